package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Identity is the identity of every store that open gives Run.
var Identity = store.Identity{Origin: Origin(0x5e), Name: "self"}

// Origin returns a deterministic origin id for test origin n (not zero when n is not).
func Origin(n byte) wire.OriginID {
	var o wire.OriginID
	for i := range o {
		o[i] = n
	}
	return o
}

// Chain returns the first n transactions of origin o as batches: transaction seq puts the
// value "v<seq>" at key "<o>-<seq>" of table "t", and the batch's records are that put.
func Chain(t testing.TB, o wire.OriginID, n int) []*store.Batch {
	t.Helper()
	c := &chain{origin: o}
	out := make([]*store.Batch, n)
	for i := range out {
		seq := c.seq + 1
		out[i] = c.next(t, put("t", fmt.Sprintf("%x-%d", o[:2], seq), fmt.Sprintf("v%d", seq)))
	}
	return out
}

// chain builds the transactions of one origin, one after another.
type chain struct {
	origin wire.OriginID
	seq    uint64
	prev   wire.Hash
	last   *store.Batch // the last batch built
}

// next builds the next transaction of the chain from ops; its records are the ops' results
// at the transaction's HLC.
func (c *chain) next(t testing.TB, ops ...wire.Op) *store.Batch {
	t.Helper()
	return c.nextTokened(t, wire.Token{}, ops...)
}

// nextTokened is next with a fencing token (transaction format 2 when it is not zero),
// which its records carry.
func (c *chain) nextTokened(t testing.TB, tok wire.Token, ops ...wire.Op) *store.Batch {
	t.Helper()
	c.seq++
	hlc := wire.MakeHLC(1_700_000_000_000+c.seq, uint16(c.origin[0]))
	txn, err := (&wire.Txn{Origin: c.origin, Seq: c.seq, HLC: hlc, Prev: c.prev, Token: tok, Ops: ops}).Encode()
	if err != nil {
		t.Fatalf("encoding seq %d: %v", c.seq, err)
	}
	b := &store.Batch{Origin: c.origin, Seq: c.seq, Hash: sha256.Sum256(txn), Txn: txn}
	for _, op := range ops {
		b.Records = append(b.Records, store.Record{Table: op.Table, Key: op.Key, Value: op.Value,
			Deleted: op.Kind == wire.OpDelete, HLC: hlc, Origin: c.origin, Token: tok})
	}
	c.prev, c.last = b.Hash, b
	return b
}

func put(table, key, value string) wire.Op {
	return wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key), Value: []byte(value)}
}

func del(table, key string) wire.Op {
	return wire.Op{Kind: wire.OpDelete, Table: []byte(table), Key: []byte(key)}
}

// Run runs the suite. open returns a new, empty store whose identity is Identity.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("ApplyInterleaved", func(t *testing.T) { testApplyInterleaved(t, open(t)) })
	t.Run("RefusesWritingNothing", func(t *testing.T) { testRefuses(t, open(t)) })
	t.Run("Records", func(t *testing.T) { testRecords(t, open(t)) })
	t.Run("Names", func(t *testing.T) { testNames(t, open(t)) })
	t.Run("PeerCursor", func(t *testing.T) { testPeerCursor(t, open(t)) })
	t.Run("BufferReuse", func(t *testing.T) { testBufferReuse(t, open(t)) })
	t.Run("Sync", func(t *testing.T) { testSync(t, open(t)) })
	t.Run("LogBytes", func(t *testing.T) { testLogBytes(t, open(t)) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, open(t)) })
	t.Run("PurgeRefusesWritingNothing", func(t *testing.T) { testPurgeRefuses(t, open(t)) })
	t.Run("Holds", func(t *testing.T) { testHolds(t, open(t)) })
	t.Run("Snapshot", func(t *testing.T) { testSnapshot(t, open(t)) })
	t.Run("ApplyCopy", func(t *testing.T) { testApplyCopy(t, open(t)) })
	t.Run("EndCopy", func(t *testing.T) { testEndCopy(t, open(t)) })
	t.Run("DropTombstones", func(t *testing.T) { testDropTombstones(t, open(t)) })
	t.Run("DropTable", func(t *testing.T) { testDropTable(t, open(t)) })
	t.Run("Reseed", func(t *testing.T) { testReseed(t, open(t)) })
	t.Run("ReseedRefusesWritingNothing", func(t *testing.T) { testReseedRefuses(t, open(t)) })
	t.Run("Repair", func(t *testing.T) { testRepair(t, open(t)) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, open(t)) })
	t.Run("Skip", func(t *testing.T) { testSkip(t, open(t)) })
	t.Run("SkipRefusesWritingNothing", func(t *testing.T) { testSkipRefuses(t, open(t)) })
	t.Run("SkipExtends", func(t *testing.T) { testSkipExtends(t, open(t)) })
	t.Run("SkipPurge", func(t *testing.T) { testSkipPurge(t, open(t)) })
	t.Run("SkipCopyEnd", func(t *testing.T) { testSkipCopyEnd(t, open(t)) })
	t.Run("SkipAudit", func(t *testing.T) { testSkipAudit(t, open(t)) })
	t.Run("SkipReseed", func(t *testing.T) { testSkipReseed(t, open(t)) })
	t.Run("Control", func(t *testing.T) { testControl(t, open(t)) })
	t.Run("ControlBounds", func(t *testing.T) { testControlBounds(t, open(t)) })
	t.Run("ControlOutsideRecords", func(t *testing.T) { testControlOutsideRecords(t, open(t)) })
	t.Run("Via", func(t *testing.T) { testVia(t, open(t)) })
	t.Run("LeafMarks", func(t *testing.T) { testLeafMarks(t, open(t)) })
	t.Run("ReseedLeafWrites", func(t *testing.T) { testReseedLeafWrites(t, open(t)) })
	t.Run("ReseedLeafWritesRefused", func(t *testing.T) { testReseedLeafWritesRefused(t, open(t)) })
}

