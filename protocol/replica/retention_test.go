package replica_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Retention: bounded history, against the harness's real sessions on a virtual clock.

// writeN writes n records on the node, one transaction each, pumping after each.
func writeN(n *node, from, count int) {
	n.h.t.Helper()
	for i := from; i < from+count; i++ {
		n.write(put("t", fmt.Sprint("k", i), fmt.Sprint("v", i)))
		n.h.pump()
	}
}

// logOf is the node's log of origin of, as its store holds it.
func (n *node) logOf(of *node) store.Log {
	n.h.t.Helper()
	logs, err := n.store.Logs()
	if err != nil {
		n.h.t.Fatal(err)
	}
	return logs[of.origin]
}

// audit fails the test unless the node's store passes store.Audit.
func (n *node) audit() {
	n.h.t.Helper()
	problems, err := store.Audit(n.store, 0)
	if err != nil || len(problems) > 0 {
		n.h.t.Fatalf("%s: audit: %v %v", n.name, problems, err)
	}
}

// wantFloor checks the floor of of's log on n, in the store and in the status, and that
// the entries at and below it are gone and the ones above it are there.
func (n *node) wantFloor(of *node, seq uint64) {
	n.h.t.Helper()
	if got := n.logOf(of).Floor.Seq; got != seq {
		n.h.t.Fatalf("%s: the floor of %s's log is %d, want %d", n.name, of.name, got, seq)
	}
	if st := n.originStatus(of); st.FloorSeq != seq || st.LogBytes != n.logOf(of).Bytes {
		n.h.t.Errorf("%s: status of %s = floor %d, %d log bytes; want floor %d, %d bytes", n.name, of.name,
			st.FloorSeq, st.LogBytes, seq, n.logOf(of).Bytes)
	}
	if seq > 0 {
		if _, err := n.store.Entry(of.origin, seq); !errors.Is(err, store.ErrPurged) {
			n.h.t.Errorf("%s: entry %s/%d at the floor: %v, want ErrPurged", n.name, of.name, seq, err)
		}
	}
	n.entry(of, seq+1) // fails the test when the log does not go on from the floor
}

// TestRetentionByAge: entries older than RetainAge go, on the origin and on the node it
// replicates to, except each log's head; what is left verifies, and replication goes on.
func TestRetentionByAge(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RetainAge: 2 * time.Second}
	a := h.addNode("A", cfg)
	b := h.addNode("B", cfg)
	h.connect(b, a)
	writeN(a, 0, 10)
	h.advance(time.Second)
	a.wantFloor(a, 0) // younger than RetainAge: nothing goes yet
	b.wantFloor(a, 0)
	h.advance(2 * time.Second)
	for _, n := range []*node{a, b} {
		n.wantFloor(a, 9) // the head, entry 10, stays
		raw, _ := n.entry(a, 10)
		if got := n.logOf(a).Bytes; got != uint64(len(raw)) {
			t.Errorf("%s: A's log holds %d bytes, want the head's %d", n.name, got, len(raw))
		}
		if got := n.rep.Counters().EntriesPurged; got != 9 {
			t.Errorf("%s: %d entries purged, want 9", n.name, got)
		}
		n.audit()
	}
	a.write(put("t", "after", "purge"))
	h.pump()
	if got := b.originStatus(a).AppliedSeq; got != 11 {
		t.Fatalf("B applied A up to %d after the purge, want 11", got)
	}
	if _, d1 := a.digest("t"); true {
		if _, d2 := b.digest("t"); d1 != d2 {
			t.Errorf("digests differ after the purge: %s %s", d1, d2)
		}
	}
}

