package replica_test

import (
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// trafficOf is n's traffic total for peer (zero when it has none).
func trafficOf(n *node, peer string) replica.Traffic {
	n.h.t.Helper()
	for _, p := range n.rep.Status(n.clock()).Traffic {
		if p.Name == peer {
			return p.Traffic
		}
	}
	return replica.Traffic{}
}

// TestPeerTraffic: a peer's traffic totals are its connections' counters added up: the
// open connection's while it is open, kept when it ends, and the next connection's added
// to them, so that they never go back. What A counts as sent to C, C counts as received
// from A, frame type by frame type.
func TestPeerTraffic(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	c := h.addNode("C", replica.Config{})
	l := h.connect(a, c)
	for range 3 {
		a.write(put("t", "k", "v"))
	}
	h.pump()
	h.advance(2 * time.Second) // PINGs and heads rounds
	st := c.peerStatus("A").Stats
	first := trafficOf(c, "A")
	if first != replica.TrafficOf(&st) {
		t.Fatalf("C's total for A %+v\nwant its one connection's %+v", first, replica.TrafficOf(&st))
	}
	if first.FramesInByType.Of(wire.TypeData) != 3 || first.FramesIn == 0 || first.BytesIn == 0 || first.MessagesOut == 0 {
		t.Fatalf("C's total for A after 3 entries: %+v", first)
	}
	checkMirrored(t, trafficOf(a, "C"), first)

	h.disconnect(l)
	if got := trafficOf(c, "A"); got != first {
		t.Fatalf("C's total for A once the connection ended %+v\nwant what it was, %+v", got, first)
	}
	h.connect(a, c)
	for range 2 {
		a.write(put("t", "k", "v"))
	}
	h.pump()
	st = c.peerStatus("A").Stats
	second := replica.TrafficOf(&st)
	want := first
	want.Add(&second)
	got := trafficOf(c, "A")
	if got != want {
		t.Fatalf("C's total for A on its second connection %+v\nwant the first's plus the second's %+v", got, want)
	}
	if got.FramesInByType.Of(wire.TypeData) != 5 || got.BytesIn <= first.BytesIn || got.FramesOut <= first.FramesOut {
		t.Fatalf("C's total for A after 5 entries on two connections: %+v (first %+v)", got, first)
	}
	checkMirrored(t, trafficOf(a, "C"), got)
}

// checkMirrored: what one end sent, the other received, type by type (nothing in flight).
func checkMirrored(t *testing.T, x, y replica.Traffic) {
	t.Helper()
	if x.BytesOut != y.BytesIn || x.BytesIn != y.BytesOut || x.MessagesOut != y.MessagesIn || x.MessagesIn != y.MessagesOut ||
		x.FramesOut != y.FramesIn || x.FramesIn != y.FramesOut || x.FramesOutByType != y.FramesInByType || x.FramesInByType != y.FramesOutByType {
		t.Fatalf("the two ends disagree:\n%+v\n%+v", x, y)
	}
	var sum uint64
	for slot := range protocol.FrameSlots {
		sum += x.FramesOutByType[slot]
	}
	if sum != x.FramesOut {
		t.Fatalf("frames out by type add up to %d, not %d", sum, x.FramesOut)
	}
}
