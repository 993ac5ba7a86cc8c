package sim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"plait/protocol/feed"
	"plait/protocol/wire"
)

// Change feeds under the simulator (docs/design.md §26.7): every random run has one
// consumer of table t1's feed per node. A consumer reads with feed.StartWith and
// Reader.Next against its node's store at random steps, as a shell would on its loop, with
// random bounds; it drops its reader at random (a disconnect), and resumes from the last
// position it was given — the last event's, or the reader's own after a read, as a
// heartbeat's id gives it — on the same node or on another. A crash, a power loss or a
// recovery of its node drops its reader too. A resume the node is behind (BehindError) is
// tried again at a later step; a purged start or read (PurgedError) is a reread: the
// consumer reads the table again (a listing) and goes on from the node's applied
// positions, as a consumer told `purged` does.
//
// The oracle: each consumer is given every acknowledged change of t1 after the position it
// first started at exactly once, per origin in seq order, with the operations its origin
// wrote — or is told to reread past it (a reread event, or a purged restart, covering
// every seq up to the position it carries).

// feedTable is the table the consumers follow: placed in the runs that place tables, so
// that fills and runs held as skips naming it reach its feeds.
var feedTable = []byte("t1")

// consumer is one consumer of feedTable's feed.
type consumer struct {
	name  string
	node  string // the node it reads from (now, or next)
	r     *feed.Reader
	at    readerAt
	pos   feed.Position // the last position it was given
	began feed.Position // the position it first started at
	// last: per origin, the last seq it was given a change of or told to reread past.
	last    map[wire.OriginID]uint64
	covered map[wire.OriginID]uint64 // per origin, the highest seq a reread covers
	got     map[wire.OriginID]map[uint64]bool
	// gotLeaf: the leaf writes it was given a change of, by leaf origin and leaf seq: a
	// format-3 entry's (hubs.go).
	gotLeaf map[leafWrite]bool
	started bool
}

// readerAt is what a reader was started on: a node's store in one of its runs.
type readerAt struct {
	store  *recordingStore
	starts int
}

// feedRun is the run's consumers and what they counted.
type feedRun struct {
	consumers []*consumer
	rng       *rand.Rand
}

// drawFeeds schedules the consumers' steps over the busy part of the run, from a source of
// their own: the run's other draws, and so its schedule, stay the same. A consumer only
// reads a store, so nothing else of the run changes either.
func (c *Cluster) drawFeeds(rep *Report, seed uint64, names []string, end time.Time) {
	fr := &feedRun{rng: rand.New(rand.NewPCG(seed, 0x6665656473))}
	c.feeds = fr
	for i, name := range names {
		cs := &consumer{name: fmt.Sprintf("feed-%d", i), node: name, last: map[wire.OriginID]uint64{},
			covered: map[wire.OriginID]uint64{}, got: map[wire.OriginID]map[uint64]bool{}, gotLeaf: map[leafWrite]bool{}}
		fr.consumers = append(fr.consumers, cs)
		for t := c.Now().Add(time.Duration(100+fr.rng.IntN(400)) * time.Millisecond); t.Before(end); t = t.Add(time.Duration(50+fr.rng.IntN(450)) * time.Millisecond) {
			k := fr.rng.IntN(100)
			other := names[fr.rng.IntN(len(names))]
			maxEvents, maxBytes, heartbeat := 1+fr.rng.IntN(20), 64+fr.rng.IntN(4096), fr.rng.IntN(2) == 0
			c.At(t, func() {
				switch {
				case k < 8: // a disconnect: it resumes at its next step
					if cs.r != nil {
						rep.FeedDisconnects++
					}
					cs.r = nil
				case k < 16: // a disconnect, and it resumes on another node
					if cs.r != nil {
						rep.FeedDisconnects++
					}
					cs.r, cs.node = nil, other
				default:
					c.feedStep(rep, cs, maxEvents, maxBytes, heartbeat)
				}
			})
		}
	}
}

