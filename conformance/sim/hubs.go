package sim

import (
	"fmt"
	"slices"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Fan-in hubs under the simulator (docs/design.md §27): a tenth of the random runs (hubSeed)
// are a core of 3 nodes, 2 to 4 hubs (members of the cluster map, replica.Config.MaxLeaves
// set) and 1 to 20 leaves (replica.Config.Hub set, one link to their hub only), under a map
// whose nodes are the core and the hubs and which has a leaf_window. Leaves write, crash,
// come back, and move to another hub (they restart with another Hub and a link to it); the
// run's other faults (disconnects, partitions, crashes, power losses, dropped and corrupted
// entries, a full disk, clock skews, one leaf's clock beyond the bounds for a while) hit
// every node, hubs and leaves included.
//
// The oracle notes each leaf write at the leaf, by its conflict identity (leaf origin, leaf
// seq, leaf HLC: Cluster.writes), and watches every format-3 entry a node other than its
// hub applies (hubRun.applied). It checks that
//   - every acknowledged leaf write is re-originated, and on every core node (its version
//     there, or one newer: checkHubs), with the leaf's version, never the hub's: the records
//     end as last-writer-wins over the leaves' versions makes them (checkOracle compares
//     versions, not only values), so conflicts resolve as they would without hubs, and no
//     deleted key comes back;
//   - one hub's log never carries the same (leaf, leaf seq) twice (a crash double); two
//     hubs' logs may (a move double), and each hub's leaf_writes_twice is exactly the
//     format-3 entries it applied at or below its mark of their leaf;
//   - no core node's state grows with the leaves: its vector, its status's origins and
//     peers name members only, and it keeps no leaf marks;
//   - no leaf write is refused (the run never makes one older than the leaf window);
//   - every leaf's status ends with its write checkpoint: its hub connected, every write
//     re-originated and on the core;
//   - change feeds give a format-3 change with the operations and HLC its leaf wrote,
//     found by leaf origin and leaf seq (feeds.go).
//
// Record digests stay by conflict identity only (recordsDigest, placedDigests: never Via),
// and the convergence the end waits for is the members' logs on every node and each
// leaf's own writes re-originated (heldOrigins, pending): a leaf's origin is in no log but
// its own.

// hubRun is a run's hubs and leaves, and what its oracle saw of them.
type hubRun struct {
	c                  *Cluster
	core, hubs, leaves []string
	members            []string // core and hubs: the map's nodes
	leaf               map[string]bool
	leafOrigin         map[wire.OriginID]string // the leaves, by origin
	hubOrigin          map[wire.OriginID]string // the hubs, by origin
	window             time.Duration
	// carried: the hub seq that carries each (hub, leaf, leaf seq), as nodes other than
	// the hub applied it; byWrite: the same, by leaf write (every hub that carries it).
	carried map[carry]uint64
	byWrite map[leafWrite]map[wire.OriginID]uint64
	// reoriginated: per leaf origin, the highest leaf seq a node saw re-originated.
	reoriginated map[wire.OriginID]uint64
	// twice: per hub, the format-3 entries it applied at or below its mark of their leaf
	// (the move doubles it must count leaf_writes_twice for: docs/design.md §27.3).
	twice map[string]uint64
}

type leafWrite struct {
	leaf wire.OriginID
	seq  uint64
}

type carry struct {
	hub wire.OriginID
	leafWrite
}

// hubSeed says whether a random run has hubs: a tenth of the seeds, among the fifth that
// place no table, set no links and take no locks (seed%5 == 0), both with and without a
// sync delay (even seeds have one). A tenth keeps make sim's time: a hub run has up to 27
// nodes where the others have 3 to 8.
func hubSeed(seed uint64) bool { return seed%20 == 0 || seed%20 == 15 }

// hubLeafWindow is the runs' leaf_window, in seconds: far above how long a run keeps a
// leaf's write from its hub (crashes, partitions, moves of a few seconds each), so no
// write is refused too-old, and the oracle can require every one on the core.
const hubLeafWindow = 60

// randomHubs is Random's run with hubs: its topology, writes and faults, drawn from the
// cluster's generator after the options Random set.
func (c *Cluster) randomHubs(rep *Report) Report {
	opts := c.opts
	seed := opts.Seed
	rng := c.Rand()
	hr := &hubRun{c: c, leaf: map[string]bool{}, leafOrigin: map[wire.OriginID]string{}, hubOrigin: map[wire.OriginID]string{},
		window: hubLeafWindow * time.Second, carried: map[carry]uint64{}, byWrite: map[leafWrite]map[wire.OriginID]uint64{},
		reoriginated: map[wire.OriginID]uint64{}, twice: map[string]uint64{}}
	c.hubs, c.inv.hubs = hr, hr
	nHubs, nLeaves := 2+rng.IntN(3), 1+rng.IntN(20)
	if opts.Leaves > 0 {
		nLeaves = opts.Leaves
	}
	for i := range 3 + nHubs {
		name := nodeName(i)
		if i < 3 {
			hr.core = append(hr.core, name)
		} else {
			hr.hubs = append(hr.hubs, name)
		}
		hr.members = append(hr.members, name)
		if err := c.addNode(name, 0, nil, func(n *Node) {
			if i >= 3 {
				n.MaxLeaves = nLeaves
			}
		}); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return *rep
		}
		if i >= 3 {
			hr.hubOrigin[c.nodes[name].origin] = name
		}
	}
	width := len(fmt.Sprint(nLeaves - 1))
	hubOf := map[string]string{}
	for i := range nLeaves {
		name := fmt.Sprintf("L%0*d", width, i)
		hub := hr.hubs[rng.IntN(nHubs)]
		hr.leaves = append(hr.leaves, name)
		hr.leaf[name] = true
		hubOf[name] = hub
		if err := c.addNode(name, 0, nil, func(n *Node) {
			n.Hub = hub
			n.Skew = time.Duration(rng.Int64N(int64(2*lockSkew+1))) - lockSkew
		}); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return *rep
		}
		hr.leafOrigin[c.nodes[name].origin] = name
	}
	names := c.Names()
	rep.Nodes, rep.Hubs, rep.Leaves = len(names), nHubs, nLeaves
	rep.Topology = fmt.Sprintf("core 3, %d hubs, %d leaves", nHubs, nLeaves)
	// The core is a mesh; each hub dials one or two core nodes, and half the hubs another
	// hub; each leaf dials its hub.
	link := func(from, to string) {
		if c.Link(from, to) == nil {
			_ = c.Connect(from, to) // two nodes of the run, no link yet: not refused
			l := c.Link(from, to)
			l.MinDelay = time.Duration(1+rng.IntN(5)) * time.Millisecond
			l.MaxDelay = l.MinDelay + time.Duration(rng.IntN(30))*time.Millisecond
		}
	}
	link(hr.core[1], hr.core[0])
	link(hr.core[2], hr.core[0])
	link(hr.core[2], hr.core[1])
	for i, h := range hr.hubs {
		link(h, hr.core[rng.IntN(3)])
		if rng.IntN(2) == 0 {
			link(h, hr.core[rng.IntN(3)])
		}
		if i > 0 && rng.IntN(2) == 0 {
			link(h, hr.hubs[rng.IntN(i)])
		}
	}
	for _, l := range hr.leaves {
		link(l, hubOf[l])
	}
	rep.Links = len(c.links)
	links := c.sortedLinks()
	// The map, with the core and the hubs as its nodes and the leaf window, on every member
	// before the first write: a hub takes leaves only once every member holds it.
	doc := c.MapDoc(1, hr.members)
	for _, name := range hr.members {
		if _, err := c.PublishMap(name, doc); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return *rep
		}
	}

	const busy = 15 * time.Second
	end := c.Now().Add(busy)
	retaining := opts.RetainBytes > 0
	if retaining {
		for i, name := range names {
			c.At(c.Now().Add(time.Duration(50+10*(i%100))*time.Millisecond), func() {
				c.randomWrite(rep, name, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("first-" + name), Value: []byte("1")}})
			})
		}
	}
	// Writes: half of them by leaves, over the key space every node writes.
	for t := c.Now().Add(200 * time.Millisecond); t.Before(end); t = t.Add(time.Duration(10+rng.IntN(60)) * time.Millisecond) {
		node := hr.members[rng.IntN(len(hr.members))]
		if rng.IntN(2) == 0 {
			node = hr.leaves[rng.IntN(nLeaves)]
		}
		ops := randomOps(c, rng.IntN(3)+1)
		if retaining {
			for i := range ops {
				if ops[i].Kind == wire.OpPut {
					ops[i].Value = append(ops[i].Value, make([]byte, 100)...)
				}
			}
		}
		c.At(t, func() { c.randomWrite(rep, node, ops) })
	}
	versions := map[string]uint64{}
	anyV1 := false
	c.drawFaults(rep, names, links, versions, &anyV1, end)
	// Hubs crash (power losses among them when writes are synced late) under their leaves'
	// writes: a hub that forgot what it re-originated would re-originate it again.
	for range 1 + rng.IntN(3) {
		hub := hr.hubs[rng.IntN(nHubs)]
		at := c.Now().Add(time.Second + time.Duration(rng.Int64N(int64(busy-2*time.Second))))
		d := time.Duration(200+rng.IntN(3000)) * time.Millisecond
		power := opts.SyncDelay > 0 && rng.IntN(2) == 0
		c.At(at, func() { c.crashFor(rep, hub, power, d) })
	}
	// Leaves move: one crashes, and restarts at another hub. A third of the time its hub
	// went down as it moved, and a third its hub was cut off from the core a while before:
	// the entries that hub re-originated reach the other hub only once it is back, and the
	// other hub re-originates them too (a move double).
	for range 1 + rng.IntN(1+nLeaves/2) {
		leaf := hr.leaves[rng.IntN(nLeaves)]
		at := c.Now().Add(2*time.Second + time.Duration(rng.Int64N(int64(busy-3*time.Second))))
		d := time.Duration(100+rng.IntN(3000)) * time.Millisecond
		k := rng.IntN(nHubs)
		why := rng.IntN(3)
		down := time.Duration(500+rng.IntN(3000)) * time.Millisecond
		before := time.Duration(500+rng.IntN(1500)) * time.Millisecond
		if why == 2 {
			c.At(at.Add(-before), func() {
				if old := c.nodes[leaf].Hub; old != hr.hubs[k] {
					c.cutOff(rep, old, before+down)
				}
			})
		}
		c.At(at, func() {
			if old := c.nodes[leaf].Hub; why == 1 && old != hr.hubs[k] {
				c.crashFor(rep, old, false, down)
			}
			c.moveLeaf(rep, leaf, hr.hubs[k], d)
		})
	}
	// A third of the runs put one leaf's clock beyond the bounds for a while: its hub holds
	// that leaf's writes back (docs/design.md §27.2), never its own origin.
	if rng.IntN(3) == 0 {
		n := c.nodes[hr.leaves[rng.IntN(nLeaves)]]
		off := 600*time.Millisecond + time.Duration(rng.Int64N(int64(1400*time.Millisecond)))
		if rng.IntN(3) == 0 {
			off = -off
		}
		from := c.Now().Add(time.Duration(rng.Int64N(int64(busy / 2))))
		until := from.Add(time.Duration(1000+rng.IntN(5000)) * time.Millisecond)
		c.At(from, func() {
			c.trace("%s's clock is %s further off until %s", n.Name, off, until.Sub(Epoch))
			c.driftNode(n, off, 0, until)
		})
	}
	if retaining {
		c.awayAndCopies(rep, names, opts.RetainHold < 30*time.Second)
	}
	c.diskFills(rep, names, end)
	c.mapsAndRequests(rep, hr.members, end)
	c.drawFeeds(rep, seed, hr.members, end)
	c.SetV2Only(true)
	c.RunUntil(end)
	c.Restore()
	return c.finishRandom(rep, names, false)
}

