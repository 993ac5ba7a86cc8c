package replica_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/internal/mutate"
	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// TestAntiEntropyConfigBounds: AntiEntropyRange and AntiEntropyBytes at their bounds are
// taken, one past is refused.
func TestAntiEntropyConfigBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  replica.Config
		ok   bool
	}{
		{"range at the bound", replica.Config{AntiEntropyRange: wire.MaxRangeCount}, true},
		{"range one past", replica.Config{AntiEntropyRange: wire.MaxRangeCount + 1}, false},
		{"range of one", replica.Config{AntiEntropyRange: 1}, true},
		{"a negative range", replica.Config{AntiEntropyRange: -1}, false},
		{"bytes at the low bound", replica.Config{AntiEntropyBytes: replica.MinCopyChunk}, true},
		{"bytes one below", replica.Config{AntiEntropyBytes: replica.MinCopyChunk - 1}, false},
		{"bytes at the frame limit", replica.Config{AntiEntropyBytes: 1 << 20, Limits: protocol.Limits{MaxFrameBody: 1 << 20}}, true},
		{"bytes one past the frame limit", replica.Config{AntiEntropyBytes: 1<<20 + 1, Limits: protocol.Limits{MaxFrameBody: 1 << 20}}, false},
	} {
		var o wire.OriginID
		o[0] = 1
		_, err := replica.New(c.cfg, memstore.New(store.Identity{Origin: o, Name: "A"}))
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestAntiEntropyPagedAnswers: B lost 60 records of 2 KiB; A's answers hold at most
// AntiEntropyBytes (1 KiB past the first record) each, so the range comes in many answers,
// each ending at its last record; every lost record comes back with its version, and the
// tables end the same.
func TestAntiEntropyPagedAnswers(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{AntiEntropyInterval: 10 * time.Millisecond, AntiEntropyRange: 16, AntiEntropyBytes: replica.MinCopyChunk}
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	for i := range 100 {
		a.write(wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte(strings.Repeat("v", 2048))})
	}
	h.pump()
	h.advance(2 * time.Second)
	sameRecords(t, "t", a, b)
	for i := 20; i < 80; i++ {
		b.store.Corrupt([]byte("t"), []byte(fmt.Sprintf("k%03d", i)), nil)
	}
	before := b.rep.Counters()
	h.advance(5 * time.Second)
	sameRecords(t, "t", a, b)
	got := b.rep.Counters()
	if n := got.AntiEntropyRecordsRepaired - before.AntiEntropyRecordsRepaired; n != 60 {
		t.Errorf("B repaired %d records, want 60", n)
	}
	if n := got.AntiEntropyRangesDiffering - before.AntiEntropyRangesDiffering; n < 60 {
		t.Errorf("%d ranges differed: answers of 1 KiB carry one 2 KiB record each, want at least 60", n)
	}
	if a.rep.Counters().AntiEntropyRecordsRepaired != 0 {
		t.Errorf("A repaired %d records from B, which lacked them", a.rep.Counters().AntiEntropyRecordsRepaired)
	}
}

// TestAntiEntropyOffStillAnswers: a node with passes turned off asks nothing, and answers
// its peer's asks.
func TestAntiEntropyOffStillAnswers(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{AntiEntropyInterval: -1})
	b := h.addNode("B", replica.Config{AntiEntropyInterval: 10 * time.Millisecond})
	h.connect(b, a)
	a.write(wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")})
	h.advance(time.Second)
	if n := a.rep.Counters().AntiEntropyRangesCompared; n != 0 {
		t.Errorf("A (off) compared %d ranges", n)
	}
	if n := b.rep.Counters().AntiEntropyRangesCompared; n == 0 {
		t.Error("B compared no range: A did not answer")
	}
}

