package replica_test

import (
	"fmt"
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestFenceReach: B, empty, asks whether it can meet a fence of A's head. With no
// connection nothing is known: it waits. Connected to A alone, whose log is purged past
// B's position and which serves no copy (MaxCopies -1), it is unreachable, and stays so
// while A is all it is connected to. Connected to C too, which holds A's log from its
// start, B takes A's entries from C and the fence is met; a fence above A's head then
// waits (A, whose floor is below B's position now, can bring it), and is met once A writes
// it. A fence of positions B applied is met whatever was purged.
func TestFenceReach(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, MaxCopies: -1})
	c := h.addNode("C", replica.Config{})
	h.connect(c, a)
	for i := range 40 {
		a.write(put("t", fmt.Sprint("k", i%10), fmt.Sprint("v", i)))
	}
	h.pump()
	h.advance(2 * time.Second)
	head := a.originStatus(a).AppliedSeq
	if f := a.logOf(a).Floor.Seq; f < 30 || c.originStatus(a).AppliedSeq != head || c.logOf(a).Floor.Seq != 0 {
		t.Fatalf("A's floor %d, C's of A %d (applied %d): the test needs A purged and C whole", f, c.logOf(a).Floor.Seq, c.originStatus(a).AppliedSeq)
	}
	fence := lock.Fence{{Origin: a.origin, Seq: head}}
	b := h.addNode("B", replica.Config{})
	want := func(what string, f lock.Fence, state replica.FenceState, origin wire.OriginID) {
		t.Helper()
		if got, o := b.rep.FenceReach(f); got != state || o != origin {
			t.Errorf("%s: FenceReach = %d (origin %x), want %d (origin %x)", what, got, o[:1], state, origin[:1])
		}
	}
	want("no connection", fence, replica.FenceWaiting, a.origin)
	want("an empty fence", nil, replica.FenceMet, wire.OriginID{})

	h.connect(b, a)
	if b.originStatus(a).AppliedSeq != 0 {
		t.Fatalf("B took A's entries from a purged A: %+v", b.originStatus(a))
	}
	want("connected to A alone, purged past B", fence, replica.FenceUnreachable, a.origin)
	want("a fence of B's own origin at its position and A's", lock.Fence{{Origin: a.origin, Seq: 1}, {Origin: b.origin, Seq: 0}}, replica.FenceUnreachable, a.origin)
	h.advance(5 * time.Second) // A answers every copy B asks busy
	want("connected to A alone, after copies refused", fence, replica.FenceUnreachable, a.origin)

	h.connect(b, c)
	if got := b.originStatus(a).AppliedSeq; got != head {
		t.Fatalf("B applied A to %d through C, want %d", got, head)
	}
	want("A's entries taken from C", fence, replica.FenceMet, wire.OriginID{})
	above := lock.Fence{{Origin: a.origin, Seq: head + 1}}
	want("a fence above A's head, A able to bring it", above, replica.FenceWaiting, a.origin)
	a.write(put("t", "k", "after"))
	h.pump()
	want("A's next write applied", above, replica.FenceMet, wire.OriginID{})
}

// TestFenceReachDuringCopy: B is connected to A, purged past it and serving no copy (the
// fence of A's head unreachable), then to D, purged too but serving copies, over a link of
// 5 ms each way: from then on, while D's copy runs, the fence waits (the copy raises B's
// positions to D's), never unreachable, until the copy meets it.
func TestFenceReachDuringCopy(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, MaxCopies: -1})
	d := h.addNode("D", replica.Config{RetainAge: time.Second, CopyChunk: 1 << 10})
	h.connect(d, a)
	for i := range 40 {
		a.write(put("t", fmt.Sprint("k", i), fmt.Sprint("value ", i, " long enough to need several chunks of a copy")))
	}
	h.pump()
	h.advance(2 * time.Second)
	head := a.originStatus(a).AppliedSeq
	if d.originStatus(a).AppliedSeq != head || d.logOf(a).Floor.Seq < 30 {
		t.Fatalf("D's status of A %+v, floor %d: the test needs D holding A purged", d.originStatus(a), d.logOf(a).Floor.Seq)
	}
	fence := lock.Fence{{Origin: a.origin, Seq: head}}
	b := h.addNode("B", replica.Config{})
	h.connect(b, a)
	if got, _ := b.rep.FenceReach(fence); got != replica.FenceUnreachable {
		t.Fatalf("connected to A alone: FenceReach = %d, want unreachable", got)
	}
	l := h.open(b, d)
	l.latency = 5 * time.Millisecond
	for step := 0; ; step++ {
		got, _ := b.rep.FenceReach(fence)
		if got == replica.FenceMet {
			break
		}
		if got != replica.FenceWaiting {
			t.Fatalf("%d ms after B dialed D (copies started %d): FenceReach = %d, want waiting", step, b.rep.Counters().CopiesStarted, got)
		}
		if step > 2000 {
			t.Fatalf("the copy from D never met the fence: B's status of A %+v", b.originStatus(a))
		}
		h.now = h.now.Add(time.Millisecond)
		h.pump()
	}
	if c := b.rep.Counters(); c.CopiesStarted == 0 || c.CopiesCompleted == 0 {
		t.Errorf("B's counters %+v: the fence was met without a copy", c)
	}
}
