package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"plait/protocol"
	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// Report is what one random run did and found.
type Report struct {
	Seed        uint64
	Nodes       int
	Links       int
	Topology    string
	Mixed       bool // some node spoke version 1 at some point
	Writes      int
	Disconnects int
	Partitions  int
	Crashes     int
	PowerLosses int    // crashes that lost every write since the node's last Sync
	Upgrades    int    // restarts at a newer protocol version than the node spoke before
	Downgrades  int    // restarts at an older one
	RetainBytes uint64 // the nodes' retention bound (0: the defaults)
	// Copies completed, copies resumed, crashes of a node taking a copy, copied records
	// merged twice, tombstones dropped.
	Copies, Recopied, CopyCrashes  int
	CopyResumes, TombstonesDropped uint64
	CopyHeldBack                   uint64 // records left out of copies served, at the nodes' last starts
	Purged                         uint64 // log entries purged, over every node
	PurgedAnswers                  uint64 // peers answered purged, over every node
	DiskFulls                      int    // a node's disk filled for a while (FillDisk)
	Recoveries                     int    // nodes that recovered from degraded storage
	Injected                       int    // faults that hit an entry
	Detected                       int
	Covered                        int
	Resent                         int
	Closed                         int // dropped entries whose connection closed before anything showed the hole
	Moves                          int // source changes (not first choices)
	Duplicates                     uint64
	Records                        int
	Digest                         string
	Virtual                        time.Duration
	SyncDelay                      time.Duration // nodes held unsynced writes this long (0: not at all)
	Maps                           int           // cluster maps published (adopted where published)
	Placed                         int           // the nodes that carry table t1 (0: nothing placed)
	Requests                       int           // requests between nodes started
	// Links made one-way, links excluding t0 (both from the start), live changes of a
	// link's settings, and the entries sent over a link that does not send that way or
	// excludes a table, each checked against its settings (links.go).
	OneWay, Excluding, LinkChanges, LinkChecked int
	// Locks (locks.go): leases granted and held by clients, their writes acknowledged and
	// refused (lock-lost or given up at the confirm), and home crashes.
	LockGrants, LockAcked, LockLost, LockHomeCrashes int
	// LockDelegated counts the grants a delegate made itself (docs/design.md §25.9).
	LockDelegated int
	// LockVia counts the writes under a lease acknowledged through a node other than the
	// holder's, LockViaDelegated those under a lease its delegate granted.
	LockVia, LockViaDelegated int
	// LockBeyond is 1 for a lock run with a clock beyond the bounds, LockOverlaps the
	// overlaps its oracle saw the homes see (locks.go).
	LockBeyond, LockOverlaps int
	// Change feeds (feeds.go): changes and rereads the consumers were given (the rereads
	// by reason: a run naming the table, a copy, a repair), their disconnects, resumes,
	// resumes the node was behind for, and purged restarts.
	FeedChanges, FeedRereads, FeedDisconnects, FeedResumes, FeedBehind, FeedPurged int
	FeedSkipped, FeedCopy, FeedRepair                                              int
	// Fan-in hubs (hubs.go): the run's hubs and leaves (0: a run without), the leaves'
	// acknowledged writes, their moves to another hub, the hubs' counters over the run
	// (re-originated, duplicates from a leaf, applied twice), the leaf writes two hubs'
	// logs carry (move doubles), and a core node's cost: its vector's entries, its status's
	// origin and peer rows, its store's bytes; and the messages delivered in the run.
	Hubs, Leaves, LeafWrites, LeafMoves, MoveDoubles int
	LeafReoriginated, LeafDuplicates, LeafTwice      uint64
	CoreVector, CoreRows, CoreBytes, Messages        int
	// FramesOut and FramesIn are the frames the run's sessions sent and were delivered,
	// by type (traffic.go); the summary prints the frames delivered per write.
	FramesOut, FramesIn protocol.FrameCounts
	Failures            []string
}

