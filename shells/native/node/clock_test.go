package node_test

import (
	"testing"
	"time"
)

// TestClockMeasured: two nodes on one machine measure each other's clock within the PINGs'
// first seconds: each peer shows an offset (near zero: one clock) and the node's clock is
// measured by one peer, seen off by none, writes taken.
func TestClockMeasured(t *testing.T) {
	b := start(t, "B")
	a := start(t, "A", b)
	waitFor(t, "both clocks measured", func() bool {
		for _, n := range []*testNode{a, b} {
			if st := status(t, n); st.Node.Clock.Measured != 1 {
				return false
			}
		}
		return true
	})
	for _, n := range []*testNode{a, b} {
		st := status(t, n)
		if cs := st.Node.Clock; cs.Off != 0 || cs.RefusingWrites || cs.Offset > 100*time.Millisecond || cs.Offset < -100*time.Millisecond {
			t.Errorf("%s's clock: %+v", n.name, cs)
		}
		other := map[string]string{"A": "B", "B": "A"}[n.name]
		if p, _ := peerOf(t, n, other); p.ClockOffset == nil || *p.ClockOffset > 100*time.Millisecond || *p.ClockOffset < -100*time.Millisecond {
			t.Errorf("%s's offset of %s: %v", n.name, other, p.ClockOffset)
		}
	}
}
