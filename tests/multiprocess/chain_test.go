//go:build multiprocess || scale

package multiprocess

import (
	"fmt"
	"testing"
	"time"
)

// TestThreeHopChain: A <- B <- C, C never connected to A. Writes at A reach C; C shows A
// with source_peer B and lag 0; nothing is received twice; digests are equal; plait check
// passes on every data directory.
func TestThreeHopChain(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", b.PeerFlag())
	for i := range 100 {
		a.put("t", fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	waitFor(t, "C holding A's 100", 30*time.Second, func() bool { return c.origin("A").AppliedSeq == 100 })
	if o := c.origin("A"); o.SourcePeer != "B" || o.LagSeq != 0 || o.HeadSeq != 100 || o.SourceChanges != 0 {
		t.Errorf("C's status of A: %+v, want source B, head 100, lag 0", o)
	}
	if d := c.status().Counters.DuplicatesReceived; d != 0 {
		t.Errorf("C received %d duplicates", d)
	}
	if da, dc := a.digest("t"), c.digest("t"); da != dc {
		t.Errorf("digests: A %s, C %s", da, dc)
	}
	for _, p := range []*proc{a, b, c} {
		p.stop()
		p.check()
	}
}