func (r Report) String() string {
	return fmt.Sprintf("seed %d: %d nodes %s (%d links) mixed=%v writes=%d disconnects=%d partitions=%d crashes=%d (power %d) upgrades=%d downgrades=%d faults=%d detected=%d covered=%d resent=%d closed=%d moves=%d duplicates=%d retain-bytes=%d purged=%d purged-answers=%d copies=%d (resumed %d, crashed %d) tombstones-dropped=%d disk-fulls=%d (recovered %d) maps=%d placed=%d requests=%d one-way=%d excluding=%d link-changes=%d link-checked=%d lock-grants=%d lock-acked=%d lock-lost=%d lock-home-crashes=%d lock-beyond=%d lock-overlaps=%d feed-changes=%d feed-rereads=%d feed-disconnects=%d feed-resumes=%d feed-behind=%d feed-purged=%d records=%d digest=%s virtual=%s sync-delay=%s frames=%d frames-per-write=%.1f",
		r.Seed, r.Nodes, r.Topology, r.Links, r.Mixed, r.Writes, r.Disconnects, r.Partitions, r.Crashes, r.PowerLosses, r.Upgrades, r.Downgrades,
		r.Injected, r.Detected, r.Covered, r.Resent, r.Closed, r.Moves, r.Duplicates, r.RetainBytes, r.Purged, r.PurgedAnswers, r.Copies, r.CopyResumes, r.CopyCrashes, r.TombstonesDropped, r.DiskFulls, r.Recoveries, r.Maps, r.Placed, r.Requests, r.OneWay, r.Excluding, r.LinkChanges, r.LinkChecked, r.LockGrants, r.LockAcked, r.LockLost, r.LockHomeCrashes, r.LockBeyond, r.LockOverlaps, r.FeedChanges, r.FeedRereads, r.FeedDisconnects, r.FeedResumes, r.FeedBehind, r.FeedPurged, r.Records, r.Digest, r.Virtual, r.SyncDelay, r.Frames(), r.FramesPerWrite()) + r.hubString()
}

func (r Report) hubString() string {
	if r.Hubs == 0 {
		return ""
	}
	return fmt.Sprintf(" hubs=%d leaves=%d leaf-writes=%d leaf-moves=%d reoriginated=%d leaf-duplicates=%d move-doubles=%d twice=%d core-vector=%d core-rows=%d core-bytes=%d messages=%d",
		r.Hubs, r.Leaves, r.LeafWrites, r.LeafMoves, r.LeafReoriginated, r.LeafDuplicates, r.MoveDoubles, r.LeafTwice, r.CoreVector, r.CoreRows, r.CoreBytes, r.Messages)
}

// SimLimits are small session limits, so that the simulator's small transactions fill
// the flow-control windows during catch-ups: about 30 entries in flight per version-2
// channel and 120 per connection, and 4 KiB unacknowledged on a version-1 connection.
var SimLimits = protocol.Limits{
	MaxFrameBody:     1 << 10,
	MaxMessage:       64 << 10,
	MaxSendBuffer:    8 << 10,
	MaxUnackedBytes:  4 << 10,
	MaxChannelBuffer: 4 << 10,
	MaxSessionBuffer: 16 << 10,
}

// Topologies the random runs draw from.
var Topologies = []string{"chain", "star", "mesh", "tree", "ring", "diamond"}

