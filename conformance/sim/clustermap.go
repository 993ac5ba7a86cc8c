package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// The cluster map and requests between nodes under the simulator (docs/design.md §23):
// maps published on random nodes while the schedule crashes, partitions and skews them,
// and requests sent between random nodes. The oracle checks that no node ever replaces
// a map by one of a lower generation, that every node ends on the highest generation
// published, that every node's list of members below version 4 is exact once the
// schedule heals, and that every request is answered once (or, its node crashed, never),
// never twice.

// mapOracle is what the simulator published and asked, and what it saw of it.
type mapOracle struct {
	published map[uint64][][]byte // canonical documents adopted where published, by generation
	maxGen    uint64
	held      map[string]uint64 // the generation each node was last seen holding
	// asks: requests started, by node, the node's start and the request id.
	asks map[askKey]*asked
}

// asked is one request started: when, and how many answers it had.
type asked struct {
	at      time.Time
	answers int
}

type askKey struct {
	node  string
	start int
	id    replica.RequestID
}

func (o *mapOracle) init() {
	if o.published == nil {
		o.published, o.held, o.asks = map[uint64][][]byte{}, map[string]uint64{}, map[askKey]*asked{}
	}
}

// PublishMap publishes a map document on a running node, as PUT /v1/cluster/map does. It
// reports whether the node adopted it (or held it already); a stale generation is the
// node doing its job, not a failure.
func (c *Cluster) PublishMap(node string, doc []byte) (bool, error) {
	n := c.nodes[node]
	if n == nil || n.Rep == nil {
		return false, fmt.Errorf("publish a map on %s: not running", node)
	}
	c.maps.init()
	var st replica.MapStatus
	var refused error
	err := c.callErr(n, func(r *replica.Replica) error {
		var err error
		st, err = r.PublishMap(n.clock(c), doc)
		var we *wire.Error
		if asWire(err, &we) && we.Code == replica.CodeStaleGeneration {
			refused = err
			return nil
		}
		return err
	})
	if err != nil || refused != nil {
		return false, err
	}
	if !slices.ContainsFunc(c.maps.published[st.Generation], func(d []byte) bool { return string(d) == string(st.Document) }) {
		c.maps.published[st.Generation] = append(c.maps.published[st.Generation], st.Document)
	}
	c.published(st.Generation)
	c.maps.maxGen = max(c.maps.maxGen, st.Generation)
	c.trace("%s: cluster map generation %d published%s", node, st.Generation, c.placementDoc(st.Generation))
	return true, nil
}

// Ask starts a request of kind map from node to target.
func (c *Cluster) Ask(node, target string) error {
	n := c.nodes[node]
	if n == nil || n.Rep == nil {
		return fmt.Errorf("ask from %s: not running", node)
	}
	c.maps.init()
	var id replica.RequestID
	c.call(n, func(r *replica.Replica) error {
		var err error
		id, err = r.Ask(n.clock(c), target, "map", "read", nil)
		if id != 0 {
			c.maps.asks[askKey{node, n.starts, id}] = &asked{at: c.now}
		}
		return err
	})
	return nil
}

// observeMap checks, after every step of a node, that its map's generation never went
// down, and counts the answers to its requests.
func (c *Cluster) observeMap(n *Node) {
	c.maps.init()
	g := n.Rep.MapGeneration()
	if g < c.maps.held[n.Name] {
		c.inv.fail(c.now, "%s replaced cluster map generation %d by %d", n.Name, c.maps.held[n.Name], g)
	}
	c.maps.held[n.Name] = g
	for _, a := range n.Rep.Answers() {
		q := c.maps.asks[askKey{n.Name, n.starts, a.ID}]
		if q == nil && c.locks != nil {
			c.lockAnswer(n, a) // not a map request's: a lock request's (locks.go)
			continue
		}
		switch {
		case q == nil:
			c.inv.fail(c.now, "%s: an answer to request %d, which it never started", n.Name, a.ID)
			continue
		case q.answers > 0:
			c.inv.fail(c.now, "%s: request %d answered twice (%q after another)", n.Name, a.ID, a.Code)
		}
		q.answers++
	}
}

