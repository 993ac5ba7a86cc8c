package replica_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// The base copy, against the harness's real sessions on a virtual clock.

// records lists every record of a node's table, tombstones included, as "key=value",
// "key deleted" and versions, for comparing two nodes' stores exactly.
func (n *node) records(table string) []string {
	n.h.t.Helper()
	var out []string
	err := n.store.Scan([]byte(table), nil, func(r store.Record) bool {
		if r.Deleted {
			out = append(out, fmt.Sprintf("%s deleted @%d/%x", r.Key, r.HLC, r.Origin[:1]))
		} else {
			out = append(out, fmt.Sprintf("%s=%s @%d/%x", r.Key, r.Value, r.HLC, r.Origin[:1]))
		}
		return true
	})
	if err != nil {
		n.h.t.Fatal(err)
	}
	return out
}

func sameRecords(t *testing.T, table string, nodes ...*node) {
	t.Helper()
	want := nodes[0].records(table)
	for _, n := range nodes[1:] {
		got := n.records(table)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("table %s on %s:\n%v\non %s:\n%v", table, nodes[0].name, want, n.name, got)
		}
	}
}

// purgedCluster is A with history purged: 40 writes to 20 keys, some deleted, in two
// tables, then a purge that leaves only A's head.
func purgedCluster(t *testing.T, acfg replica.Config) (*harness, *node) {
	h := newHarness(t)
	acfg.RetainAge = time.Second
	a := h.addNode("A", acfg)
	for i := range 40 {
		a.write(put("t", fmt.Sprint("k", i%20), fmt.Sprint("v", i)), put("u", fmt.Sprint("x", i%7), fmt.Sprint(i)))
		if i%9 == 8 {
			a.write(del("t", fmt.Sprint("k", i%20)))
		}
	}
	h.advance(2 * time.Second)
	if f := a.logOf(a).Floor.Seq; f < 40 {
		t.Fatalf("A's floor is %d: the test needs its log purged", f)
	}
	return h, a
}

// TestCopyEmptyNodeJoins: an empty node joining a node whose log is purged is answered
// PURGED, takes a copy, and ends with the same records (versions and tombstones included),
// A's position as its floor and cursor, and A's later writes streamed from there; it
// answers purged below its new floor, and its store audits.
func TestCopyEmptyNodeJoins(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{})
	b := h.addNode("B", replica.Config{CopyChunk: 1 << 10})
	h.connect(b, a)
	head := a.originStatus(a).AppliedSeq
	sameRecords(t, "t", a, b)
	sameRecords(t, "u", a, b)
	if st := b.originStatus(a); st.AppliedSeq != head || st.FloorSeq != head || st.LogBytes != 0 {
		t.Fatalf("B's status of A after the copy = %+v, want applied and floor at A's head %d", st, head)
	}
	bc, ac := b.rep.Counters(), a.rep.Counters()
	if bc.CopiesStarted != 1 || bc.CopiesCompleted != 1 || bc.CopyRecords == 0 || bc.CopyBytes == 0 || ac.CopiesServed != 1 {
		t.Fatalf("counters: B %+v, A %+v", bc, ac)
	}
	if a.rep.Counters().PurgedAnswers == 0 {
		t.Error("A never answered purged: the copy was not what the purge asked for")
	}
	// The copy wrote t and u around the log and raised B's floors: a feed reading across
	// it rereads.
	tin, uin := b.rep.FeedInputs([]byte("t")), b.rep.FeedInputs([]byte("u"))
	if tin.Copied == 0 || uin.Copied == 0 || tin.Copied+uin.Copied > bc.CopyRecords || tin.CopiesEnded != 1 || tin.Repaired != 0 {
		t.Errorf("B's feed inputs after the copy: t %d copied, u %d copied, %d copies ended, %d repaired; want records of each copied (%d in all at most), one copy ended", tin.Copied, uin.Copied, tin.CopiesEnded, tin.Repaired, bc.CopyRecords)
	}
	a.write(put("t", "after", "copy"))
	h.pump()
	if st := b.originStatus(a); st.AppliedSeq != head+1 || st.SourcePeer != "A" {
		t.Fatalf("B's status of A after a write following the copy = %+v", st)
	}
	sameRecords(t, "t", a, b)
	b.audit()
	evs := b.rep.CopyEvents()
	if len(evs) != 2 || evs[0].Kind != replica.CopyStarted || evs[1].Kind != replica.CopyCompleted || evs[1].Peer != "A" {
		t.Errorf("B's copy events %+v", evs)
	}
	// B, now holding A from its floor, serves a third node a copy (that node knows B's
	// floor: it asks for nothing below it), and answers a version-2 node below it purged.
	c := h.addNode("C", replica.Config{})
	h.connect(c, b)
	if got := b.rep.Counters().CopiesServed; got != 1 {
		t.Errorf("B served %d copies to C, want 1", got)
	}
	sameRecords(t, "t", a, b, c)
	d := h.addNode("D", replica.Config{MaxVersion: 2})
	h.connect(d, b)
	if got := b.rep.Counters().PurgedAnswers; got == 0 {
		t.Error("B did not answer the version-2 node purged below its new floor")
	}
}

