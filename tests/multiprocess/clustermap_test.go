//go:build multiprocess || scale

package multiprocess

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/shells/native/httpapi"
)

// mapBound bounds every wait for a map to spread or a conflict to show: a MAP is sent on
// adoption, one frame a hop, so on 127.0.0.1 it is far below; the bound only ends a test
// whose map never arrives.
const mapBound = 10 * time.Second

// mapDoc is a cluster map of generation gen listing names, in canonical form (what GET
// answers): keys sorted, no spaces.
func mapDoc(gen uint64, names ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"generation":%d,"nodes":[`, gen)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q}`, n)
	}
	b.WriteString("]}")
	return b.String()
}

// publishMap publishes doc on the node with PUT /v1/cluster/map; it must be adopted.
func (p *proc) publishMap(doc string) {
	p.t.Helper()
	if _, err := p.api().PutClusterMap(context.Background(), []byte(doc)); err != nil {
		p.t.Fatalf("publishing generation %s on %s: %v", doc, p.Name, err)
	}
}

// clusterMap is the map node (empty: this node) holds, asked of p: GET /v1/cluster/map
// with ?node=node, its canonical form without the answer's newline.
func (p *proc) clusterMap(node string) string {
	p.t.Helper()
	doc, err := p.api().ClusterMapOf(context.Background(), node)
	if err != nil {
		p.t.Fatalf("%s: GET /v1/cluster/map?node=%s: %v", p.Name, node, err)
	}
	return string(bytes.TrimSpace(doc))
}

// mapStatus is the node's cluster_map in /v1/status.
func (p *proc) mapStatus() httpapi.ClusterMapDoc {
	p.t.Helper()
	return p.status().ClusterMap
}

// mapJSON is the node's cluster_map as JSON, for a failure's message.
func (p *proc) mapJSON() string {
	p.t.Helper()
	b, _ := json.Marshal(p.mapStatus())
	return string(b)
}