// Random runs one seeded schedule: a topology of 3 to 8 nodes, writes with overlapping
// keys and deletes on every node, disconnects, partitions, crashes with restarts (some of
// them rolling upgrades or downgrades in mixed-version runs) and faulty links that drop or
// corrupt one entry; then it heals everything and checks convergence. newSession may be
// nil (the native core).
func Random(seed uint64, opts Options) Report {
	opts.Seed = seed
	if opts.Limits == (protocol.Limits{}) {
		opts.Limits = SimLimits
	}
	if seed%2 == 0 && opts.SyncDelay == 0 {
		// Half the runs serve local writes only once a simulated group commit made them
		// durable (replica.Config.HoldUnsynced).
		opts.SyncDelay = time.Duration(1+seed%20) * time.Millisecond
	}
	if seed%3 == 1 && opts.RetainAge == 0 && opts.RetainBytes == 0 {
		// A third of the runs purge their logs as they go: a few KiB of logs, entries of a
		// few seconds. Holds outlast every partition and crash of a run, so that no node
		// falls below a floor it would need a copy to pass.
		opts.RetainBytes = 2048 + (seed%7)*1024
		opts.RetainAge = time.Duration(2+seed%5) * time.Second
		opts.RetainHold = 30 * time.Second
		if seed%6 == 1 {
			// Half of them hold for 3 s only, and keep one node away longer (below): it
			// comes back below its peers' floors and takes a base copy.
			opts.RetainHold = 3 * time.Second
		}
		opts.CopyChunk = int(min(1024, opts.Limits.MaxFrameBody))
	}
	if seed%5 == 4 && opts.Locks.MaxTTL == 0 {
		// The lock runs' homes (locks.go) grant leases of 2 s at most: a restarted home's
		// quarantine then ends within the run.
		opts.Locks.MaxTTL = lockTTL
		if seed%10 == 9 {
			// Half of them delegate (docs/design.md §25.9): a node's repeat acquires of a
			// key it holds the delegation of are granted by its deputy, with no frame.
			opts.Locks.MaxDelegations, opts.Locks.DelegationBlock, opts.Locks.MaxDelegationTTL = 64, 64, 2*lockTTL
		}
	}
	c := New(opts)
	rng := c.Rand()
	rep := Report{Seed: seed, SyncDelay: opts.SyncDelay, RetainBytes: opts.RetainBytes}
	if opts.Leaves > 0 || opts.Nodes == 0 && hubSeed(seed) {
		return c.randomHubs(&rep)
	}
	n := 3 + rng.IntN(6)
	if opts.Nodes > 0 {
		n = opts.Nodes
	}
	rep.Nodes = n
	// Runs with retention speak version 2 and later only: a version-1 peer that resumes
	// below an arrival floor is answered purged, and can take no base copy (docs/design.md
	// §14). The draws stay the same, so the other runs keep their schedules.
	retaining := opts.RetainBytes > 0
	rep.Mixed = rng.IntN(4) == 0 && !retaining
	names := make([]string, n)
	versions := map[string]uint64{} // the protocol-max each node starts with next (0: the newest)
	anyV1 := false
	for i := range names {
		names[i] = nodeName(i)
		var maxV uint64
		if rep.Mixed && rng.IntN(3) == 0 {
			maxV, anyV1 = 1, true
		}
		versions[names[i]] = maxV
		if err := c.AddNode(names[i], maxV); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			return rep
		}
	}
	rep.Topology = Topologies[rng.IntN(len(Topologies))]
	for _, e := range Edges(rep.Topology, n) {
		_ = c.Connect(names[e[0]], names[e[1]]) // refused only for unknown nodes or a second link: neither here
	}
	for range rng.IntN(3) { // redundant paths, so that relays can fail over
		a, b := rng.IntN(n), rng.IntN(n)
		if a != b && c.Link(names[a], names[b]) == nil {
			_ = c.Connect(names[a], names[b]) // a != b and no link yet: it cannot be refused
		}
	}
	rep.Links = len(c.links)
	for _, l := range c.sortedLinks() {
		l.MinDelay = time.Duration(1+rng.IntN(5)) * time.Millisecond
		l.MaxDelay = l.MinDelay + time.Duration(rng.IntN(30))*time.Millisecond
	}
	links := c.sortedLinks()
	if !rep.Mixed && seed%5 == 2 {
		// A fifth of the version-4 runs place table t1 on some of their nodes, from before
		// the first write (placement.go). Drawn from a source of its own, so that the
		// run's other draws, and the schedules of seeds without placement, stay the same.
		prng := rand.New(rand.NewPCG(seed, 0x706c616365))
		carriers := slices.Clone(names)
		prng.Shuffle(len(carriers), func(i, j int) { carriers[i], carriers[j] = carriers[j], carriers[i] })
		carriers = carriers[:1+prng.IntN(n-1)]
		slices.Sort(carriers)
		// Half of them change it with each later map (maps of generation 2 and up, drawn
		// in mapsAndRequests): a node added to t1, one removed, or one moved.
		ever := map[string]bool{}
		for _, cr := range carriers {
			ever[cr] = true
		}
		if prng.IntN(2) == 0 && changingPlacement {
			c.place.changed = true
			cur := slices.Clone(carriers)
			for g := uint64(2); g <= 8; g++ {
				cur = slices.Clone(cur) // the last generation's is kept as it is
				out := slices.DeleteFunc(slices.Clone(names), func(x string) bool { return slices.Contains(cur, x) })
				switch k := prng.IntN(3); {
				case k == 0 && len(out) > 0: // added
					cur = append(cur, out[prng.IntN(len(out))])
				case k == 1 && len(cur) > 1: // removed
					i := prng.IntN(len(cur))
					cur = slices.Delete(cur, i, i+1)
				case len(out) > 0: // moved
					cur[prng.IntN(len(cur))] = out[prng.IntN(len(out))]
				}
				cur = slices.Clone(cur)
				slices.Sort(cur)
				c.PlaceGeneration(g, map[string][]string{"t1": cur})
				for _, cr := range cur {
					ever[cr] = true
				}
			}
		}
		// A node that does not carry t1 relays none of its entries: the carriers reach one
		// another through carriers (docs/contract.md §23.3), here by links of their own
		// between every node that carries it at some generation, which the faults below
		// leave alone (they draw from the links made before).
		all := slices.Sorted(maps.Keys(ever))
		for i, x := range all {
			for _, y := range all[i+1:] {
				if c.Link(x, y) == nil {
					_ = c.Connect(x, y) // two nodes of the run, no link yet: not refused
					l := c.Link(x, y)
					l.MinDelay = time.Duration(1+prng.IntN(5)) * time.Millisecond
					l.MaxDelay = l.MinDelay + time.Duration(prng.IntN(30))*time.Millisecond
				}
			}
		}
		c.SetPlacement(map[string][]string{"t1": carriers})
		rep.Placed = len(carriers)
		doc := c.MapDoc(1, names)
		for _, name := range names {
			if _, err := c.PublishMap(name, doc); err != nil {
				rep.Failures = append(rep.Failures, err.Error())
				return rep
			}
		}
	}

	const busy = 15 * time.Second
	if !rep.Mixed && seed%5 == 4 {
		// A fifth of the version-4 runs (none of them placing tables or setting links) name
		// lock homes and run clients that increment counters under locks (locks.go).
		c.drawLocks(&rep, seed, names, c.Now().Add(busy))
	}
	if !rep.Mixed && seed%5 == 3 {
		// A fifth of the version-4 runs (none of them placing tables) make links one-way
		// and exclude t0 from one, and change a link's settings once while they run
		// (links.go). Drawn from a source of their own, as placement is.
		c.drawLinks(&rep, seed, busy)
	}
	end := c.Now().Add(busy)
	if retaining {
		// Every origin writes first, before any fault: each node then subscribes to each
		// origin at some peer, which holds it from there. A node that never subscribed to
		// an origin before its peers purged it could only catch up by a base copy.
		for i, name := range names {
			c.At(c.Now().Add(time.Duration(50+10*i)*time.Millisecond), func() {
				if seq, _ := c.Write(name, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("first-" + name), Value: []byte("1")}}); seq > 0 {
					rep.Writes++
				}
			})
		}
	}
	// Writes: 2 to 4 writers at a time over a small key space, so keys collide.
	for t := c.Now().Add(200 * time.Millisecond); t.Before(end); t = t.Add(time.Duration(10+rng.IntN(60)) * time.Millisecond) {
		node := names[rng.IntN(n)]
		ops := randomOps(c, rng.IntN(3)+1)
		if retaining {
			// Values of 100 bytes or more: a copy then takes several windows of credit, so
			// that a crash can land in its middle. No draw is added.
			for i := range ops {
				if ops[i].Kind == wire.OpPut {
					ops[i].Value = append(ops[i].Value, make([]byte, 100)...)
				}
			}
		}
		c.At(t, func() {
			if seq, _ := c.Write(node, ops); seq > 0 {
				rep.Writes++
			}
		})
	}
	c.drawFaults(&rep, names, links, versions, &anyV1, end)
	if retaining {
		c.awayAndCopies(&rep, names, opts.RetainHold < 30*time.Second)
	}
	c.diskFills(&rep, names, end)
	c.mapsAndRequests(&rep, names, end)
	c.drawFeeds(&rep, seed, names, end)
	// Only runs where no node ever speaks version 1 promise that nothing is received twice.
	c.SetV2Only(!anyV1)
	c.RunUntil(end)
	c.Restore()
	return c.finishRandom(&rep, names, anyV1)
}