// TestCopyMerges: a node back after its hold lapsed, with writes nobody else has, takes a
// copy that merges: its own writes survive and then reach A, those made during the copy
// too (after A's snapshot: the copy does not hold them); a version of its that A superseded
// is replaced, and one newer than A's stays; a record A deleted goes.
func TestCopyMerges(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second})
	b := h.addNode("B", replica.Config{})
	ba := h.connect(b, a)
	a.write(put("t", "shared", "a1"))
	b.write(put("t", "old-b", "b1"), put("t", "both", "b-early"))
	h.pump()
	h.disconnect(ba)
	// Apart: B writes what A never sees; A supersedes B's "both", deletes B's "old-b".
	b.write(put("t", "only-b", "b2"))
	h.advance(time.Millisecond)
	a.write(put("t", "both", "a-later"), del("t", "old-b"))
	for i := range 10 {
		a.write(put("t", fmt.Sprint("a", i), "x"))
	}
	h.advance(5 * time.Second) // B's hold lapses; A purges its log of A and B
	if f := a.logOf(a).Floor.Seq; f < 5 {
		t.Fatalf("A's floor of A is %d", f)
	}
	ba = h.open(b, a)
	h.stepUntil(ba, func() bool { return a.rep.Counters().CopiesServed == 1 })
	b.write(put("t", "zz-during", "b3"), put("t", "a0", "b-newer")) // after A's snapshot
	h.pump()
	if got := b.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("B completed %d copies", got)
	}
	for key, want := range map[string]string{"only-b": "b2", "both": "a-later", "shared": "a1", "a9": "x", "zz-during": "b3", "a0": "b-newer"} {
		if r, ok := b.get("t", key); !ok || r.Deleted || string(r.Value) != want {
			t.Errorf("B's %s after the copy = %+v, want %s", key, r, want)
		}
	}
	if r, ok := b.get("t", "old-b"); ok && !r.Deleted {
		t.Errorf("B's old-b survived A's delete: %+v", r)
	}
	h.pump()
	if r, ok := a.get("t", "only-b"); !ok || string(r.Value) != "b2" {
		t.Errorf("B's own write did not reach A after the copy: %+v", r)
	}
	if _, d1 := a.digest("t"); true {
		if _, d2 := b.digest("t"); d1 != d2 {
			t.Errorf("digests differ after the copy: A %s, B %s", d1, d2)
		}
	}
	b.audit()
	a.audit()
}