// randomWrite is one write of a random run, counted when acknowledged.
func (c *Cluster) randomWrite(rep *Report, node string, ops []wire.Op) {
	if seq, _ := c.Write(node, ops); seq > 0 {
		rep.Writes++
		if c.hubs != nil && c.hubs.leaf[node] {
			rep.LeafWrites++
		}
	}
}

// crashFor crashes a running node (its power lost, when power) and restarts it d later.
func (c *Cluster) crashFor(rep *Report, node string, power bool, d time.Duration) {
	if c.Node(node).Rep == nil {
		return
	}
	rep.Crashes++
	if power {
		rep.PowerLosses++
		_ = c.PowerLoss(node) // running, and power is drawn only with a sync delay
	} else {
		_ = c.Crash(node) // running: not refused
	}
	c.At(c.Now().Add(d), func() {
		if c.Node(node).Rep == nil {
			_ = c.Restart(node, c.Node(node).MaxVersion) // down: not refused
		}
	})
}

// cutOff partitions a hub from every member it links to for d: its leaves stay connected,
// and it goes on re-originating their writes, which reach no other member meanwhile.
func (c *Cluster) cutOff(rep *Report, hub string, d time.Duration) {
	var cut []*Link
	for _, l := range c.sortedLinks() {
		if (l.From == hub || l.To == hub) && !c.hubs.leaf[l.From] && !c.hubs.leaf[l.To] && l.Up {
			cut = append(cut, l)
		}
	}
	rep.Partitions++
	c.trace("%s is cut off from the core for %s", hub, d)
	for _, l := range cut {
		_ = c.SetLink(l.From, l.To, false) // a link of the run: not refused
	}
	c.At(c.Now().Add(d), func() {
		for _, l := range cut {
			_ = c.SetLink(l.From, l.To, true)
		}
	})
}

