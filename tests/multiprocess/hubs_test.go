//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/internal/cluster"
)

// hubCluster is a core of three nodes, A, B and C (B dials A, C dials A and B), and hubs
// that each dial the three and take leaves (docs/contract.md §26), under a cluster map
// naming the core and the hubs, with a leaf window; and the leaves, each dialing one hub.
type hubCluster struct {
	core, hubs []*proc
	leaves     [][]*proc // by hub
}

// hubMap is the cluster map of a hub cluster: the core and the hubs as its nodes, never
// the leaves, and a leaf window of a day.
func hubMap(gen uint64, members []*proc) string {
	names := make([]string, len(members))
	for i, p := range members {
		names[i] = fmt.Sprintf("{%q:%q}", "name", p.Name)
	}
	return fmt.Sprintf(`{"generation":%d,"leaf_window":86400,"nodes":[%s]}`, gen, strings.Join(names, ","))
}

// startHubs starts the core and hubs hubs, publishes the map on A, waits until every
// member holds it and knows every other at version 4 (the hubs' gate), then starts
// leavesPerHub leaves on each hub and waits until each hub has them all connected.
func startHubs(t *testing.T, hubs, leavesPerHub int) *hubCluster {
	t.Helper()
	c := &hubCluster{}
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	cc := serve(t, "C", "--peer", a.PeerFlag(), "--peer", b.PeerFlag())
	c.core = []*proc{a, b, cc}
	for i := range hubs {
		c.hubs = append(c.hubs, serve(t, fmt.Sprintf("H%d", i+1), "--max-leaves", fmt.Sprint(leavesPerHub+2),
			"--peer", a.PeerFlag(), "--peer", b.PeerFlag(), "--peer", cc.PeerFlag()))
	}
	members := slices.Concat(c.core, c.hubs)
	waitFor(t, "the core and the hubs connected", 60*time.Second, func() bool {
		for _, h := range c.hubs {
			for _, p := range c.core {
				if !h.connected(p.Name) {
					return false
				}
			}
		}
		return b.connected("A") && cc.connected("A") && cc.connected("B")
	})
	a.publishMap(hubMap(1, members))
	waitFor(t, "every member holding the map, every other known at version 4", 60*time.Second, func() bool {
		for _, p := range members {
			st := p.mapStatus()
			if st.Generation != 1 || len(st.MembersBelowV4) != 0 {
				return false
			}
		}
		return true
	})
	for i, h := range c.hubs {
		var ls []*proc
		for j := range leavesPerHub {
			ls = append(ls, serve(t, fmt.Sprintf("L%d-%03d", i+1, j+1), "--hub", h.PeerFlag()))
		}
		c.leaves = append(c.leaves, ls)
	}
	for i, h := range c.hubs {
		waitFor(t, h.Name+" taking its leaves", 120*time.Second, func() bool {
			l := h.status().Leaves
			return l != nil && l.Connected == len(c.leaves[i])
		})
	}
	return c
}

// allLeaves is every leaf, hub by hub.
func (c *hubCluster) allLeaves() []*proc { return slices.Concat(c.leaves...) }

// converged waits until every node (core, hubs, leaves) holds writes records of table t
// with one digest, and every leaf's write checkpoint (hub.core_seq) is its own last seq.
func (c *hubCluster) converged(t *testing.T, writes int, bound time.Duration) {
	t.Helper()
	all := slices.Concat(c.core, c.hubs, c.allLeaves())
	want := ""
	if err := cluster.WaitFor(fmt.Sprintf("all %d nodes holding the %d leaf writes alike", len(all), writes), bound, func() bool {
		d, err := c.core[0].api().Digest(context.Background(), "t")
		if err != nil || d.Count != uint64(writes) {
			return false
		}
		want = c.core[0].digest("t")
		for _, p := range all[1:] {
			if p.digest("t") != want {
				return false
			}
		}
		return true
	}); err != nil {
		c.explain(t)
		t.Fatal(err)
	}
	waitFor(t, "every leaf's write checkpoint at its own last seq", bound, func() bool {
		for _, l := range c.allLeaves() {
			st := l.status()
			own, _ := st.Origin(l.Name)
			if st.Hub == nil || st.Hub.CoreSeq != own.AppliedSeq || st.Hub.ReoriginatedSeq != own.AppliedSeq {
				return false
			}
		}
		return true
	})
}

// explain logs what each node holds and says of its hub or leaves, for a failure.
func (c *hubCluster) explain(t *testing.T) {
	t.Helper()
	for _, p := range slices.Concat(c.core, c.hubs, c.allLeaves()) {
		st := p.status()
		var origins []string
		for _, o := range st.Origins {
			origins = append(origins, fmt.Sprintf("%s:%d/%d", o.Name, o.AppliedSeq, o.HeadSeq))
		}
		hub, _ := json.Marshal(st.Hub)
		leaves, _ := json.Marshal(st.Leaves)
		var refused []string
		for _, r := range st.Refusals {
			refused = append(refused, r.Code+" "+r.Message)
		}
		var peers []string
		for _, q := range st.Peers {
			e := ""
			if q.LastError != nil {
				e = q.LastError.Code + ": " + q.LastError.Message
			}
			peers = append(peers, fmt.Sprintf("%s %s v%d %s", q.Name, q.State, q.Version, e))
		}
		t.Logf("%s: digest %s origins %v hub %s leaves %s peers %v refusals %v leaf counters reoriginated %d duplicate %d refused %d",
			p.Name, strings.TrimSpace(p.digest("t")), origins, hub, leaves, peers, refused,
			st.Counters.LeafWritesReoriginated, st.Counters.LeafWritesDuplicate, st.Counters.LeafWritesRefused)
	}
}