// RunReopen checks that a store keeps everything Apply wrote across a reopen: what a
// restarted process finds (the Store contract: an Apply that returned survives a crash of
// the process). open returns a new, empty store; reopen closes a store the way a killed
// process leaves it (without Sync) and opens it again.
func RunReopen(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	s := open(t)
	a, b := Chain(t, originA, 3), Chain(t, originB, 2)
	a[0].Name, b[0].Name = "alpha", "beta"
	a[1].PeerOrigin, a[1].PeerCursor = peerP, 7
	for i, batch := range []*store.Batch{a[0], b[0], a[1], b[1], a[2]} {
		apply(t, s, batch, uint64(i+1))
	}
	must(t, s.SetPeerCursor(peerQ, 3))
	more := &chain{origin: originB, seq: b[1].Seq, prev: b[1].Hash} // a tombstone too
	apply(t, s, more.next(t, del("t", fmt.Sprintf("%x-%d", originB[:2], 1))), 6)
	// A format-2 entry: a tokened put, and RecordToken.
	apply(t, s, more.nextTokened(t, tokenT, put("t", "locked", "x")), 7)
	// Runs held as skips: C's log a run, then an entry, then a run at its head.
	c := Chain(t, originC, 6)
	applySkip(t, s, SkipBatch(t, c, 1, 2, "p"))
	apply(t, s, c[2], 8)
	applySkip(t, s, SkipBatch(t, c, 4, 6, "p", "q"))
	// A purge (A to 1 with the arrival floor at 1; B's first entry, position 2, stays as a
	// straggler after the floor passes it at 3) and holds.
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 1}}, ArrivalFloor: 1}))
	must(t, s.Purge(&store.Purge{ArrivalFloor: 3}))
	must(t, s.PutHolds([]store.Hold{{Peer: "P", Origin: originA, Seq: 2, Since: holdTime(1)},
		{Peer: "Q", Seq: 4, Since: holdTime(2)}}))
	// Control documents, one overwritten.
	must(t, s.PutControl("cluster-map", []byte(`{"generation":1}`)))
	must(t, s.PutControl("members", []byte("m")))
	must(t, s.PutControl("cluster-map", []byte(`{"generation":2}`)))
	// A hub's entry re-originating a leaf write (a via record, the leaf's mark with the
	// entry), and a mark raised alone.
	hub := &chain{origin: originH}
	apply(t, s, hub.nextLeaf(t, wire.LeafBlock{Origin: leafL, Seq: 4, HLC: leafHLC(4), Hash: wire.Hash{4}}, put("t", "from-leaf", "l")), 9)
	must(t, s.PutLeafMark(store.LeafMark{Leaf: leafM, Seq: 2, Hash: wire.Hash{2}, Carrier: originH, At: 1}))
	// A copy being taken: its records (a via record among them) and state.
	copiedVia := rec("u", "via", "v", leafHLC(9), leafM)
	copiedVia.Via, copiedVia.ViaHLC = originH, hlcOf(t, hub.last)+1
	tokened := tomb("u", "l", 4, originC)
	tokened.Token = tokenT
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{rec("u", "k", "v", 5, originC), tokened, copiedVia},
		State: store.CopyState{Peer: "P", Table: []byte("u"), Key: []byte("k"), Snapshots: 1, Records: 1, Started: 3,
			Vector: []wire.CopyPosition{{Origin: originC, Seq: 2, Hash: wire.Hash{2}, HLC: 5}}}}))
	before := dump(t, s, originA, originB, originC, originH, peerP, peerQ)
	if !strings.Contains(before, "via=") {
		t.Fatalf("the dump shows no via:\n%s", before)
	}
	s = reopen(t, s)
	for _, want := range []store.LeafMark{{Leaf: leafL, Seq: 4, Hash: wire.Hash{4}, Carrier: originH, At: 1},
		{Leaf: leafM, Seq: 2, Hash: wire.Hash{2}, Carrier: originH, At: 1}} {
		if m, ok := leafMark(t, s, want.Leaf); !ok || m != want {
			t.Errorf("LeafMark(%x) after a reopen = %+v, %v; want %+v", want.Leaf[:2], m, ok, want)
		}
	}
	if after := dump(t, s, originA, originB, originC, originH, peerP, peerQ); after != before {
		t.Errorf("the store changed across a reopen:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if id, err := s.Identity(); err != nil || id != Identity {
		t.Errorf("Identity after a reopen = %+v, %v", id, err)
	}
}