// drawFaults draws a random run's faults, about one a second until end: disconnects and
// partitions of its links, crashes of its nodes (power losses among them with a sync
// delay; rolling upgrades and downgrades in mixed runs, which versions and anyV1 follow),
// and links that drop or corrupt one entry.
func (c *Cluster) drawFaults(rep *Report, names []string, links []*Link, versions map[string]uint64, anyV1 *bool, end time.Time) {
	rng := c.Rand()
	n := len(names)
	for t := c.Now().Add(time.Second); t.Before(end); t = t.Add(time.Duration(300+rng.IntN(1400)) * time.Millisecond) {
		l := links[rng.IntN(len(links))]
		switch k := rng.IntN(100); {
		case k < 30:
			c.At(t, func() { rep.Disconnects++; _ = c.Disconnect(l.From, l.To) })
		case k < 45:
			d := time.Duration(500+rng.IntN(3000)) * time.Millisecond
			c.At(t, func() { rep.Partitions++; _ = c.SetLink(l.From, l.To, false) })
			c.At(t.Add(d), func() { _ = c.SetLink(l.From, l.To, true) })
		case k < 65:
			node := names[rng.IntN(n)]
			d := time.Duration(200+rng.IntN(4000)) * time.Millisecond
			version := versions[node]
			power := c.opts.SyncDelay > 0 && rng.IntN(2) == 0
			if rep.Mixed && rng.IntN(2) == 0 {
				// A rolling upgrade from version 1 to the newest, or a downgrade to 1.
				if version == 1 {
					version = 0
				} else {
					version = 1
				}
				versions[node] = version
				*anyV1 = *anyV1 || version == 1
			}
			c.At(t, func() {
				if c.Node(node).Rep != nil {
					rep.Crashes++
					// The node runs (checked above), so neither can be refused.
					if power {
						rep.PowerLosses++
						_ = c.PowerLoss(node)
					} else {
						_ = c.Crash(node)
					}
					c.At(c.Now().Add(d), func() {
						if c.Node(node).Rep == nil {
							switch before, after := speaks(c.Node(node).MaxVersion), speaks(version); {
							case after > before:
								rep.Upgrades++
							case after < before:
								rep.Downgrades++
							}
							_ = c.Restart(node, version) // it is down (checked above): not refused
						}
					})
				}
			})
		case k < 85:
			from, to := l.From, l.To
			if rng.IntN(2) == 0 {
				from, to = to, from
			}
			c.At(t, func() { _ = c.Inject(from, to, Drop) })
		default:
			from, to := l.From, l.To
			if rng.IntN(2) == 0 {
				from, to = to, from
			}
			c.At(t, func() { _ = c.Inject(from, to, Corrupt) })
		}
	}
}