// moveLeaf moves a leaf to hub (docs/operations.md §19): it stops (when it runs), its link to
// its hub goes, and it restarts d later with hub as its hub, which finds from the leaf
// marks it can see what to re-originate. A move to the hub it has is a crash and a return.
func (c *Cluster) moveLeaf(rep *Report, leaf, hub string, d time.Duration) {
	n := c.nodes[leaf]
	if n.failed {
		return
	}
	if n.Rep != nil {
		rep.Crashes++
		_ = c.Crash(leaf) // running: not refused
	}
	if n.Hub != hub {
		rep.LeafMoves++
		c.trace("%s moves from hub %s to %s", leaf, n.Hub, hub)
		_ = c.RemoveLink(leaf, n.Hub) // the leaf's one link: not refused
		n.Hub = hub
		_ = c.Connect(leaf, hub) // the old link is gone: not refused
		l := c.Link(leaf, hub)
		l.MinDelay = time.Duration(1+c.rng.IntN(5)) * time.Millisecond
		l.MaxDelay = l.MinDelay + time.Duration(c.rng.IntN(30))*time.Millisecond
	}
	c.At(c.Now().Add(d), func() {
		if n.Rep == nil && !n.failed {
			_ = c.Restart(leaf, n.MaxVersion) // down: not refused
		}
	})
}

