package sim

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Placement under the simulator (docs/design.md §24): a run may place a table on some of
// its nodes from its first moment (every node is given the map before any write, and every
// later map of the run keeps the placement), while the schedule crashes, partitions and
// skews them. The oracle checks that every carrier of a placed table ends with every
// acknowledged write of it, that no other node holds a record of it, that no node's log
// holds an entry of which it carries no table (a sender that ignored placement), and that
// the other tables are alike everywhere.

// placement is a run's placement: each placed table's carriers (nil: nothing placed), and
// the map documents' placement member, `,"placement":{...}`.
type placement struct {
	carriers map[string]map[string]bool
	doc      string
	// byGen: the placement member of each generation's maps, when the run changes it (a
	// table added to a node, removed from one, moved); changed: it does. carriers and doc
	// follow the highest generation published so far.
	byGen   map[uint64]map[string][]string
	changed bool
}

// SetPlacement places each table of p on the nodes listed, for the run's writes and its
// oracle; the caller publishes maps that say so.
func (c *Cluster) SetPlacement(p map[string][]string) {
	c.place.carriers = map[string]map[string]bool{}
	var b strings.Builder
	b.WriteString(`,"placement":{`)
	for i, t := range slices.Sorted(maps.Keys(p)) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:[", t)
		c.place.carriers[t] = map[string]bool{}
		for j, n := range p[t] {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q", n)
			c.place.carriers[t][n] = true
		}
		b.WriteString("]")
	}
	b.WriteString("}")
	c.place.doc = b.String()
	c.inv.placed = c.place.carriers
}

// PlacementDoc is the placement member the run's maps carry now ("" when none).
func (c *Cluster) PlacementDoc() string { return c.place.doc }

// PlaceGeneration makes maps of generation gen place each table of p on the nodes listed;
// once a map of that generation is published, the run's writes and its oracle follow it.
func (c *Cluster) PlaceGeneration(gen uint64, p map[string][]string) {
	if c.place.byGen == nil {
		c.place.byGen = map[uint64]map[string][]string{}
	}
	c.place.byGen[gen] = p
}

// placementDoc is the placement member of generation gen's maps.
func (c *Cluster) placementDoc(gen uint64) string {
	if p := c.place.byGen[gen]; p != nil {
		saved := c.place
		c.SetPlacement(p)
		doc := c.place.doc
		c.place = saved
		c.inv.placed = c.place.carriers
		return doc
	}
	return c.place.doc
}

// published follows a map of generation gen published: the highest generation's placement
// is the run's from then on.
func (c *Cluster) published(gen uint64) {
	if p := c.place.byGen[gen]; p != nil && gen >= c.maps.maxGen {
		byGen, changed := c.place.byGen, c.place.changed
		c.SetPlacement(p)
		c.place.byGen, c.place.changed = byGen, changed
	}
}

// carries reports whether node carries table under the run's placement.
func (c *Cluster) carries(node string, table []byte) bool {
	cs, placed := c.place.carriers[string(table)]
	return !placed || cs[node]
}

// placeOps turns a drawn transaction into one the node may write: an operation of a
// placed table the node does not carry goes to the first unplaced table instead, and a
// transaction that would then mix placed and unplaced tables takes its first operation's
// table for all (a writer's job: the node refuses both, not-carried and mixed-placement).
// No draw is made, so a run's schedule is the same with or without placement.
func (c *Cluster) placeOps(node string, ops []wire.Op) []wire.Op {
	if c.place.carriers == nil {
		return ops
	}
	out := slices.Clone(ops)
	for i := range out {
		if !c.carries(node, out[i].Table) {
			out[i].Table = []byte("t0")
		}
	}
	placed := func(t []byte) bool { _, p := c.place.carriers[string(t)]; return p }
	for i := range out {
		if placed(out[i].Table) != placed(out[0].Table) {
			for j := range out {
				out[j].Table = out[0].Table
			}
			break
		}
	}
	return out
}

// placementFindings is what the end state breaks of placement: a record of a placed table
// on a node that does not carry it, or a log entry none of whose tables the node carries.
func (c *Cluster) placementFindings() []string {
	if c.place.carriers == nil {
		return nil
	}
	var out []string
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		for t, cs := range c.place.carriers {
			if cs[name] {
				continue
			}
			count := 0
			_ = n.Store.Scan([]byte(t), nil, func(store.Record) bool { count++; return true })
			if count > 0 {
				out = append(out, fmt.Sprintf("%s: holds %d records of table %s, which it does not carry", name, count, t))
			}
		}
		if c.place.changed {
			continue // an entry it was sent whole while it carried the table stays in its log
		}
		logs, _ := n.Store.Logs()
		vec, _ := n.Store.Vector()
		for _, e := range vec.Entries() {
			if e.Origin == n.origin {
				continue
			}
			for seq := logs[e.Origin].Floor.Seq + 1; seq <= e.Seq; seq++ {
				raw, err := n.Store.Entry(e.Origin, seq)
				if err != nil {
					continue // a run, or purged
				}
				v, perr := wire.ParseTxn(raw)
				if perr != nil {
					continue
				}
				any := false
				it := v.Ops()
				for op, ok := it.Next(); ok; op, ok = it.Next() {
					any = any || c.carries(name, op.Table)
				}
				if !any {
					out = append(out, fmt.Sprintf("%s: holds entry %d of %s whole, and carries none of its tables", name, seq, c.originName(e.Origin)))
					break
				}
			}
		}
	}
	return out
}

// placedDigests hashes a node's records of the tables it carries that are placed, table by
// table, and returns the digests by table; recordsDigest covers the unplaced ones.
func (c *Cluster) placedDigests(n *Node) map[string][]byte {
	out := map[string][]byte{}
	for t, cs := range c.place.carriers {
		if !cs[n.Name] {
			continue
		}
		var b bytes.Buffer
		_ = n.Store.Scan([]byte(t), nil, func(r store.Record) bool {
			if r.Deleted && (c.opts.RetainAge > 0 || c.opts.RetainBytes > 0) {
				return true
			}
			fmt.Fprintf(&b, "%q %q %v %d %x\n", r.Key, r.Value, r.Deleted, r.HLC, r.Origin)
			return true
		})
		out[t] = b.Bytes()
	}
	return out
}

// placementPending is the first node still filling a table it was added to, or waiting to
// remove one it no longer carries ("" when none): the run has not settled until none is.
func (c *Cluster) placementPending() string {
	for _, name := range c.names {
		n := c.nodes[name]
		if n.Rep == nil {
			continue
		}
		st := n.Rep.MapStatus()
		if len(st.Filling) > 0 {
			return fmt.Sprintf("%s fills %v", name, st.Filling)
		}
		if len(st.Removals) > 0 {
			return fmt.Sprintf("%s removes %v", name, st.Removals)
		}
	}
	return ""
}