// TestAntiEntropyLinkShare measures what anti-entropy costs the link when nothing differs:
// two nodes holding 10,000 records, passes at the default pace, for a minute. The bytes of
// its frames stay within one ask and one equal answer per second each way.
func TestAntiEntropyLinkShare(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	for i := range 10000 {
		a.write(wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(fmt.Sprintf("key-%05d", i)), Value: []byte(strings.Repeat("v", 100))})
	}
	h.pump()
	h.advance(time.Second)
	start := b.peerStatus("A").Stats
	const d = 60 * time.Second
	h.advance(d)
	end := b.peerStatus("A").Stats
	ae := end.RangeBytesIn + end.RangeBytesOut - start.RangeBytesIn - start.RangeBytesOut
	repl := start.BytesIn + start.BytesOut // the connection until then: the 10,000 writes replicated
	ranges := b.rep.Counters().AntiEntropyRangesCompared + a.rep.Counters().AntiEntropyRangesCompared
	perSec := float64(ae) / d.Seconds()
	// A pass over the records is 10000/256 ranges per node.
	pass := float64(ae) / float64(ranges) * (10000.0 / replica.DefaultAntiEntropyRange)
	t.Logf("nothing differing, 10000 records of 100 B, both nodes passing: anti-entropy %d bytes in %v over %d ranges "+
		"(%.0f B/s on the link, %.0f B per range exchange); a pass over the records %.0f B per node, %.2f%% of the %d bytes their replication took",
		ae, d, ranges, perSec, float64(ae)/float64(ranges), pass, 100*pass/float64(repl), repl)
	if b.rep.Counters().AntiEntropyRangesDiffering != 0 || b.rep.Counters().AntiEntropyRangesCompared < 55 {
		t.Errorf("B's counters %+v", b.rep.Counters())
	}
	// Per second and direction of asking: one RANGEDIGEST (at most ~150 bytes with these
	// keys) and one equal RANGERECORDS (~30 bytes); both nodes ask.
	if perSec > 2*(150+30)+50 {
		t.Errorf("anti-entropy took %.0f B/s with nothing differing", perSec)
	}
}