// onceInTheCore checks that every leaf write reached the core once: each core node's
// origins are the members alone (no leaf is an origin there), and the hubs' logs, as every
// core node applied them, hold exactly writes entries (a write re-originated twice would
// add one; one lost would be missing from the digests already).
func (c *hubCluster) onceInTheCore(t *testing.T, writes int) {
	t.Helper()
	var members []string
	for _, p := range slices.Concat(c.core, c.hubs) {
		members = append(members, p.Name)
	}
	slices.Sort(members)
	for _, p := range c.core {
		st := p.status()
		var names []string
		entries := uint64(0)
		for _, o := range st.Origins {
			names = append(names, o.Name)
			if strings.HasPrefix(o.Name, "H") {
				entries += o.AppliedSeq
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, members) {
			t.Errorf("%s's origins: %v; want the members %v alone (no leaf)", p.Name, names, members)
		}
		if entries != uint64(writes) {
			t.Errorf("%s applied %d entries of the hubs for %d leaf writes: each leaf write must be re-originated once", p.Name, entries, writes)
		}
		if st.Leaves != nil || st.Hub != nil {
			t.Errorf("%s, a core node, shows leaves %v or a hub %v", p.Name, st.Leaves, st.Hub)
		}
	}
}

// leafWriter writes keys NAME-1, NAME-2, ... on a leaf, one every pace, until stop,
// counting each write the leaf acknowledged; a write the client did not send again and
// that failed fails the test.
func leafWriter(t *testing.T, l *proc, pace time.Duration, stop <-chan struct{}, n *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	c := l.api()
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(pace):
		}
		if _, err := c.Put(context.Background(), "t", []byte(fmt.Sprintf("%s-%d", l.Name, i)), []byte("v")); err != nil {
			t.Errorf("%s: write %d: %v", l.Name, i, err)
			return
		}
		n.Add(1)
	}
}

// TestHubsAndLeaves: a core of three, two hubs, five leaves on each (docs/contract.md §26).
// Each leaf writes 20 records; every node ends with the 200 records alike, each leaf's
// write checkpoint reaches its last write, the core's origins are the five members alone,
// and the hubs' logs hold 200 entries in all (every leaf write once). Then H1 is killed
// with kill -9 while every leaf writes, and started again: still every acknowledged write
// is everywhere, once.
func TestHubsAndLeaves(t *testing.T) {
	hubsAndLeaves(t, 2, 5, 20, 20*time.Millisecond, 120*time.Second)
}

// hubsAndLeaves is TestHubsAndLeaves with hubs hubs of leavesPerHub leaves, each leaf
// writing each records first, then one every pace while a hub is killed; bound bounds each
// wait for the cluster to converge.
func hubsAndLeaves(t *testing.T, hubs, leavesPerHub, each int, pace, bound time.Duration) {
	c := startHubs(t, hubs, leavesPerHub)
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range c.allLeaves() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := l.api()
			for i := 1; i <= each; i++ {
				if _, err := c.Put(context.Background(), "t", []byte(fmt.Sprintf("%s-w%d", l.Name, i)), []byte("v")); err != nil {
					t.Errorf("%s: write %d: %v", l.Name, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	writes := each * len(c.allLeaves())
	c.converged(t, writes, bound)
	t.Logf("%d leaf writes on %d leaves of %d hubs: everywhere, the checkpoints passed, %v after the first", writes, len(c.allLeaves()), hubs, time.Since(start))
	c.onceInTheCore(t, writes)
	for i, h := range c.hubs {
		l := h.status().Leaves
		if l.Connected != leavesPerHub || l.Marks < leavesPerHub || len(l.Lag) != 4 || l.Max != leavesPerHub+2 {
			raw, _ := json.Marshal(l)
			t.Errorf("%s's leaves: %s; want %d connected of %d, a mark each, the four lag bands", c.hubs[i].Name, raw, leavesPerHub, leavesPerHub+2)
		}
		if n := h.status().Counters.LeafWritesReoriginated; n != uint64(each*len(c.leaves[i])) {
			t.Errorf("%s re-originated %d leaf writes, want %d", h.Name, n, each*len(c.leaves[i]))
		}
	}

	// kill -9 of H1 under the leaves' writes, and its restart.
	stop := make(chan struct{})
	var n atomic.Int64
	for _, l := range c.allLeaves() {
		wg.Add(1)
		go leafWriter(t, l, pace, stop, &n, &wg)
	}
	h1 := c.hubs[0]
	waitFor(t, "H1 re-originating under the writes", bound, func() bool {
		return h1.origin("H1").AppliedSeq >= uint64(each*leavesPerHub+20)
	})
	h1.kill()
	// The leaves write on while their hub is down, and after it is back.
	down := n.Load()
	waitFor(t, "50 more leaf writes while H1 is down", bound, func() bool { return n.Load() >= down+50 })
	h1.start()
	waitFor(t, "H1's leaves back", bound, func() bool {
		l := h1.status().Leaves
		return l != nil && l.Connected == leavesPerHub
	})
	back := n.Load()
	waitFor(t, "50 more leaf writes once H1 is back", bound, func() bool { return n.Load() >= back+50 })
	close(stop)
	wg.Wait()
	writes += int(n.Load())
	c.converged(t, writes, bound)
	c.onceInTheCore(t, writes)
	for _, p := range slices.Concat(c.core, c.hubs) {
		p.stop()
		p.check()
	}
}
