package replica_test

import (
	"fmt"
	"testing"
	"time"

	"plait/protocol/replica"
)

// headsAtOnce is the nodes' configuration in these tests of the routing rule: every
// moved head goes to every peer at once, so that what a node knows of its candidates is
// what they hold as the test steps. Heads that wait for Config.HeadsInterval are tested
// in heads_test.go, and the simulator runs the default.
var headsAtOnce = replica.Config{HeadsInterval: -1}

// headsAtOnceV3 is headsAtOnce on version 3, without the quiet control plane (quiet.go).
var headsAtOnceV3 = replica.Config{HeadsInterval: -1, MaxVersion: 3}

// originMoves keeps the moves of one origin.
func originMoves(ms []replica.Move, of *node) []replica.Move {
	var out []replica.Move
	for _, m := range ms {
		if m.Origin == of.origin {
			out = append(out, m)
		}
	}
	return out
}

func wantMoves(t *testing.T, who string, got []replica.Move, want ...replica.Move) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: moves = %+v\nwant %+v", who, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: move %d = %+v\nwant %+v", who, i, got[i], want[i])
		}
	}
}

func (n *node) byName(name string) *node {
	for _, m := range n.h.nodes {
		if m.name == name {
			return m
		}
	}
	n.h.t.Fatalf("no node %s", name)
	return nil
}

// TestRoutingOneSourceDirectAndSplitHorizon: C hears A through B1 and B2 and takes it from
// exactly one of them; it never advertises A to that source nor does the source subscribe
// to A on C; when A itself connects, A's channel moves to the direct connection.
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestRoutingOneSourceDirectAndSplitHorizon(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnceV3)
	b1 := h.addNode("B1", headsAtOnceV3)
	b2 := h.addNode("B2", headsAtOnceV3)
	c := h.addNode("C", headsAtOnceV3)
	h.connect(b1, a)
	h.connect(b2, a)
	h.connect(c, b1)
	h.connect(c, b2)
	c.takeMoves()

	a.write(put("t", "k0", "v"))
	h.pump()
	st := c.originStatus(a)
	if st.SourcePeer != "B1" && st.SourcePeer != "B2" {
		t.Fatalf("C's source of A = %q, want B1 or B2", st.SourcePeer)
	}
	src := c.byName(st.SourcePeer)
	other := map[*node]*node{b1: b2, b2: b1}[src]
	// With instant delivery B1's heads reach C first (its connection is older).
	if src != b1 {
		t.Errorf("C's source of A = %s, want B1 (the first advertiser)", src.name)
	}
	wantMoves(t, "C", originMoves(c.takeMoves(), a),
		replica.Move{At: h.now, Origin: a.origin, To: src.name, Reason: replica.ReasonFirst})
	for i := 1; i < 4; i++ {
		a.write(put("t", fmt.Sprint("k", i), "v"))
		h.pump()
	}
	h.advance(2 * time.Second)
	if got := c.originStatus(a); got.SourcePeer != src.name || got.AppliedSeq != 4 || got.HeadSeq != 4 || got.SourceChanges != 0 {
		t.Errorf("C's status of A = %+v, want source %s applied 4", got, src.name)
	}
	if got := c.rep.Counters(); got.DuplicatesReceived != 0 || got.TxnsApplied != 4 {
		t.Errorf("C's counters = %+v, want 4 applied and no duplicates", got)
	}
	// Split horizon: C never advertised A to its source; it does to the other relay; no
	// relay subscribed to A on C.
	if _, ever := h.headsSent("C", src.name, a.origin); ever {
		t.Errorf("C advertised A to its source %s", src.name)
	}
	if now, _ := h.headsSent("C", other.name, a.origin); !now {
		t.Errorf("C does not advertise A to %s, which is not its source", other.name)
	}
	for _, b := range []*node{b1, b2} {
		if h.subscribed(b.name, "C", a.origin) {
			t.Errorf("%s subscribed to A on C", b.name)
		}
		if got := b.originStatus(a); got.SourcePeer != "A" || got.SourceChanges != 0 {
			t.Errorf("%s's status of A = %+v, want source A", b.name, got)
		}
	}
	if !h.subscribed("C", src.name, a.origin) || h.subscribed("C", other.name, a.origin) {
		t.Errorf("C subscribed to A on %s: %v, on %s: %v; want only the source",
			src.name, h.subscribed("C", src.name, a.origin), other.name, h.subscribed("C", other.name, a.origin))
	}

	// A connects to C directly: the origin itself is preferred at once.
	h.connect(a, c)
	wantMoves(t, "C", originMoves(c.takeMoves(), a),
		replica.Move{At: h.now, Origin: a.origin, From: src.name, To: "A", Reason: replica.ReasonDirect})
	if got := c.originStatus(a); got.SourcePeer != "A" || got.SourceChanges != 1 || got.AppliedSeq != 4 {
		t.Errorf("C's status of A after A connected = %+v, want source A, 1 change", got)
	}
	a.write(put("t", "k4", "v"))
	h.pump()
	h.advance(2 * time.Second)
	if got := c.originStatus(a); got.AppliedSeq != 5 || got.LagSeq != 0 {
		t.Errorf("C's status of A = %+v, want applied 5", got)
	}
	if got := c.rep.Counters(); got.DuplicatesReceived != 0 || got.TxnsApplied != 5 {
		t.Errorf("C's counters = %+v, want 5 applied and no duplicates", got)
	}
	// A is no longer taken from the relay: C now advertises A to it.
	if now, _ := h.headsSent("C", src.name, a.origin); !now {
		t.Errorf("C does not advertise A to %s after moving A to the direct connection", src.name)
	}
	for _, b := range []*node{b1, b2} {
		if got := c.originStatus(b); got.SourcePeer != b.name || got.SourceChanges != 0 {
			t.Errorf("C's status of %s = %+v", b.name, got)
		}
	}
	if len(c.takeMoves()) != 0 {
		t.Error("C moved again")
	}
}