// heldOrigins names the origins whose logs the node holds once the run converged: every
// node's in a run without hubs; in one with hubs, the members' (a leaf's origin is held by
// the leaf alone: downstream of its hub it does not exist), and a leaf's own.
func (c *Cluster) heldOrigins(name string) []string {
	if c.hubs == nil {
		return c.names
	}
	if c.hubs.leaf[name] {
		return append(slices.Clone(c.hubs.members), name)
	}
	return c.hubs.members
}

// atOrBelowMark reports whether a hub is applying a format-3 entry at or below its mark of
// the entry's leaf (read before the batch is written): an entry it must count
// leaf_writes_twice for once written.
func (hr *hubRun) atOrBelowMark(s *recordingStore, b *store.Batch) bool {
	if len(b.Txn) == 0 || b.Txn[0] != wire.TxnFormat3 || hr.hubOrigin[s.origin] == "" {
		return false
	}
	v, err := wire.ParseTxn(b.Txn)
	if err != nil {
		return false
	}
	m, ok, _ := s.LeafMark(v.Leaf.Origin) // the in-memory store's reads never fail
	return ok && v.Leaf.Seq <= m.Seq
}

// applied watches one batch a node applied: a format-3 entry of a hub, applied by a node
// other than that hub (so served, so durable at the hub: what a power loss there can take
// back was never seen here), gives the hub seq that carries its leaf write. The same leaf
// write at two seqs of one hub is a crash double. A hub's own format-3 entry takes the seq
// from any local write a power loss took back: that write did not survive.
func (hr *hubRun) applied(s *recordingStore, b *store.Batch) {
	if len(b.Txn) == 0 || b.Txn[0] != wire.TxnFormat3 || b.Skip != nil {
		return
	}
	c := hr.c
	if b.Origin == s.origin {
		delete(c.writes[b.Origin], b.Seq)
		return
	}
	v, err := wire.ParseTxn(b.Txn)
	if err != nil {
		return // applied, so parsed by the replica: never
	}
	w := leafWrite{v.Leaf.Origin, v.Leaf.Seq}
	k := carry{b.Origin, w}
	if at, ok := hr.carried[k]; ok && at != b.Seq {
		s.inv.fail(s.now(), "%s: hub %s's log carries leaf %s's seq %d twice, at seqs %d and %d: re-originated again after a crash",
			s.node, c.originName(b.Origin), c.originName(w.leaf), w.seq, at, b.Seq)
		return
	}
	hr.carried[k] = b.Seq
	if hr.byWrite[w] == nil {
		hr.byWrite[w] = map[wire.OriginID]uint64{}
	}
	hr.byWrite[w][b.Origin] = b.Seq
	hr.reoriginated[w.leaf] = max(hr.reoriginated[w.leaf], w.seq)
}