// finishRandom ends a random run once its schedule ran and everything was restored: it
// runs until the nodes converge, checks the end state and fills in the report.
func (c *Cluster) finishRandom(rep *Report, names []string, anyV1 bool) Report {
	opts := c.opts
	if anyV1 {
		// Version 1 has no heads: an entry dropped at the tail of an origin's stream is
		// revealed only by that origin's next entry. Each origin with a dropped entry not
		// yet accounted for writes once more (version 2 needs no such help: its stall rule
		// finds the hole, and this would hide a broken one).
		for i, name := range names {
			if !c.inv.unresolvedDrop(c.Node(name).origin) {
				continue
			}
			c.At(c.Now().Add(time.Duration(i)*time.Millisecond), func() {
				if seq, _ := c.Write(name, randomOps(c, 1)); seq > 0 {
					rep.Writes++
				}
			})
		}
	}
	converged := c.stabilizeAllUp(2 * time.Minute)
	if converged && c.rewriteDiverged(rep, names) {
		converged = c.stabilizeAllUp(2 * time.Minute)
	}
	if !converged {
		_, why := c.Converged()
		if down := c.down(); down != "" {
			why = down + " is down"
		} else if copying := c.copyRunning(); copying != "" && why == "" {
			why = copying + " still takes a base copy"
		}
		c.inv.fail(c.now, "did not converge within 2 minutes of healing: %s", why)
	}
	rep.Records, rep.Digest = c.CheckConverged()
	c.checkMaps()
	c.checkLocks(rep)
	c.checkFeeds(rep)
	c.checkHubs(rep)
	f := c.Faults()
	rep.Injected, rep.Detected, rep.Covered, rep.Resent, rep.Closed = f.Injected, f.Detected, f.Covered, f.Resent, f.Closed
	for _, name := range names {
		nd := c.Node(name)
		for _, m := range nd.moves {
			if m.From != "" && m.From != m.To {
				rep.Moves++
			}
		}
		if nd.Rep != nil {
			cs := nd.Rep.Counters()
			rep.Duplicates += cs.DuplicatesReceived
			rep.Purged += cs.EntriesPurged
			rep.PurgedAnswers += cs.PurgedAnswers
			rep.CopyResumes += cs.CopiesResumed
			rep.CopyHeldBack += cs.CopyHeldBack
			rep.TombstonesDropped += cs.TombstonesDropped
		}
		rep.Recoveries += nd.Recoveries
	}
	if opts.Inspect != nil {
		opts.Inspect(c)
	}
	rep.Copies, rep.Recopied = c.inv.copies, c.inv.recopied
	if c.lk != nil {
		rep.LinkChecked = c.lk.checked
	}
	if rep.Recopied > 0 {
		// Each chunk's records and cursor are one write, and a resume starts after the
		// cursor: nothing is merged twice (the bound is about one chunk a resume).
		c.inv.fail(c.now, "%d copied records were merged again after a resume", rep.Recopied)
	}
	rep.Virtual = c.Now().Sub(Epoch)
	c.reportTraffic(rep)
	rep.Failures = c.Failures()
	return *rep
}