// feedStep is one read of a consumer: it (re)starts its reader when it has none, then
// reads one chunk.
func (c *Cluster) feedStep(rep *Report, cs *consumer, maxEvents, maxBytes int, heartbeat bool) bool {
	n := c.nodes[cs.node]
	if n.Rep == nil {
		cs.r = nil
		return false
	}
	if cs.r != nil && (cs.at.store != n.Store || cs.at.starts != n.starts) {
		cs.r = nil // the node crashed, lost power or recovered since: the connection is gone
	}
	in := n.Rep.FeedInputs(feedTable)
	if cs.r == nil {
		since := feed.Since{Kind: feed.SincePosition, Position: cs.pos}
		if !cs.started {
			since = feed.Since{Kind: feed.SinceNow}
		}
		r, err := feed.StartWith(n.Store, feedTable, since, in)
		var be *feed.BehindError
		var pe *feed.PurgedError
		switch {
		case errors.As(err, &be):
			rep.FeedBehind++
			return false // tried again at a later step
		case errors.As(err, &pe):
			c.feedPurged(rep, cs, n.Name)
			return false
		case err != nil:
			c.inv.fail(c.now, "%s: start on %s: %v", cs.name, n.Name, err)
			return false
		}
		if !cs.started {
			cs.started, cs.pos, cs.began = true, r.Position(), r.Position()
			for _, e := range cs.pos {
				cs.last[e.Origin] = e.Seq
			}
		} else {
			rep.FeedResumes++
		}
		cs.r, cs.at = r, readerAt{store: n.Store, starts: n.starts}
	}
	evs, err := cs.r.Next(n.Store, in, maxEvents, maxBytes)
	for i := range evs {
		c.feedEvent(rep, cs, &evs[i])
	}
	var pe *feed.PurgedError
	switch {
	case errors.As(err, &pe):
		c.feedPurged(rep, cs, n.Name)
		return false
	case err != nil:
		c.inv.fail(c.now, "%s: read on %s: %v", cs.name, n.Name, err)
		cs.r = nil
		return false
	}
	if heartbeat {
		cs.pos = cs.r.Position()
	}
	return cs.r.CaughtUp()
}

// feedEvent checks one event a consumer is given against what it was given before and
// what the origins wrote, and takes it.
func (c *Cluster) feedEvent(rep *Report, cs *consumer, ev *feed.Event) {
	switch ev.Kind {
	case feed.Reread:
		rep.FeedRereads++
		switch ev.Reason {
		case feed.ReasonSkipped:
			rep.FeedSkipped++
		case feed.ReasonCopy:
			rep.FeedCopy++
		case feed.ReasonRepair:
			rep.FeedRepair++
		}
		for _, e := range ev.Position {
			cs.covered[e.Origin] = max(cs.covered[e.Origin], e.Seq)
			cs.last[e.Origin] = max(cs.last[e.Origin], e.Seq)
		}
	case feed.Change:
		rep.FeedChanges++
		o, s := ev.Origin, ev.Seq
		if s <= cs.last[o] {
			c.inv.fail(c.now, "%s: given seq %d of origin %s after seq %d: a change given twice or out of order", cs.name, s, c.originName(o), cs.last[o])
		}
		cs.last[o] = max(cs.last[o], s)
		if cs.got[o] == nil {
			cs.got[o] = map[uint64]bool{}
		}
		cs.got[o][s] = true
		w, ok := c.writes[o][s]
		hlc, by := ev.HLC, ""
		if lb, leaf := leafOf(c.nodes[cs.node].Store, o, s); leaf {
			by = fmt.Sprintf(" (leaf %s's seq %d)", c.originName(lb.Origin), lb.Seq)
			// A hub's re-originated entry: its change is the leaf's write, found by its
			// leaf origin and leaf seq, at the leaf's HLC.
			cs.gotLeaf[leafWrite{lb.Origin, lb.Seq}] = true
			w, ok = c.writes[lb.Origin][lb.Seq]
			hlc = lb.HLC
		}
		if ok {
			var ops []wire.Op
			for _, op := range w.ops {
				if bytes.Equal(op.Table, feedTable) {
					ops = append(ops, op)
				}
			}
			same := len(ops) == len(ev.Ops) && w.hlc == hlc
			for i := 0; same && i < len(ops); i++ {
				same = ops[i].Kind == ev.Ops[i].Kind && bytes.Equal(ops[i].Key, ev.Ops[i].Key) && bytes.Equal(ops[i].Value, ev.Ops[i].Value)
			}
			if !same {
				c.inv.fail(c.now, "%s: seq %d of origin %s%s given as %d operations at %d, the origin wrote %d of %s at %d", cs.name, s, c.originName(o), by, len(ev.Ops), hlc, len(ops), feedTable, w.hlc)
			}
		}
	}
	cs.pos = ev.Position
}