var (
	originA = Origin(0xa1)
	originB = Origin(0xb2)
	originC = Origin(0xc3)
	peerP   = Origin(0x70)
	peerQ   = Origin(0x71)
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func apply(t *testing.T, s store.Store, b *store.Batch, wantPos uint64) {
	t.Helper()
	pos, err := s.Apply(b)
	if err != nil {
		t.Fatalf("Apply origin %x seq %d: %v", b.Origin[:2], b.Seq, err)
	}
	if pos != wantPos {
		t.Fatalf("Apply origin %x seq %d: arrival position %d, want %d", b.Origin[:2], b.Seq, pos, wantPos)
	}
}

func get(t *testing.T, s store.Store, table, key string) (store.Record, bool) {
	t.Helper()
	r, ok, err := s.Get([]byte(table), []byte(key))
	must(t, err)
	return r, ok
}

func scan(t *testing.T, s store.Store, table string, after []byte) []store.Record {
	t.Helper()
	var out []store.Record
	must(t, s.Scan([]byte(table), after, func(r store.Record) bool {
		out = append(out, r)
		return true
	}))
	return out
}

func peerCursor(t *testing.T, s store.Store, peer wire.OriginID) uint64 {
	t.Helper()
	pos, err := s.PeerCursor(peer)
	must(t, err)
	return pos
}

func fmtRecord(r store.Record) string {
	f := fmt.Sprintf("%s/%q=%q deleted=%v hlc=%d origin=%x token=%v", r.Table, r.Key, r.Value, r.Deleted, r.HLC, r.Origin[:2], r.Token)
	if !r.Via.IsZero() || r.ViaHLC != 0 {
		f += fmt.Sprintf(" via=%x@%d", r.Via[:2], r.ViaHLC)
	}
	return f
}

func fmtRecords(rs []store.Record) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmtRecord(r))
	}
	return strings.Join(parts, "\n")
}

// dump renders everything the store holds that the interface shows, for origins (log
// entries at seqs 1 to 8, peer cursors) and every table, in a deterministic order, and the
// control documents under controlKeys.
func dump(t *testing.T, s store.Store, origins ...wire.OriginID) string {
	t.Helper()
	var w strings.Builder
	w.WriteString(dumpData(t, s, origins...))
	for _, k := range controlKeys {
		v, err := s.Control(k)
		must(t, err)
		if v != nil {
			fmt.Fprintf(&w, "control %s %d bytes %x\n", k, len(v), sha256.Sum256(v))
		}
	}
	return w.String()
}

