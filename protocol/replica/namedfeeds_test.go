package replica_test

import (
	"errors"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Named feeds' holds against retention (docs/design.md §26.5): each test runs one node
// whose RetainBytes of 1 purges every entry it may, so that what stays is what a hold
// keeps (and each log's head).

// feedNode is a node whose retention purges all it may, with five entries written after
// entry 1, and a named feed "f" made at entry 1 with cap holdBytes.
func feedNode(t *testing.T, cfg replica.Config) (*harness, *node) {
	t.Helper()
	h := newHarness(t)
	cfg.RetainBytes = 1
	a := h.addNode("A", cfg)
	writeN(a, 0, 1)
	return h, a
}

// entryBytes is the bytes of of's entries from..to in n's store.
func (n *node) entryBytes(of *node, from, to uint64) uint64 {
	n.h.t.Helper()
	var sum uint64
	for s := from; s <= to; s++ {
		raw, _ := n.entry(of, s)
		sum += uint64(len(raw))
	}
	return sum
}

func (n *node) feed(name string) replica.NamedFeedStatus {
	n.h.t.Helper()
	st, ok := n.rep.NamedFeed(name)
	if !ok {
		n.h.t.Fatalf("%s: no named feed %s", n.name, name)
	}
	return st
}

func (n *node) putFeed(name string, holdBytes uint64) replica.NamedFeedStatus {
	n.h.t.Helper()
	st, _, err := n.rep.PutNamedFeed(name, "t", holdBytes)
	if err != nil {
		n.h.t.Fatalf("%s: PutNamedFeed %s: %v", n.name, name, err)
	}
	return st
}

func (n *node) ack(name string, of *node, seq uint64) (replica.NamedFeedStatus, error) {
	return n.rep.AckNamedFeed(name, []wire.OriginSeq{{Origin: of.origin, Seq: seq}})
}

func wantCode(t *testing.T, what string, err error, code wire.Code) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("%s: %v, want code %s", what, err, code)
	}
}

// TestNamedFeedHeldUnderCap: a feed whose bytes above its position are exactly its cap
// holds every entry above its position; the status counts them; one byte less of cap and
// the same entries lapse its hold, retention purges past its position, and the lapse is
// counted once.
func TestNamedFeedHeldUnderCap(t *testing.T) {
	for _, over := range []uint64{0, 1} {
		h, a := feedNode(t, replica.Config{})
		a.putFeed("f", 0)
		writeN(a, 1, 5) // entries 2..6 above the position 1
		above := a.entryBytes(a, 2, 6)
		st := a.putFeed("f", above-over)
		if st.LagBytes != above || st.LagEntries != 5 || len(st.Position) != 1 || st.Position[0].Seq != 1 {
			t.Fatalf("cap-%d: feed %+v, want 5 entries and %d bytes behind position 1", over, st, above)
		}
		h.advance(2 * time.Second)
		st = a.feed("f")
		if over == 0 {
			a.wantFloor(a, 1) // entry 1 is at the position: it goes; 2..6 stay
			if st.Lapsed || st.HeldBytes != a.entryBytes(a, 2, 5) || a.rep.Status(a.clock()).Counters.NamedFeedHoldsLapsed != 0 {
				t.Fatalf("at the cap: %+v, lapses %d; want held, holding entries 2..5", st, a.rep.Status(a.clock()).Counters.NamedFeedHoldsLapsed)
			}
			continue
		}
		a.wantFloor(a, 5) // the head, 6, stays
		if !st.Lapsed || st.HeldBytes != 0 || a.rep.Status(a.clock()).Counters.NamedFeedHoldsLapsed != 1 {
			t.Fatalf("one byte over the cap: %+v, lapses %d; want lapsed once, holding nothing", st, a.rep.Status(a.clock()).Counters.NamedFeedHoldsLapsed)
		}
		if st.LagBytes != a.entryBytes(a, 6, 6) || st.LagEntries != 5 {
			t.Fatalf("lapsed, purged to 5: %d entries and %d bytes behind, want 5 and the %d bytes the log holds above it",
				st.LagEntries, st.LagBytes, a.entryBytes(a, 6, 6))
		}
	}
}

