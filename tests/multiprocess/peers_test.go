//go:build multiprocess || scale

package multiprocess

import (
	"testing"
	"time"
)

// TestAddedPeerSurvivesRestart: B adds A with POST /v1/peers, stops on SIGTERM and starts
// again on its data directory without any --peer. It dials A again from what it kept (A
// dials nobody: the connection is B's, under A's configured URL), connects, and A's
// writes after the restart replicate over it.
func TestAddedPeerSurvivesRestart(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B")
	b.addPeer(a)
	a.put("t", "before", "1")
	waitFor(t, "B holding A's write over the added peer", 30*time.Second, func() bool { return b.origin("A").AppliedSeq == 1 })
	b.stop()
	b.args = nil
	b.start()
	waitFor(t, "B connected to A again after the restart", 30*time.Second, func() bool { return b.connected("A") })
	if ds := b.dialers(); ds["A"].URL != a.URL {
		t.Errorf("B's peers[] after the restart: %+v, want A at %s", ds, a.URL)
	}
	a.put("t", "after", "2")
	waitFor(t, "B holding A's write after the restart", 30*time.Second, func() bool { return b.origin("A").AppliedSeq == 2 })
	if da, db := a.digest("t"), b.digest("t"); da != db {
		t.Errorf("digests differ: A %s, B %s", da, db)
	}
	for _, p := range []*proc{a, b} {
		p.stop()
		p.check()
	}
}