// checkMaps is the end of a run's checks of maps and requests, every node up and the
// schedule healed.
func (c *Cluster) checkMaps() {
	if c.maps.published == nil {
		return
	}
	// The records converged; a map or a member entry sent on a connection made again at
	// the very end may still be on its way: a few round trips more, at most 5 s, until
	// nothing is found.
	found := c.mapFindings()
	for i := 0; i < 50 && len(found) > 0; i++ {
		c.Run(100 * time.Millisecond)
		found = c.mapFindings()
	}
	for _, f := range found {
		c.inv.fail(c.now, "%s", f)
	}
	// A request its node still runs is answered by its timeout at the latest.
	timeout := c.opts.RequestTimeout
	if timeout == 0 {
		timeout = replica.DefaultRequestTimeout
	}
	for k, q := range c.maps.asks {
		if n := c.nodes[k.node]; q.answers == 0 && n.starts == k.start && n.Rep != nil && c.now.Sub(q.at) > timeout+time.Second {
			c.inv.fail(c.now, "%s: request %d, started at %s, was never answered", k.node, k.id, q.at.Sub(Epoch))
		}
	}
}

// mapFindings is what the end check finds wrong with the nodes' maps and member lists now.
func (c *Cluster) mapFindings() []string {
	var found []string
	holder := c.mapHolder()
	g := c.reachGraph()
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil || speaks(n.MaxVersion) < 4 {
			continue
		}
		st := n.Rep.MapStatus()
		if st.Generation != c.maps.maxGen && g.reach(name)[holder] {
			found = append(found, fmt.Sprintf("%s holds cluster map generation %d, the highest published is %d", name, st.Generation, c.maps.maxGen))
		}
		if st.Generation == c.maps.maxGen && st.Generation > 0 && !slices.ContainsFunc(c.maps.published[st.Generation], func(d []byte) bool { return string(d) == string(st.Document) }) {
			found = append(found, fmt.Sprintf("%s holds a map of generation %d that was never published", name, st.Generation))
		}
		if c.hubs == nil || !c.hubs.leaf[name] {
			// A leaf holds its hub's map, read-only, and takes no part in the version-4
			// gate: it lists no member below or above (docs/design.md §27.5).
			found = append(found, c.belowV4Findings(g, name, st)...)
		}
	}
	return found
}

// mapHolder is a node seen holding the highest generation published ("" when none).
func (c *Cluster) mapHolder() string {
	for _, name := range c.names {
		if c.maps.held[name] == c.maps.maxGen {
			return name
		}
	}
	return ""
}

// reachGraph is the run's up links, by node, and the sets of running version-4 nodes they
// connect, each found once: a run with hubs has a thousand nodes under make scale.
type reachGraph struct {
	c       *Cluster
	up      map[string][]string // the other end of every up link, by node
	reaches map[string]map[string]bool
}

func (c *Cluster) reachGraph() *reachGraph {
	g := &reachGraph{c: c, up: map[string][]string{}, reaches: map[string]map[string]bool{}}
	for _, l := range c.sortedLinks() {
		if l.Up {
			g.up[l.From] = append(g.up[l.From], l.To)
			g.up[l.To] = append(g.up[l.To], l.From)
		}
	}
	return g
}

func (c *Cluster) v4(n string) bool {
	nd := c.nodes[n]
	return nd.Rep != nil && speaks(nd.MaxVersion) >= 4
}

