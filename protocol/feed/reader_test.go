package feed_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"plait/protocol/feed"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// logs builds a store's logs entry by entry, writing each entry's records as
// last-writer-wins would (a record is written when its version is newer than the stored).
type logs struct {
	t    *testing.T
	st   *memstore.Store
	prev map[wire.OriginID]wire.Hash
	seq  map[wire.OriginID]uint64
}

var (
	oA, oB, oC = org(1), org(2), org(3)
	tbl        = []byte("t")
)

// org is test origin n, its first byte n: origins sort by n, and events name them by it.
func org(n byte) wire.OriginID { return wire.OriginID{n, 0xfe, 15: n} }

func newLogs(t *testing.T) *logs {
	st := memstore.New(store.Identity{Origin: org(9), Name: "self"})
	return &logs{t: t, st: st, prev: map[wire.OriginID]wire.Hash{}, seq: map[wire.OriginID]uint64{}}
}

func put(table, key, value string) wire.Op {
	return wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key), Value: []byte(value)}
}

func del(table, key string) wire.Op {
	return wire.Op{Kind: wire.OpDelete, Table: []byte(table), Key: []byte(key)}
}

// entry appends origin o's next entry, stamped hlc, with ops.
func (l *logs) entry(o wire.OriginID, hlc uint64, ops ...wire.Op) {
	l.t.Helper()
	seq := l.seq[o] + 1
	tx := wire.Txn{Origin: o, Seq: seq, HLC: wire.HLC(hlc), Prev: l.prev[o], Ops: ops}
	raw, err := tx.Encode()
	if err != nil {
		l.t.Fatal(err)
	}
	b := &store.Batch{Origin: o, Seq: seq, Hash: wire.Sum256(raw), Txn: raw, Name: fmt.Sprintf("n%x", o[0])}
	for _, op := range ops {
		rec := store.Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete, HLC: tx.HLC, Origin: o}
		old, has, err := l.st.Get(op.Table, op.Key)
		if err != nil {
			l.t.Fatal(err)
		}
		if !has || store.NewerVersion(rec.Version(), old.Version()) {
			b.Records = append(b.Records, rec)
		}
	}
	if _, err := l.st.Apply(b); err != nil {
		l.t.Fatal(err)
	}
	l.seq[o], l.prev[o] = seq, b.Hash
}

// run appends a run of n entries of o held as a skip, naming tables.
func (l *logs) run(o wire.OriginID, n int, hlc uint64, tables ...string) {
	l.t.Helper()
	seq := l.seq[o]
	var ts [][]byte
	for _, t := range tables {
		ts = append(ts, []byte(t))
	}
	h := wire.Sum256([]byte(fmt.Sprint(o, seq+uint64(n))))
	b := &store.Batch{Origin: o, Seq: seq + uint64(n), Hash: h,
		Skip: &store.Skip{From: seq + 1, Prev: l.prev[o], Tables: ts, HLC: wire.HLC(hlc)}}
	if _, err := l.st.Apply(b); err != nil {
		l.t.Fatal(err)
	}
	l.seq[o], l.prev[o] = seq+uint64(n), h
}

// purge drops o's entries up to to (retention).
func (l *logs) purge(o wire.OriginID, to uint64) {
	l.t.Helper()
	last, _ := l.st.LastArrival()
	if err := l.st.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: o, To: to}}, ArrivalFloor: last}); err != nil {
		l.t.Fatal(err)
	}
}

// copyTo ends a base copy that raises o's log to seq (its entries between never held here).
func (l *logs) copyTo(o wire.OriginID, seq uint64) {
	l.t.Helper()
	h := wire.Sum256([]byte(fmt.Sprint("copy", o, seq)))
	if err := l.st.EndCopy(&store.CopyEnd{Logs: []store.CopiedLog{{Origin: o,
		Position: wire.CopyPosition{Origin: o, Seq: seq, Hash: h, HLC: wire.HLC(seq)}}}}); err != nil {
		l.t.Fatal(err)
	}
	l.seq[o], l.prev[o] = seq, h
}