// diskFills adds, drawn after every other draw of the run, one node whose disk fills for
// 1 to 4 s at a random time: it degrades (its writes refused, nothing applied or
// acknowledged) and recovers once the space is back.
func (c *Cluster) diskFills(rep *Report, names []string, end time.Time) {
	rng := c.Rand()
	node := names[rng.IntN(len(names))]
	span := max(end.Sub(c.Now())-6*time.Second, time.Second)
	at := c.Now().Add(time.Second + time.Duration(rng.Int64N(int64(span))))
	d := time.Duration(1000+rng.IntN(3000)) * time.Millisecond
	c.At(at, func() {
		rep.DiskFulls++
		c.FillDisk(node, d)
	})
}

// awayAndCopies adds a retention run's copy faults, drawn after every other draw of the
// run: with short holds, one node is cut off from all its links for 5 to 8 s, so that it
// returns below its peers' floors; and a node taking a copy crashes in its middle.
func (c *Cluster) awayAndCopies(rep *Report, names []string, away bool) {
	rng := c.Rand()
	if away {
		node := names[rng.IntN(len(names))]
		at := c.Now().Add(time.Duration(2000+rng.IntN(3000)) * time.Millisecond)
		d := time.Duration(5000+rng.IntN(3000)) * time.Millisecond
		var cut []*Link
		for _, l := range c.sortedLinks() {
			if l.From == node || l.To == node {
				cut = append(cut, l)
			}
		}
		c.At(at, func() {
			rep.Partitions++
			for _, l := range cut {
				_ = c.SetLink(l.From, l.To, false) // a known link: never refused
			}
		})
		c.At(at.Add(d), func() {
			for _, l := range cut {
				_ = c.SetLink(l.From, l.To, true)
			}
		})
	}
	// The second chunk of a copy crashes the node taking it (twice a run at most), which
	// restarts 300 ms later and resumes the copy.
	crashes := 0
	for _, name := range names {
		c.Node(name).Store.onChunk = func(node string, chunks int) {
			if chunks != 2 || crashes >= 2 {
				return
			}
			crashes++
			c.At(c.Now(), func() {
				if c.Node(node).Rep == nil {
					return
				}
				rep.Crashes++
				rep.CopyCrashes++
				_ = c.Crash(node) // it runs: not refused
				c.At(c.Now().Add(300*time.Millisecond), func() {
					if c.Node(node).Rep == nil {
						_ = c.Restart(node, c.Node(node).MaxVersion)
					}
				})
			})
		}
	}
}