// TestRoutingFailover: C takes A through B1 and D through B2; B1's connection drops while
// B2 carries A further: A moves to B2 at once, D is untouched, nothing is re-delivered.
func TestRoutingFailover(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnce)
	b1 := h.addNode("B1", headsAtOnce)
	b2 := h.addNode("B2", headsAtOnce)
	c := h.addNode("C", headsAtOnce)
	d := h.addNode("D", headsAtOnce)
	h.connect(b1, a)
	cb1 := h.connect(c, b1)
	a.write(put("t", "a0", "v"))
	a.write(put("t", "a1", "v"))
	h.pump()
	h.connect(b2, a)
	h.connect(d, b2)
	h.connect(c, b2)
	d.write(put("t", "d0", "v"))
	d.write(put("t", "d1", "v"))
	h.pump()
	if got := c.originStatus(a); got.SourcePeer != "B1" || got.AppliedSeq != 2 {
		t.Fatalf("C's status of A = %+v, want source B1 applied 2", got)
	}
	if got := c.originStatus(d); got.SourcePeer != "B2" || got.AppliedSeq != 2 {
		t.Fatalf("C's status of D = %+v, want source B2 applied 2", got)
	}
	c.takeMoves()

	// B1 stops delivering to C (held), A writes: B2 advertises A above C's applied.
	cb1.hold = true
	a.write(put("t", "a2", "v"))
	h.pump()
	if got := c.originStatus(a); got.AppliedSeq != 2 || got.HeadSeq != 3 || got.LagSeq != 1 || got.SourcePeer != "B1" {
		t.Fatalf("C's status of A with B1 held = %+v, want applied 2 head 3 from B1", got)
	}
	lost := h.now
	h.disconnect(cb1)
	wantMoves(t, "C", c.takeMoves(),
		replica.Move{At: lost, Origin: a.origin, From: "B1", To: "B2", Reason: replica.ReasonDisconnected, LostAt: lost})
	if got := c.originStatus(a); got.SourcePeer != "B2" || got.SourceChanges != 1 || got.AppliedSeq != 3 || got.LagSeq != 0 {
		t.Errorf("C's status of A after failover = %+v, want source B2, 1 change, applied 3", got)
	}
	if got := c.originStatus(d); got.SourcePeer != "B2" || got.SourceChanges != 0 {
		t.Errorf("C's status of D after A's failover = %+v, want source B2, no change", got)
	}
	// Split horizon follows the move: C withdrew A from B2 if it ever advertised it.
	if now, _ := h.headsSent("C", "B2", a.origin); now {
		t.Error("C still advertises A to B2, its new source")
	}

	for i := range 5 {
		a.write(put("t", fmt.Sprint("a", i+3), "v"))
		d.write(put("t", fmt.Sprint("d", i+2), "v"))
		b1.write(put("t", fmt.Sprint("b1-", i), "v"))
		c.write(put("t", fmt.Sprint("c", i), "v"))
		h.pump()
		h.advance(100 * time.Millisecond)
	}
	h.advance(3 * time.Second)
	want := map[string]uint64{"A": 8, "B1": 5, "B2": 0, "C": 5, "D": 7}
	for _, n := range h.nodes {
		vec := n.applied()
		for _, o := range h.nodes {
			if got := vec[o.origin]; got != want[o.name] {
				t.Errorf("%s applied %s up to %d, want %d", n.name, o.name, got, want[o.name])
			}
		}
		if got := n.rep.Counters(); got.DuplicatesReceived != 0 || got.GapsDetected != 0 || got.Divergences != 0 || got.ProtocolErrors != 0 {
			t.Errorf("%s counters = %+v", n.name, got)
		}
	}
	sameDigest(t, "t", h.nodes...)
	if got := c.originStatus(a); got.SourcePeer != "B2" || got.SourceChanges != 1 {
		t.Errorf("C's status of A = %+v, want B2 after 1 change", got)
	}
	if got := c.originStatus(d); got.SourcePeer != "B2" || got.SourceChanges != 0 {
		t.Errorf("C's status of D = %+v, want B2, no change", got)
	}
	if got := c.rep.Counters().TxnsApplied; got != 8+7+5+5 { // A 8, D 7, B1 5 (through B2), own 5
		t.Errorf("C applied %d transactions, want 25", got)
	}
}