func start(t *testing.T, st store.Store, since feed.Since) *feed.Reader {
	t.Helper()
	r, err := feed.Start(st, tbl, since)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

func next(t *testing.T, r *feed.Reader, st store.Store, in feed.Inputs) []feed.Event {
	t.Helper()
	evs, err := r.Next(st, in, 1000, 1<<20)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return evs
}

// brief is an event as the tests compare it: kind, then reason or origin:seq and keys.
func brief(evs []feed.Event) []string {
	var out []string
	for _, e := range evs {
		switch e.Kind {
		case feed.Reread:
			s := "reread " + e.Reason
			if e.Seq > 0 {
				s += fmt.Sprintf(" %x:%d", e.Origin[0], e.Seq)
			}
			out = append(out, s)
		default:
			s := fmt.Sprintf("%x:%d", e.Origin[0], e.Seq)
			for _, op := range e.Ops {
				w := ""
				if !op.Won {
					w = "(lost)"
				}
				if op.Kind == wire.OpDelete {
					s += " -" + string(op.Key) + w
				} else {
					s += " " + string(op.Key) + "=" + string(op.Value) + w
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func want(t *testing.T, evs []feed.Event, w ...string) {
	t.Helper()
	if got := brief(evs); !reflect.DeepEqual(got, w) && !(len(got) == 0 && len(w) == 0) {
		t.Fatalf("events %q, want %q", got, w)
	}
}

func pos(es ...any) feed.Position {
	var p feed.Position
	for i := 0; i < len(es); i += 2 {
		p = p.With(es[i].(wire.OriginID), uint64(es[i+1].(int)))
	}
	return p
}

func TestStartJudgesBehindAndPurged(t *testing.T) {
	l := newLogs(t)
	for i := 0; i < 5; i++ {
		l.entry(oA, uint64(10+i), put("t", "a", "x"))
	}
	for i := 0; i < 3; i++ {
		l.entry(oB, uint64(20+i), put("t", "b", "x"))
	}
	l.purge(oA, 2)

	var be *feed.BehindError
	_, err := feed.Start(l.st, tbl, feed.Since{Kind: feed.SincePosition, Position: pos(oA, 5, oB, 4)})
	if !errors.As(err, &be) || be.Origin != oB || be.Seq != 4 || !be.Have.Equal(pos(oA, 5, oB, 3)) {
		t.Fatalf("Start ahead on B: %v (%+v), want *BehindError on B with the node's position", err, be)
	}
	_, err = feed.Start(l.st, tbl, feed.Since{Kind: feed.SincePosition, Position: pos(oC, 1)})
	if !errors.As(err, &be) || be.Origin != oC {
		t.Fatalf("Start on an origin the node lacks: %v, want *BehindError", err)
	}
	// Behind is judged first: a position both ahead and below a floor waits.
	_, err = feed.Start(l.st, tbl, feed.Since{Kind: feed.SincePosition, Position: pos(oA, 1, oB, 9)})
	if !errors.As(err, &be) {
		t.Fatalf("Start ahead and purged: %v, want *BehindError", err)
	}
	var pe *feed.PurgedError
	for _, p := range []feed.Position{pos(oA, 1), nil, pos(oB, 3)} {
		_, err = feed.Start(l.st, tbl, feed.Since{Kind: feed.SincePosition, Position: p})
		if !errors.As(err, &pe) || pe.Origin != oA || pe.Floor != 2 {
			t.Fatalf("Start at %v: %v, want *PurgedError of A floor 2", p, err)
		}
	}
	r := start(t, l.st, feed.Since{Kind: feed.SincePosition, Position: pos(oA, 2)})
	want(t, next(t, r, l.st, feed.Inputs{}), "1:3 a=x(lost)", "1:4 a=x(lost)", "1:5 a=x", "2:1 b=x(lost)", "2:2 b=x(lost)", "2:3 b=x")

	r = start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	if !r.Position().Equal(pos(oA, 2)) {
		t.Fatalf("oldest starts at %v, want A's floor", r.Position())
	}
	r = start(t, l.st, feed.Since{Kind: feed.SinceNow})
	if !r.Position().Equal(pos(oA, 5, oB, 3)) {
		t.Fatalf("now starts at %v", r.Position())
	}
	if evs := next(t, r, l.st, feed.Inputs{}); len(evs) != 0 || !r.CaughtUp() {
		t.Fatalf("a reader at now reads %q", brief(evs))
	}
	l.entry(oB, 30, del("t", "b"))
	want(t, next(t, r, l.st, feed.Inputs{}), "2:4 -b")
}

func TestOrderByHLCThenOrigin(t *testing.T) {
	l := newLogs(t)
	l.entry(oB, 5, put("t", "b1", "1"))
	l.entry(oA, 7, put("t", "a1", "1"))
	l.entry(oC, 5, put("t", "c1", "1"))
	l.entry(oA, 8, put("t", "a2", "1"))
	l.entry(oB, 6, put("t", "b2", "1"))
	l.entry(oB, 9, put("t", "b3", "1"))
	l.entry(oC, 4, put("t", "c2", "1")) // lower than its own previous: seq order wins within an origin
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs := next(t, r, l.st, feed.Inputs{})
	want(t, evs, "2:1 b1=1", "3:1 c1=1", "3:2 c2=1", "2:2 b2=1", "1:1 a1=1", "1:2 a2=1", "2:3 b3=1")
	if !evs[2].Position.Equal(pos(oB, 1, oC, 2)) || evs[2].Name != "n3" || evs[2].HLC != 4 {
		t.Fatalf("event 3: position %v name %q hlc %d", evs[2].Position, evs[2].Name, evs[2].HLC)
	}
	if !r.Position().Equal(pos(oA, 2, oB, 3, oC, 2)) || !r.CaughtUp() {
		t.Fatalf("position after %v", r.Position())
	}
}

func TestEntriesWithoutTheTable(t *testing.T) {
	l := newLogs(t)
	l.entry(oA, 1, put("u", "k", "1"))
	l.entry(oA, 2, put("u", "k", "2"), put("t", "k", "x"), put("v", "k", "3"), del("t", "j"))
	l.entry(oA, 3, put("u", "k", "4"))
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs := next(t, r, l.st, feed.Inputs{})
	want(t, evs, "1:2 k=x -j")
	if !evs[0].Position.Equal(pos(oA, 2)) || !r.Position().Equal(pos(oA, 3)) {
		t.Fatalf("event at %v, reader at %v", evs[0].Position, r.Position())
	}
}

func TestRunsHeldAsSkips(t *testing.T) {
	l := newLogs(t)
	l.entry(oA, 1, put("t", "k", "1"))
	l.run(oA, 3, 4, "u") // not naming t: passed silently
	l.entry(oA, 5, put("u", "k", "1"))
	l.run(oA, 2, 7, "t", "u") // naming t: one reread
	l.entry(oA, 8, put("t", "k", "2"))
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs := next(t, r, l.st, feed.Inputs{})
	want(t, evs, "1:1 k=1(lost)", "reread skipped 1:7", "1:8 k=2")
	if !evs[1].Position.Equal(pos(oA, 7)) {
		t.Fatalf("reread at %v, want past the run", evs[1].Position)
	}
	// A position inside a run reads the run.
	r = start(t, l.st, feed.Since{Kind: feed.SincePosition, Position: pos(oA, 6)})
	want(t, next(t, r, l.st, feed.Inputs{}), "reread skipped 1:7", "1:8 k=2")
}

func TestPurgedMidRead(t *testing.T) {
	for _, copied := range []bool{false, true} {
		t.Run(fmt.Sprint("copy=", copied), func(t *testing.T) {
			l := newLogs(t)
			for i := 1; i <= 4; i++ {
				l.entry(oA, uint64(i), put("t", fmt.Sprint("a", i), "x"))
			}
			l.entry(oB, 50, put("t", "b", "x"))
			r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
			in := feed.Inputs{CopiesEnded: 3}
			evs, err := r.Next(l.st, in, 2, 1<<20)
			if err != nil || len(evs) != 2 {
				t.Fatalf("first read: %q, %v", brief(evs), err)
			}
			if copied {
				l.copyTo(oA, 9)
				in.CopiesEnded++
			} else {
				l.purge(oA, 3)
			}
			l.entry(oA, 20, put("t", "a10", "x"))
			evs, err = r.Next(l.st, in, 100, 1<<20)
			if !copied {
				var pe *feed.PurgedError
				if !errors.As(err, &pe) || pe.Origin != oA || pe.Floor != 3 || pe.Seq != 2 {
					t.Fatalf("read across a purge: %q, %v; want *PurgedError of A floor 3 at 2", brief(evs), err)
				}
				if _, err2 := r.Next(l.st, in, 100, 1<<20); !errors.As(err2, &pe) {
					t.Fatalf("the next read after a purge: %v", err2)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want(t, evs, "reread copy", "1:10 a10=x", "2:1 b=x")
			if !evs[0].Position.Equal(pos(oA, 9)) {
				t.Fatalf("reread at %v, want A's floor", evs[0].Position)
			}
			// The same count again: no second reread.
			want(t, next(t, r, l.st, in))
		})
	}
}

func TestAroundTheLogRereads(t *testing.T) {
	l := newLogs(t)
	l.entry(oA, 1, put("t", "k", "1"))
	in := feed.Inputs{Repaired: 5, Copied: 2, CopiesEnded: 1}
	r := start(t, l.st, feed.Since{Kind: feed.SinceNow})
	want(t, next(t, r, l.st, in)) // the first Next's inputs are where the reader starts
	in.Repaired++
	want(t, next(t, r, l.st, in), "reread repair")
	want(t, next(t, r, l.st, in))
	in.Copied += 3
	l.entry(oA, 2, put("t", "k", "2"))
	evs := next(t, r, l.st, in)
	want(t, evs, "reread copy", "1:2 k=2")
	if !evs[0].Position.Equal(pos(oA, 1)) {
		t.Fatalf("reread at %v, want before the entry after it", evs[0].Position)
	}
	in.Copied++
	in.Repaired++
	want(t, next(t, r, l.st, in), "reread copy") // one reread for both
	// A copy ended with no floor past the reader: nothing to say.
	in.CopiesEnded++
	want(t, next(t, r, l.st, in))

	// StartWith takes its inputs at start.
	r2, err := feed.StartWith(l.st, tbl, feed.Since{Kind: feed.SinceNow}, in)
	if err != nil {
		t.Fatal(err)
	}
	in.Repaired++
	want(t, next(t, r2, l.st, in), "reread repair")
}

func TestWon(t *testing.T) {
	l := newLogs(t)
	l.entry(oA, 10, put("t", "k", "a"), put("t", "j", "a"))
	l.entry(oB, 5, put("t", "k", "b")) // older: loses when applied
	l.entry(oB, 11, del("t", "j"))     // newer: wins
	l.entry(oC, 12, put("t", "j", "c"))
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	want(t, next(t, r, l.st, feed.Inputs{}), "2:1 k=b(lost)", "1:1 k=a j=a(lost)", "2:2 -j(lost)", "3:1 j=c")
}

func TestBounds(t *testing.T) {
	l := newLogs(t)
	for i := 1; i <= 10; i++ {
		l.entry(oA, uint64(i), put("t", fmt.Sprint("k", i), "0123456789"))
	}
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs, err := r.Next(l.st, feed.Inputs{}, 3, 1<<20)
	if err != nil || len(evs) != 3 || r.CaughtUp() || !r.Position().Equal(pos(oA, 3)) {
		t.Fatalf("maxEvents 3: %q %v, caught up %v at %v", brief(evs), err, r.CaughtUp(), r.Position())
	}
	raw, _ := l.st.Entry(oA, 4)
	evs, err = r.Next(l.st, feed.Inputs{}, 100, 2*len(raw))
	if err != nil || len(evs) != 2 || r.CaughtUp() {
		t.Fatalf("maxBytes of two entries: %q %v", brief(evs), err)
	}
	evs, err = r.Next(l.st, feed.Inputs{}, 100, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("maxBytes below one entry reads one: %q %v", brief(evs), err)
	}
	evs, err = r.Next(l.st, feed.Inputs{}, 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("bounds of 0 read one: %q %v", brief(evs), err)
	}
	evs = next(t, r, l.st, feed.Inputs{})
	if len(evs) != 3 || !r.CaughtUp() || !r.Position().Equal(pos(oA, 10)) {
		t.Fatalf("the rest: %q, caught up %v", brief(evs), r.CaughtUp())
	}
}

// build is one store with every kind of entry: three origins interleaved, entries of other
// tables, runs naming the table and not.
func build(t *testing.T) *logs {
	l := newLogs(t)
	for i := 0; i < 40; i++ {
		o := []wire.OriginID{oA, oB, oC}[i%3]
		switch i % 7 {
		case 3:
			l.run(o, 2, uint64(100+i*3%17), "t")
		case 5:
			l.run(o, 1, uint64(100+i*3%17), "u")
		case 6:
			l.entry(o, uint64(100+i*5%13), put("u", "k", "v"))
		default:
			l.entry(o, uint64(100+i*5%13), put("t", fmt.Sprint("k", i%4), fmt.Sprint(i)), del("t", fmt.Sprint("k", i%5)))
		}
	}
	return l
}

func TestDeterminism(t *testing.T) {
	l1, l2 := build(t), build(t)
	r1 := start(t, l1.st, feed.Since{Kind: feed.SinceOldest})
	r2 := start(t, l2.st, feed.Since{Kind: feed.SinceOldest})
	in := feed.Inputs{Repaired: 1}
	all := next(t, r1, l1.st, in)
	if len(all) < 20 {
		t.Fatalf("only %d events", len(all))
	}
	// The same store in chunks, resuming from the last event's position on the way: the
	// same events.
	var chunked []feed.Event
	for i := 0; i < 1000 && (len(chunked) == 0 || !r2.CaughtUp()); i++ {
		evs, err := r2.Next(l2.st, in, 3, 50)
		if err != nil {
			t.Fatal(err)
		}
		chunked = append(chunked, evs...)
		if i%2 == 1 && len(evs) > 0 {
			r2, err = feed.StartWith(l2.st, tbl, feed.Since{Kind: feed.SincePosition, Position: evs[len(evs)-1].Position}, in)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if !reflect.DeepEqual(all, chunked) {
		t.Fatalf("one read:\n%q\nin chunks and resumes:\n%q", brief(all), brief(chunked))
	}
}

func TestUnsyncedOwnEntriesHeldBack(t *testing.T) {
	l := newLogs(t)
	for i := 1; i <= 4; i++ {
		l.entry(oA, uint64(i), put("t", fmt.Sprint("a", i), "x"))
	}
	l.entry(oB, 9, put("t", "b", "x"))
	in := feed.Inputs{Own: oA, Synced: 2}
	r, err := feed.StartWith(l.st, tbl, feed.Since{Kind: feed.SinceNow}, in)
	if err != nil || !r.Position().Equal(pos(oA, 2, oB, 1)) {
		t.Fatalf("now with A synced to 2: %v, %v", r.Position(), err)
	}
	r = start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs := next(t, r, l.st, in)
	want(t, evs, "1:1 a1=x", "1:2 a2=x", "2:1 b=x")
	if !r.CaughtUp() {
		t.Fatal("a reader at the synced seq is not caught up")
	}
	in.Synced = 4
	want(t, next(t, r, l.st, in), "1:3 a3=x", "1:4 a4=x")
}

// leafEntry appends hub o's next entry, stamped hlc, re-originating leaf's write seq,
// stamped leafHLC, with ops (transaction format 3, docs/design.md §27): its records carry
// the leaf's version, and the hub as Via.
func (l *logs) leafEntry(o wire.OriginID, hlc uint64, leaf wire.OriginID, seq, leafHLC uint64, ops ...wire.Op) {
	l.t.Helper()
	n := l.seq[o] + 1
	tx := wire.Txn{Origin: o, Seq: n, HLC: wire.HLC(hlc), Prev: l.prev[o], Ops: ops,
		Leaf: &wire.LeafBlock{Origin: leaf, Seq: seq, HLC: wire.HLC(leafHLC), Hash: wire.Hash{byte(seq)}}}
	raw, err := tx.Encode()
	if err != nil {
		l.t.Fatal(err)
	}
	b := &store.Batch{Origin: o, Seq: n, Hash: wire.Sum256(raw), Txn: raw, Name: fmt.Sprintf("n%x", o[0])}
	for _, op := range ops {
		rec := store.Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete,
			HLC: wire.HLC(leafHLC), Origin: leaf, Via: o, ViaHLC: tx.HLC}
		old, has, err := l.st.Get(op.Table, op.Key)
		if err != nil {
			l.t.Fatal(err)
		}
		if !has || store.NewerVersion(rec.Version(), old.Version()) {
			b.Records = append(b.Records, rec)
		}
	}
	if _, err := l.st.Apply(b); err != nil {
		l.t.Fatal(err)
	}
	l.seq[o], l.prev[o] = n, b.Hash
}

// TestLeafWrites (design §27.1 row 20): an event of a hub's format-3 entry has the hub's
// origin, seq and HLC (its position) and the leaf's origin and seq; an operation won when
// the stored version is the leaf's (the conflict identity), never the hub's: the leaf's k
// at 8 lost to A's at 10, though the hub re-originated it at 20; its k at 11 won; its j at
// 11 lost to A's at 12, though the hub's entry is at 21.
func TestLeafWrites(t *testing.T) {
	l := newLogs(t)
	leaf := org(7)
	l.entry(oA, 10, put("t", "k", "a"))
	l.entry(oA, 12, put("t", "j", "a"))
	l.leafEntry(oB, 20, leaf, 4, 8, put("t", "k", "leaf-old"))
	l.leafEntry(oB, 21, leaf, 5, 11, put("t", "k", "leaf"), put("t", "j", "leaf"))
	r := start(t, l.st, feed.Since{Kind: feed.SinceOldest})
	evs := next(t, r, l.st, feed.Inputs{})
	want(t, evs, "1:1 k=a(lost)", "1:2 j=a", "2:1 k=leaf-old(lost)", "2:2 k=leaf j=leaf(lost)")
	for i, e := range evs {
		switch {
		case e.Origin == oB && (e.Leaf != leaf || e.LeafSeq != uint64(i+2) || e.HLC != wire.HLC(18+i)):
			t.Errorf("event %d: leaf %v seq %d, HLC %d; want leaf %v seq %d, the hub's HLC %d", i, e.Leaf, e.LeafSeq, e.HLC, leaf, i+2, 18+i)
		case e.Origin == oA && (!e.Leaf.IsZero() || e.LeafSeq != 0):
			t.Errorf("event %d of A: leaf %v seq %d; want none", i, e.Leaf, e.LeafSeq)
		}
	}
}
