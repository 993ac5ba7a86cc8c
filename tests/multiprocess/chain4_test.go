//go:build multiprocess || scale

package multiprocess

import (
	"testing"
	"time"
)

// TestFourNodeChainFailover: A <- B <- C <- D, with B2 a second relay of A that C also
// reaches. B is killed under writes at A: C moves A onto B2 (the failover at the second
// hop); D keeps taking A through C without a change; nobody receives a duplicate.
func TestFourNodeChainFailover(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	b2 := serve(t, "B2", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", b.PeerFlag())
	d := serve(t, "D", "--peer", c.PeerFlag())
	w := startWriters(t, a)
	waitFor(t, "D taking A through C, and C through B", 30*time.Second, func() bool {
		return d.origin("A").SourcePeer == "C" && c.origin("A").SourcePeer == "B" && d.origin("A").AppliedSeq > 5
	})
	c.addPeer(b2)
	waitFor(t, "C connected to B2", 30*time.Second, func() bool { return c.connected("B2") })
	b.kill()
	before := d.origin("A").AppliedSeq
	waitFor(t, "D advancing after the failover", 30*time.Second, func() bool { return d.origin("A").AppliedSeq > before+10 })
	w.halt()
	waitFor(t, "D converging", 30*time.Second, func() bool { return d.origin("A").AppliedSeq == a.origin("A").AppliedSeq })
	if o := c.origin("A"); o.SourcePeer != "B2" || o.SourceChanges != 1 {
		t.Errorf("C's status of A: %+v, want B2 after one change", o)
	}
	if o := d.origin("A"); o.SourcePeer != "C" || o.SourceChanges != 0 || o.LagSeq != 0 {
		t.Errorf("D's status of A: %+v, want C, no change, lag 0", o)
	}
	for _, p := range []*proc{c, d} {
		if dups := p.status().Counters.DuplicatesReceived; dups != 0 {
			t.Errorf("%s received %d duplicates", p.Name, dups)
		}
	}
	for _, p := range []*proc{a, b2, c, d} {
		p.stop()
	}
	for _, p := range []*proc{a, b, b2, c, d} {
		p.check()
	}
}