// TestNamedFeedAcks: acks move the position up only, take the bytes they pass off the
// feed's, and let retention purge up to the new position; an ack above the node's
// applied seq is refused whole; an unknown feed is refused.
func TestNamedFeedAcks(t *testing.T) {
	h, a := feedNode(t, replica.Config{})
	a.putFeed("f", 1<<20)
	writeN(a, 1, 5)
	st, err := a.ack("f", a, 4)
	if err != nil {
		t.Fatal(err)
	}
	if st.Position[0].Seq != 4 || st.LagEntries != 2 || st.LagBytes != a.entryBytes(a, 5, 6) {
		t.Fatalf("after an ack to 4: %+v, want position 4, 2 entries and %d bytes behind", st, a.entryBytes(a, 5, 6))
	}
	h.advance(2 * time.Second)
	a.wantFloor(a, 4)
	if st, err = a.ack("f", a, 2); err != nil || st.Position[0].Seq != 4 {
		t.Fatalf("an ack below the position: %+v %v, want the position left at 4", st, err)
	}
	_, err = a.ack("f", a, 7)
	wantCode(t, "an ack above the applied seq", err, replica.CodeAhead)
	if st = a.feed("f"); st.Position[0].Seq != 4 {
		t.Fatalf("a refused ack moved the position: %+v", st)
	}
	_, err = a.ack("g", a, 1)
	wantCode(t, "an ack of an unknown feed", err, replica.CodeNoSuchFeed)
	_, err = a.rep.AckNamedFeed("f", []wire.OriginSeq{{Origin: wire.OriginID{0xee}, Seq: 1}})
	wantCode(t, "an ack of an origin this node does not know", err, replica.CodeAhead)
	if n := len(a.rep.Status(a.clock()).Origins); n != 1 {
		t.Fatalf("an ack of an unknown origin: %d origins in the status, want A's alone", n)
	}
	c := a.rep.Status(a.clock()).Counters
	if c.NamedFeedAcks != 1 || c.NamedFeedAcksAhead != 2 {
		t.Fatalf("counters: %d acks, %d ahead; want 1 and 2", c.NamedFeedAcks, c.NamedFeedAcksAhead)
	}
}

// TestNamedFeedSurvivesRestart: a feed's table, cap, position and lapse come back from
// its control document, and its bytes are counted again from the logs.
func TestNamedFeedSurvivesRestart(t *testing.T) {
	h, a := feedNode(t, replica.Config{})
	a.putFeed("f", 1<<20)
	a.putFeed("g", 1)
	writeN(a, 1, 5)
	if _, err := a.ack("f", a, 3); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Second) // g lapses; f holds from 3
	a.wantFloor(a, 3)
	if _, err := a.ack("f", a, 4); err != nil { // above the floor: loading walks the log to count
		t.Fatal(err)
	}
	before := a.rep.NamedFeeds()
	a.restart()
	after := a.rep.NamedFeeds()
	if len(after) != 2 {
		t.Fatalf("after a restart: %+v, want f and g", after)
	}
	for i := range before {
		b, n := before[i], after[i]
		if b.Name != n.Name || b.Table != n.Table || b.HoldBytes != n.HoldBytes || b.Lapsed != n.Lapsed ||
			b.LagBytes != n.LagBytes || b.LagEntries != n.LagEntries || len(n.Position) != 1 || n.Position[0] != b.Position[0] {
			t.Fatalf("after a restart: %+v, want %+v", n, b)
		}
	}
	if !after[1].Lapsed || after[0].Lapsed || after[0].LagBytes != a.entryBytes(a, 5, 6) {
		t.Fatalf("after a restart: %+v, want f held with %d bytes behind and g lapsed", after, a.entryBytes(a, 5, 6))
	}
	writeN(a, 6, 1)
	h.advance(2 * time.Second)
	a.wantFloor(a, 4) // f still holds after the restart
}