// TestRoutingFailoverWaitsForCandidate: when the source drops and no other peer advertises
// a head above the applied seq, the origin has no source (source_peer empty) until one
// does; that later choice is still counted as a move, with the reason the source was lost.
func TestRoutingFailoverWaitsForCandidate(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnce)
	b1 := h.addNode("B1", headsAtOnce)
	b2 := h.addNode("B2", headsAtOnce)
	c := h.addNode("C", headsAtOnce)
	h.connect(b1, a)
	cb1 := h.connect(c, b1)
	a.write(put("t", "a0", "v"))
	h.pump()
	h.connect(b2, a)
	h.connect(c, b2)
	c.takeMoves()
	lost := h.now
	h.disconnect(cb1)
	if got := c.originStatus(a); got.SourcePeer != "" || got.AppliedSeq != 1 || got.SourceChanges != 0 {
		t.Errorf("C's status of A with no candidate = %+v, want no source", got)
	}
	if ms := c.takeMoves(); len(ms) != 0 {
		t.Errorf("C moved with no candidate: %+v", ms)
	}
	h.advance(time.Second)
	a.write(put("t", "a1", "v"))
	h.pump()
	wantMoves(t, "C", originMoves(c.takeMoves(), a),
		replica.Move{At: h.now, Origin: a.origin, From: "B1", To: "B2", Reason: replica.ReasonDisconnected, LostAt: lost})
	if got := c.originStatus(a); got.SourcePeer != "B2" || got.AppliedSeq != 2 || got.SourceChanges != 1 {
		t.Errorf("C's status of A = %+v, want source B2 applied 2 after 1 change", got)
	}
	if got := c.rep.Counters().DuplicatesReceived; got != 0 {
		t.Errorf("C received %d duplicates", got)
	}
}

