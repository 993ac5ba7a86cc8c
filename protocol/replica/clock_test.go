package replica_test

import (
	"errors"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// skewedTriangle is A, B and C all connected, A's clock ahead by skew, each with cfg.
func skewedTriangle(t *testing.T, skew time.Duration, cfg replica.Config) (h *harness, a, b, c *node) {
	h = newHarness(t)
	a = h.addNode("A", cfg)
	b = h.addNode("B", cfg)
	c = h.addNode("C", cfg)
	a.skew = skew
	h.connect(b, a)
	h.connect(c, a)
	h.connect(c, b)
	return h, a, b, c
}

// hlcWithin fails the test when a node's newest entry of its own origin has a timestamp
// more than d from its wall clock: the HLC ran away with another node's clock.
func hlcWithin(t *testing.T, n *node, d time.Duration) {
	t.Helper()
	seq := n.originStatus(n).AppliedSeq
	if seq == 0 {
		return
	}
	_, v := n.entry(n, seq)
	if gap := int64(v.HLC.WallMillis()) - n.clock().UnixMilli(); gap > d.Milliseconds() {
		t.Fatalf("%s: its entry %d is stamped %d ms ahead of its clock", n.name, seq, gap)
	}
}

// TestClockAheadHeld: an entry stamped more than the bound ahead of the receiver's clock
// is held back — not applied, its origin stuck "clock-ahead" — while the other origins
// flow and the receivers' own timestamps stay with their clocks; a Tick deadline wakes
// the receiver when its clock catches up, and the entry applies then, nothing skipped.
// On version 3, whose first PING, a second after the handshake, measures the clocks: the
// stamps of version 4 measure each link with its first frames, in whatever order they
// travel, and B may have measured only A, a minute off, when it writes (TestClockRefusesWrites
// is the guard's test on version 4).
func TestClockAheadHeld(t *testing.T) {
	const skew = time.Minute
	h, a, b, c := skewedTriangle(t, skew, replica.Config{MaxVersion: 3})
	// Before any PING measured A's clock: A writes, stamped a minute ahead.
	a.write(put("t", "k", "from A"))
	a.write(put("t", "k2", "from A"))
	h.pump()
	for _, n := range []*node{b, c} {
		st := n.originStatus(a)
		if st.Stuck != replica.StuckClockAhead || st.AppliedSeq != 0 || st.StuckUntil.IsZero() {
			t.Fatalf("%s's status of A = %+v, want held clock-ahead at 0", n.name, st)
		}
	}
	b.write(put("t", "k", "from B"))
	h.pump()
	for _, n := range []*node{a, c} {
		if got := n.originStatus(b).AppliedSeq; got != 1 {
			t.Fatalf("%s applied B up to %d: the other origins must keep flowing", n.name, got)
		}
	}
	hlcWithin(t, b, replica.DefaultMaxClockOffset)
	h.advance(3 * time.Second) // the PINGs measure A's clock
	if off := b.peerStatus("A").ClockOffset; off == nil || *off != skew {
		t.Fatalf("B's measure of A's clock offset = %v, want %v", off, skew)
	}
	// The hold ends when B's clock is within the bound of A's entry: at the deadline.
	until := b.originStatus(a).StuckUntil
	if got, want := until, epoch.Add(skew-replica.DefaultMaxClockOffset); got.Sub(want) > 100*time.Millisecond || want.Sub(got) > 0 {
		t.Fatalf("hold until %v, want about %v", got, want)
	}
	h.tickDeadlines(until.Add(-time.Millisecond))
	if st := c.originStatus(a); st.AppliedSeq != 0 || st.Stuck != replica.StuckClockAhead {
		t.Fatalf("C's status of A before the deadline = %+v", st)
	}
	h.tickDeadlines(until.Add(5 * time.Millisecond))
	h.pump()
	for _, n := range []*node{b, c} {
		if st := n.originStatus(a); st.AppliedSeq != 2 || st.Stuck != "" {
			t.Fatalf("%s's status of A after the hold = %+v, want both entries applied", n.name, st)
		}
		hlcWithin(t, n, replica.DefaultMaxClockOffset)
		// Held is not lost: no gap was counted, and nothing was asked again as one.
		if got := n.rep.Counters(); got.GapsDetected != 0 || got.ResendsRequested != 0 {
			t.Fatalf("%s counted %d gaps and %d resends for a hold", n.name, got.GapsDetected, got.ResendsRequested)
		}
	}
}

// TestClockRefusesWrites: a node whose clock most of its measured peers see beyond the
// bound refuses local writes with clock-offset and says so in its status; the peers,
// each seen off by only one of two, keep writing; once its clock is back the node writes
// again.
func TestClockRefusesWrites(t *testing.T) {
	h, a, b, c := skewedTriangle(t, 24*time.Hour, replica.Config{})
	ab, ac := h.links[0], h.links[1]
	h.advance(3 * time.Second)
	cs := a.rep.Status(a.clock()).Node.Clock
	if !cs.RefusingWrites || cs.Measured != 2 || cs.Off != 2 || cs.Offset != 24*time.Hour {
		t.Fatalf("A's clock status = %+v, want refusing, 2 of 2, +24h", cs)
	}
	_, err := a.rep.Write(a.clock(), []wire.Op{put("t", "k", "v")})
	if !errors.Is(err, wire.NewError(wire.CodeClockOffset, "")) {
		t.Fatalf("A's write: %v, want clock-offset", err)
	}
	if got := a.originStatus(a).AppliedSeq; got != 0 {
		t.Fatalf("a refused write was applied: seq %d", got)
	}
	for _, n := range []*node{b, c} {
		if cs := n.rep.Status(n.clock()).Node.Clock; cs.RefusingWrites || cs.Measured != 2 || cs.Off != 1 {
			t.Fatalf("%s's clock status = %+v, want 1 of 2 off, writing", n.name, cs)
		}
		n.write(put("t", n.name, "v"))
	}
	h.pump()
	hlcWithin(t, a, replica.DefaultMaxClockOffset)
	// The operator fixes A's clock. The harness's times carry no monotonic reading, so A's
	// sessions, whose PING timers are on A's old clock, would wait a day for their next
	// PING; A reconnects instead (a native node's timers run on the monotonic clock).
	a.skew = 0
	h.disconnect(ab)
	h.disconnect(ac)
	h.connect(b, a)
	h.connect(c, a)
	h.advance(2 * time.Second)
	if cs := a.rep.Status(a.clock()).Node.Clock; cs.RefusingWrites || cs.Off != 0 {
		t.Fatalf("A's clock status after the fix = %+v", cs)
	}
	a.write(put("t", "k", "v"))
	h.pump()
	if got := b.originStatus(a).AppliedSeq; got != 1 {
		t.Fatalf("B applied A up to %d after A's clock was fixed", got)
	}
}

// TestClockMarginOfTheRoundTrip: an offset is known only to within half the round trip
// of its measurement, so a peer counts as seeing this node's clock off only when the
// offset is beyond the bound by more than that. Over links of 150 ms each way (a round
// trip of 300 ms), A 600 ms ahead is within the bound give or take the measurement's error
// and writes; A 700 ms ahead is beyond it whatever the error, and is refused.
func TestClockMarginOfTheRoundTrip(t *testing.T) {
	for _, c := range []struct {
		skew    time.Duration
		refused bool
	}{{600 * time.Millisecond, false}, {700 * time.Millisecond, true}} {
		h := newHarness(t)
		a := h.addNode("A", replica.Config{})
		b := h.addNode("B", replica.Config{})
		a.skew = c.skew
		l := h.open(b, a)
		l.latency = 150 * time.Millisecond
		h.advance(5 * time.Second)
		cs := a.rep.Status(a.clock()).Node.Clock
		if cs.Measured != 1 || cs.Offset != c.skew {
			t.Fatalf("A %v ahead: clock status %+v, want 1 measured at +%v", c.skew, cs, c.skew)
		}
		if cs.RefusingWrites != c.refused {
			t.Errorf("A %v ahead over a 300 ms round trip: refusing writes %v, want %v", c.skew, cs.RefusingWrites, c.refused)
		}
	}
}

// TestClockUnmeasured: a peer that sends no time (version 2) is never measured, so never
// counts against a node's writes, and status says null; with the bound off (negative)
// nothing is held or refused whatever the clocks.
func TestClockUnmeasured(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 2})
	b := h.addNode("B", replica.Config{})
	a.skew = time.Hour
	h.connect(b, a)
	h.advance(3 * time.Second)
	if off := b.peerStatus("A").ClockOffset; off != nil {
		t.Fatalf("B measured a version-2 peer: %v", *off)
	}
	if cs := a.rep.Status(a.clock()).Node.Clock; cs.Measured != 0 || cs.RefusingWrites {
		t.Fatalf("A's clock status = %+v", cs)
	}
	a.write(put("t", "k", "v")) // not refused: nobody measured A
	h.pump()
	if st := b.originStatus(a); st.Stuck != replica.StuckClockAhead {
		t.Fatalf("B's status of A = %+v: the entry is ahead whoever measured what", st)
	}

	_, a2, b2, _ := skewedTriangle(t, time.Hour, replica.Config{MaxClockOffset: -1})
	a2.h.advance(3 * time.Second)
	a2.write(put("t", "k", "v"))
	a2.h.pump()
	if st := b2.originStatus(a2); st.AppliedSeq != 1 || st.Stuck != "" {
		t.Fatalf("with the bound off, B's status of A = %+v", st)
	}
}
