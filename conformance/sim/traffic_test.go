package sim

import (
	"fmt"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// sessionsCounted adds up what every node's sessions counted (replica.Status.Traffic:
// every connection of every peer, ended ones included), sent and received, by type.
func sessionsCounted(c *Cluster) (out, in protocol.FrameCounts) {
	for _, name := range c.Names() {
		n := c.Node(name)
		for _, p := range n.Rep.Status(n.clock(c)).Traffic {
			out.Add(&p.FramesOutByType)
			in.Add(&p.FramesInByType)
		}
	}
	return out, in
}

// TestFramesCountedAsSessionsCount: the simulator's frame counts by type are what the
// sessions themselves counted, both ways: over a run of four nodes with writes, a
// disconnect (a connection that ended: its counts stay with its peer) and reconnects, but
// no crash (a crashed replica's counts go with it) and no fault on the links.
func TestFramesCountedAsSessionsCount(t *testing.T) {
	names := []string{"A", "B", "C", "D"}
	c := newV2Cluster(t, Options{Seed: 3}, names, [2]string{"A", "B"}, [2]string{"B", "C"}, [2]string{"C", "D"}, [2]string{"D", "A"})
	c.Run(time.Second)
	for i := range 30 {
		c.Write(names[i%4], put(fmt.Sprint("k", i), "v"))
		c.Run(20 * time.Millisecond)
		if i == 10 {
			if err := c.Disconnect("A", "B"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !c.Stabilize(30 * time.Second) {
		_, why := c.Converged()
		t.Fatal("not converged:", why, c.Failures())
	}
	if f := c.Failures(); len(f) > 0 {
		t.Fatal(f)
	}
	out, in := sessionsCounted(c)
	sent, delivered := c.FramesSent(), c.FramesDelivered()
	if sent.Of(wire.TypeData) == 0 || delivered.Of(wire.TypeHello) < 10 || sent.Of(wire.TypePing) == 0 {
		t.Fatalf("the run's frames: sent %v, delivered %v (HELLO: the 4 links and the reconnect)", sent, delivered)
	}
	for slot := range protocol.UsedFrameSlots() {
		if sent[slot] != out[slot] || delivered[slot] != in[slot] {
			t.Errorf("%s: the simulator saw %d sent and %d delivered; the sessions counted %d sent and %d received",
				protocol.SlotName(slot), sent[slot], delivered[slot], out[slot], in[slot])
		}
	}
	rep := Report{Writes: 30}
	c.reportTraffic(&rep)
	if rep.Frames() != total(&in) || rep.FramesPerWrite() != float64(total(&in))/30 {
		t.Errorf("the report's %d frames (%.2f a write), the sessions received %d", rep.Frames(), rep.FramesPerWrite(), total(&in))
	}
}