// pending says why the leaves' writes are not all on the core yet ("" when they are): a
// running leaf whose own log is ahead of what any node saw re-originated of it.
func (hr *hubRun) pending() string {
	for _, name := range hr.leaves {
		n := hr.c.nodes[name]
		if n.Rep == nil {
			continue
		}
		if own := n.Store.Cursor(n.origin).Seq; own > hr.reoriginated[n.origin] {
			return fmt.Sprintf("leaf %s wrote to seq %d, re-originated to %d", name, own, hr.reoriginated[n.origin])
		}
	}
	return ""
}

// checkHubs is the end of a hub run's checks, once it converged (the package comment).
func (c *Cluster) checkHubs(rep *Report) {
	hr := c.hubs
	if hr == nil {
		return
	}
	// A leaf's write checkpoint (docs/design.md §27.7): once the run converged, every
	// leaf's status says its hub has re-originated its every write and the whole core has
	// them, within 20 s: a hub learns the positions of the members it has no connection to
	// only as they are passed on, seconds after the logs agree.
	found := c.checkpointFindings()
	for i := 0; i < 200 && len(found) > 0; i++ {
		c.Run(100 * time.Millisecond)
		found = c.checkpointFindings()
	}
	for _, f := range found {
		c.inv.fail(c.now, "%s", f)
	}
	heads := c.heads()
	// The oracle's end state: last-writer-wins over every surviving write, by conflict
	// identity (checkOracle's want).
	final := map[string]store.Version{}
	deleted := map[string]bool{}
	for o, ws := range c.writes {
		for seq, w := range ws {
			if seq > heads[o] {
				continue
			}
			v := store.Version{Token: w.tok, HLC: w.hlc, Origin: o}
			for _, op := range w.ops {
				k := string(op.Table) + "\x00" + string(op.Key)
				if old, ok := final[k]; ok && store.NewerVersion(old, v) {
					continue
				}
				final[k], deleted[k] = v, op.Kind == wire.OpDelete
			}
		}
	}
	for _, leaf := range hr.leaves {
		o := c.nodes[leaf].origin
		for _, seq := range slices.Sorted(mapsKeys(c.writes[o])) {
			if seq > heads[o] {
				continue // lost with the leaf's power, never acknowledged to anyone
			}
			w := c.writes[o][seq]
			lw := leafWrite{o, seq}
			if len(hr.byWrite[lw]) == 0 && !c.markedOnHub(lw) {
				c.inv.fail(c.now, "leaf %s's write at seq %d was never re-originated", leaf, seq)
				continue
			}
			v := store.Version{Token: w.tok, HLC: w.hlc, Origin: o}
			for _, core := range hr.core {
				n := c.nodes[core]
				if n.Rep == nil {
					continue
				}
				for _, op := range w.ops {
					r, ok, _ := n.Store.Get(op.Table, op.Key) // the in-memory store's reads never fail
					k := string(op.Table) + "\x00" + string(op.Key)
					switch {
					case ok && (r.Version() == v || store.NewerVersion(r.Version(), v)):
					case !ok && deleted[k] && (final[k] == v || store.NewerVersion(final[k], v)):
						// this delete, or a newer one, whose tombstone is dropped
					case ok:
						c.inv.fail(c.now, "%s: leaf %s's write at seq %d of %s/%s (version %d of %s) is not there: it holds the older %d of %s",
							core, leaf, seq, op.Table, op.Key, w.hlc, leaf, r.HLC, c.originName(r.Origin))
					default:
						c.inv.fail(c.now, "%s: leaf %s's write at seq %d of %s/%s (version %d of %s) is not there, nor any newer",
							core, leaf, seq, op.Table, op.Key, w.hlc, leaf)
					}
				}
			}
		}
	}
	// Move doubles: a leaf write in two hubs' logs. A hub that applies another's entry of it
	// (at or below its own mark) counts leaf_writes_twice, exactly once an entry (one that
	// took a base copy past that entry applied none).
	for _, hs := range hr.byWrite {
		if len(hs) > 1 {
			rep.MoveDoubles++
		}
	}
	for _, h := range hr.hubs {
		hc := c.nodes[h].hubCounters()
		rep.LeafTwice += hc.twice
		rep.LeafReoriginated += hc.reoriginated
		rep.LeafDuplicates += hc.duplicate
		if hc.refused > 0 {
			c.inv.fail(c.now, "hub %s refused %d leaf writes: no write of the run is older than the leaf window", h, hc.refused)
		}
		if hc.twice != hr.twice[h] {
			c.inv.fail(c.now, "hub %s counted %d leaf_writes_twice, it applied %d format-3 entries at or below its mark of their leaf", h, hc.twice, hr.twice[h])
		}
	}
	if rep.MoveDoubles > 0 && rep.LeafTwice == 0 && c.inv.copies == 0 {
		c.inv.fail(c.now, "%d leaf writes are in two hubs' logs, the hubs counted no leaf_writes_twice", rep.MoveDoubles)
	}
	// The core's state does not grow with the leaves.
	member := map[wire.OriginID]bool{}
	for _, m := range hr.members {
		member[c.nodes[m].origin] = true
	}
	for _, core := range hr.core {
		n := c.nodes[core]
		if n.Rep == nil {
			continue
		}
		vec, _ := n.Store.Vector()
		rep.CoreVector = max(rep.CoreVector, len(vec.Entries()))
		for _, e := range vec.Entries() {
			if !member[e.Origin] {
				c.inv.fail(c.now, "%s: its vector holds origin %s, which is no member", core, c.originName(e.Origin))
			}
		}
		st := n.Rep.Status(n.clock(c))
		rep.CoreRows = max(rep.CoreRows, len(st.Origins)+len(st.Peers))
		for _, os := range st.Origins {
			if !member[os.Origin] {
				c.inv.fail(c.now, "%s: its status has a row of origin %s, which is no member", core, c.originName(os.Origin))
			}
		}
		for _, p := range st.Peers {
			if hr.leaf[p.Name] {
				c.inv.fail(c.now, "%s: its status has a row of peer %s, a leaf", core, p.Name)
			}
		}
		marks := 0
		_ = n.Store.LeafMarks(func(store.LeafMark) bool { marks++; return true })
		if marks > 0 {
			c.inv.fail(c.now, "%s: a core node keeps %d leaf marks", core, marks)
		}
		rep.CoreBytes = max(rep.CoreBytes, storeBytes(n.Store))
	}
	rep.Messages = c.messages
}