// TestNamedFeedDeleteReleases: a deleted feed holds nothing (retention purges past its
// position at the next step) and stays deleted across a restart.
func TestNamedFeedDeleteReleases(t *testing.T) {
	h, a := feedNode(t, replica.Config{})
	a.putFeed("f", 1<<20)
	writeN(a, 1, 5)
	h.advance(2 * time.Second)
	a.wantFloor(a, 1)
	if ok, err := a.rep.DeleteNamedFeed("f"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	h.advance(2 * time.Second)
	a.wantFloor(a, 5)
	a.restart()
	if fs := a.rep.NamedFeeds(); len(fs) != 0 {
		t.Fatalf("after a delete and a restart: %+v", fs)
	}
	if ok, err := a.rep.DeleteNamedFeed("f"); ok || err != nil {
		t.Fatalf("deleting it again: %v %v, want false", ok, err)
	}
}

// TestNamedFeedLimit: MaxNamedFeeds feeds are kept, one more is refused and counted; a
// PUT of an existing one sets its cap; one of another table, or a bad name, is refused.
func TestNamedFeedLimit(t *testing.T) {
	_, a := feedNode(t, replica.Config{MaxNamedFeeds: 2})
	a.putFeed("f1", 1)
	a.putFeed("f2", 1)
	_, _, err := a.rep.PutNamedFeed("f3", "t", 1)
	wantCode(t, "a third feed", err, replica.CodeTooManyNamedFeeds)
	if n := a.rep.Status(a.clock()).Counters.NamedFeedsRefused; n != 1 {
		t.Fatalf("named_feeds_refused %d, want 1", n)
	}
	if st, created, err := a.rep.PutNamedFeed("f2", "t", 9); err != nil || created || st.HoldBytes != 9 {
		t.Fatalf("setting f2's cap: %+v %v %v", st, created, err)
	}
	_, _, err = a.rep.PutNamedFeed("f2", "u", 9)
	wantCode(t, "f2 of another table", err, replica.CodeFeedExists)
	_, _, err = a.rep.PutNamedFeed("F", "t", 9)
	wantCode(t, "a name outside the rule", err, replica.CodeBadFeedName)
}

// TestNamedFeedRearms: a lapsed feed holds again once an ack brings it under its cap with
// nothing above its position purged, not before: a larger cap alone does not, while
// entries above its position are gone.
func TestNamedFeedRearms(t *testing.T) {
	h, a := feedNode(t, replica.Config{})
	a.putFeed("f", 1)
	writeN(a, 1, 5)
	h.advance(2 * time.Second)
	a.wantFloor(a, 5)
	if st := a.putFeed("f", 1<<20); !st.Lapsed {
		t.Fatalf("a larger cap with entries 2..5 purged: %+v, want still lapsed", st)
	}
	st, err := a.ack("f", a, 5)
	if err != nil || st.Lapsed || st.LagBytes != a.entryBytes(a, 6, 6) {
		t.Fatalf("an ack to the floor under the cap: %+v %v, want held again with entry 6's %d bytes above it", st, err, a.entryBytes(a, 6, 6))
	}
	writeN(a, 6, 3)
	h.advance(2 * time.Second)
	a.wantFloor(a, 5)
}

// TestNamedFeedRuns: on a node that does not carry a table, whose log of an origin holds
// runs (one row per stretch of entries it was not sent, each SKIP extending the row
// before), the log's bytes in the status are the store's, and a named feed counts each
// row once, as the store does: its bytes above a
// position at 0 are the log's; an ack inside a run keeps the run above it; a restart
// counts the same.
func TestNamedFeedRuns(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	h.pump()
	b.putFeed("f", 1<<20)
	for _, op := range []wire.Op{put("t", "k1", "1"), put("u", "k2", "2"), put("t", "k3", "3"), put("t", "k4", "4"), put("t", "k5", "5"), put("u", "k6", "6")} {
		a.write(op)
		h.pump() // one SKIP per entry: B extends its run row with each
	}
	run := runAt(t, b, a.origin, 4)
	if run == nil || run.From != 3 || run.To != 5 {
		t.Fatalf("B holds A's 3..5 as %+v, want one run 3..5", run)
	}
	if got := b.originStatus(a).LogBytes; got != b.logBytes(a) {
		t.Fatalf("B's status says its log of A holds %d bytes, its store %d", got, b.logBytes(a))
	}
	at := b.feed("f").Position
	base := uint64(0) // what B's log of A held when the feed was made (the map's entries)
	for _, p := range at {
		if p.Origin == a.origin {
			base = b.entryBytesThrough(a, p.Seq)
		}
	}
	if st := b.feed("f"); st.LagBytes != b.logBytes(a)-base+b.ownLogBytes() {
		t.Fatalf("B's feed: %d bytes behind, want %d: B's log of A above the position, counted as the store counts it", st.LagBytes, b.logBytes(a)-base+b.ownLogBytes())
	}
	if _, err := b.ack("f", a, 4); err != nil {
		t.Fatal(err)
	}
	want := uint64(len(store.AppendSkipRow(nil, run))) + b.entryBytesThrough(a, 6) - b.entryBytesThrough(a, 5)
	if st := b.feed("f"); st.LagBytes != want+b.ownLogBytes() {
		t.Fatalf("after an ack inside the run 3..5: %d bytes behind, want %d (the run and entry 6)", st.LagBytes, want+b.ownLogBytes())
	}
	before := b.feed("f")
	b.restart()
	if after := b.feed("f"); after.LagBytes != before.LagBytes {
		t.Fatalf("after a restart: %d bytes behind, want %d", after.LagBytes, before.LagBytes)
	}
}

// entryBytesThrough is the bytes of of's log on n from its first seq through seq, each
// run counted once, as the store counts a log's bytes.
func (n *node) entryBytesThrough(of *node, seq uint64) uint64 {
	n.h.t.Helper()
	var sum uint64
	for s := uint64(1); s <= seq; s++ {
		raw, err := n.store.Entry(of.origin, s)
		var sk *store.SkippedError
		if errors.As(err, &sk) {
			if sk.To > seq {
				break
			}
			sum += uint64(len(store.AppendSkipRow(nil, sk)))
			s = sk.To
			continue
		}
		if err != nil {
			n.h.t.Fatalf("%s: entry %s/%d: %v", n.name, of.name, s, err)
		}
		sum += uint64(len(raw))
	}
	return sum
}

// ownLogBytes is the bytes of n's own log above the feed "f"'s position of it.
func (n *node) ownLogBytes() uint64 {
	n.h.t.Helper()
	var at uint64
	for _, p := range n.feed("f").Position {
		if p.Origin == n.origin {
			at = p.Seq
		}
	}
	return n.logBytes(n) - n.entryBytesThrough(n, at)
}
