package sim

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Links under the simulator (docs/design.md §24.6): a run may make links one-way and
// exclude table t0 from one, from its first moment, and change one link's settings once
// while it runs. The draws keep every origin's entries reaching every node: the directed
// graph of what may cross the links stays strongly connected without the links that
// exclude t0 (linkValid), since every origin writes t0 and no node takes an origin over a
// link that hides a table it writes. The oracle reads the wire: a node never
// sends an entry (a DATA frame) to a peer it does not send to, nor one all of whose
// operations are of tables the link excludes; and a node applies no operation of an
// excluded table from an entry that came over the link. A run with an exclusion ends once
// the records agree as well as the logs (linkRecordsAlike): a node that passed an
// excluded table's operations would hold records the logs do not show.

// excludedTable is the table the runs exclude from links: one of the two randomOps writes.
const excludedTable = "t0"

// linkOracle is what a run with links drew and checked.
type linkOracle struct {
	excludes bool // some link excluded a table at some point of the run
	// checked: the entries (DATA frames) sent over a link that does not send that way or
	// excludes a table, each checked against its settings.
	checked int
}

// arrival is a delivery a node is taking in over a link that excludes tables: the entries
// it carries, each with the tables the link excludes as the receiver knows them when the
// entry comes, so that the store can tell an apply of one of them (recordingStore.Apply).
type arrival struct {
	node    string
	from    string
	entries map[vecKey]map[string]bool
	name    func(wire.OriginID) string // an origin's node, for the failure
}

type vecKey struct {
	origin wire.OriginID
	seq    uint64
}

// SetPeerLink sets node's settings for the link to peer, as an operator's PUT
// /v1/peers/{name} does: at once on a running node (Replica.SetLink), and in the node's
// configuration, which a restart starts from. The oracle checks the links of a cluster
// from its first call on.
func (c *Cluster) SetPeerLink(node, peer string, ls replica.LinkSettings) error {
	n := c.nodes[node]
	if n == nil || c.nodes[peer] == nil {
		return fmt.Errorf("link settings %s-%s: unknown node", node, peer)
	}
	ls, err := replica.CheckLink(ls)
	if err != nil {
		return err
	}
	if c.lk == nil {
		c.lk = &linkOracle{}
	}
	if len(ls.Exclude) > 0 {
		c.lk.excludes = true
	}
	if n.Links == nil {
		n.Links = map[string]replica.LinkSettings{}
	}
	if ls.Mode == wire.LinkBoth && len(ls.Exclude) == 0 {
		delete(n.Links, peer)
	} else {
		n.Links[peer] = ls
	}
	c.trace("%s sets the link to %s: %s, excluding %q", node, peer, ls.Mode, ls.Exclude)
	var refused error
	c.call(n, func(r *replica.Replica) error {
		refused = r.SetLink(n.clock(c), peer, ls)
		return refused
	})
	return refused
}

// linkSettings is every node's settings by peer, as the draws see them.
type linkSettings map[string]map[string]replica.LinkSettings

func (s linkSettings) get(node, peer string) replica.LinkSettings { return s[node][peer] }

func (s linkSettings) set(node, peer string, ls replica.LinkSettings) {
	if s[node] == nil {
		s[node] = map[string]replica.LinkSettings{}
	}
	s[node][peer] = ls
}

func (s linkSettings) clone() linkSettings {
	out := linkSettings{}
	for n, m := range s {
		out[n] = maps.Clone(m)
	}
	return out
}

// excludesT0 reports whether the link between a and b excludes t0, on either end.
func (s linkSettings) excludesT0(a, b string) bool {
	has := func(ls replica.LinkSettings) bool {
		return slices.ContainsFunc(ls.Exclude, func(t []byte) bool { return string(t) == excludedTable })
	}
	return has(s.get(a, b)) || has(s.get(b, a))
}

// linkValid reports whether settings keep the run able to converge: no link's two ends
// contradict each other (both receive, or both send: link-mismatch), and every node
// reaches every other over the links' directions without the links that exclude t0. Every
// origin writes t0, and a node takes no origin over a link that hides a table it writes
// (docs/design.md §24.6): such a link carries an origin's entries only until its first
// entry of t0 shows it, so the rest must have a way around every one of them. (The rule
// that an end of such a link is nobody's only way, kept while a node took an origin over
// it and held the origin's t0 entries as runs that a peer carrying t0 refuses, seed 98,
// went with that: a node now holds no run of a table it carries.)
func (c *Cluster) linkValid(s linkSettings) bool {
	for _, l := range c.sortedLinks() {
		a, b := s.get(l.From, l.To).Mode, s.get(l.To, l.From).Mode
		if a != wire.LinkBoth && a == b {
			return false
		}
	}
	without := map[*Link]bool{}
	for _, l := range c.sortedLinks() {
		if s.excludesT0(l.From, l.To) {
			without[l] = true
		}
	}
	return c.stronglyConnected(s, without)
}

