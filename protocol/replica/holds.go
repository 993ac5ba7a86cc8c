package replica

import (
	"maps"
	"slices"

	"plait/protocol/clustermap"
	"plait/protocol/wire"
)

// How far a node holds a table (docs/design.md §24.4). A node's applied positions say how
// far it applied each origin's log, not that its records of a table reflect that log: an
// entry of a table it does not carry is passed (as a run, or stored without its
// operations of that table), and a table it was added to lacks the entries it passed
// before. Every decision that takes a node's records of a table for whole (a fill's
// source, a base copy's source, a removal's carriers) asks how far the node holds that
// table instead: per origin, the seq through which every entry of the table is reflected
// in its records. A node that carries a table and owes it no fill holds it whole (through
// every applied position); it never moves past an entry of a table it carries without
// applying it (receiveSkip, partialCopyRefusal). A table a link excludes is no exception:
// nothing of it is taken over that link (links.go: no entry or run of it, no origin that
// writes it, no copy's chunk), so the node holds it whole as far as its positions go.

// tableHold is a table this node holds records of and does not carry: of each origin it
// holds the table through its applied seq, except an origin in stopped, held through the
// seq given there (it passed an entry of the table after it). Entries applied after the
// node stopped carrying the table keep it whole while they write none of it, so a node
// removed from a table and added again soon owes no fill.
type tableHold struct {
	stopped map[wire.OriginID]uint64
}

// storedHold is a tableHold in the map's control value.
type storedHold struct {
	Table   string       `cbor:"1,keyasint"`
	Stopped []storedSeqs `cbor:"2,keyasint,omitempty"`
}

func storeHolds(held map[string]*tableHold) []storedHold {
	var out []storedHold
	for _, t := range slices.Sorted(maps.Keys(held)) {
		out = append(out, storedHold{Table: t, Stopped: storeSeqs(held[t].stopped)})
	}
	return out
}

func loadHolds(hs []storedHold) map[string]*tableHold {
	if len(hs) == 0 {
		return nil
	}
	out := map[string]*tableHold{}
	for _, h := range hs {
		out[h.Table] = &tableHold{stopped: loadSeqs(h.Stopped)}
	}
	return out
}

func storeSeqs(m map[wire.OriginID]uint64) []storedSeqs {
	var out []storedSeqs
	for _, o := range slices.SortedFunc(maps.Keys(m), cmpOrigin) {
		out = append(out, storedSeqs{Origin: o, Seq: m[o]})
	}
	return out
}

func loadSeqs(ss []storedSeqs) map[wire.OriginID]uint64 {
	out := make(map[wire.OriginID]uint64, len(ss))
	for _, s := range ss {
		out[s.Origin] = s.Seq
	}
	return out
}

// appliedSeqs is this node's applied seq of every origin it applied anything of.
func (r *Replica) appliedSeqs() map[wire.OriginID]uint64 {
	out := make(map[wire.OriginID]uint64, len(r.originList))
	for _, st := range r.originList {
		if st.applied.Seq > 0 {
			out[st.id] = st.applied.Seq
		}
	}
	return out
}

// hold is how far this node holds table: whole (true), or through the seq of each origin
// in the map (absent: none of it).
func (r *Replica) hold(table string) (map[wire.OriginID]uint64, bool) {
	if f := r.fills[table]; f != nil {
		// Its entries after the fill's positions came whole; those up to them, as far as
		// the fills so far brought them.
		out := r.appliedSeqs()
		for o, w := range f.want {
			if c := f.covered[o]; c < w {
				out[o] = c
			}
		}
		return out, false
	}
	if h := r.held[table]; h != nil {
		out := r.appliedSeqs()
		for o, s := range h.stopped {
			out[o] = min(out[o], s)
		}
		return out, false
	}
	if r.carries([]byte(table)) {
		return nil, true
	}
	return nil, false
}