// reach is the set of running version-4 nodes reachable from name (itself included)
// through up links between running version-4 nodes. The set of a running version-4 node
// is its component's, which every node of it shares.
func (g *reachGraph) reach(name string) map[string]bool {
	if r, ok := g.reaches[name]; ok {
		return r
	}
	seen := map[string]bool{name: true}
	for todo := []string{name}; len(todo) > 0; {
		at := todo[0]
		todo = todo[1:]
		for _, other := range g.up[at] {
			if !seen[other] && g.c.v4(other) {
				seen[other] = true
				todo = append(todo, other)
			}
		}
	}
	g.reaches[name] = seen
	if g.c.v4(name) {
		for k := range seen {
			g.reaches[k] = seen
		}
	}
	return seen
}

// belowV4Findings: a member reachable over version-4 nodes is below version 4 exactly when
// it does not speak it; a member that does not speak it is below wherever one of its
// version-4 neighbours is reachable (that neighbour saw its handshake).
func (c *Cluster) belowV4Findings(g *reachGraph, name string, st replica.MapStatus) []string {
	var found []string
	reach := g.reach(name)
	for _, m := range st.Members {
		nd := c.nodes[m]
		below := slices.Contains(st.MembersBelowV4, m)
		switch {
		case nd == nil:
			if !below {
				found = append(found, fmt.Sprintf("%s: member %s, which no node is, is not below version 4", name, m))
			}
		case reach[m] && below:
			found = append(found, fmt.Sprintf("%s: member %s speaks version 4 and is reachable, but is listed below it", name, m))
		case speaks(nd.MaxVersion) < 4 && nd.Rep != nil && slices.ContainsFunc(g.up[m], func(x string) bool { return reach[x] }) && !below:
			found = append(found, fmt.Sprintf("%s: member %s speaks version %d, but is not listed below 4", name, m, speaks(nd.MaxVersion)))
		}
	}
	return found
}