// stronglyConnected reports whether every node reaches every other over the links but
// those in without, each in the directions its settings let entries cross
// (docs/contract.md §23.7: a sends to b when a's mode is send or both and b's receive or
// both).
func (c *Cluster) stronglyConnected(s linkSettings, without map[*Link]bool) bool {
	if len(c.names) < 2 {
		return true
	}
	fwd := map[string][]string{}
	for _, l := range c.sortedLinks() {
		if without[l] {
			continue
		}
		for _, d := range [][2]string{{l.From, l.To}, {l.To, l.From}} {
			if s.get(d[0], d[1]).Mode.Sends() && s.get(d[1], d[0]).Mode.Receives() {
				fwd[d[0]] = append(fwd[d[0]], d[1])
			}
		}
	}
	for _, from := range c.names {
		seen := map[string]bool{from: true}
		todo := []string{from}
		for len(todo) > 0 {
			x := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for _, y := range fwd[x] {
				if !seen[y] {
					seen[y] = true
					todo = append(todo, y)
				}
			}
		}
		if len(seen) < len(c.names) {
			return false
		}
	}
	return true
}

// drawLinks draws a run's links from a source of its own (so that the run's other draws,
// and other seeds' schedules, stay the same): one or two links made one-way, t0 excluded
// from one link (on one end or both), each only where linkValid holds; they are set
// before any connection is established. Then one live change of one end of a link at a
// drawn time within busy, under the same rule.
func (c *Cluster) drawLinks(rep *Report, seed uint64, busy time.Duration) {
	prng := rand.New(rand.NewPCG(seed, 0x6c696e6b73))
	links := c.sortedLinks()
	cur := linkSettings{}
	ends := func(l *Link) (string, string) {
		if prng.IntN(2) == 0 {
			return l.From, l.To
		}
		return l.To, l.From
	}
	// One-way: x only receives from y; y sends (both or send).
	want := 1 + prng.IntN(2)
	for tries := 0; rep.OneWay < want && tries < 8; tries++ {
		x, y := ends(links[prng.IntN(len(links))])
		ym := []wire.LinkMode{wire.LinkBoth, wire.LinkSend}[prng.IntN(2)]
		if cur.get(x, y).Mode != wire.LinkBoth || cur.get(y, x).Mode != wire.LinkBoth {
			continue
		}
		next := cur.clone()
		next.set(x, y, replica.LinkSettings{Mode: wire.LinkReceive})
		next.set(y, x, replica.LinkSettings{Mode: ym})
		if c.linkValid(next) {
			cur = next
			rep.OneWay++
		}
	}
	// t0 excluded from one link: by one end, the other, or both.
	for tries := 0; tries < 8; tries++ {
		l := links[prng.IntN(len(links))]
		on := prng.IntN(3)
		next := cur.clone()
		for i, d := range [][2]string{{l.From, l.To}, {l.To, l.From}} {
			if on == i || on == 2 {
				ls := next.get(d[0], d[1])
				ls.Exclude = [][]byte{[]byte(excludedTable)}
				next.set(d[0], d[1], ls)
			}
		}
		if c.linkValid(next) {
			cur = next
			rep.Excluding++
			break
		}
	}
	for _, name := range c.names {
		for _, peer := range slices.Sorted(maps.Keys(cur[name])) {
			if ls := cur[name][peer]; ls.Mode != wire.LinkBoth || len(ls.Exclude) > 0 {
				_ = c.SetPeerLink(name, peer, ls) // valid settings of two nodes of the run: not refused
			}
		}
	}
	if c.lk == nil {
		c.lk = &linkOracle{} // nothing drawn: the checks run all the same
	}
	// The live change: one end of a drawn link takes another mode, and half the time
	// excludes t0 or stops excluding it.
	at := c.Now().Add(time.Second + time.Duration(prng.Int64N(int64(busy-3*time.Second))))
	for tries := 0; tries < 16; tries++ {
		x, y := ends(links[prng.IntN(len(links))])
		ls := cur.get(x, y)
		ls.Mode = wire.LinkMode(prng.IntN(3))
		if prng.IntN(2) == 0 {
			if len(ls.Exclude) > 0 {
				ls.Exclude = nil
			} else {
				ls.Exclude = [][]byte{[]byte(excludedTable)}
			}
		}
		old := cur.get(x, y)
		if ls.Mode == old.Mode && len(ls.Exclude) == len(old.Exclude) {
			continue
		}
		next := cur.clone()
		next.set(x, y, ls)
		if !c.linkValid(next) {
			continue
		}
		c.At(at, func() {
			rep.LinkChanges++
			_ = c.SetPeerLink(x, y, ls) // valid: not refused
		})
		break
	}
}