// checkpointFindings is what the running leaves' statuses say wrong of their hubs now.
func (c *Cluster) checkpointFindings() []string {
	var found []string
	for _, name := range c.hubs.leaves {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		own := n.Store.Cursor(n.origin).Seq
		switch h := n.Rep.Status(n.clock(c)).Hub; {
		case h == nil:
			found = append(found, fmt.Sprintf("%s: a leaf whose status has no hub", name))
		case h.Name != n.Hub || !h.Connected:
			found = append(found, fmt.Sprintf("%s: its status names hub %s (connected %v), its hub is %s", name, h.Name, h.Connected, n.Hub))
		case h.ReoriginatedSeq < own || h.CoreSeq < own:
			found = append(found, fmt.Sprintf("%s: wrote to seq %d, its hub says %d re-originated and %d on the core", name, own, h.ReoriginatedSeq, h.CoreSeq))
		}
	}
	return found
}

// markedOnHub reports whether a running hub's mark of the write's leaf is at or above its
// seq: the write was re-originated where no node the oracle watches applied it as an entry
// (a node that took a base copy past it), or refused.
func (c *Cluster) markedOnHub(w leafWrite) bool {
	for _, h := range c.hubs.hubs {
		if n := c.nodes[h]; n.Rep != nil {
			if m, ok, _ := n.Store.LeafMark(w.leaf); ok && m.Seq >= w.seq {
				return true
			}
		}
	}
	return false
}

