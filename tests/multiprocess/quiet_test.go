//go:build multiprocess || scale

package multiprocess

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pingPongs is what a node's /metrics count of PING and PONG frames on every link, both
// directions (plait_peer_frames_total).
func (p *proc) pingPongs() uint64 {
	p.t.Helper()
	_, body := p.get("/metrics")
	var n uint64
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "plait_peer_frames_total{") ||
			!(strings.Contains(l, `frame="PING"`) || strings.Contains(l, `frame="PONG"`)) || !strings.Contains(l, `direction="out"`) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			p.t.Fatalf("%s: metrics line %q: %v", p.Name, l, err)
		}
		n += uint64(v)
	}
	return n
}

// TestQuietMesh: four plait processes in a full mesh, every link at version 4 (docs/design.md
// §28). Idle, their links carry at most one PING or PONG a second each, both ways counted
// (the dialer PINGs a link idle for 2 s; version 3 sent a PING each way each second); every
// peer shows its traffic in status. Then D stops dialing A, the one connection between them:
// D goes loud on A's origin to B and C, takes A through one of them within the move delay,
// and keeps up with A's writes with no entry received twice, while B and C keep taking A
// from A itself.
func TestQuietMesh(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", a.PeerFlag(), "--peer", b.PeerFlag())
	d := serve(t, "D", "--peer", a.PeerFlag(), "--peer", b.PeerFlag(), "--peer", c.PeerFlag())
	all := []*proc{a, b, c, d}
	for i, p := range all {
		p.put("t", fmt.Sprint("k", i), "v")
	}
	waitFor(t, "the mesh converged, every link at version 4", 30*time.Second, func() bool {
		for _, p := range all {
			if p.digest("t") != a.digest("t") {
				return false
			}
			st := p.status()
			if len(st.Peers) != 3 {
				return false
			}
			for _, q := range st.Peers {
				if !q.Connected || q.Version != 4 {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(3 * time.Second) // the first samples' PINGs, and the heads rounds, settle
	var before uint64
	for _, p := range all {
		before += p.pingPongs()
	}
	const idle = 12 * time.Second
	time.Sleep(idle)
	var after uint64
	for _, p := range all {
		after += p.pingPongs()
		for _, q := range p.status().Peers {
			if q.FramesIn == 0 || q.FramesOut == 0 || q.BytesIn == 0 || q.MessagesOut == 0 {
				t.Errorf("%s's status of %s shows no traffic: %+v", p.Name, q.Name, q)
			}
		}
	}
	const links = 6
	if rate := float64(after-before) / links / idle.Seconds(); rate > 1 {
		t.Errorf("idle: %.2f PINGs and PONGs a link a second, want at most 1", rate)
	} else {
		t.Logf("idle: %.2f PINGs and PONGs a link a second", rate)
	}

	w := startWriters(t, a)
	waitFor(t, "D taking A from A", 10*time.Second, func() bool { return d.origin("A").SourcePeer == "A" })
	dups := d.status().Counters.DuplicatesReceived
	d.deletePeer("A")
	waitFor(t, "D taking A through B or C", 10*time.Second, func() bool {
		s := d.origin("A").SourcePeer
		return s == "B" || s == "C"
	})
	seq := a.origin("A").AppliedSeq
	waitFor(t, "D past A's writes of the failover", 10*time.Second, func() bool { return d.origin("A").AppliedSeq > seq })
	w.halt()
	waitFor(t, "the mesh converged again", 30*time.Second, func() bool {
		for _, p := range all {
			if p.digest("t") != a.digest("t") {
				return false
			}
		}
		return true
	})
	if got := d.status().Counters.DuplicatesReceived; got != dups {
		t.Errorf("D received %d entries twice in the failover, want none", got-dups)
	}
	for _, p := range []*proc{b, c} {
		if s := p.origin("A").SourcePeer; s != "A" {
			t.Errorf("%s takes A from %q, want A itself", p.Name, s)
		}
	}
}