// TestAntiEntropyOnePassForAllPeers: a hub of four peers (whose own passes are off) makes
// one pass, one range an interval, each asked of the next peer by name: in 20 intervals
// it compares 20 ranges, 5 of each peer, where a pass per peer compared 80. An ask whose
// connection closes before its answer does not hold the pass: the next range goes to the
// next peer.
func TestAntiEntropyOnePassForAllPeers(t *testing.T) {
	h := newHarness(t)
	const interval = 100 * time.Millisecond
	hub := h.addNode("H", replica.Config{AntiEntropyInterval: interval})
	names := []string{"A", "B", "C", "D"}
	links := map[string]*link{}
	for _, name := range names {
		links[name] = h.connect(h.addNode(name, replica.Config{AntiEntropyInterval: -1}), hub)
	}
	hub.write(wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")})
	h.pump()
	asked := func() map[string]uint64 { // each peer's anti-entropy bytes from the hub: its asks
		m := map[string]uint64{}
		for _, name := range names {
			m[name] = hub.peerStatus(name).Stats.RangeBytesOut
		}
		return m
	}
	h.advance(interval) // the first range goes an interval after the first peer came
	before, compared := asked(), hub.rep.Counters().AntiEntropyRangesCompared
	h.advance(20 * interval)
	after := asked()
	if n := hub.rep.Counters().AntiEntropyRangesCompared - compared; n != 20 {
		t.Errorf("the hub compared %d ranges in 20 intervals with 4 peers, want 20 (one an interval, not one a peer)", n)
	}
	// Every ask covers the one record: the same bytes each time.
	var total uint64
	for _, name := range names {
		total += after[name] - before[name]
	}
	for _, name := range names {
		if got := after[name] - before[name]; got*4 != total {
			t.Errorf("peer %s was sent %d of the %d bytes of asks, want a quarter: the peers in turn", name, got, total)
		}
	}
	// The next ask goes to the peer after the last asked; close its connection with the ask
	// unanswered (ticked, not pumped), and the pass goes on with the peer after it.
	next := ""
	h.now = h.now.Add(interval)
	h.check(hub, hub.rep.Tick(hub.clock()))
	h.collect()
	for _, name := range names {
		if hub.peerStatus(name).Stats.RangeBytesOut > after[name] {
			next = name
		}
	}
	if next == "" {
		t.Fatal("no ask at the interval")
	}
	h.disconnect(links[next])
	compared = hub.rep.Counters().AntiEntropyRangesCompared
	h.advance(4 * interval)
	if n := hub.rep.Counters().AntiEntropyRangesCompared - compared; n < 3 {
		t.Errorf("%d ranges compared in the 4 intervals after the asked peer %s closed, want 3 or more: the lost ask held the pass", n, next)
	}
}

// TestAntiEntropyUnansweredAskGivenUp: a peer that never answers while its connection
// stays up (its answers are lost here) holds the hub's one pass for StallTimeout, no
// longer: the ask is counted abandoned, and the ranges go to the other peer, every interval,
// passing over the one that still owes its answer.
func TestAntiEntropyUnansweredAskGivenUp(t *testing.T) {
	h := newHarness(t)
	const interval = 100 * time.Millisecond
	hub := h.addNode("H", replica.Config{AntiEntropyInterval: interval})
	h.connect(h.addNode("A", replica.Config{AntiEntropyInterval: -1}), hub)
	h.connect(h.addNode("B", replica.Config{AntiEntropyInterval: -1}), hub)
	h.drop = func(from, to string, f wire.Decoded) bool {
		return f.Type == wire.TypeRangeRecords && from == "A"
	}
	h.advance(interval + advanceStep) // the first range, asked of A (the first name)
	if a := hub.peerStatus("A").Stats.RangeBytesOut; a == 0 {
		t.Fatal("the first range was not asked of A")
	}
	h.advance(replica.DefaultStallTimeout - 2*advanceStep)
	if got := hub.rep.Counters(); got.AntiEntropyRangesCompared != 0 || got.AntiEntropyAsksAbandoned != 0 {
		t.Fatalf("before the stall timeout: %d compared, %d abandoned; want 0 and 0 (the ask holds the pass)",
			got.AntiEntropyRangesCompared, got.AntiEntropyAsksAbandoned)
	}
	asksOfA := hub.peerStatus("A").Stats.RangeBytesOut
	// From here only the nodes' own deadlines: the hub's timer gives the ask up.
	h.tickDeadlines(h.now.Add(2*advanceStep + 10*interval))
	got := hub.rep.Counters()
	if got.AntiEntropyAsksAbandoned != 1 {
		t.Errorf("asks abandoned = %d, want 1", got.AntiEntropyAsksAbandoned)
	}
	if got.AntiEntropyRangesCompared < 9 {
		t.Errorf("%d ranges compared in the 10 intervals after the stall timeout, want 9 or more, all of B", got.AntiEntropyRangesCompared)
	}
	if a := hub.peerStatus("A").Stats.RangeBytesOut; a != asksOfA {
		t.Errorf("A, which still owes its answer, was asked again (%d bytes of asks, was %d)", a, asksOfA)
	}
}

// TestAntiEntropyEqualHLCTieByOrigin: two nodes wrote the same key at the same HLC, so
// last-writer-wins breaks the tie by origin (the higher wins). H, of the higher origin,
// applied L's write and kept its own; L has not had H's entry yet (lost on the way). When
// H's pass compares L's range, L's version is older than H's by the tie-break: H keeps its
// own (L repairs itself, here by the log), and its record never goes back to L's, even for
// a while. The other way round too: L, its store back to its own version after it applied
// H's, takes H's back from H's answer.
func TestAntiEntropyEqualHLCTieByOrigin(t *testing.T) {
	h := newHarness(t)
	l := h.addNode("L", replica.Config{AntiEntropyInterval: -1})
	hi := h.addNode("H", replica.Config{AntiEntropyInterval: 10 * time.Millisecond})
	if string(l.origin[:]) >= string(hi.origin[:]) {
		t.Fatal("the test needs L's origin below H's")
	}
	put := func(n *node, v string) {
		n.write(wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte(v)})
	}
	put(l, "from L") // the same instant, no entry seen before: the same HLC
	put(hi, "from H")
	rl, _ := l.get("t", "k")
	rh, _ := hi.get("t", "k")
	if rl.HLC != rh.HLC {
		t.Fatalf("the writes' HLCs differ (%d, %d): the test needs a tie", rl.HLC, rh.HLC)
	}
	h.drop = func(from, to string, f wire.Decoded) bool { // H's entries never reach L
		o, _, ok := dataSeq(f)
		return ok && from == "H" && o == hi.origin
	}
	h.connect(l, hi)
	if st := hi.originStatus(l); st.AppliedSeq != 1 {
		t.Fatalf("H applied L to %d, want 1", st.AppliedSeq)
	}
	for range 100 {
		h.advance(10 * time.Millisecond)
		if r, _ := hi.get("t", "k"); string(r.Value) != "from H" || r.Origin != hi.origin {
			t.Fatalf("H's k = %q of origin %x after anti-entropy against L: the lower origin's version of the same HLC overwrote H's",
				r.Value, r.Origin[:1])
		}
	}
	got := hi.rep.Counters()
	if got.AntiEntropyRangesDiffering == 0 {
		t.Fatal("H's passes saw no differing range: the test compared nothing")
	}
	if got.AntiEntropyRecordsRepaired != 0 {
		t.Errorf("H repaired %d records from L, want 0: its own version wins the tie", got.AntiEntropyRecordsRepaired)
	}
	if r, _ := l.get("t", "k"); string(r.Value) != "from L" {
		t.Fatalf("L's k = %q: the test needs L without H's entry", r.Value)
	}
	h.drop = nil // the log brings L H's entry, which wins there too
	h.advance(replica.DefaultStallTimeout + time.Second)
	sameRecords(t, "t", l, hi)

	l.cfg.AntiEntropyInterval = 10 * time.Millisecond
	l.restart()
	l.store.Corrupt([]byte("t"), []byte("k"), &rl) // L's store loses H's version: L's own is back
	h.connect(l, hi)
	h.advance(time.Second)
	if r, _ := l.get("t", "k"); string(r.Value) != "from H" || r.Origin != hi.origin {
		t.Errorf("L's k = %q of origin %x after anti-entropy against H: the higher origin's version of the same HLC, applied here, did not come back",
			r.Value, r.Origin[:1])
	}
	if got := l.rep.Counters().AntiEntropyRecordsRepaired; got != 1 {
		t.Errorf("L repaired %d records from H, want 1", got)
	}
	// The repair wrote t around the log: a feed of t reading across it rereads; one of u
	// does not.
	if in := l.rep.FeedInputs([]byte("t")); in.Repaired != 1 || in.Copied != 0 {
		t.Errorf("L's feed inputs of t after one repair: %d repaired, %d copied; want 1 repaired", in.Repaired, in.Copied)
	}
	if in := l.rep.FeedInputs([]byte("u")); in.Repaired != 0 {
		t.Errorf("L's feed inputs of u after a repair of t: %d repaired", in.Repaired)
	}
}