// TestRetentionHoldsALaggingPeer: a peer that was sent an origin and fell behind holds its
// entries past RetainAge; the hold shows in RetentionHeld, survives a restart of the node,
// and lapses after RetainHold without progress (counted from the node's restart, which cut
// the peer off too). The peer, a version-2 one back below the floor of the node's own
// origin, is answered purged.
func TestRetentionHoldsALaggingPeer(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RetainAge: time.Second, RetainHold: 10 * time.Second, MaxVersion: 2}
	a := h.addNode("A", cfg)
	c := h.addNode("C", replica.Config{MaxVersion: 2})
	ca := h.connect(c, a)
	writeN(a, 0, 3)
	h.disconnect(ca)
	writeN(a, 3, 7) // C has 3 of 10
	h.advance(3 * time.Second)
	a.wantFloor(a, 3) // C holds 4 to 9; 10 is the head
	entries, bytes := a.rep.RetentionHeld("C")
	var want uint64
	for seq := uint64(4); seq <= 9; seq++ {
		raw, _ := a.entry(a, seq)
		want += uint64(len(raw))
	}
	if entries != 6 || bytes != want {
		t.Errorf("C holds %d entries and %d bytes back on A, want 6 and %d", entries, bytes, want)
	}
	wantHoldAge(t, a, "C", 3*time.Second) // not advanced since C acknowledged 3, at the start
	holds, err := a.store.Holds()
	if err != nil || len(holds) != 1 || holds[0].Peer != "C" || holds[0].Origin != a.origin || holds[0].Seq != 3 {
		t.Fatalf("A's stored holds = %+v, %v; want C's on A at 3", holds, err)
	}

	a.restart()
	h.advance(2 * time.Second)
	a.wantFloor(a, 3)                     // the hold came back from the store
	wantHoldAge(t, a, "C", 2*time.Second) // counted from the restart, which cut C off

	h.advance(9 * time.Second) // past RetainHold since A's restart: it counts from there
	a.wantFloor(a, 9)
	if entries, _ := a.rep.RetentionHeld("C"); entries != 0 {
		t.Errorf("C still holds %d entries after its hold lapsed", entries)
	}
	if age := a.rep.RetentionHoldAge("C", a.clock()); age != 0 {
		t.Errorf("C's lapsed hold is %s old, want 0 (none keeps anything)", age)
	}
	if holds, _ := a.store.Holds(); len(holds) != 0 {
		t.Errorf("A keeps holds %+v after they lapsed", holds)
	}
	a.audit()

	h.connect(c, a) // C asks for A's origin from 3: purged, answered by closing
	if got := a.rep.Counters().PurgedAnswers; got != 1 {
		t.Errorf("A answered purged %d times, want 1", got)
	}
	if e := c.rep.LastError("A"); e == nil || e.Err.Code != wire.CodePurged || e.Err.Class != wire.ClassUnsupported {
		t.Errorf("C's last error of A = %+v, want purged (unsupported)", e)
	}
	if got := c.applied()[a.origin]; got != 3 {
		t.Errorf("C applied A up to %d, want 3: nothing below a floor is streamed", got)
	}
}

// wantHoldAge checks that peer's oldest hold on n has not advanced for about want: at least
// want, give or take the harness's steps (the restarted node's first input is a step after
// its restart).
func wantHoldAge(t *testing.T, n *node, peer string, want time.Duration) {
	t.Helper()
	if age := n.rep.RetentionHoldAge(peer, n.clock()); age < want-50*time.Millisecond || age >= want+100*time.Millisecond {
		t.Errorf("%s's hold on %s is %s old, want %s", peer, n.name, age, want)
	}
	if p := n.rep.Status(n.clock()); p.Node.RetainHold != n.cfg.RetainHold {
		t.Errorf("%s's status says RetainHold %s, want %s", n.name, p.Node.RetainHold, n.cfg.RetainHold)
	}
}

// TestRetentionRelayWithdraws: a relay whose log of an origin was purged past a version-2
// subscriber's position withdraws the origin from it and sends none of its entries; the
// connection stays up for everything else.
func TestRetentionRelayWithdraws(t *testing.T) {
	h := newHarness(t)
	short := replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second, MaxVersion: 2}
	a := h.addNode("A", replica.Config{MaxVersion: 2})
	b := h.addNode("B", short)
	c := h.addNode("C", replica.Config{MaxVersion: 2})
	h.connect(b, a)
	cb := h.connect(c, b)
	writeN(a, 0, 2)
	h.disconnect(cb)
	writeN(a, 2, 8)
	h.advance(4 * time.Second)
	b.wantFloor(a, 9)
	h.connect(c, b)
	if got := b.rep.Counters().PurgedAnswers; got != 1 {
		t.Errorf("B answered purged %d times, want 1", got)
	}
	if st := c.originStatus(a); st.AppliedSeq != 2 || st.SourcePeer != "" {
		t.Errorf("C's status of A = %+v, want applied 2 and no source", st)
	}
	if !c.peerStatus("B").Connected {
		t.Errorf("C's connection to B closed; a relay only withdraws the origin")
	}
	b.write(put("t", "b", "1")) // B's own origin still flows
	h.pump()
	if got := c.applied()[b.origin]; got != 1 {
		t.Errorf("C applied B up to %d, want 1", got)
	}
}