// TestCopyResumes: a copy cut off by a lost connection and by a restart of the receiver
// goes on from the last chunk made durable, on a new snapshot each time: every record is
// merged once (none copied again after a resume), the copy's position is the lowest of its
// snapshots, and writes made meanwhile converge.
func TestCopyResumes(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{})
	bigTable(h, a, 200, 300)
	small := protocol.Limits{MaxFrameBody: 2 << 10, MaxMessage: 64 << 10, MaxChannelBuffer: 4 << 10, MaxSessionBuffer: 8 << 10}
	b := h.addNode("B", replica.Config{CopyChunk: 1 << 10, Limits: small, CopyRetry: 100 * time.Millisecond})
	copied := func() uint64 {
		if st, _ := b.store.CopyState(); st != nil {
			return st.Records
		}
		return 0
	}
	ba := h.open(b, a)
	h.stepUntil(ba, func() bool { return copied() > 0 }) // a chunk made durable, then the cut
	h.disconnect(ba)
	first := copied()
	a.write(put("big", "k999", "written during the copy"))
	h.advance(200 * time.Millisecond) // CopyRetry
	ba = h.open(b, a)
	h.stepUntil(ba, func() bool { return copied() > first })
	before := b.rep.Counters().CopyRecords
	b.restart() // a crash: the store keeps what ApplyCopy wrote
	if st, _ := b.store.CopyState(); st == nil || st.Records <= first || st.Snapshots < 2 {
		t.Fatalf("after the second run: %+v (first run: %d records)", st, first)
	}
	h.connect(b, a)
	h.advance(time.Second)
	if got := b.rep.Counters(); got.CopiesCompleted != 1 || got.CopiesResumed == 0 {
		t.Fatalf("B's counters %+v: want one copy completed after resumes", got)
	}
	total := sameCopiedTables(t, a, b)
	// Each chunk is merged and its cursor written in one write, and a resume starts after
	// the last record made durable: no record is merged twice.
	if got := before + b.rep.Counters().CopyRecords; got != uint64(total) {
		t.Errorf("B merged %d copied records over three runs; A holds %d", got, total)
	}
	if st := b.originStatus(a); st.AppliedSeq != a.originStatus(a).AppliedSeq {
		t.Fatalf("B's status of A %+v", st)
	}
	b.audit()
}

// TestCopyBadChunkResumes: a chunk whose keys are out of order (a sender that breaks the
// copy's rules, or a path that alters it) stops the copy with bad-chunk: nothing of it is
// merged, the connection stays up, the taker counts it, and the copy resumes from the
// last chunk made durable and ends with the sender's records, each merged once.
func TestCopyBadChunkResumes(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{})
	bigTable(h, a, 60, 100)
	b := h.addNode("B", replica.Config{CopyChunk: 1 << 10, CopyRetry: 100 * time.Millisecond})
	chunks, spoiled := 0, false
	h.alter = func(from, to string, msg []byte) []byte {
		if from != "A" || spoiled {
			return msg
		}
		frames, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, f := range frames {
			body, err := f.Value.AppendBody(nil)
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := f.Value.(*wire.Chunk); ok && len(c.Records) >= 2 && !spoiled {
				if chunks++; chunks == 3 { // the third chunk: its first two records swapped
					spoiled = true
					c.Records[0], c.Records[1] = c.Records[1], c.Records[0]
					body = swappedChunk(c)
				}
			}
			out = wire.AppendHeader(out, wire.Header{Type: f.Value.FrameType(), Flags: f.Flags, Channel: f.Channel, Length: uint32(len(body))})
			out = append(out, body...)
		}
		return out
	}
	ba := h.connect(b, a)
	if !spoiled {
		t.Fatal("the copy sent fewer than three chunks of two records: the test spoiled none")
	}
	h.alter = nil
	h.advance(time.Second)
	got := b.rep.Counters()
	if got.BadChunks != 1 || got.CopiesResumed != 1 || got.CopiesCompleted != 1 || got.ProtocolErrors != 0 {
		t.Fatalf("B's counters %+v: want one bad chunk, one resume, the copy completed, no protocol error", got)
	}
	if ba.dialer.closed {
		t.Error("the bad chunk closed the connection; it stops the copy only")
	}
	total := sameCopiedTables(t, a, b)
	if got.CopyRecords != uint64(total) {
		t.Errorf("B merged %d copied records; A holds %d: the spoiled chunk was merged, or a resume copied again", got.CopyRecords, total)
	}
	if e := b.rep.LastError("A"); e == nil || e.Err == nil || e.Err.Code != wire.CodeBadChunk {
		t.Errorf("B's last error with A is %+v, want bad-chunk", e)
	}
	b.audit()
}