// partialTables are the tables this node does not hold whole, sorted: the placed tables
// it does not carry, those it holds records of and does not carry, those it fills.
func (r *Replica) partialTables() []string {
	if r.cfg.Mutations.HoldWhole {
		return nil
	}
	set := map[string]bool{}
	for t := range r.cmap.cur.Placement {
		if !r.carries([]byte(t)) {
			set[t] = true
		}
	}
	for t := range r.held {
		set[t] = true
	}
	for t := range r.fills {
		set[t] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// holdSeqs is a hold as a list ascending by origin, without the origins held through 0.
func holdSeqs(h map[wire.OriginID]uint64) []wire.OriginSeq {
	var out []wire.OriginSeq
	for _, o := range slices.SortedFunc(maps.Keys(h), cmpOrigin) {
		if h[o] > 0 {
			out = append(out, wire.OriginSeq{Origin: o, Seq: h[o]})
		}
	}
	return out
}

// plannedHolds is what this node holds and owes under map next, adopted over map prev
// (its current): a table it stops carrying is held as far as it held it; a table it is
// added to is owed a fill up to its applied positions, less what it holds of it already
// (nothing owed when that is all); the rest as they were.
func (r *Replica) plannedHolds(prev, next clustermap.Map) (map[string]*fill, map[string]*tableHold, map[string]uint64) {
	fills, held, since := map[string]*fill{}, map[string]*tableHold{}, map[string]uint64{}
	own := r.origin(r.id.Origin).applied.Seq
	tables := map[string]bool{}
	for t := range prev.Placement {
		tables[t] = true
	}
	for t := range next.Placement {
		tables[t] = true
	}
	for t := range r.held {
		tables[t] = true
	}
	for t := range r.fills {
		tables[t] = true
	}
	for t := range r.ownSince {
		tables[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(tables)) {
		now, whole := r.hold(t)
		was := whole || r.fills[t] != nil || r.held[t] != nil
		if !next.Carries(r.id.Name, []byte(t)) {
			// It writes the table no more: its own entries from the next on write none
			// of it (a node removed twice keeps the first stop: it wrote none between).
			since[t] = r.ownSince[t]
			if prev.Carries(r.id.Name, []byte(t)) || since[t] == 0 {
				since[t] = own + 1
			}
		}
		switch {
		case !next.Carries(r.id.Name, []byte(t)):
			if !was {
				continue // never held: nothing to keep
			}
			h := &tableHold{stopped: map[wire.OriginID]uint64{}}
			applied := r.appliedSeqs()
			for o, s := range now {
				if s < applied[o] {
					h.stopped[o] = s
				}
			}
			for o := range applied {
				if _, ok := now[o]; !ok && !whole {
					h.stopped[o] = 0
				}
			}
			held[t] = h
		case whole:
			// carried under both maps
		case r.fills[t] != nil:
			fills[t] = r.fills[t]
		default:
			// Added: what it holds already counts; the rest comes by fills.
			want := r.appliedSeqs()
			covered := map[wire.OriginID]uint64{}
			owed := false
			for o, w := range want {
				covered[o] = min(now[o], w)
				if o == r.id.Origin && r.ownSince[t] > 0 && r.ownSince[t] <= now[o]+1 {
					covered[o] = w // its own entries since it held them write none of it
				}
				owed = owed || covered[o] < w
			}
			if owed {
				fills[t] = &fill{want: want, covered: covered, from: slices.Clone(prev.Placement[t]), since: r.ownSince[t]}
			}
		}
	}
	if len(fills) == 0 {
		fills = nil
	}
	if len(held) == 0 {
		held = nil
	}
	if len(since) == 0 {
		since = nil
	}
	return fills, held, since
}

// stopHolds notes that this node moves origin o past seq without taking the operations of
// tables (an entry it passes, a run, a copy that raises the log): each of them it holds
// and holds o of through seq or further is held through seq from now. The map's control
// value is written first, so that a crash after it claims less, never more.
func (r *Replica) stopHolds(o wire.OriginID, seq uint64, tables [][]byte) error {
	var changed map[string]*tableHold
	for _, t := range tables {
		h := r.held[string(t)]
		if h == nil {
			continue
		}
		if s, ok := h.stopped[o]; ok && s <= seq {
			continue
		}
		if changed == nil {
			changed = maps.Clone(r.held)
		}
		n := &tableHold{stopped: maps.Clone(h.stopped)}
		if n.stopped == nil {
			n.stopped = map[wire.OriginID]uint64{}
		}
		n.stopped[o] = seq
		changed[string(t)] = n
	}
	if changed == nil {
		return nil
	}
	cs := &r.cmap
	if err := r.writeMap(cs.cur, cs.publisher, cs.published, cs.appliedAt, r.fills, changed); err != nil {
		return err
	}
	r.held = changed
	return nil
}

// heldTables lists the tables this node holds and does not carry, for stopHolds.
func (r *Replica) heldTables() [][]byte {
	var out [][]byte
	for _, t := range slices.Sorted(maps.Keys(r.held)) {
		out = append(out, []byte(t))
	}
	return out
}

// sendHolds tells the taker of a copy served on c how far its snapshot holds each table
// this node does not hold whole (HOLDS, before COPYBEGIN). It reports false when the
// connection went.
func (r *Replica) sendHolds(c *conn) bool {
	for _, t := range r.partialTables() {
		h, _ := r.hold(t)
		if !r.checkConn(c, c.sess.V4().CopyHolds([]byte(t), holdSeqs(h), r.ownSince[t])) {
			return false
		}
	}
	return true
}

// onCopyHolds takes in how far the snapshot of the copy this node takes holds a table. It
// keeps what its decisions read, so that a peer's frames cannot make it keep more than its
// own tables and origins: the tables it carries, fills or holds, and of them the origins
// it knows (one it does not is held through 0, which refuses more, never less: a copy that
// would raise it past such a table's entries, partialCopyRefusal).
func (r *Replica) onCopyHolds(c *conn, b *wire.Holds) {
	t := r.cp.take
	if t == nil || t.conn != c.id || !r.carries(b.Table) && r.fills[string(b.Table)] == nil && r.held[string(b.Table)] == nil {
		return
	}
	if t.hidden[string(b.Table)] {
		return // the link excludes it: the copy holds none of it (hideTables)
	}
	if t.holds == nil {
		t.holds, t.since = map[string]map[wire.OriginID]uint64{}, map[string]uint64{}
	}
	if b.Since > 0 {
		t.since[string(b.Table)] = b.Since
	}
	h := t.holds[string(b.Table)]
	if h == nil {
		h = map[wire.OriginID]uint64{}
		t.holds[string(b.Table)] = h
	}
	for _, s := range b.Seqs {
		if r.origins[s.Origin] != nil {
			h[s.Origin] = s.Seq
		}
	}
}

// sourceHold is how far the snapshot of the copy t holds table: whole through its
// positions, unless its source said otherwise (HOLDS).
func (t *copyTake) sourceHold(table []byte) map[wire.OriginID]uint64 {
	if h, ok := t.holds[string(table)]; ok {
		return h
	}
	out := make(map[wire.OriginID]uint64, len(t.snap))
	for o, p := range t.snap {
		out[o] = p.Seq
	}
	return out
}

// sourceWhole reports whether the snapshot of the copy t holds table whole.
func (t *copyTake) sourceWhole(table []byte) bool {
	_, partial := t.holds[string(table)]
	return !partial
}

// mayWrite reports whether origin st may have written table: it carried it under a map
// this node held (writers), was seen to write it, or is not known by name.
func (r *Replica) mayWrite(st *originState, table string) bool {
	if st == nil || st.name == "" || st.writes[table] || r.cmap.cur.Carries(st.name, []byte(table)) {
		return true
	}
	w, ok := r.writers[table]
	return !ok || w == nil || slices.Contains(w, st.name)
}

// plannedWriters is writers with the carriers of next's placed tables added: a table
// placed for the first time was carried by every node before (nil: anyone may have
// written it), unless this node held a map before that placed it.
func (r *Replica) plannedWriters(prev, next clustermap.Map) map[string][]string {
	out := maps.Clone(r.writers)
	if out == nil {
		out = map[string][]string{}
	}
	applied := len(r.appliedSeqs()) > 0
	for t, nodes := range next.Placement {
		w, ok := out[t]
		if ok && w == nil {
			continue
		}
		if !ok && (prev.Generation > 0 && len(prev.Placement[t]) == 0 || prev.Generation == 0 && applied) {
			// Unplaced before: every node carried it (this node's first map: unless its
			// logs hold nothing yet, and then nothing was written that it knows of).
			out[t] = nil
			continue
		}
		merged := slices.Clone(w)
		for _, n := range nodes {
			if !slices.Contains(merged, n) {
				merged = append(merged, n)
			}
		}
		slices.Sort(merged)
		out[t] = merged
	}
	return out
}

// heldAnswer is one table of a positions answer that the node does not hold whole.
type heldAnswer struct {
	Table string       `cbor:"1,keyasint"`
	Seqs  []storedSeqs `cbor:"2,keyasint,omitempty"`
}

func storeWriters(w map[string][]string) []storedWriters {
	var out []storedWriters
	for _, t := range slices.Sorted(maps.Keys(w)) {
		out = append(out, storedWriters{Table: t, Any: w[t] == nil, Nodes: w[t]})
	}
	return out
}

func loadWriters(ws []storedWriters) map[string][]string {
	if len(ws) == 0 {
		return nil
	}
	out := map[string][]string{}
	for _, w := range ws {
		if w.Any {
			out[w.Table] = nil
		} else {
			out[w.Table] = w.Nodes
		}
	}
	return out
}

// storedSince is one table's ownSince in the map's control value.
type storedSince struct {
	Table string `cbor:"1,keyasint"`
	Seq   uint64 `cbor:"2,keyasint"`
}

func storeSince(m map[string]uint64) []storedSince {
	var out []storedSince
	for _, t := range slices.Sorted(maps.Keys(m)) {
		out = append(out, storedSince{Table: t, Seq: m[t]})
	}
	return out
}

func loadSince(ss []storedSince) map[string]uint64 {
	if len(ss) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(ss))
	for _, s := range ss {
		out[s.Table] = s.Seq
	}
	return out
}