// stabilizeAllUp is Stabilize over every node: a node down for a while (the copy crash
// above may come during the healing, and restarts 300 ms later) holds entries the others
// lack, so the running ones agreeing is not yet the end state.
func (c *Cluster) stabilizeAllUp(limit time.Duration) bool {
	deadline := c.now.Add(limit)
	for {
		if ok, _ := c.Converged(); ok && c.down() == "" && c.copyRunning() == "" {
			return true
		}
		if !c.now.Before(deadline) {
			return false
		}
		c.Run(50 * time.Millisecond)
	}
}

// rewriteDiverged has each origin that a node still shows diverged write once more, and
// reports whether any did. An entry damaged on its way at the tail of an origin's stream,
// after the node had applied that seq from another source, stays a divergence until the
// origin's next entry is applied (docs/contract.md §8.2 diverged); a run whose origins
// stop writing there would end on it.
func (c *Cluster) rewriteDiverged(rep *Report, names []string) bool {
	wrote := false
	for _, name := range names {
		o := c.nodes[name].origin
		if slices.ContainsFunc(names, func(other string) bool {
			n := c.nodes[other]
			return n.Rep != nil && n.Rep.Origin(o).Diverged
		}) {
			if seq, _ := c.Write(name, randomOps(c, 1)); seq > 0 {
				rep.Writes++
				wrote = true
			}
		}
	}
	return wrote
}

// copyRunning names a node that takes a base copy ("" when none): a copy still running
// once the logs agree (it was asked for while the node was below its peers' floors) ends
// the run early, with the node's copy source catching-up (docs/contract.md §8.7).
func (c *Cluster) copyRunning() string {
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		if n.Store.copying() {
			return name
		}
		for _, p := range n.Rep.Status(n.clock(c)).Peers {
			if p.Copy != nil && p.Copy.Direction == "receiving" {
				return name
			}
		}
	}
	return ""
}

// down names a node that is not running and not stopped for good ("" when none).
func (c *Cluster) down() string {
	for _, name := range c.names {
		if n := c.nodes[name]; n.Rep == nil && !n.failed {
			return name
		}
	}
	return ""
}

// changingPlacement turns on the runs whose later maps add t1 to nodes, remove it from
// others and move it. Off, a run changes no placement: kept as a switch to tell a failure
// of the moves from one of the rest.
const changingPlacement = true

func randomOps(c *Cluster, n int) []wire.Op {
	rng := c.Rand()
	ops := make([]wire.Op, n)
	for i := range ops {
		key := []byte(fmt.Sprintf("k%02d", rng.IntN(24)))
		table := []byte("t" + fmt.Sprint(rng.IntN(2)))
		if rng.IntN(6) == 0 {
			ops[i] = wire.Op{Kind: wire.OpDelete, Table: table, Key: key}
			continue
		}
		ops[i] = wire.Op{Kind: wire.OpPut, Table: table, Key: key, Value: []byte(fmt.Sprintf("v%d", rng.Uint32()))}
	}
	return ops
}

// Edges returns a topology's links between nodes 0..n-1, each as (dialer, listener).
func Edges(topology string, n int) [][2]int {
	var es [][2]int
	switch topology {
	case "chain":
		for i := 1; i < n; i++ {
			es = append(es, [2]int{i, i - 1})
		}
	case "star":
		for i := 1; i < n; i++ {
			es = append(es, [2]int{i, 0})
		}
	case "mesh":
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				es = append(es, [2]int{j, i})
			}
		}
	case "tree":
		for i := 1; i < n; i++ {
			es = append(es, [2]int{i, (i - 1) / 2})
		}
	case "ring":
		for i := 0; i < n; i++ {
			es = append(es, [2]int{(i + 1) % n, i})
		}
	case "diamond": // 0 reaches the rest through two relays 1 and 2; the rest hang off both
		es = append(es, [2]int{1, 0}, [2]int{2, 0})
		for i := 3; i < n; i++ {
			es = append(es, [2]int{i, 1}, [2]int{i, 2})
		}
	}
	return es
}

// nodeName names node i: A to Z, then A1, B1, ...
func nodeName(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return string(rune('A'+i%26)) + fmt.Sprint(i/26)
}

// speaks is the protocol version a node started with protocol-max maxVersion speaks with
// a peer of the current build: maxVersion, or the newest for 0.
func speaks(maxVersion uint64) uint64 {
	if maxVersion == 0 {
		return handshake.Implemented().Max
	}
	return maxVersion
}