// dumpData is dump without the control documents: the records, the logs and the rest.
func dumpData(t *testing.T, s store.Store, origins ...wire.OriginID) string {
	t.Helper()
	var w strings.Builder
	id, err := s.Identity()
	must(t, err)
	fmt.Fprintf(&w, "identity %x %q\n", id.Origin, id.Name)
	v, err := s.Vector()
	must(t, err)
	for _, e := range v.Entries() {
		fmt.Fprintf(&w, "cursor %x %d %x\n", e.Origin[:2], e.Seq, e.Hash[:4])
	}
	last, err := s.LastArrival()
	must(t, err)
	fmt.Fprintf(&w, "last arrival %d\n", last)
	hlc, err := s.RecordHLC()
	must(t, err)
	fmt.Fprintf(&w, "record hlc %d\n", hlc)
	tok, err := s.RecordToken()
	must(t, err)
	fmt.Fprintf(&w, "record token %v\n", tok)
	logs, err := s.Logs()
	must(t, err)
	for _, e := range v.Entries() {
		l := logs[e.Origin]
		fmt.Fprintf(&w, "log %x floor %d %x hlc %d below %d bytes %d\n", e.Origin[:2], l.Floor.Seq, l.Floor.Hash[:4],
			l.Floor.HLC, l.Below, l.Bytes)
	}
	afloor, err := s.ArrivalFloor()
	must(t, err)
	fmt.Fprintf(&w, "arrival floor %d\n", afloor)
	holds, err := s.Holds()
	must(t, err)
	for _, h := range holds {
		fmt.Fprintf(&w, "hold %q %x %d %d\n", h.Peer, h.Origin[:2], h.Seq, h.Since.UnixNano())
	}
	if cs, err := s.CopyState(); err != nil {
		t.Fatal(err)
	} else if cs != nil {
		fmt.Fprintf(&w, "copy state %+v\n", *cs)
	}
	arr, err := s.Arrivals(afloor, 1000)
	must(t, err)
	for _, a := range arr {
		fmt.Fprintf(&w, "arrival %d %x\n", a.Pos, sha256.Sum256(a.Txn))
	}
	for _, o := range origins {
		for seq := uint64(1); seq <= 8; seq++ {
			b, err := s.Entry(o, seq)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if errors.Is(err, store.ErrPurged) {
				fmt.Fprintf(&w, "entry %x %d purged\n", o[:2], seq)
				continue
			}
			var run *store.SkippedError
			if errors.As(err, &run) {
				fmt.Fprintf(&w, "entry %x %d skipped %+v\n", o[:2], seq, *run)
				continue
			}
			must(t, err)
			fmt.Fprintf(&w, "entry %x %d %x\n", o[:2], seq, sha256.Sum256(b))
		}
		fmt.Fprintf(&w, "peer cursor %x %d\n", o[:2], peerCursor(t, s, o))
	}
	tables, err := s.Tables()
	must(t, err)
	for _, table := range tables {
		fmt.Fprintf(&w, "table %q\n%s\n", table, fmtRecords(scan(t, s, string(table), nil)))
	}
	must(t, s.LeafMarks(func(m store.LeafMark) bool {
		fmt.Fprintf(&w, "leaf mark %x %d %x carried by %x %d\n", m.Leaf[:2], m.Seq, m.Hash[:4], m.Carrier[:2], m.At)
		return true
	}))
	names, err := s.Names()
	must(t, err)
	keys := make([]wire.OriginID, 0, len(names))
	for o := range names {
		keys = append(keys, o)
	}
	slices.SortFunc(keys, func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) })
	for _, o := range keys {
		fmt.Fprintf(&w, "name %x %q\n", o[:2], names[o])
	}
	return w.String()
}

func testEmpty(t *testing.T, s store.Store) {
	id, err := s.Identity()
	must(t, err)
	if id != Identity {
		t.Errorf("Identity = %+v, want %+v", id, Identity)
	}
	v, err := s.Vector()
	must(t, err)
	if v.Len() != 0 {
		t.Errorf("Vector has %d entries, want 0", v.Len())
	}
	last, err := s.LastArrival()
	must(t, err)
	if last != 0 {
		t.Errorf("LastArrival = %d, want 0", last)
	}
	arr, err := s.Arrivals(0, 10)
	must(t, err)
	if len(arr) != 0 {
		t.Errorf("Arrivals(0, 10) = %d entries, want 0", len(arr))
	}
	if b, err := s.Entry(originA, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Entry(A, 1) = %x, %v; want ErrNotFound", b, err)
	}
	if r, ok := get(t, s, "t", "k"); ok {
		t.Errorf("Get(t, k) found %s", fmtRecord(r))
	}
	if rs := scan(t, s, "t", nil); len(rs) != 0 {
		t.Errorf("Scan(t) = %s", fmtRecords(rs))
	}
	tables, err := s.Tables()
	must(t, err)
	if len(tables) != 0 {
		t.Errorf("Tables = %q, want none", tables)
	}
	names, err := s.Names()
	must(t, err)
	if len(names) != 0 {
		t.Errorf("Names = %v, want none", names)
	}
	if pos := peerCursor(t, s, peerP); pos != 0 {
		t.Errorf("PeerCursor(P) = %d, want 0", pos)
	}
}