// TestRoutingMoveDelay: another candidate's head ahead of the source's for less than the
// move delay moves nothing; ahead for the move delay, the origin moves (ReasonAhead).
func TestRoutingMoveDelay(t *testing.T) {
	for _, delay := range []time.Duration{0, 700 * time.Millisecond} {
		t.Run(fmt.Sprint("delay=", delay), func(t *testing.T) {
			want := delay
			if want == 0 {
				want = replica.DefaultMoveDelay
			}
			h := newHarness(t)
			a := h.addNode("A", headsAtOnce)
			b1 := h.addNode("B1", headsAtOnce)
			b2 := h.addNode("B2", headsAtOnce)
			c := h.addNode("C", replica.Config{MoveDelay: delay, HeadsInterval: -1})
			ab1 := h.connect(b1, a)
			h.connect(c, b1)
			a.write(put("t", "k", "1"))
			h.pump()
			h.connect(b2, a)
			h.connect(c, b2)
			if got := c.originStatus(a).SourcePeer; got != "B1" {
				t.Fatalf("C's source of A = %q, want B1", got)
			}
			c.takeMoves()

			// B1 is cut off from A while B2 keeps receiving: B2's head is ahead of B1's.
			h.advance(100 * time.Millisecond)
			ab1.hold = true
			a.write(put("t", "k", "2"))
			h.pump()
			if got := c.originStatus(a); got.AppliedSeq != 1 || got.HeadSeq != 2 || got.LagSeq != 1 || got.LagMs != 100 {
				t.Errorf("C's status of A with B2 ahead = %+v, want applied 1 head 2 lag 1 / 100 ms", got)
			}
			if dl := c.rep.NextDeadline(); dl.IsZero() || dl.After(h.now.Add(want)) {
				t.Errorf("C's next deadline %v is after the move delay's end %v", dl, h.now.Add(want))
			}
			// Ahead for less than the move delay; then B1 catches up.
			h.advance(want - 50*time.Millisecond)
			ab1.hold = false
			h.pump()
			if got := c.originStatus(a); got.SourcePeer != "B1" || got.AppliedSeq != 2 || got.SourceChanges != 0 {
				t.Errorf("C's status of A after B1 caught up = %+v, want source B1 applied 2", got)
			}
			h.advance(want) // well past the first ahead instant + the move delay
			if ms := c.takeMoves(); len(ms) != 0 {
				t.Errorf("C moved although no head stayed ahead for the move delay: %+v", ms)
			}

			// Ahead for the whole move delay: the move, at exactly ahead-since + delay.
			ab1.hold = true
			a.write(put("t", "k", "3"))
			h.pump()
			t0 := h.now
			h.advance(want - advanceStep)
			if ms := c.takeMoves(); len(ms) != 0 {
				t.Errorf("C moved before the move delay: %+v", ms)
			}
			if got := c.originStatus(a); got.SourcePeer != "B1" || got.AppliedSeq != 2 {
				t.Errorf("C's status of A before the move = %+v", got)
			}
			h.advance(advanceStep)
			wantMoves(t, "C", c.takeMoves(),
				replica.Move{At: t0.Add(want), Origin: a.origin, From: "B1", To: "B2", Reason: replica.ReasonAhead})
			if got := c.originStatus(a); got.SourcePeer != "B2" || got.AppliedSeq != 3 || got.SourceChanges != 1 {
				t.Errorf("C's status of A after the move = %+v, want source B2 applied 3, 1 change", got)
			}
			ab1.hold = false
			h.pump()
			// B1 catches up and stays level with B2: no move back.
			a.write(put("t", "k", "4"))
			h.pump()
			h.advance(3 * want)
			if ms := c.takeMoves(); len(ms) != 0 {
				t.Errorf("C moved again: %+v", ms)
			}
			if got := c.originStatus(a); got.SourcePeer != "B2" || got.AppliedSeq != 4 || got.SourceChanges != 1 {
				t.Errorf("C's status of A = %+v", got)
			}
			for _, n := range h.nodes {
				if got := n.rep.Counters(); got.DuplicatesReceived != 0 || got.GapsDetected != 0 {
					t.Errorf("%s counters = %+v", n.name, got)
				}
			}
		})
	}
}