// TestAntiEntropyNotFromAPeerBehind: A wrote k last (it writes nothing after), C deleted
// k, and A dropped the tombstone; B, away meanwhile, takes a copy from A, which removes k
// (A's vector shows it applied k's write, and A lacks it). B's own tombstone horizon does
// not cover k: its --retain-age is a day, and A's origin is applied here only to k's
// version. D, which takes everything through B, left before C's delete and still holds k;
// its copy of B is held back, so it
// stays behind on C's origin. B does not take k back from D while D has not shown it
// applied C as far as B (it counts it), and once D caught up, a record B lost is repaired
// from D: nothing lost stays lost.
func TestAntiEntropyNotFromAPeerBehind(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprint("broken=", broken), func(t *testing.T) {
			h := newHarness(t)
			a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second})
			b := h.addNode("B", replica.Config{RetainAge: 24 * time.Hour, AntiEntropyInterval: 10 * time.Millisecond,
				Mutations: mutate.Set{RepairFromBehind: broken}})
			c := h.addNode("C", replica.Config{})
			d := h.addNode("D", replica.Config{})
			// D takes everything through B: A never learns of D's origin, which, never
			// written, would keep A from dropping any tombstone.
			ba, ca, db := h.connect(b, a), h.connect(c, a), h.connect(d, b)
			b.write(put("t", "b", "0"))
			c.write(put("t", "c", "1"))
			h.pump()
			a.write(put("t", "k", "a's last write"))
			h.pump()
			if r, ok := d.get("t", "k"); !ok || r.Deleted {
				t.Fatalf("D's k = %+v, want A's write", r)
			}
			h.disconnect(db)
			h.disconnect(ba)
			h.disconnect(ca)
			h.advance(10 * time.Millisecond)
			c.write(del("t", "k"))
			c.write(put("t", "c", "2"))
			h.advance(10 * time.Millisecond)
			b.write(put("t", "b", "1"))
			ba = h.connect(b, a)
			h.disconnect(ba)
			ca = h.connect(c, a)
			h.disconnect(ca)
			h.advance(5 * time.Second) // A drops k's tombstone and purges C's log past B
			if _, ok := a.get("t", "k"); ok {
				t.Fatal("A kept k's tombstone: the test needs it gone")
			}
			ba = h.connect(b, a)
			h.advance(time.Second)
			if got := b.rep.Counters().CopiesCompleted; got != 1 {
				t.Fatalf("B completed %d copies, want 1", got)
			}
			if _, ok := b.get("t", "k"); ok {
				t.Fatal("B holds k after the copy: the test needs the copy to remove it")
			}
			h.disconnect(ba)                                      // D is B's only peer from here
			h.drop = func(from, to string, f wire.Decoded) bool { // D's copy of B is held back
				_, isCopy := f.Value.(*wire.Copy)
				return from == "D" && isCopy
			}
			db = h.connect(d, b)
			h.advance(2 * time.Second)
			r, back := b.get("t", "k")
			if back != broken {
				t.Fatalf("B's k from D, which has not applied C's delete = %+v (held %v)", r, back)
			}
			if broken {
				return
			}
			if n := b.rep.Counters().AntiEntropyPeerBehind; n == 0 {
				t.Fatalf("B's counters %+v: want k counted as held by a peer behind", b.rep.Counters())
			}
			h.drop = nil
			h.disconnect(db)
			h.connect(d, b) // D's copy of B resumes (after CopyRetry), and D is level with B
			h.advance(5 * time.Second)
			if _, ok := d.get("t", "k"); ok {
				t.Fatalf("D holds k after its copy of B; D's counters %+v", d.rep.Counters())
			}
			lost, _ := b.get("t", "c")
			b.store.Corrupt([]byte("t"), []byte("c"), nil)
			h.advance(2 * time.Second)
			if r, ok := b.get("t", "c"); !ok || r.HLC != lost.HLC || r.Origin != lost.Origin || string(r.Value) != "2" {
				t.Fatalf("B's lost t/c = %+v (held %v), want %+v back from D", r, ok, lost)
			}
			sameRecords(t, "t", b, d)
		})
	}
}