func testApplyInterleaved(t *testing.T, s store.Store) {
	a, b, c := Chain(t, originA, 3), Chain(t, originB, 2), Chain(t, originC, 4)
	order := []*store.Batch{a[0], b[0], a[1], c[0], c[1], b[1], a[2], c[2], c[3]}
	for i, batch := range order {
		apply(t, s, batch, uint64(i+1))
		last, err := s.LastArrival()
		must(t, err)
		if last != uint64(i+1) {
			t.Fatalf("LastArrival = %d after %d applies", last, i+1)
		}
	}

	v, err := s.Vector()
	must(t, err)
	want := vector.Of(
		vector.Entry{Origin: originA, Seq: 3, Hash: sha256.Sum256(a[2].Txn)},
		vector.Entry{Origin: originB, Seq: 2, Hash: sha256.Sum256(b[1].Txn)},
		vector.Entry{Origin: originC, Seq: 4, Hash: sha256.Sum256(c[3].Txn)},
	)
	if !vector.Equal(v, want) {
		t.Errorf("Vector = %+v\nwant %+v", v.Entries(), want.Entries())
	}

	for _, batch := range order {
		got, err := s.Entry(batch.Origin, batch.Seq)
		must(t, err)
		if !bytes.Equal(got, batch.Txn) {
			t.Errorf("Entry(%x, %d) = %x, want %x", batch.Origin[:2], batch.Seq, got, batch.Txn)
		}
	}
	for _, miss := range []struct {
		o   wire.OriginID
		seq uint64
	}{{originA, 0}, {originA, 4}, {originB, 3}, {peerP, 1}} {
		if _, err := s.Entry(miss.o, miss.seq); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Entry(%x, %d): %v, want ErrNotFound", miss.o[:2], miss.seq, err)
		}
	}

	checkPage := func(after uint64, limit int, wantFirst, wantN int) {
		t.Helper()
		arr, err := s.Arrivals(after, limit)
		must(t, err)
		if len(arr) != wantN {
			t.Fatalf("Arrivals(%d, %d) = %d entries, want %d", after, limit, len(arr), wantN)
		}
		for i, got := range arr {
			pos := wantFirst + i
			if got.Pos != uint64(pos) || !bytes.Equal(got.Txn, order[pos-1].Txn) {
				t.Errorf("Arrivals(%d, %d)[%d] = position %d %x, want position %d %x",
					after, limit, i, got.Pos, got.Txn, pos, order[pos-1].Txn)
			}
		}
	}
	checkPage(0, 100, 1, 9)
	checkPage(0, 4, 1, 4)
	checkPage(4, 4, 5, 4)
	checkPage(8, 4, 9, 1)
	checkPage(3, 1, 4, 1)
	checkPage(9, 4, 0, 0)
	checkPage(100, 4, 0, 0)
	checkPage(0, 0, 0, 0)
}

