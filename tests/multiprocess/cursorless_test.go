//go:build multiprocess || scale

package multiprocess

import (
	"testing"
	"time"
)

// TestCursorlessRelayedOrigin: the seeds' 4-node case. D's writes reach the target B only
// through the relay C (B has no connection to D). B is offline across a write window on
// A, C and D, returns, and converges from its own per-origin positions: nothing is
// received twice and resends stay bounded.
func TestCursorlessRelayedOrigin(t *testing.T) {
	a := serve(t, "A")
	c := serve(t, "C")
	b := serve(t, "B", "--peer", a.PeerFlag(), "--peer", c.PeerFlag())
	d := serve(t, "D", "--peer", c.PeerFlag())
	w := startWriters(t, a, c, d)
	waitFor(t, "B taking D through C", 30*time.Second, func() bool {
		o := b.origin("D")
		return o.SourcePeer == "C" && o.AppliedSeq > 5
	})
	b.kill()
	before := d.origin("D").AppliedSeq
	waitFor(t, "a write window while B is offline", 30*time.Second, func() bool { return d.origin("D").AppliedSeq > before+30 })
	b.start()
	w.halt()
	all := []*proc{a, b, c, d}
	waitFor(t, "every node converging", 30*time.Second, func() bool {
		for _, at := range all {
			for _, of := range all {
				if at.origin(of.Name).AppliedSeq != of.origin(of.Name).AppliedSeq {
					return false
				}
			}
		}
		return true
	})
	st := b.status()
	if st.Counters.DuplicatesReceived != 0 || st.Counters.GapsDetected > 1 || st.Counters.ResendsRequested > 1 {
		t.Errorf("B's counters after returning: %v, want no duplicate and at most one resend", st.Counters)
	}
	for _, p := range []*proc{a, c, d} {
		if b.digest("t") != p.digest("t") {
			t.Errorf("B's digest differs from %s's", p.Name)
		}
	}
	for _, p := range all {
		p.stop()
		p.check()
	}
}