// choiceSetup: C takes A through R0; then the relays named connect to A and to C (in that
// order); R0's link to C is held and A writes once, so that every relay advertises A
// above C's applied seq. The caller shapes the heads and then drops R0.
func choiceSetup(t *testing.T, relays ...string) (h *harness, a, c *node, cr0 *link, links map[string][2]*link) {
	h = newHarness(t)
	a = h.addNode("A", headsAtOnce)
	r0 := h.addNode("R0", headsAtOnce)
	var rs []*node
	for _, name := range relays {
		rs = append(rs, h.addNode(name, headsAtOnce))
	}
	c = h.addNode("C", headsAtOnce)
	h.connect(r0, a)
	cr0 = h.connect(c, r0)
	a.write(put("t", "k", "1"))
	h.pump()
	links = map[string][2]*link{}
	for _, r := range rs {
		links[r.name] = [2]*link{h.connect(r, a), h.connect(c, r)}
	}
	if got := c.originStatus(a).SourcePeer; got != "R0" {
		t.Fatalf("C's source of A = %q, want R0", got)
	}
	c.takeMoves()
	return h, a, c, cr0, links
}

// TestRoutingChoiceOrder: among candidates the highest advertised head wins, then the
// lowest RTT, then the lowest peer name (whatever the connection order).
func TestRoutingChoiceOrder(t *testing.T) {
	t.Run("highest head", func(t *testing.T) {
		h, a, c, cr0, links := choiceSetup(t, "B2", "B3")
		cr0.hold = true
		a.write(put("t", "k", "2"))
		h.pump()
		links["B2"][0].hold = true // B2 stops hearing A
		a.write(put("t", "k", "3"))
		h.pump()
		lost := h.now
		h.disconnect(cr0)
		wantMoves(t, "C", c.takeMoves(),
			replica.Move{At: lost, Origin: a.origin, From: "R0", To: "B3", Reason: replica.ReasonDisconnected, LostAt: lost})
		if got := c.originStatus(a); got.SourcePeer != "B3" || got.AppliedSeq != 3 {
			t.Errorf("C's status of A = %+v, want source B3 applied 3", got)
		}
	})
	t.Run("lowest RTT", func(t *testing.T) {
		h, a, c, cr0, links := choiceSetup(t, "B2", "B3")
		links["B2"][1].latency = 30 * time.Millisecond // multiples of advanceStep
		links["B3"][1].latency = 10 * time.Millisecond
		// A sample of each link since its latency changed: version 4's dialer PINGs within
		// the sample interval (5 s) on a link whose traffic echoes no stamp.
		h.advance(5100 * time.Millisecond)
		if r2, r3 := c.peerStatus("B2").RTT, c.peerStatus("B3").RTT; r2 != 60*time.Millisecond || r3 != 20*time.Millisecond {
			t.Fatalf("C's RTT to B2 %v, to B3 %v; want 60ms and 20ms", r2, r3)
		}
		cr0.hold = true
		a.write(put("t", "k", "2"))
		h.advance(100 * time.Millisecond)
		if got := c.originStatus(a); got.HeadSeq != 2 || got.AppliedSeq != 1 {
			t.Fatalf("C's status of A = %+v, want head 2 applied 1", got)
		}
		lost := h.now
		h.disconnect(cr0)
		wantMoves(t, "C", c.takeMoves(),
			replica.Move{At: lost, Origin: a.origin, From: "R0", To: "B3", Reason: replica.ReasonDisconnected, LostAt: lost})
		h.advance(100 * time.Millisecond)
		if got := c.originStatus(a); got.SourcePeer != "B3" || got.AppliedSeq != 2 {
			t.Errorf("C's status of A = %+v, want source B3 applied 2", got)
		}
	})
	t.Run("lowest name", func(t *testing.T) {
		// B3 connects to C before B2: the connection order favours B3, the name B2.
		h, a, c, cr0, _ := choiceSetup(t, "B3", "B2")
		cr0.hold = true
		a.write(put("t", "k", "2"))
		h.pump()
		lost := h.now
		h.disconnect(cr0)
		wantMoves(t, "C", c.takeMoves(),
			replica.Move{At: lost, Origin: a.origin, From: "R0", To: "B2", Reason: replica.ReasonDisconnected, LostAt: lost})
		if got := c.originStatus(a); got.SourcePeer != "B2" || got.AppliedSeq != 2 || got.SourceChanges != 1 {
			t.Errorf("C's status of A = %+v, want source B2 applied 2", got)
		}
	})
}