// TestAntiEntropyTableAPeerDoesNotCompare: A's link to B excludes table x, its link to C
// nothing; C's answers carry one record each (2 KiB records, AntiEntropyBytes at its
// least). Taking turns by name with both, A's pass gave B the range that reaches past its
// last records of x (B compares none of x) and C only the first record of each pass, so
// the records of x A lost at its end were compared with no one, for ever. Only peers that
// compare every table take turns when one does: C alone is asked, and what A lost of x
// and of u comes back from it.
func TestAntiEntropyTableAPeerDoesNotCompare(t *testing.T) {
	h := newHarness(t)
	paged := replica.Config{AntiEntropyInterval: -1, AntiEntropyBytes: replica.MinCopyChunk}
	a := h.addNode("A", replica.Config{AntiEntropyInterval: 10 * time.Millisecond,
		Links: map[string]replica.LinkSettings{"B": {Exclude: [][]byte{[]byte("x")}}}})
	b, c := h.addNode("B", paged), h.addNode("C", paged)
	h.connect(a, b)
	h.connect(a, c)
	h.connect(b, c)
	value := strings.Repeat("v", 2048)
	for i := range 3 {
		c.write(put("u", fmt.Sprintf("k%d", i), value))
	}
	for i := range 5 {
		c.write(put("x", fmt.Sprintf("k%d", i), value))
	}
	h.pump()
	h.advance(2 * time.Second)
	for _, n := range []*node{a, b} {
		if got, want := fmt.Sprint(n.digest("u")), fmt.Sprint(c.digest("u")); got != want {
			t.Fatalf("table u on %s: %s, on C: %s", n.name, got, want)
		}
	}
	if _, ok := b.get("x", "k0"); !ok {
		t.Fatal("B lacks x/k0: the test needs B to hold x, and still never compare it with A")
	}
	for _, k := range []string{"k3", "k4"} {
		a.store.Corrupt([]byte("x"), []byte(k), nil)
	}
	a.store.Corrupt([]byte("u"), []byte("k2"), nil)
	before, askedB := a.rep.Counters().AntiEntropyRecordsRepaired, a.peerStatus("B").Stats.RangeBytesOut
	h.advance(5 * time.Second)
	for _, tb := range []string{"u", "x"} {
		na, da := a.digest(tb)
		if nc, dc := c.digest(tb); na != nc || da != dc {
			t.Errorf("table %s: A holds %d records, C %d, not alike", tb, na, nc)
		}
	}
	if n := a.rep.Counters().AntiEntropyRecordsRepaired - before; n != 3 {
		t.Errorf("A repaired %d records, want 3", n)
	}
	if n := a.peerStatus("B").Stats.RangeBytesOut - askedB; n != 0 {
		t.Errorf("A sent B %d bytes of asks, want none: C compares every table, B not x", n)
	}
}

