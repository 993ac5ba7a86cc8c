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
}

// SetPlacement places each table of p on the nodes listed, for the run's writes and its
// oracle; the caller publishes maps that say so.
func (c *Cluster) SetPlacement(p map[string][]string) {
	c.place = placement{carriers: map[string]map[string]bool{}}
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

// PlacementDoc is the placement member every map of the run carries ("" when none).
func (c *Cluster) PlacementDoc() string { return c.place.doc }

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