// TestCopyBusy: a node serving MaxCopies copies answers the next copy-busy; the refused
// node waits and copies once the first is done.
func TestCopyBusy(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{MaxCopies: 1})
	bigTable(h, a, 200, 300) // more than a window: the first copy stays open a while
	small := protocol.Limits{MaxFrameBody: 2 << 10, MaxMessage: 64 << 10, MaxChannelBuffer: 4 << 10, MaxSessionBuffer: 8 << 10}
	b := h.addNode("B", replica.Config{CopyChunk: 1 << 10, Limits: small})
	c := h.addNode("C", replica.Config{CopyChunk: 1 << 10, Limits: small, CopyRetry: 50 * time.Millisecond})
	ba := h.open(b, a)
	h.stepUntil(ba, func() bool { return a.rep.Counters().CopiesServed == 1 })
	ba.hold = true // B's copy stays open while C asks
	h.connect(c, a)
	if got := a.rep.Counters().CopiesBusy; got == 0 {
		t.Fatalf("A answered C %d copy-busy", got)
	}
	ba.hold = false
	h.advance(time.Second)
	if got := a.rep.Counters(); got.CopiesBusy == 0 || got.CopiesServed != 2 {
		t.Fatalf("A's counters %+v: want a copy-busy answer, then both served", got)
	}
	sameRecords(t, "t", a, b, c)
	sameRecords(t, "big", a, b, c)
}

// restoredBeforeWrites is A, whose log of B is purged (purgedCluster), and B, which wrote 5
// entries to A and came back, disconnected, from a backup taken before it wrote anything.
func restoredBeforeWrites(t *testing.T) (*harness, *node, *node) {
	t.Helper()
	h, a := purgedCluster(t, replica.Config{})
	b := h.addNode("B", replica.Config{})
	old := b.store.Clone() // a backup of B from before it wrote anything
	ab := h.connect(b, a)
	for i := range 5 {
		b.write(put("t", fmt.Sprint("b", i), "x"))
	}
	h.pump()
	h.disconnect(ab)
	b.store = old
	b.start()
	return h, a, b
}

// TestCopyRefusesOriginRewind: a node whose own origin its peer holds beyond its log (a data
// directory older than its history elsewhere) takes no copy: the peer's SUBSCRIBE, or the
// copy's snapshot, shows the rewind first, and the node is rewound (rewind.go).
func TestCopyRefusesOriginRewind(t *testing.T) {
	h, a, b := restoredBeforeWrites(t)
	h.advance(3 * time.Second)
	a.write(put("t", "k0", "newer"))
	h.advance(2 * time.Second)
	h.connect(b, a)
	if got := b.rep.Counters(); got.OriginRewinds == 0 || got.CopiesCompleted != 0 {
		t.Fatalf("B's counters %+v: want the rewind found and no copy", got)
	}
	if rw := b.rep.Rewound(); rw == nil || rw.Peer != "A" || rw.Seq != 5 || rw.OwnSeq != 0 {
		t.Errorf("B's rewind evidence: %+v", rw)
	}
	if e := b.rep.LastError("A"); e == nil || (e.Err.Code != wire.CodeOriginRewound && e.Err.Code != wire.CodeGoingAway) {
		t.Errorf("B's last error for A: %+v", e)
	}
}

// stepUntil delivers l's messages one round at a time until cond holds (at most 10000
// rounds), the other links' messages too.
func (h *harness) stepUntil(l *link, cond func() bool) {
	h.t.Helper()
	for range 10000 {
		if cond() {
			return
		}
		h.collect()
		for _, e := range []*end{l.dialer, l.listener} {
			h.deliver(e)
		}
	}
	h.t.Fatal("stepUntil: the condition never held")
}

// swappedChunk encodes a CHUNK body as protocol/SPEC.md lays it out, without the
// encoder's checks (which refuse keys out of order): format 1, the table, the count, and
// each record's kind, key, HLC, origin and value.
func swappedChunk(c *wire.Chunk) []byte {
	body := binary.AppendUvarint([]byte{wire.ChunkFormat1}, uint64(len(c.Table)))
	body = append(body, c.Table...)
	body = binary.AppendUvarint(body, uint64(len(c.Records)))
	for _, r := range c.Records {
		kind := byte(wire.ChunkPut)
		if r.Deleted {
			kind = wire.ChunkTombstone
		}
		body = binary.AppendUvarint(append(body, kind), uint64(len(r.Key)))
		body = append(body, r.Key...)
		body = binary.BigEndian.AppendUint64(body, uint64(r.HLC))
		body = append(body, r.Origin[:]...)
		if !r.Deleted {
			body = binary.AppendUvarint(body, uint64(len(r.Value)))
			body = append(body, r.Value...)
		}
	}
	return body
}