// mapsAndRequests adds, drawn after every other draw of the run, one to four map
// publications on random nodes (sometimes two of one generation on two nodes at once, a
// conflict that the next generation ends; sometimes a lower generation on a node that
// has not seen the highest yet; sometimes one on a node that crashes right after, before
// it could tell anyone; sometimes one on a node one of whose links is partitioned) and a
// few requests between random nodes, a third of them with their target crashing while they
// are on their way.
func (c *Cluster) mapsAndRequests(rep *Report, names []string, end time.Time) {
	rng := c.Rand()
	base := uint64(0)
	if c.place.carriers != nil {
		base = 1 // the run's first map, published before anything else (random.go)
	}
	if c.locks != nil {
		base = 2 // the run's first maps: the members, then the lock homes (locks.go)
	}
	if c.hubs != nil {
		base = 1 // the run's first map, with the hubs and the leaf window (hubs.go)
	}
	doc := func(gen uint64, variant int) []byte {
		members := slices.Clone(names)
		if variant%2 == 1 {
			slices.Reverse(members) // another document of the same generation
		}
		return c.MapDoc(base+gen, members)
	}
	span := max(end.Sub(c.Now())-2*time.Second, time.Second)
	var gen uint64
	for range 1 + rng.IntN(4) {
		at := c.Now().Add(time.Second + time.Duration(rng.Int64N(int64(span))))
		node := names[rng.IntN(len(names))]
		gen++
		g := gen
		switch k := rng.IntN(10); {
		case k < 2: // two of one generation on two nodes at once
			other := names[rng.IntN(len(names))]
			c.At(at, func() { c.publishDrawn(rep, node, doc(g, 0)) })
			c.At(at.Add(time.Millisecond), func() { c.publishDrawn(rep, other, doc(g, 1)) })
		case k < 4 && g > 1: // a lower generation, where it may not be stale yet
			c.At(at, func() { c.publishDrawn(rep, node, doc(g, 0)) })
			late := names[rng.IntN(len(names))]
			c.At(at.Add(time.Duration(1+rng.IntN(20))*time.Millisecond), func() { c.publishDrawn(rep, late, doc(g-1, 1)) })
		case k < 6: // on a node that crashes at once, and comes back later
			d := time.Duration(500+rng.IntN(2000)) * time.Millisecond
			c.At(at, func() {
				if c.publishDrawn(rep, node, doc(g, 0)) && c.Node(node).Rep != nil {
					rep.Crashes++
					_ = c.Crash(node) // running: checked
					c.At(c.Now().Add(d), func() {
						if c.Node(node).Rep == nil {
							_ = c.Restart(node, c.Node(node).MaxVersion) // down: checked
						}
					})
				}
			})
		case k < 8: // during a partition of one of the node's links
			links := c.memberLinks()
			l := links[rng.IntN(len(links))]
			d := time.Duration(500+rng.IntN(2000)) * time.Millisecond
			on := l.From
			c.At(at, func() { rep.Partitions++; _ = c.SetLink(l.From, l.To, false) }) // a link of the run: not refused
			c.At(at.Add(time.Millisecond), func() { c.publishDrawn(rep, on, doc(g, 0)) })
			c.At(at.Add(d), func() { _ = c.SetLink(l.From, l.To, true) })
		default:
			c.At(at, func() { c.publishDrawn(rep, node, doc(g, 0)) })
		}
	}
	for range 2 + rng.IntN(4) {
		at := c.Now().Add(time.Second + time.Duration(rng.Int64N(int64(span))))
		from, to := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		if rng.IntN(8) == 0 {
			to = "nobody" // no route reaches it
		}
		c.At(at, func() {
			if c.Node(from).Rep != nil {
				rep.Requests++
				_ = c.Ask(from, to) // running: checked
			}
		})
		if k := rng.IntN(3); k == 0 && to != from && to != "nobody" {
			// The target crashes while the request is on its way: the connection that
			// carried it closes under it (unreachable), or its answer never comes (timeout).
			d := time.Duration(500+rng.IntN(2000)) * time.Millisecond
			c.At(at.Add(time.Duration(1+rng.IntN(3))*time.Millisecond), func() {
				if c.Node(to).Rep != nil {
					rep.Crashes++
					_ = c.Crash(to) // running: checked
					c.At(c.Now().Add(d), func() {
						if c.Node(to).Rep == nil {
							_ = c.Restart(to, c.Node(to).MaxVersion) // down: checked
						}
					})
				}
			})
		}
	}
}

// memberLinks are the run's links between members of its maps: every link but a leaf's
// (a leaf holds its hub's map read-only: hubs.go).
func (c *Cluster) memberLinks() []*Link {
	links := c.sortedLinks()
	if c.hubs == nil {
		return links
	}
	return slices.DeleteFunc(links, func(l *Link) bool { return c.hubs.leaf[l.From] || c.hubs.leaf[l.To] })
}

// MapDoc is a map document of generation gen with the members named, in that order, the
// run's placement and its lock homes.
func (c *Cluster) MapDoc(gen uint64, members []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"generation":%d,"nodes":[`, gen)
	for i, m := range members {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":%q}`, m)
	}
	b.WriteString("]" + c.placementDoc(gen) + c.lockDoc(gen) + c.leafWindowDoc() + "}")
	return []byte(b.String())
}

// publishDrawn publishes a drawn document on a node that is running, and counts it.
func (c *Cluster) publishDrawn(rep *Report, node string, doc []byte) bool {
	if c.Node(node).Rep == nil {
		return false
	}
	ok, err := c.PublishMap(node, doc)
	var se *store.StorageError
	var ce *clustermap.Error
	// A full disk refuses it, and a map that turns locks on is refused before the node knows
	// every member speaks version 4: the node doing its job.
	if err != nil && !errors.As(err, &se) && !(errors.As(err, &ce) && ce.Code == clustermap.CodeClusterNotV4) {
		c.inv.fail(c.now, "publishing a map on %s: %v", node, err)
	}
	if ok {
		rep.Maps++
	}
	return ok
}