func testRefuses(t *testing.T, s store.Store) {
	a := Chain(t, originA, 4)
	b := Chain(t, originB, 2)
	a[0].Name, a[0].PeerOrigin, a[0].PeerCursor = "alpha", peerP, 5
	apply(t, s, a[0], 1)
	apply(t, s, a[1], 2)
	apply(t, s, b[0], 3)
	origins := []wire.OriginID{originA, originB, originC, peerP, peerQ}
	before := dump(t, s, origins...)

	// A fork of A: its seq 3 follows a seq 2 other than the applied one.
	fork := &chain{origin: originA}
	fork.next(t, put("t", "fork", "1"))
	fork.next(t, put("t", "fork", "2"))
	forked3 := fork.next(t, put("t", "fork", "3"))

	// A's seq 4 on the hash of A's seq 2, the cursor: right previous hash, wrong seq.
	skipOnHash := (&chain{origin: originA, seq: 3, prev: a[1].Hash}).next(t, put("t", "skip", "4"))

	seq0 := *a[2]
	seq0.Seq = 0
	c := Chain(t, originC, 2)
	garbage := []byte("not a transaction")
	notNext := map[string]*store.Batch{
		"skip ahead":                      a[3],
		"skip ahead on the cursor's hash": skipOnHash,
		"repeat":                          a[1],
		"repeat first":                    a[0],
		"seq 0":                           &seq0,
		"new origin at seq 2":             c[1],
		"previous hash differs":           forked3,
	}
	other := map[string]*store.Batch{
		"zero origin": {Seq: 1, Txn: c[0].Txn, Hash: c[0].Hash},
		"hash is not SHA-256 of the txn": {Origin: originA, Seq: 3, Txn: a[2].Txn, Hash: a[1].Hash,
			Records: a[2].Records},
		"txn does not parse": {Origin: originC, Seq: 1, Txn: garbage, Hash: sha256.Sum256(garbage)},
		"txn of another origin": {Origin: originB, Seq: 2, Txn: a[1].Txn, Hash: a[1].Hash,
			Records: a[1].Records},
		"txn of another seq": {Origin: originA, Seq: 3, Txn: a[3].Txn, Hash: a[3].Hash,
			Records: a[3].Records},
	}
	// Every refused batch also carries what would show if it were written in part.
	extra := []store.Record{
		{Table: []byte("t"), Key: a[0].Records[0].Key, Value: []byte("overwritten"), HLC: 9, Origin: originA},
		{Table: []byte("refused"), Key: []byte("k"), Value: []byte("v"), HLC: 9, Origin: originA},
	}
	refuse := func(name string, batch *store.Batch, wantNotNext bool) {
		t.Helper()
		batch.Records = append(slices.Clone(batch.Records), extra...)
		batch.Name, batch.PeerOrigin, batch.PeerCursor = "evil", peerQ, 99
		pos, err := s.Apply(batch)
		switch {
		case err == nil:
			t.Errorf("%s: Apply accepted it at arrival position %d", name, pos)
		case wantNotNext && !errors.Is(err, store.ErrNotNext):
			t.Errorf("%s: Apply: %v, want ErrNotNext", name, err)
		case !wantNotNext && errors.Is(err, store.ErrNotNext):
			t.Errorf("%s: Apply: %v, want an error other than ErrNotNext", name, err)
		}
		if after := dump(t, s, origins...); after != before {
			t.Fatalf("%s: the refused Apply wrote.\nbefore:\n%s\nafter:\n%s", name, before, after)
		}
	}
	for _, name := range sortedKeys(notNext) {
		refuse(name, notNext[name], true)
	}
	for _, name := range sortedKeys(other) {
		refuse(name, other[name], false)
	}

	// The next entry still gets the next position: refusals leave no gap.
	apply(t, s, Chain(t, originA, 3)[2], 4)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func testRecords(t *testing.T, s store.Store) {
	a, b := &chain{origin: originA}, &chain{origin: originB}
	a1 := a.next(t, put("u", "k1", "u-one"), put("t", "k3", "three"), put("t", "k1", "one"))
	b1 := b.next(t, put("t", "k2", "two"), put("t", "\xff", "high"), put("a.b", "x", "y"))
	a2 := a.next(t, del("t", "k2"), put("t", "k10", "ten"))
	recordHLC := func(want wire.HLC, after string) {
		t.Helper()
		if got, err := s.RecordHLC(); err != nil || got != want {
			t.Errorf("RecordHLC after %s = %d, %v; want %d", after, got, err, want)
		}
	}
	recordHLC(0, "no apply")
	apply(t, s, a1, 1)
	recordHLC(a1.Records[0].HLC, "A seq 1")
	apply(t, s, b1, 2)
	recordHLC(b1.Records[0].HLC, "B seq 1") // the same wall time as A seq 1, a higher logical
	apply(t, s, a2, 3)
	recordHLC(a2.Records[0].HLC, "A seq 2")

	r, ok := get(t, s, "t", "k2")
	if !ok || !r.Deleted || r.HLC != a2.Records[0].HLC || r.Origin != originA ||
		string(r.Table) != "t" || string(r.Key) != "k2" || len(r.Value) != 0 {
		t.Errorf("Get(t, k2) = %s, %v; want the tombstone of A seq 2 at HLC %d", fmtRecord(r), ok, a2.Records[0].HLC)
	}
	r, ok = get(t, s, "t", "k1")
	if !ok || r.Deleted || string(r.Value) != "one" || r.HLC != a1.Records[0].HLC || r.Origin != originA {
		t.Errorf("Get(t, k1) = %s, %v", fmtRecord(r), ok)
	}
	r, ok = get(t, s, "u", "k1")
	if !ok || r.Deleted || string(r.Value) != "u-one" || string(r.Table) != "u" {
		t.Errorf("Get(u, k1) = %s, %v", fmtRecord(r), ok)
	}
	if r, ok := get(t, s, "u", "k2"); ok {
		t.Errorf("Get(u, k2) found %s: tables are independent", fmtRecord(r))
	}

	keys := func(rs []store.Record) string {
		var ks []string
		for _, r := range rs {
			k := string(r.Key)
			if r.Deleted {
				k += "(deleted)"
			}
			ks = append(ks, k)
		}
		return strings.Join(ks, ",")
	}
	for _, c := range []struct {
		after []byte
		want  string
	}{
		{nil, "k1,k10,k2(deleted),k3,\xff"},
		{[]byte("k1"), "k10,k2(deleted),k3,\xff"},
		{[]byte("k100"), "k2(deleted),k3,\xff"},
		{[]byte("k2"), "k3,\xff"},
		{[]byte("\xff"), ""},
		{[]byte("\xff\xff"), ""},
	} {
		if got := keys(scan(t, s, "t", c.after)); got != c.want {
			t.Errorf("Scan(t, after %q) = %q, want %q", c.after, got, c.want)
		}
	}
	if got := keys(scan(t, s, "u", nil)); got != "k1" {
		t.Errorf("Scan(u) = %q, want k1", got)
	}
	if got := keys(scan(t, s, "none", nil)); got != "" {
		t.Errorf("Scan(none) = %q, want nothing", got)
	}
	calls := 0
	must(t, s.Scan([]byte("t"), nil, func(r store.Record) bool {
		calls++
		return calls < 2
	}))
	if calls != 2 {
		t.Errorf("Scan went on after fn returned false: %d calls, want 2", calls)
	}

	tables, err := s.Tables()
	must(t, err)
	if got := fmt.Sprintf("%q", tables); got != `["a.b" "t" "u"]` {
		t.Errorf("Tables = %s, want [a.b t u]", got)
	}

	// The store writes the versions the batch carries: deciding which one wins is the
	// replica's. A put over the tombstone, at an older HLC, replaces it.
	b2 := b.next(t, put("t", "k2", "back"))
	b2.Records[0].HLC = 1
	apply(t, s, b2, 4)
	recordHLC(a2.Records[0].HLC, "a batch of older versions")
	b3 := b.next(t, put("t", "k3", "x"))
	b3.Records = nil // a transaction whose every version lost: no record written
	apply(t, s, b3, 5)
	recordHLC(a2.Records[0].HLC, "a batch without records")
	r, ok = get(t, s, "t", "k2")
	if !ok || r.Deleted || string(r.Value) != "back" || r.HLC != 1 || r.Origin != originB {
		t.Errorf("Get(t, k2) after the put = %s, %v", fmtRecord(r), ok)
	}
}

func testNames(t *testing.T, s store.Store) {
	a, b := Chain(t, originA, 3), Chain(t, originB, 1)
	a[0].Name = "alpha"
	apply(t, s, a[0], 1)
	apply(t, s, b[0], 2)
	apply(t, s, a[1], 3)
	names, err := s.Names()
	must(t, err)
	if len(names) != 1 || names[originA] != "alpha" {
		t.Errorf("Names = %v, want only A: alpha", names)
	}
	a[2].Name = "alpha2"
	apply(t, s, a[2], 4)
	names, err = s.Names()
	must(t, err)
	if len(names) != 1 || names[originA] != "alpha2" {
		t.Errorf("Names = %v, want only A: alpha2", names)
	}
	names[originB] = "caller's"
	if names, _ := s.Names(); len(names) != 1 {
		t.Errorf("Names = %v after the caller changed the map it got", names)
	}
}

func testPeerCursor(t *testing.T, s store.Store) {
	a := Chain(t, originA, 4)
	check := func(when string, p, q uint64) {
		t.Helper()
		if got := peerCursor(t, s, peerP); got != p {
			t.Errorf("%s: PeerCursor(P) = %d, want %d", when, got, p)
		}
		if got := peerCursor(t, s, peerQ); got != q {
			t.Errorf("%s: PeerCursor(Q) = %d, want %d", when, got, q)
		}
	}
	a[0].PeerOrigin, a[0].PeerCursor = peerP, 5
	apply(t, s, a[0], 1)
	check("batch raises P to 5", 5, 0)
	a[1].PeerOrigin, a[1].PeerCursor = peerP, 3
	apply(t, s, a[1], 2)
	check("batch with P at 3", 5, 0)
	must(t, s.SetPeerCursor(peerP, 4))
	check("SetPeerCursor(P, 4) sets it back", 4, 0)
	must(t, s.SetPeerCursor(peerP, 8))
	check("SetPeerCursor(P, 8)", 8, 0)
	must(t, s.SetPeerCursor(peerQ, 2))
	check("SetPeerCursor(Q, 2)", 8, 2)
	a[2].PeerCursor = 100 // no PeerOrigin: not set
	apply(t, s, a[2], 3)
	check("batch without a peer origin", 8, 2)
	if got := peerCursor(t, s, wire.OriginID{}); got != 0 {
		t.Errorf("PeerCursor(zero) = %d, want 0", got)
	}
	a[3].PeerOrigin, a[3].PeerCursor = peerQ, 7
	apply(t, s, a[3], 4)
	check("batch raises Q to 7", 8, 7)
}

func testBufferReuse(t *testing.T, s store.Store) {
	c := &chain{origin: originA}
	b := c.next(t, put("t", "key", "value"))
	txn := bytes.Clone(b.Txn)
	apply(t, s, b, 1)
	scribble := func(bs ...[]byte) {
		for _, x := range bs {
			for i := range x {
				x[i] = '#'
			}
		}
	}
	r0 := b.Records[0]
	scribble(b.Txn, r0.Table, r0.Key, r0.Value)

	check := func(when string) {
		t.Helper()
		got, err := s.Entry(originA, 1)
		must(t, err)
		if !bytes.Equal(got, txn) {
			t.Fatalf("%s: Entry = %x, want %x", when, got, txn)
		}
		arr, err := s.Arrivals(0, 1)
		must(t, err)
		if len(arr) != 1 || !bytes.Equal(arr[0].Txn, txn) {
			t.Fatalf("%s: Arrivals = %v", when, arr)
		}
		r, ok := get(t, s, "t", "key")
		if !ok || string(r.Table) != "t" || string(r.Key) != "key" || string(r.Value) != "value" {
			t.Fatalf("%s: Get(t, key) = %s, %v", when, fmtRecord(r), ok)
		}
		rs := scan(t, s, "t", nil)
		if len(rs) != 1 || string(rs[0].Key) != "key" || string(rs[0].Value) != "value" {
			t.Fatalf("%s: Scan(t) = %s", when, fmtRecords(rs))
		}
		tables, err := s.Tables()
		must(t, err)
		if len(tables) != 1 || string(tables[0]) != "t" {
			t.Fatalf("%s: Tables = %q", when, tables)
		}
		v, err := s.Vector()
		must(t, err)
		if want := vector.Of(vector.Entry{Origin: originA, Seq: 1, Hash: sha256.Sum256(txn)}); !vector.Equal(v, want) {
			t.Fatalf("%s: Vector = %+v", when, v.Entries())
		}
	}
	check("after the caller reused the batch's buffers")

	got, err := s.Entry(originA, 1)
	must(t, err)
	arr, err := s.Arrivals(0, 1)
	must(t, err)
	r, _ := get(t, s, "t", "key")
	rs := scan(t, s, "t", nil)
	tables, err := s.Tables()
	must(t, err)
	v, err := s.Vector()
	must(t, err)
	v.Advance(vector.Entry{Origin: originA, Seq: 2, Hash: wire.Hash{1}})
	v.Advance(vector.Entry{Origin: originB, Seq: 1, Hash: wire.Hash{1}})
	scribble(got, arr[0].Txn, r.Table, r.Key, r.Value, rs[0].Table, rs[0].Key, rs[0].Value, tables[0])
	check("after the caller changed the slices it got")
}

func testSync(t *testing.T, s store.Store) {
	must(t, s.Sync())
	apply(t, s, Chain(t, originA, 1)[0], 1)
	must(t, s.Sync())
	if last, err := s.LastArrival(); err != nil || last != 1 {
		t.Errorf("LastArrival after Sync = %d, %v; want 1", last, err)
	}
}