// chunkSizes wraps a session to record the body size and record count of every CHUNK it
// is given to send.
type chunkSizes struct {
	replica.Session
	log *[][2]int
}

func (s chunkSizes) V3() protocol.V3Commands { return chunkSizesV3{s.Session.V3(), s.log} }

type chunkSizesV3 struct {
	protocol.V3Commands
	log *[][2]int
}

func (s chunkSizesV3) SendChunk(body []byte) error {
	err := s.V3Commands.SendChunk(body)
	if err == nil {
		v, perr := wire.ParseChunk(body)
		if perr != nil {
			return perr
		}
		*s.log = append(*s.log, [2]int{len(body), v.Count})
	}
	return err
}

// TestCopyChunksFill: the chunks of a table are full, all but its last: each holds as many
// records as the chunk size allows (no chunk is cut short by the one that would not fit,
// which then went alone).
func TestCopyChunksFill(t *testing.T) {
	var sent [][2]int
	const chunk = 4 << 10
	h, a := purgedCluster(t, replica.Config{CopyChunk: chunk, NewSession: func(cfg protocol.Config) (replica.Session, error) {
		s, err := replica.NativeSession(cfg)
		return chunkSizes{s, &sent}, err
	}})
	bigTable(h, a, 400, 100)
	b := h.addNode("B", replica.Config{})
	h.connect(b, a)
	sameRecords(t, "big", a, b)
	// A "big" record takes 1 + 1 + 4 + 8 + 16 + 1 + 100 = 131 bytes of a chunk; the table's
	// header 1 + 1 + 3 + 2: a full chunk holds 31 records, 400 of them take 13 chunks.
	var big [][2]int
	for _, c := range sent {
		if c[1] > 20 { // the tables t and u hold 20 and 7 small records
			big = append(big, c)
		}
	}
	if len(big) != 13 {
		t.Fatalf("the 400 records went in %d chunks, want 13: %v", len(big), sent)
	}
	for i, c := range big[:12] {
		if c[0] > chunk || c[1] != 31 {
			t.Errorf("chunk %d of the table: %d bytes, %d records; want 31 records within %d bytes", i, c[0], c[1], chunk)
		}
	}
}

// TestCopyServedSyncsWritesItAnswers: with HoldUnsynced, a node asked for a copy syncs its
// store first, its local writes being in the snapshot; SyncedSeq then covers them, and the
// shell answers those writes by it: the replica needs no further sync (NeedsSync is false),
// so a shell waiting for one of its own would leave them unanswered until the next write.
func TestCopyServedSyncsWritesItAnswers(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{HoldUnsynced: true, RetainAge: time.Second})
	for i := range 5 {
		a.write(put("t", fmt.Sprint("k", i), "v"))
	}
	h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
	h.advance(2 * time.Second)
	if f := a.logOf(a).Floor.Seq; f == 0 {
		t.Fatal("A's log is not purged: the test needs B to take a copy")
	}
	seq := a.write(put("t", "late", "v")) // applied, not synced
	if got := a.rep.SyncedSeq(); got >= seq || !a.rep.NeedsSync() {
		t.Fatalf("before the copy: SyncedSeq %d, NeedsSync %v, for the write at %d", got, a.rep.NeedsSync(), seq)
	}
	b := h.addNode("B", replica.Config{})
	h.connect(b, a)
	if got := a.rep.Counters().CopiesServed; got != 1 {
		t.Fatalf("A served %d copies, want 1", got)
	}
	if got := a.rep.SyncedSeq(); got < seq {
		t.Errorf("after serving the copy SyncedSeq is %d, below the write at %d the snapshot holds", got, seq)
	}
	if a.rep.NeedsSync() {
		t.Error("A still needs a sync after the one it made for the copy")
	}
	sameRecords(t, "t", a, b)
}