// TestRetentionBytesOldestFirst: past RetainBytes, entries go oldest in arrival order
// first, whatever their age, until the logs fit (each log's head stays).
func TestRetentionBytesOldestFirst(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	h.connect(b, a)
	writeN(a, 0, 5)
	writeN(b, 0, 5)
	writeN(a, 5, 5)
	raw, _ := a.entry(a, 1)
	bound := uint64(4 * len(raw)) // about four entries' worth
	c := h.addNode("C", replica.Config{RetainBytes: bound})
	h.connect(c, a)
	h.advance(time.Second)
	la, lb := c.logOf(a), c.logOf(b)
	if total := la.Bytes + lb.Bytes; total > bound {
		t.Errorf("C's logs hold %d bytes, more than the bound %d", total, bound)
	}
	// Arrival order on C (it took A, then B? whatever its order) — the oldest go first:
	// every entry kept is newer in C's arrival order than every entry purged.
	arr, err := c.store.Arrivals(mustFloor(t, c), 100)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[wire.OriginID]uint64{a.origin: la.Floor.Seq, b.origin: lb.Floor.Seq}
	for _, e := range arr {
		v, _ := wire.ParseTxn(e.Txn)
		if v.Seq <= kept[v.Origin] {
			t.Errorf("arrival %d (%x seq %d) is in the order below its log's floor", e.Pos, v.Origin[:1], v.Seq)
		}
	}
	if la.Floor.Seq == 0 && lb.Floor.Seq == 0 {
		t.Errorf("nothing purged on C: floors %d and %d", la.Floor.Seq, lb.Floor.Seq)
	}
	c.audit()
}

func mustFloor(t *testing.T, n *node) uint64 {
	t.Helper()
	f, err := n.store.ArrivalFloor()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRetentionVersion1BelowArrivalFloor: a version-1 peer that resumes below the arrival
// floor is answered purged; one that stayed connected held the arrival order while it
// was behind.
func TestRetentionVersion1BelowArrivalFloor(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second})
	c := h.addNode("C", replica.Config{MaxVersion: 1})
	ca := h.connect(c, a)
	writeN(a, 0, 3)
	h.disconnect(ca)
	writeN(a, 3, 5)
	h.advance(time.Second + 500*time.Millisecond)
	if f := mustFloor(t, a); f != 3 {
		t.Errorf("A's arrival floor with C's version-1 hold at 3 = %d, want 3", f)
	}
	h.advance(3 * time.Second)
	if f := mustFloor(t, a); f != 7 {
		t.Fatalf("A's arrival floor after C's hold lapsed = %d, want 7 (the head, 8, stays)", f)
	}
	h.connect(c, a)
	if e := c.rep.LastError("A"); e == nil || e.Err.Code != wire.CodePurged {
		t.Errorf("C's last error of A = %+v, want purged", e)
	}
	if got := a.rep.Counters().PurgedAnswers; got != 1 {
		t.Errorf("A answered purged %d times, want 1", got)
	}
}

