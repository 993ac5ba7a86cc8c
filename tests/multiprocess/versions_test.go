//go:build multiprocess || scale

package multiprocess

import (
	"syscall"
	"testing"
	"time"

	"plait/protocol/handshake"
)

// TestLegacyRelayFailover: the relay failover with C at --protocol-max 1. Version 1 has
// one scalar cursor per peer in that peer's arrival order: when B dies, C resumes from
// B2 with nothing to go by for the entries it already applied through B, and they arrive
// again as duplicates. It still converges. This is the behaviour version 2 removes.
func TestLegacyRelayFailover(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	b2 := serve(t, "B2", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", b.PeerFlag(), "--protocol-max", "1")
	wa := startWriters(t, a)
	waitFor(t, "C holding A's entries through B", 30*time.Second, func() bool { return c.origin("A").AppliedSeq > 20 })
	b.kill()
	c.addPeer(b2)
	before := c.origin("A").AppliedSeq
	waitFor(t, "C advancing through B2", 30*time.Second, func() bool { return c.origin("A").AppliedSeq > before+10 })
	wa.halt()
	waitFor(t, "C converging through B2", 30*time.Second, func() bool { return c.origin("A").AppliedSeq == a.origin("A").AppliedSeq })
	d := c.status().Counters.DuplicatesReceived
	if d == 0 {
		t.Error("C at version 1 received no duplicate after the failover: the legacy behaviour is not what the test assumes")
	}
	t.Logf("C received %d duplicates after the failover", d)
	if c.digest("t") != a.digest("t") {
		t.Error("C's digest differs from A's")
	}
	for _, p := range []*proc{a, b2, c} {
		p.stop()
	}
	for _, p := range []*proc{a, b, b2, c} {
		p.check()
	}
}

// TestRollingUpgrade: B runs at --protocol-max 1 between A and C, then is restarted on
// the same data directory at version 2 under continuous writes; the chain converges.
func TestRollingUpgrade(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag(), "--protocol-max", "1")
	c := serve(t, "C", "--peer", b.PeerFlag())
	wa, wc := startWriters(t, a), startWriters(t, c)
	waitFor(t, "C holding A's entries through the version-1 B", 30*time.Second, func() bool { return c.origin("A").AppliedSeq > 10 })
	b.stop()
	b.args = []string{"--peer", a.PeerFlag(), "--protocol-max", "2"}
	b.start()
	before := c.origin("A").AppliedSeq
	waitFor(t, "C advancing through the upgraded B", 30*time.Second, func() bool { return c.origin("A").AppliedSeq > before+10 })
	wa.halt()
	wc.halt()
	waitFor(t, "the chain converging", 30*time.Second, func() bool {
		return c.origin("A").AppliedSeq == a.origin("A").AppliedSeq && a.origin("C").AppliedSeq == c.origin("C").AppliedSeq
	})
	if a.digest("t") != c.digest("t") || b.digest("t") != a.digest("t") {
		t.Error("digests differ after the upgrade")
	}
	for _, p := range []*proc{a, b, c} {
		p.stop()
		p.check()
	}
}

// TestLiveness: a peer stopped with SIGSTOP is reported not connected once the liveness
// timeout has passed; after SIGCONT it resumes without loss.
func TestLiveness(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	connected := func() bool { return b.connected("A") }
	waitFor(t, "B connected to A", 30*time.Second, connected)
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B seeing A gone", 30*time.Second, func() bool { return !connected() })
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B connected again", 30*time.Second, connected)
	for i := range 20 {
		a.put("t", "k"+string(rune('a'+i)), "v")
	}
	waitFor(t, "B holding A's writes", 30*time.Second, func() bool { return b.origin("A").AppliedSeq == 20 })
	for _, p := range []*proc{a, b} {
		p.stop()
		p.check()
	}
}

// TestRollingUpgradeFrom2: three nodes of the 0.2 era (each at --protocol-max 2, as a node
// of release 0.2 speaks) in a triangle, all writing, are upgraded one at a time to the
// newest version on their own data directories. After each restart every connection speaks
// the newest version exactly where both of its ends are upgraded and 2 elsewhere, every node keeps taking the
// others' writes, and at the end the digests are equal with nothing received twice.
func TestRollingUpgradeFrom2(t *testing.T) {
	old := []string{"--protocol-max", "2"}
	a := serve(t, "A", old...)
	b := serve(t, "B", append([]string{"--peer", a.PeerFlag()}, old...)...)
	c := serve(t, "C", append([]string{"--peer", a.PeerFlag(), "--peer", b.PeerFlag()}, old...)...)
	nodes := []*proc{a, b, c}
	upgraded := map[string]bool{}
	w := startWriters(t, a, b, c)
	// versions waits until every connection speaks what its ends' upgrades say.
	versions := func(step string) {
		t.Helper()
		waitFor(t, step+": every connection at its version", 30*time.Second, func() bool {
			for _, p := range nodes {
				st := p.status()
				if len(st.Peers) != 2 {
					return false
				}
				for _, q := range st.Peers {
					want := uint64(2)
					if upgraded[p.Name] && upgraded[q.Name] {
						want = handshake.Implemented().Max
					}
					if q.State != "streaming" || q.Version != want {
						return false
					}
				}
			}
			return true
		})
	}
	// advancing waits until every node has taken more of every other's writes.
	advancing := func(step string) {
		t.Helper()
		before := map[[2]*proc]uint64{} // {taker, origin's node}: what the taker had applied
		for _, p := range nodes {
			for _, q := range nodes {
				if p != q {
					before[[2]*proc{p, q}] = p.origin(q.Name).AppliedSeq
				}
			}
		}
		waitFor(t, step+": every node taking the others' writes", 30*time.Second, func() bool {
			for k, seq := range before {
				if k[0].origin(k[1].Name).AppliedSeq < seq+5 {
					return false
				}
			}
			return true
		})
	}
	versions("before")
	advancing("before")
	for _, p := range nodes {
		p.stop()
		p.args = p.args[:len(p.args)-2] // without --protocol-max: the newest version
		p.start()
		upgraded[p.Name] = true
		versions(p.Name + " upgraded")
		advancing(p.Name + " upgraded")
	}
	w.halt()
	waitFor(t, "the cluster converging", 30*time.Second, func() bool {
		for _, p := range nodes {
			for _, q := range nodes {
				if p.origin(q.Name).AppliedSeq != q.origin(q.Name).AppliedSeq {
					return false
				}
			}
		}
		return true
	})
	for _, p := range nodes[1:] {
		if p.digest("t") != a.digest("t") {
			t.Errorf("%s's digest differs from A's", p.Name)
		}
	}
	for _, p := range nodes {
		if d := p.status().Counters.DuplicatesReceived; d != 0 {
			t.Errorf("%s received %d entries twice over versions 2 and 3", p.Name, d)
		}
		p.stop()
		p.check()
	}
}