// bigTable writes n records of size-byte values to A's table "big", then lets a's
// retention purge its log past them (purgedCluster's RetainAge).
func bigTable(h *harness, a *node, n, size int) {
	for i := range n {
		a.write(put("big", fmt.Sprintf("k%03d", i), string(make([]byte, size))))
	}
	h.advance(2 * time.Second)
}

// sameCopiedTables requires a and b to hold the same records in the tables purgedCluster
// and bigTable write, and returns how many records a holds in them.
func sameCopiedTables(t *testing.T, a, b *node) int {
	t.Helper()
	total := 0
	for _, table := range []string{"t", "u", "big"} {
		sameRecords(t, table, a, b)
		total += len(a.records(table))
	}
	return total
}

// TestCopyRefusesOriginRewindBySnapshot: with the peer's SUBSCRIBE of the node's origin
// lost, the copy's snapshot is the evidence: the copy is refused (copies_refused) and the
// node is rewound all the same, refusing writes (rewind.go).
func TestCopyRefusesOriginRewindBySnapshot(t *testing.T) {
	h, a, b := restoredBeforeWrites(t)
	h.advance(3 * time.Second)
	h.drop = func(from, to string, f wire.Decoded) bool {
		return from == "A" && to == "B" && f.Type == wire.TypeSubscribe
	}
	h.connect(b, a)
	if got := b.rep.Counters(); got.CopiesRefused != 1 || got.CopiesCompleted != 0 {
		t.Fatalf("B's counters %+v: want the copy refused", got)
	}
	if rw := b.rep.Rewound(); rw == nil || rw.How != "copy" || rw.Peer != "A" || rw.Seq != 5 {
		t.Errorf("B's rewind evidence: %+v, want the copy's", rw)
	}
	var we *wire.Error
	if _, err := b.rep.Write(b.clock(), []wire.Op{put("t", "x", "y")}); !errors.As(err, &we) || we.Code != wire.CodeOriginRewound {
		t.Errorf("B's write: %v, want origin-rewound", err)
	}
}

// TestCopyRemovesSendersLatestWriteDeletedElsewhere: a record the taker holds whose
// version is the sender's own latest entry (the sender wrote nothing since), deleted by
// another origin whose tombstone the sender then dropped, is gone from the taker after the
// copy. The snapshot's vector shows the sender applied the write that made it: its version
// is equal to, not below, the vector's timestamp of its origin (docs/design.md §15: "at or
// below"). Kept, it would stay for good: the delete is below the taker's new position of
// the deleting origin, so no log brings it, and the sender's anti-entropy does not write
// what lies below its tombstone horizon.
func TestCopyRemovesSendersLatestWriteDeletedElsewhere(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{})
	ba, ca := h.connect(b, a), h.connect(c, a)
	b.write(put("t", "b", "0"))
	c.write(put("t", "c", "1"))
	h.pump()
	a.write(put("t", "k", "a's last write")) // A writes nothing after this
	h.pump()
	kb, ok := b.get("t", "k")
	if !ok || kb.Origin != a.origin {
		t.Fatalf("B's k before the copy = %+v, want A's write", kb)
	}
	h.disconnect(ba)
	h.disconnect(ca)
	h.advance(10 * time.Millisecond)
	c.write(del("t", "k"))           // C deletes k; B never sees it
	c.write(put("t", "c", "2"))      // so that A can purge C's delete out of its log
	h.advance(10 * time.Millisecond) // B's next write is newer than C's delete
	b.write(put("t", "b", "1"))
	ba = h.connect(b, a) // A applies B past the delete; C's origin is still at c=1 on both
	h.disconnect(ba)
	ca = h.connect(c, a)
	h.disconnect(ca)
	h.advance(5 * time.Second) // B's hold of C lapses, A purges C's log and drops k's tombstone
	if _, ok := a.get("t", "k"); ok || a.rep.Counters().TombstonesDropped != 1 {
		t.Fatalf("A kept k's tombstone (dropped %d): the test needs it gone", a.rep.Counters().TombstonesDropped)
	}
	if f, applied := a.logOf(c).Floor.Seq, b.originStatus(c).AppliedSeq; f <= applied {
		t.Fatalf("A's floor of C is %d, B applied C to %d: the test needs B to copy", f, applied)
	}
	if st := a.originStatus(a); st.AppliedSeq != 1 {
		t.Fatalf("A's own origin is at %d: the test needs k to be A's latest write", st.AppliedSeq)
	}
	h.connect(b, a)
	h.advance(time.Second)
	if got := b.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("B completed %d copies, want 1", got)
	}
	h.advance(time.Minute)
	if r, ok := b.get("t", "k"); ok && !r.Deleted {
		t.Errorf("B still holds k a minute after the copy: %+v; the snapshot's vector of A is at its version, so A deleted it", r)
	}
	sameRecords(t, "t", a, b)
	b.audit()
}