// TestDuplicateBelowFloor: an entry at or below its log's floor is a counted duplicate,
// skipped without reading the log (where it is gone).
func TestDuplicateBelowFloor(t *testing.T) {
	h := newHarness(t)
	older := &olderChannel{}
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{NewSession: older.newSession, RetainAge: time.Second})
	h.connect(b, a)
	h.connect(c, b)
	writeN(a, 0, 10)
	h.advance(2 * time.Second)
	c.wantFloor(a, 9)
	before := c.rep.Counters()
	raw1, _ := a.entry(a, 1)
	older.at = &vector.Entry{Origin: a.origin, Seq: 1, Hash: sha256.Sum256(raw1)}
	h.connect(a, c) // C moves A to A itself, subscribing at 1: A sends 2 to 10 again
	if older.at != nil {
		t.Fatal("C did not subscribe to A on the direct connection")
	}
	got := c.rep.Counters()
	if got.DuplicatesReceived != before.DuplicatesReceived+9 || got.TxnsApplied != before.TxnsApplied {
		t.Errorf("C counted %d duplicates and %d applies, want %d and %d", got.DuplicatesReceived, got.TxnsApplied,
			before.DuplicatesReceived+9, before.TxnsApplied)
	}
	c.wantFloor(a, 9)
	c.audit()
}

// TestRetentionVersion3Floors: over version 3 a relay advertises its floors, and a node whose
// applied seq is below a peer's floor does not take the origin from that peer (it asks
// nothing it could not get); it takes it from a peer that can serve it. (B serves no copy
// here, so that C waits for A: copies are TestCopy*'s.)
func TestRetentionVersion3Floors(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second, MaxCopies: -1})
	c := h.addNode("C", replica.Config{})
	h.connect(b, a)
	cb := h.connect(c, b)
	writeN(a, 0, 2)
	h.disconnect(cb)
	writeN(a, 2, 8)
	h.advance(4 * time.Second)
	b.wantFloor(a, 9)
	h.connect(c, b)
	if got := b.rep.Counters().PurgedAnswers; got != 0 {
		t.Errorf("B answered purged %d times; C knew B's floor and asked nothing", got)
	}
	if st := c.originStatus(a); st.AppliedSeq != 2 || st.SourcePeer != "" {
		t.Errorf("C's status of A with only B, floor 9, connected = %+v, want applied 2 and no source", st)
	}
	h.connect(c, a) // A holds its whole log: C takes A from A
	if st := c.originStatus(a); st.AppliedSeq != 10 || st.SourcePeer != "A" {
		t.Errorf("C's status of A with A connected = %+v, want applied 10 from A", st)
	}
}

// TestRetentionVersion3PurgedAnswer: a version-3 subscriber whose next entries a relay purged
// while it was subscribed (its hold lapsed while credit kept the relay from sending) is
// answered PURGED: the channel closes, the connection stays, and the subscriber drops the
// relay as the origin's source. (B serves no copy here, so that C waits for A.)
func TestRetentionVersion3PurgedAnswer(t *testing.T) {
	h := newHarness(t)
	small := protocol.Limits{MaxFrameBody: 1 << 10, MaxMessage: 64 << 10, MaxChannelBuffer: 2 << 10}
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second, Limits: small, MaxCopies: -1})
	c := h.addNode("C", replica.Config{Limits: small})
	h.connect(b, a)
	cb := h.connect(c, b)
	cb.hold = true // nothing reaches C, nor its acknowledgements and credit B
	for i := range 30 {
		a.write(put("t", fmt.Sprint("k", i), string(make([]byte, 200))))
		h.pump()
	}
	h.advance(3 * time.Second) // B's hold for C lapses; B purges what it could not send
	if f := b.logOf(a).Floor.Seq; f < 10 {
		t.Fatalf("B's floor of A is %d: the test needs it past what B sent C", f)
	}
	cb.hold = false
	h.pump()
	if got := b.rep.Counters().PurgedAnswers; got != 1 {
		t.Errorf("B answered purged %d times, want 1", got)
	}
	if st := c.originStatus(a); st.SourcePeer != "" || st.AppliedSeq >= 30 {
		t.Errorf("C's status of A = %+v, want no source and not all of A", st)
	}
	if !c.peerStatus("B").Connected {
		t.Errorf("a PURGED closed C's connection to B")
	}
	c.takeMoves()
	h.connect(c, a) // A can serve it: the origin moves there, for the reason it left B
	var last replica.Move
	for _, m := range c.takeMoves() {
		if m.Origin == a.origin {
			last = m
		}
	}
	if last.From != "B" || last.To != "A" || last.Reason != replica.ReasonPurged {
		t.Errorf("C's move of A = %+v, want B -> A, reason purged", last)
	}
	if st := c.originStatus(a); st.AppliedSeq != 30 {
		t.Errorf("C applied A up to %d from A, want 30", st.AppliedSeq)
	}
}