// deletePeer stops the node dialing peer and closes their connections (DELETE
// /v1/peers/{name}); a peer added with POST is forgotten, so a restart does not dial it.
func (p *proc) deletePeer(peer string) {
	p.t.Helper()
	req, _ := http.NewRequest("DELETE", "http://"+p.HTTP+"/v1/peers/"+peer, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("deleting %s from %s: %v", peer, p.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		p.t.Fatalf("deleting %s from %s: %s", peer, p.Name, resp.Status)
	}
}

// allAt reports whether every node holds a map of generation gen.
func allAt(gen uint64, nodes ...*proc) bool {
	for _, p := range nodes {
		if p.mapStatus().Generation != gen {
			return false
		}
	}
	return true
}

// TestClusterMapChain: A <- B <- C <- D <- E, each dialing the one before. A map of
// generation 1 listing the five, published on A with plait map set, is held by all five
// within 10 s (mapBound; how long it took is logged, not asserted). A asked for E's map
// (?node=E, a request over four hops) answers E's, generation 1, and the request is counted
// as sent by A, forwarded by B, C and D and served by E; A's cluster_map.versions comes to
// show all five at protocol version 4 holding generation 1, and members_below_v4 is
// absent: every member is known to speak version 4.
func TestClusterMapChain(t *testing.T) {
	names := []string{"A", "B", "C", "D", "E"}
	nodes := []*proc{serve(t, "A")}
	for _, name := range names[1:] {
		nodes = append(nodes, serve(t, name, "--peer", nodes[len(nodes)-1].PeerFlag()))
	}
	a, e := nodes[0], nodes[4]
	waitFor(t, "the chain connected", 30*time.Second, func() bool {
		for i := 1; i < len(nodes); i++ {
			if !nodes[i].connected(nodes[i-1].Name) {
				return false
			}
		}
		return true
	})
	doc := mapDoc(1, names...)
	set := exec.Command(binary, "map", "set", "-", "--http", a.HTTP)
	var stderr bytes.Buffer
	set.Stdin, set.Stderr = strings.NewReader(doc), &stderr
	out, err := set.Output()
	if err != nil {
		t.Fatalf("plait map set on A: %v\n%s", err, stderr.Bytes())
	}
	published := time.Now() // A adopted the map before it answered
	var printed struct{ Generation uint64 }
	if err := json.Unmarshal(out, &printed); err != nil || printed.Generation != 1 {
		t.Fatalf("plait map set printed %q (%v), want the map of generation 1", out, err)
	}
	// Polled every 2 ms rather than waitFor's 20, so that the times logged mean something.
	reached := map[string]time.Duration{}
	if err := cluster.WaitEvery("every node of the chain holding generation 1", mapBound, 2*time.Millisecond, func() bool {
		for _, p := range nodes {
			if _, ok := reached[p.Name]; !ok && p.mapStatus().Generation == 1 {
				reached[p.Name] = time.Since(published)
			}
		}
		return len(reached) == len(nodes)
	}); err != nil {
		t.Fatalf("%v: reached %v", err, reached)
	}
	for _, p := range nodes {
		t.Logf("%s holds generation 1 %.1f ms after plait map set returned on A", p.Name, reached[p.Name].Seconds()*1000)
	}
	for _, p := range nodes {
		if st := p.mapStatus(); st.Publisher != "A" || !slices.Equal(st.Members, names) || st.Conflict != nil {
			t.Errorf("%s's cluster_map: %s, want published on A, members A..E, no conflict", p.Name, p.mapJSON())
		}
	}
	// E never wrote: no node routes its origin, and the request finds its way toward the
	// connection E's member entry came on (docs/design.md §23.4).
	if got := a.clusterMap("E"); got != doc {
		t.Errorf("A's answer of E's map: %s, want %s", got, doc)
	}
	// Every node holds the same map, so the answer alone cannot tell who gave it: the
	// counters say A sent the request, B, C and D passed it on, and E served it.
	for i, p := range nodes {
		c := p.status().Counters
		want := [3]uint64{0, 1, 0} // sent, forwarded, served: B, C and D
		switch i {
		case 0:
			want = [3]uint64{1, 0, 0}
		case len(nodes) - 1:
			want = [3]uint64{0, 0, 1}
		}
		if got := [3]uint64{c.RequestsSent, c.RequestsForwarded, c.RequestsServed}; got != want {
			t.Errorf("%s's requests sent, forwarded, served: %v, want %v", p.Name, got, want)
		}
	}
	if got := e.clusterMap(""); got != doc {
		t.Errorf("E's own map: %s, want %s", got, doc)
	}
	// Every node stamps its member entry anew when it adopts the map; E's takes four hops
	// back to A.
	versionsAll := func() bool {
		vs := a.mapStatus().Versions
		if len(vs) != len(names) {
			return false
		}
		for i, v := range vs {
			if v.Name != names[i] || v.MaxVersion != 4 || v.Generation != 1 {
				return false
			}
		}
		return true
	}
	if err := cluster.WaitFor("A's versions showing A..E at version 4 holding generation 1", mapBound, versionsAll); err != nil {
		t.Fatalf("%v: A's cluster_map %s", err, a.mapJSON())
	}
	if st := a.mapStatus(); len(st.MembersBelowV4) != 0 {
		t.Errorf("A's members_below_v4: %v, want none", st.MembersBelowV4)
	}
	for _, p := range nodes {
		p.stop()
		p.check()
	}
}

// mapTriangle starts A, B dialing A, and C, which adds A and B with POST /v1/peers (so
// that DELETE forgets them and a restart does not dial them again), and waits until the
// three links stream.
func mapTriangle(t *testing.T) (a, b, c *proc) {
	t.Helper()
	a = serve(t, "A")
	b = serve(t, "B", "--peer", a.PeerFlag())
	c = serve(t, "C")
	c.addPeer(a)
	c.addPeer(b)
	waitFor(t, "A, B and C connected", 30*time.Second, func() bool {
		return b.connected("A") && c.connected("A") && c.connected("B")
	})
	return a, b, c
}

// TestClusterMapNodeDownDuringPublication: A, B, C in a triangle hold generation 1. C is
// killed (kill -9), generation 2 is published on A and reaches B; C, restarted on its data
// directory still holding generation 1, gets generation 2 from the peers it reconnects to
// (each side sends its map on a new version-4 connection), within 10 s (mapBound).
func TestClusterMapNodeDownDuringPublication(t *testing.T) {
	a, b, c := mapTriangle(t)
	a.publishMap(mapDoc(1, "A", "B", "C"))
	waitFor(t, "A, B and C holding generation 1", mapBound, func() bool { return allAt(1, a, b, c) })
	c.kill()
	two := mapDoc(2, "A", "B", "C")
	a.publishMap(two)
	waitFor(t, "B holding generation 2 while C is down", mapBound, func() bool { return allAt(2, b) })
	c.start()
	restarted := time.Now()
	waitFor(t, "C holding generation 2 after its restart", mapBound, func() bool { return allAt(2, c) })
	t.Logf("C holds generation 2 %.1f ms after its restart returned", time.Since(restarted).Seconds()*1000)
	if got := c.clusterMap(""); got != two {
		t.Errorf("C's map after its restart: %s, want %s", got, two)
	}
	if st := c.mapStatus(); st.Publisher != "A" || st.Conflict != nil {
		t.Errorf("C's cluster_map: %s, want generation 2 published on A", c.mapJSON())
	}
	for _, p := range []*proc{a, b, c} {
		p.stop()
		p.check()
	}
}

// TestClusterMapConflict: A, B, C in a triangle; C cuts its links (DELETE /v1/peers), and
// two different maps of generation 3 are published, x on A (B takes it) and y on C. C is
// killed and restarted on its data directory with no peer: it holds y at once (a map
// survives kill -9). C adds its peers back: every node keeps the map it had (x on A and B,
// y on C), counts one conflict, and names the other map's publisher in
// cluster_map.conflict (C on A and B, A on C), within 10 s (mapBound). Generation 4
// published on B ends it everywhere: all three hold it, none shows a conflict.
func TestClusterMapConflict(t *testing.T) {
	a, b, c := mapTriangle(t)
	c.deletePeer("A")
	c.deletePeer("B")
	waitFor(t, "C's links closed", 30*time.Second, func() bool {
		return !a.connected("C") && !b.connected("C") && !c.connected("A") && !c.connected("B")
	})
	x := `{"generation":3,"nodes":[{"api":"http://a.example:7401","name":"A"},{"name":"B"},{"name":"C"}]}`
	y := `{"generation":3,"nodes":[{"name":"A"},{"name":"B"},{"api":"http://c.example:7401","name":"C"}]}`
	a.publishMap(x)
	c.publishMap(y)
	waitFor(t, "B holding A's generation 3", mapBound, func() bool { return allAt(3, b) })
	c.kill()
	c.start()
	if st := c.mapStatus(); st.Generation != 3 || st.Publisher != "C" || c.clusterMap("") != y {
		t.Fatalf("C restarted alone holds %s (%s), want its own generation 3 (%s)", c.mapJSON(), c.clusterMap(""), y)
	}
	c.addPeer(a)
	c.addPeer(b)
	conflicted := func(p *proc, other string) bool {
		st := p.mapStatus()
		return st.Conflict != nil && st.Conflict.Generation == 3 && st.Conflict.Publisher == other
	}
	if err := cluster.WaitFor("A and B naming C, C naming A, in a conflict", mapBound, func() bool {
		return conflicted(a, "C") && conflicted(b, "C") && conflicted(c, "A")
	}); err != nil {
		t.Fatalf("%v: A %s, B %s, C %s", err, a.mapJSON(), b.mapJSON(), c.mapJSON())
	}
	for _, k := range []struct {
		p    *proc
		doc  string
		from string
	}{{a, x, "A"}, {b, x, "A"}, {c, y, "C"}} {
		if got, pub := k.p.clusterMap(""), k.p.mapStatus().Publisher; got != k.doc || pub != k.from {
			t.Errorf("%s holds %s published on %s, want its own %s published on %s", k.p.Name, got, pub, k.doc, k.from)
		}
		if n := k.p.status().Counters.ClusterMapConflicts; n != 1 {
			t.Errorf("%s counted %d conflicts, want 1 (one other map met)", k.p.Name, n)
		}
	}
	four := mapDoc(4, "A", "B", "C")
	b.publishMap(four)
	if err := cluster.WaitFor("A, B and C holding generation 4 without a conflict", mapBound, func() bool {
		for _, p := range []*proc{a, b, c} {
			if st := p.mapStatus(); st.Generation != 4 || st.Conflict != nil {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("%v: A %s, B %s, C %s", err, a.mapJSON(), b.mapJSON(), c.mapJSON())
	}
	for _, p := range []*proc{a, b, c} {
		if got := p.clusterMap(""); got != four {
			t.Errorf("%s holds %s, want %s", p.Name, got, four)
		}
		p.stop()
		p.check()
	}
}

// TestClusterMapBehindVersion3: A <- B <- C with B at --protocol-max 3, so both links speak
// version 3. A map listing the three, published on A, stays on A: B never holds it, and C,
// reached only through B, does not get it, even after A's later write has reached C through
// B. That is the contract (docs/contract.md §22.3: a node at version 3 neither holds nor
// relays the map). A lists B in members_below_v4 (it saw B's version in its handshake) and
// C too (C is known to A only through a version-3 node: not known to speak version 4).
// The same map published on C lists A and B there, for the same reasons.
func TestClusterMapBehindVersion3(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag(), "--protocol-max", "3")
	c := serve(t, "C", "--peer", b.PeerFlag())
	waitFor(t, "the chain connected", 30*time.Second, func() bool { return b.connected("A") && c.connected("B") })
	for _, p := range []*proc{a, c} {
		for _, q := range p.status().Peers {
			if q.Version != 3 {
				t.Fatalf("%s's connection to %s speaks version %d, want 3", p.Name, q.Name, q.Version)
			}
		}
	}
	doc := mapDoc(1, "A", "B", "C")
	a.publishMap(doc)
	// B at version 3 as a member entry: what A (and C) saw in its handshake.
	b3 := func(p *proc) bool {
		for _, v := range p.mapStatus().Versions {
			if v.Name == "B" {
				return v.MaxVersion == 3 && v.Generation == 0
			}
		}
		return false
	}
	if err := cluster.WaitFor("A listing B and C below version 4", mapBound, func() bool {
		return slices.Equal(a.mapStatus().MembersBelowV4, []string{"B", "C"}) && b3(a)
	}); err != nil {
		t.Fatalf("%v: A's cluster_map %s", err, a.mapJSON())
	}
	a.put("t", "after-the-map", "1")
	waitFor(t, "C holding A's write through B", 30*time.Second, func() bool { return c.origin("A").AppliedSeq == 1 })
	if gb, gc := b.mapStatus().Generation, c.mapStatus().Generation; gb != 0 || gc != 0 {
		t.Errorf("generations after A's write reached C: B %d, C %d; want 0 and 0 (the map does not cross a version-3 node)", gb, gc)
	}
	c.publishMap(doc)
	if st := c.mapStatus(); !slices.Equal(st.MembersBelowV4, []string{"A", "B"}) || !b3(c) {
		t.Errorf("C's cluster_map after publishing the same map: %s, want members_below_v4 [A B] and B at version 3", c.mapJSON())
	}
	if st := a.mapStatus(); st.Conflict != nil || st.Publisher != "A" {
		t.Errorf("A's cluster_map after C published: %s, want A's own map and no conflict", a.mapJSON())
	}
	for _, p := range []*proc{a, b, c} {
		p.stop()
		p.check()
	}
}