// TestCopyPastASourceWithNothingMore: B takes O's origin from the relay R, which holds no
// more than B and gets no more: its link to O is cut, and its only other way to O is B
// (split horizon hides O from R while R is B's source). Y holds O's later entries, but
// its log is purged past B's position, so it is no candidate. B needs entries no connected
// peer still holds: after waiting StallTimeout with nothing applied (a source may yet
// bring them), B takes a copy from Y and ends at O's head.
func TestCopyPastASourceWithNothingMore(t *testing.T) {
	h := newHarness(t)
	o := h.addNode("O", replica.Config{})
	r := h.addNode("R", replica.Config{})
	y := h.addNode("Y", replica.Config{RetainAge: time.Second})
	b := h.addNode("B", replica.Config{})
	or := h.connect(r, o)
	h.connect(y, o)
	for range 2 {
		o.write(put("t", "k", "v"))
	}
	h.advance(100 * time.Millisecond)
	h.disconnect(or)
	h.connect(b, r)
	h.advance(100 * time.Millisecond)
	if st := b.originStatus(o); st.AppliedSeq != 2 || st.SourcePeer != "R" {
		t.Fatalf("B's status of O = %+v, want 2 applied from R", st)
	}
	for range 3 {
		o.write(put("t", "k", "v"))
	}
	h.advance(2 * time.Second) // Y's log of O is purged past 2
	if f := y.logOf(o).Floor.Seq; f <= 2 {
		t.Fatalf("Y's floor of O is %d: the test needs it above B's position", f)
	}
	h.connect(b, y)
	h.advance(replica.DefaultStallTimeout - 500*time.Millisecond)
	if st, n := b.originStatus(o), b.rep.Counters().CopiesStarted; st.AppliedSeq != 2 || st.SourcePeer != "R" || st.HeadSeq != 5 || n != 0 {
		t.Fatalf("before the stall timeout: B's status of O = %+v, %d copies; want 2 applied of 5 from R, no copy yet", st, n)
	}
	h.advance(time.Second)
	if st, c := b.originStatus(o), b.rep.Counters(); st.AppliedSeq != 5 || c.CopiesStarted != 1 || c.CopiesCompleted != 1 {
		t.Fatalf("after the stall timeout: B's status of O = %+v, %d copies started, %d completed; want 5 applied, one copy",
			st, c.CopiesStarted, c.CopiesCompleted)
	}
	sameRecords(t, "t", o, b)
}

// TestCopyLapsesNamedFeedsItPasses: a named feed made on an empty node, at no position, is
// lapsed (and counted) by the copy that raises the node's floor of A past it: the entries
// after its position are gone here, and its status must not say it holds them.
func TestCopyLapsesNamedFeedsItPasses(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{})
	b := h.addNode("B", replica.Config{CopyChunk: 1 << 10})
	if _, _, err := b.rep.PutNamedFeed("audit", "t", 1<<30); err != nil {
		t.Fatal(err)
	}
	h.connect(b, a)
	if st := b.originStatus(a); st.FloorSeq == 0 {
		t.Fatalf("B's status of A = %+v: the test needs a copy that raises B's floor", st)
	}
	st, ok := b.rep.NamedFeed("audit")
	if !ok || !st.Lapsed || b.rep.Counters().NamedFeedHoldsLapsed != 1 {
		t.Fatalf("the feed after the copy passed its position: %+v (%v), %d lapses counted; want lapsed, one counted", st, ok, b.rep.Counters().NamedFeedHoldsLapsed)
	}
}
