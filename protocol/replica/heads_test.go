package replica_test

import (
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// lastHead is the last head of origin o that from sent to, by the HEADS frames recorded
// (0: none).
func (h *harness) lastHead(from, to string, o wire.OriginID) uint64 {
	var seq uint64
	for _, f := range h.frames {
		if hd, ok := f.body.(*wire.Heads); ok && f.from == from && f.to == to {
			for _, x := range hd.Heads {
				if x.Origin == o {
					seq = x.Seq
				}
			}
		}
	}
	return seq
}

// Version 3 (version 4's quiet control plane is quiet_test.go's). A triangle A, B, C: B
// and C take A's origin from A itself. B's heads of A tell C only
// where a failover could go, so a moved one waits up to HeadsInterval; A's heads go to
// its subscribers at once; once C takes A from B, B's heads of A go to C at once.
func TestHeadsWaitForTheInterval(t *testing.T) {
	const interval = 300 * time.Millisecond
	h := newHarness(t)
	a := h.addNode("A", replica.Config{HeadsInterval: interval, MaxVersion: 3})
	b := h.addNode("B", replica.Config{HeadsInterval: interval, MaxVersion: 3})
	c := h.addNode("C", replica.Config{HeadsInterval: interval, MaxVersion: 3})
	h.connect(b, a)
	ca := h.connect(c, a)
	h.connect(c, b)
	a.write(put("t", "a1", "v"))
	h.pump()
	if got := h.lastHead("B", "C", a.origin); got != 1 {
		t.Fatalf("B's first head of A to C = %d, want 1 at once (a new advertisement waits for nothing)", got)
	}

	a.write(put("t", "a2", "v"))
	h.pump()
	sent := h.now
	if got := h.lastHead("A", "C", a.origin); got != 2 {
		t.Errorf("A's head of its own origin to C, its subscriber = %d, want 2 at once", got)
	}
	if got := h.lastHead("B", "C", a.origin); got != 1 {
		t.Errorf("B's head of A to C with no time passed = %d, want 1 (2 waits for the interval)", got)
	}
	if d := b.rep.NextDeadline(); d.IsZero() || d.After(sent.Add(interval)) {
		t.Errorf("B's next deadline = %v, want by %v, when the waiting head is due", d, sent.Add(interval))
	}
	// Only the nodes' own deadlines from here: the head goes when its timer says so.
	h.tickDeadlines(sent.Add(interval - time.Millisecond))
	if got := h.lastHead("B", "C", a.origin); got != 1 {
		t.Errorf("B's head of A to C 1 ms before the interval = %d, want 1", got)
	}
	h.tickDeadlines(sent.Add(interval))
	if got := h.lastHead("B", "C", a.origin); got != 2 {
		t.Errorf("B's head of A to C at the interval = %d, want 2", got)
	}

	// C loses A. B's head of A is no more than C applied, so C waits; A writes again, and
	// C learns it from B's head once that is due: a failover waits up to the interval.
	h.disconnect(ca)
	a.write(put("t", "a3", "v"))
	h.pump()
	lost := h.now
	if got := c.originStatus(a); got.SourcePeer != "" || got.AppliedSeq != 2 {
		t.Fatalf("C's status of A with B's head waiting = %+v, want no source, applied 2", got)
	}
	h.tickDeadlines(lost.Add(interval))
	if got := c.originStatus(a); got.SourcePeer != "B" || got.AppliedSeq != 3 {
		t.Fatalf("C's status of A an interval after A's write = %+v, want source B, applied 3", got)
	}
	// C takes A from B: it withdrew A from B at once (split horizon), and B's heads of A
	// go to C, now its subscriber, as they move.
	if now, _ := h.headsSent("C", "B", a.origin); now {
		t.Error("C still advertises A to B, its new source")
	}
	a.write(put("t", "a4", "v"))
	h.pump()
	if got := h.lastHead("B", "C", a.origin); got != 4 {
		t.Errorf("B's head of A to C, its subscriber, with no time passed = %d, want 4", got)
	}
	h.connect(c, a) // A back: C returns to it at once (direct), and B is a relay again
	if got := c.originStatus(a); got.SourcePeer != "A" {
		t.Fatalf("C's source of A once A is back = %q, want A", got.SourcePeer)
	}
	if now, _ := h.headsSent("C", "B", a.origin); !now {
		t.Error("C does not advertise A to B again once it no longer takes A from B")
	}
}

// Version 3: a subscriber's heads do not wait: B takes C's origin from C only through A (no link),
// so A's head of C to B is the one B's stall rule watches.
func TestHeadsToASubscriberGoAtOnce(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	b := h.addNode("B", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	h.connect(a, c)
	h.connect(b, a)
	for i, want := range []uint64{1, 2, 3} {
		c.write(put("t", string(rune('x'+i)), "v"))
		h.pump()
		if got := h.lastHead("A", "B", c.origin); got != want {
			t.Fatalf("A's head of C to B after C's write %d = %d, want %d at once", i+1, got, want)
		}
	}
	if got := b.originStatus(c); got.SourcePeer != "A" || got.AppliedSeq != 3 || got.LagSeq != 0 {
		t.Errorf("B's status of C = %+v, want source A, applied 3, lag 0", got)
	}
}

// Version 3: with a negative HeadsInterval every moved head goes at once, as before the
// interval.
func TestHeadsIntervalNegativeSendsAtOnce(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", headsAtOnceV3)
	b := h.addNode("B", headsAtOnceV3)
	c := h.addNode("C", headsAtOnceV3)
	h.connect(b, a)
	h.connect(c, a)
	h.connect(c, b)
	for _, want := range []uint64{1, 2, 3} {
		a.write(put("t", "k", "v"))
		h.pump()
		if got := h.lastHead("B", "C", a.origin); got != want {
			t.Fatalf("B's head of A to C = %d, want %d with no time passed", got, want)
		}
	}
}
