package replica_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/replica/memstore"
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
		_, err := replica.New(c.cfg, memstore.New(replica.Identity{Origin: o, Name: "A"}))
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