// TestRoutingDirectSourceIsKept: a node that takes an origin from the origin itself keeps
// it there while the origin stays connected, even when a relay on a faster path
// advertises the origin's new heads before the origin's own heads arrive (the relay is
// never really ahead of the origin).
func TestRoutingDirectSourceIsKept(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnce)
	b := h.addNode("B", headsAtOnce)
	c := h.addNode("C", headsAtOnce)
	h.connect(b, a)
	h.connect(c, b)
	ac := h.connect(a, c)
	ac.latency = 50 * time.Millisecond // the direct path is slower than A-B-C
	c.takeMoves()
	for i := range 400 { // 4 s of steady writes, one every 10 ms
		a.write(put("t", "k", fmt.Sprint(i)))
		h.advance(advanceStep)
	}
	h.advance(time.Second)
	ms := c.takeMoves()
	st := c.originStatus(a)
	if len(ms) != 0 || st.SourceChanges != 0 || st.SourcePeer != "A" {
		for _, m := range ms {
			t.Logf("move at +%v: %s -> %s (%s)", m.At.Sub(epoch), m.From, m.To, m.Reason)
		}
		t.Errorf("C's moves of A = %+v; status %+v; want none, source A", ms, st)
	}
	if st.AppliedSeq != 400 {
		t.Errorf("C applied A up to %d, want 400", st.AppliedSeq)
	}
}

// TestRoutingSameSourceAgainIsNotAMove: the source reconnecting and being chosen again is
// not a move (source_changes stays 0; the Move says ReasonFirst with From == To).
func TestRoutingSameSourceAgainIsNotAMove(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnce)
	b := h.addNode("B", headsAtOnce)
	c := h.addNode("C", headsAtOnce)
	h.connect(b, a)
	cb := h.connect(c, b)
	a.write(put("t", "k", "1"))
	h.pump()
	c.takeMoves()
	lost := h.now
	h.disconnect(cb)
	h.advance(time.Second)
	h.connect(c, b)
	a.write(put("t", "k", "2"))
	h.pump()
	wantMoves(t, "C", originMoves(c.takeMoves(), a),
		replica.Move{At: h.now, Origin: a.origin, From: "B", To: "B", Reason: replica.ReasonFirst, LostAt: lost})
	if got := c.originStatus(a); got.SourcePeer != "B" || got.SourceChanges != 0 || got.AppliedSeq != 2 {
		t.Errorf("C's status of A = %+v, want source B, no change, applied 2", got)
	}
}