// TestRetentionDropsTombstones: a tombstone goes once it is older than RetainAge and every
// other origin the node knows was applied past it; an origin that wrote nothing since (C
// here), or nothing at all (B), holds it back until it writes.
func TestRetentionDropsTombstones(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RetainAge: time.Second}
	a := h.addNode("A", cfg)
	b := h.addNode("B", cfg)
	c := h.addNode("C", cfg)
	h.connect(b, a)
	h.connect(c, a)
	c.write(put("t", "c", "1"))
	a.write(put("t", "k", "v"))
	h.pump()
	h.advance(time.Millisecond)
	a.write(del("t", "k"))
	h.pump()
	h.advance(2 * time.Second)
	for _, n := range []*node{a, b} {
		if r, ok := n.get("t", "k"); !ok || !r.Deleted {
			t.Fatalf("%s: the tombstone went while C's origin was not applied past it: %+v", n.name, r)
		}
	}
	c.write(put("t", "c", "2")) // C's origin moves past the delete
	h.pump()
	h.advance(2 * time.Second)
	if r, ok := a.get("t", "k"); !ok || !r.Deleted {
		t.Fatalf("A dropped the tombstone while B's origin, which never wrote, was applied nowhere: %+v", r)
	}
	b.write(put("t", "b", "1"))
	h.pump()
	h.advance(2 * time.Second)
	for _, n := range []*node{a, b, c} {
		if r, ok := n.get("t", "k"); ok {
			t.Errorf("%s: the tombstone is still there: %+v", n.name, r)
		}
		if got := n.rep.Counters().TombstonesDropped; got != 1 {
			t.Errorf("%s: %d tombstones dropped, want 1", n.name, got)
		}
		n.audit()
	}
	if _, ok := a.get("t", "c"); !ok {
		t.Error("a live record went with the tombstones")
	}
}

// TestPartialTableKeepsTombstones: a node drops no tombstone of a table it does not hold
// whole (docs/design.md §14, §24.4). A, removed from t while B, t's carrier, has not
// applied A's delete of t/k, keeps t's records until B holds them; past the horizon A
// drops the tombstone of an unplaced table and keeps t's: a copy B took from it would keep
// B's older t/k (A does not hold t whole) and raise A's origin past the delete.
func TestPartialTableKeepsTombstones(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RetainAge: time.Second}
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A","B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k", "v"))
	a.write(put("u", "j", "v"))
	h.pump()
	h.advance(time.Millisecond)
	// B is sent none of A's entries from the deletes on.
	from := a.write(del("t", "k"))
	h.drop = func(f, to string, d wire.Decoded) bool {
		o, s, ok := dataSeq(d)
		return ok && f == "A" && to == "B" && o == a.origin && s >= from
	}
	a.write(del("u", "j"))
	h.pump()
	h.advance(time.Millisecond)
	b.write(put("u", "b", "1")) // B's origin moves past the deletes on A
	h.pump()
	if _, err := a.publish(mapDoc(3, `,"placement":{"t":["B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Second)
	if _, ok := a.get("u", "j"); ok {
		t.Fatal("A: u/j's tombstone is there: the test needs the horizon passed")
	}
	if r, ok := a.get("t", "k"); !ok || !r.Deleted {
		t.Fatalf("A dropped the tombstone of t/k, a table it no longer holds whole (B has not applied the delete): %+v, %v", r, ok)
	}
	if got := a.rep.Counters().TombstonesDropped; got != 1 {
		t.Fatalf("A: %d tombstones dropped, want 1 (u/j's)", got)
	}
	if r, ok := b.get("t", "k"); !ok || r.Deleted {
		t.Fatalf("B: t/k = %+v, %v: the test needs B behind the delete", r, ok)
	}
	// B, sent the rest, takes the delete; A's removal then drops t.
	h.drop = nil
	a.write(put("u", "a", "1"))
	h.pump()
	h.advance(3 * time.Second)
	if r, ok := b.get("t", "k"); ok && !r.Deleted {
		t.Errorf("B: t/k is back after its delete: %+v", r)
	}
	a.audit()
	b.audit()
}