// TestAntiEntropyAnswerEndFitsTheFrame: frames of 1 KiB, answers of at most 1 KiB, keys
// of 40 bytes. An answer cut short ends at its last record, whose point (table and key)
// the answer's header then holds; counted with the ask's end instead (none: the range
// ran to the end), a full answer passed the frame limit by the key's bytes, and the peer
// sent an answer with no record in its place, which the asker took for the whole range:
// the records past the first answer were compared with no one. B lost 30 records of 60;
// all of them come back.
func TestAntiEntropyAnswerEndFitsTheFrame(t *testing.T) {
	h := newHarness(t)
	lim := protocol.Limits{MaxFrameBody: 1 << 10}
	a := h.addNode("A", replica.Config{Limits: lim, AntiEntropyInterval: -1})
	b := h.addNode("B", replica.Config{Limits: lim, AntiEntropyInterval: 10 * time.Millisecond})
	h.connect(b, a)
	key := func(i int) string { return fmt.Sprintf("%038d%02d", 0, i) }
	for i := range 60 {
		a.write(put("t", key(i), "v"))
	}
	h.pump()
	h.advance(time.Second)
	for i := 30; i < 60; i++ {
		b.store.Corrupt([]byte("t"), []byte(key(i)), nil)
	}
	before := b.rep.Counters().AntiEntropyRecordsRepaired
	h.advance(3 * time.Second)
	if n := b.rep.Counters().AntiEntropyRecordsRepaired - before; n != 30 {
		t.Errorf("B repaired %d records, want 30", n)
	}
	na, da := a.digest("t")
	if nb, db := b.digest("t"); na != nb || da != db {
		t.Errorf("table t: A holds %d records, B %d, not alike", na, nb)
	}
}