// feedPurged is a consumer told `purged`: it reads the table again (here: everything up to
// the node's applied positions is covered) and goes on from there.
func (c *Cluster) feedPurged(rep *Report, cs *consumer, node string) {
	n := c.nodes[node]
	rep.FeedPurged++
	r, err := feed.StartWith(n.Store, feedTable, feed.Since{Kind: feed.SinceNow}, n.Rep.FeedInputs(feedTable))
	if err != nil {
		c.inv.fail(c.now, "%s: start now on %s: %v", cs.name, node, err)
		cs.r = nil
		return
	}
	c.feedEvent(rep, cs, &feed.Event{Kind: feed.Reread, Reason: "purged", Position: r.Position()})
	cs.r, cs.at = r, readerAt{store: n.Store, starts: n.starts}
}

// checkFeeds ends every consumer's feed after the run converged: it reads on a running
// node until it is level with it, then must have been given, or told to reread past, every
// acknowledged change of t1 after the position it began at.
func (c *Cluster) checkFeeds(rep *Report) {
	if c.feeds == nil {
		return
	}
	heads := c.heads()
	for _, cs := range c.feeds.consumers {
		if !cs.started {
			continue
		}
		if c.nodes[cs.node].Rep == nil {
			for _, name := range c.names {
				if c.nodes[name].Rep != nil {
					cs.r, cs.node = nil, name
					break
				}
			}
		}
		level := false
		for i := 0; i < 10000 && !level; i++ {
			level = c.feedStep(rep, cs, 100, 1<<20, true)
		}
		if !level {
			c.inv.fail(c.now, "%s: not level with %s after 10000 reads at %s", cs.name, cs.node, feed.Format(cs.pos))
			continue
		}
		vec, _ := c.nodes[cs.node].Store.Vector()
		for _, e := range vec.Entries() {
			if got := cs.r.Position().Seq(e.Origin); got != e.Seq {
				c.inv.fail(c.now, "%s: level with %s at seq %d of origin %s, which it applied to %d", cs.name, cs.node, got, c.originName(e.Origin), e.Seq)
			}
		}
		for _, o := range slices.SortedFunc(mapsKeys(c.writes), func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) }) {
			missed := 0
			var first uint64
			for s, w := range c.writes[o] {
				if s > heads[o] || !slices.ContainsFunc(w.ops, func(op wire.Op) bool { return bytes.Equal(op.Table, feedTable) }) {
					continue
				}
				if c.hubs != nil && c.hubs.leafOrigin[o] != "" {
					// A leaf's write reaches a consumer in the entries of the hubs that
					// re-originated it: it is owed one change, found by its leaf origin
					// and leaf seq, when one of them is after the consumer's start and
					// not covered by a reread.
					if cs.gotLeaf[leafWrite{o, s}] || !c.hubs.owed(cs, leafWrite{o, s}, heads) {
						continue
					}
				} else if s <= cs.began.Seq(o) || s <= cs.covered[o] || cs.got[o][s] {
					continue
				}
				if missed == 0 || s < first {
					first = s
				}
				missed++
			}
			if missed > 0 {
				c.inv.fail(c.now, "%s: never given %d acknowledged changes of %s by origin %s (the first at seq %d), nor told to reread past them (it began at %d, a reread covers to %d)",
					cs.name, missed, feedTable, c.originName(o), first, cs.began.Seq(o), cs.covered[o])
			}
		}
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