// storeBytes is what a node's store holds: its records' tables, keys, values and versions,
// and its logs' bytes.
func storeBytes(s *recordingStore) int {
	total := 0
	tables, _ := s.Tables() // the in-memory store's reads never fail
	for _, t := range tables {
		_ = s.Scan(t, nil, func(r store.Record) bool {
			total += len(r.Table) + len(r.Key) + len(r.Value) + 8 + 16 + 40
			return true
		})
	}
	logs, _ := s.Logs()
	for _, l := range logs {
		total += int(l.Bytes)
	}
	return total
}

// hubCounts are the counters of a hub the oracle reads, summed over the node's replicas
// (Node.counted: a crash loses a replica's counters).
type hubCounts struct {
	twice, reoriginated, duplicate, refused uint64
}

func (h hubCounts) plus(cs replica.Counters) hubCounts {
	return hubCounts{h.twice + cs.LeafWritesTwice, h.reoriginated + cs.LeafWritesReoriginated,
		h.duplicate + cs.LeafWritesDuplicate, h.refused + cs.LeafWritesRefused}
}

// keepCounters adds the counters of the node's replica, which a crash loses, to what its
// earlier replicas counted.
func (n *Node) keepCounters() {
	if n.Rep != nil && n.MaxLeaves > 0 {
		n.counted = n.counted.plus(n.Rep.Counters())
	}
}

// hubCounters are the node's hub counters over the run: what its earlier replicas counted
// and what the running one has.
func (n *Node) hubCounters() hubCounts {
	if n.Rep == nil {
		return n.counted
	}
	return n.counted.plus(n.Rep.Counters())
}

// leafOf is the leaf block of the entry (origin, seq) in a node's log, when it is a
// re-originated leaf write (format 3).
func leafOf(s *recordingStore, o wire.OriginID, seq uint64) (wire.LeafBlock, bool) {
	raw, err := s.Entry(o, seq)
	if err != nil || len(raw) == 0 || raw[0] != wire.TxnFormat3 {
		return wire.LeafBlock{}, false
	}
	v, err := wire.ParseTxn(raw)
	if err != nil {
		return wire.LeafBlock{}, false
	}
	return v.Leaf, true
}

// leafWindowDoc is the maps' leaf_window member in a run with hubs ("" in the others).
func (c *Cluster) leafWindowDoc() string {
	if c.hubs == nil {
		return ""
	}
	return fmt.Sprintf(`,"leaf_window":%d`, int(c.hubs.window/time.Second))
}

// owed reports whether a consumer is owed a change of a leaf write: one of the hub entries
// that carry it is after the position the consumer began at, not covered by a reread, and
// survived.
func (hr *hubRun) owed(cs *consumer, w leafWrite, heads map[wire.OriginID]uint64) bool {
	for h, seq := range hr.byWrite[w] {
		if seq > cs.began.Seq(h) && seq > cs.covered[h] && seq <= heads[h] {
			return true
		}
	}
	return false
}