// noteLinks reads what a delivery to e tells of the link before its node takes it in: the
// peer's LINK (its settings for the link, as e's node knows them from then on: frames
// after it in the message are taken under them), and the entries that come over a link
// excluding tables, each with the tables excluded when it comes (arrival).
func (c *Cluster) noteLinks(e *end, msg []byte) {
	c.inv.arriving = nil
	var a *arrival
	excluded := e.excluded()
	r := wire.NewReader(msg, 0)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			break
		}
		switch f.Type {
		case wire.TypeLink:
			if l, derr := wire.DecodeLink(f.Body); derr == nil {
				e.peerLink = wire.Link{Mode: l.Mode, Tables: slices.Clone(l.Tables)}
				excluded = e.excluded()
			}
		case wire.TypeData:
			if len(excluded) == 0 {
				continue
			}
			if _, v, perr := wire.ParseData(f.Body); perr == nil {
				if a == nil {
					a = &arrival{node: e.node.Name, from: e.peer.node.Name, entries: map[vecKey]map[string]bool{}, name: c.originName}
				}
				a.entries[vecKey{v.Origin, v.Seq}] = excluded
			}
		}
	}
	c.inv.arriving = a
}

// excluded is the union of both ends' excluded tables as e's node knows them: its own
// settings for the peer and the peer's last LINK on this connection.
func (e *end) excluded() map[string]bool {
	out := map[string]bool{}
	for _, t := range e.node.Links[e.peer.node.Name].Exclude {
		out[string(t)] = true
	}
	for _, t := range e.peerLink.Tables {
		out[string(t)] = true
	}
	return out
}

// checkSent checks the entries a node puts on a connection against the link's settings
// as the node knows them when it sends: its own, and the peer's last LINK it received on
// the connection (a change of the peer's reaches it with that LINK; what it sent before
// is in flight, not against the settings). It sends an entry only when its own mode
// sends and the peer's receives, and never one all of whose operations are of excluded
// tables (such entries go as SKIP runs).
func (c *Cluster) checkSent(e *end, msg []byte) {
	own := e.node.Links[e.peer.node.Name]
	sends := own.Mode.Sends() && e.peerLink.Mode.Receives()
	excluded := e.excluded()
	if sends && len(excluded) == 0 {
		return
	}
	for _, ef := range entryFrames(msg) {
		if ef.frame.Type != wire.TypeData {
			continue
		}
		c.lk.checked++
		v := ef.txn
		if !sends {
			c.inv.fail(c.now, "%s sent entry %s/%d to %s, against the link's direction (its own mode %s, the peer's %s)",
				e.node.Name, c.originName(v.Origin), v.Seq, e.peer.node.Name, own.Mode, e.peerLink.Mode)
			return
		}
		all := true
		it := v.Ops()
		for op, ok := it.Next(); ok && all; op, ok = it.Next() {
			all = excluded[string(op.Table)]
		}
		if all {
			c.inv.fail(c.now, "%s sent entry %s/%d to %s whole, and the link excludes every table it writes (%v)",
				e.node.Name, c.originName(v.Origin), v.Seq, e.peer.node.Name, slices.Sorted(maps.Keys(excluded)))
			return
		}
	}
}

// appliedExcluded checks a batch a store applies while its node takes in a delivery: an
// entry that came over a link excluding tables writes none of their records.
func (v *invariants) appliedExcluded(node string, b *store.Batch, now time.Time) {
	a := v.arriving
	if a == nil || a.node != node {
		return
	}
	excluded := a.entries[vecKey{b.Origin, b.Seq}]
	for _, r := range b.Records {
		if excluded[string(r.Table)] {
			v.fail(now, "%s applied %s/%s of entry %s/%d, which came from %s over a link excluding table %s",
				node, r.Table, r.Key, a.name(b.Origin), b.Seq, a.from, r.Table)
			return
		}
	}
}

// linkRecordsAlike reports whether every running node holds the same records, when some
// link excluded a table: entries passed over such a link leave their records of it to
// anti-entropy with a peer whose link carries it (docs/design.md §24.6), so logs alike
// are not yet the end state.
func (c *Cluster) linkRecordsAlike() (bool, string) {
	if c.lk == nil || !c.lk.excludes {
		return true, ""
	}
	var first []byte
	firstName := ""
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		d, _ := c.recordsDigest(n)
		if first == nil {
			first, firstName = d, name
		} else if !bytes.Equal(d, first) {
			return false, fmt.Sprintf("records of %s differ from those of %s (anti-entropy to come)", name, firstName)
		}
	}
	return true, ""
}
