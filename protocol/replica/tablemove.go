package replica

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// A node removed from a table (docs/design.md §24.4): it keeps the table's records until
// every carrier of the table in its map has applied, of every origin, what this node had
// applied when the removal began, so that nothing acknowledged here is lost with its copy;
// then it deletes them in one write and counts what it freed. It learns a carrier's
// positions by a request (kind positions), which reaches carriers it is not connected to
// through the mesh; a carrier that is down is waited for until a map drops it from the
// table.

// removal is a table this node holds records of and no longer carries.
type removal struct {
	table string
	// want: this node's applied positions when the removal began.
	want map[wire.OriginID]uint64
	// waiting: the carriers that have not shown them yet; asking: their requests in flight.
	waiting map[string]bool
	asking  map[string]RequestID
	nextAt  time.Time
}

// RemovalStatus is a table waiting to be removed, and the carriers it waits for.
type RemovalStatus struct {
	Table   string
	Waiting []string
}

// planRemovals makes the removals the map asks for: a table this node holds records of and
// does not carry is removed (a new removal wants this node's positions now); one it
// carries again is not; each waits for the carriers of the map, and for no other.
func (r *Replica) planRemovals() {
	r.removalsDirty = false
	m := &r.cmap.cur
	tables, err := r.store.Tables()
	if !r.check(err) {
		return
	}
	held := map[string]bool{}
	for _, t := range tables {
		held[string(t)] = true
		if r.carries(t) || r.removals[string(t)] != nil {
			continue
		}
		rm := &removal{table: string(t), want: map[wire.OriginID]uint64{}, asking: map[string]RequestID{}, nextAt: r.now}
		for _, st := range r.originList {
			if st.applied.Seq > 0 && st.id != r.id.Origin {
				rm.want[st.id] = st.applied.Seq
			}
		}
		// This node's own writes of the table: its carriers must hold them too.
		if own := r.origins[r.id.Origin]; own != nil && own.applied.Seq > 0 {
			rm.want[r.id.Origin] = own.applied.Seq
		}
		if r.removals == nil {
			r.removals = map[string]*removal{}
		}
		r.removals[string(t)] = rm
	}
	for t, rm := range r.removals {
		if !held[t] || r.carries([]byte(t)) {
			delete(r.removals, t)
			continue
		}
		carriers := map[string]bool{}
		for _, n := range m.Placement[t] {
			if n != r.id.Name {
				carriers[n] = true
			}
		}
		// Every carrier of this map, those that answered under the map before too: the
		// table's carriers may all be new (it moved), and one that showed it held enough
		// then may have been removed and dropped it since.
		rm.waiting = carriers
		if r.cfg.Mutations.DropAtOnce {
			rm.waiting = map[string]bool{}
		}
	}
}

// removeTables asks the carriers each removal waits for, when due, and removes a table
// once none is waited for.
func (r *Replica) removeTables() {
	if r.removalsDirty {
		r.planRemovals()
	}
	if len(r.removals) == 0 || r.storage.err != nil {
		return
	}
	for _, t := range slices.Sorted(maps.Keys(r.removals)) {
		rm := r.removals[t]
		if len(rm.waiting) == 0 {
			if r.held[t] != nil {
				// Claimed held no longer first: a crash before the drop then claims less.
				held := maps.Clone(r.held)
				delete(held, t)
				cs := &r.cmap
				if !r.check(r.writeMap(cs.cur, cs.publisher, cs.published, cs.appliedAt, r.fills, held)) {
					return
				}
				r.held = held
			}
			n, size, err := r.store.DropTable([]byte(t))
			if !r.check(err) {
				return
			}
			r.counters.TablesRemoved++
			r.counters.RecordsFreed += n
			r.counters.BytesFreed += size
			delete(r.removals, t)
			continue
		}
		if r.now.Before(rm.nextAt) {
			continue
		}
		rm.nextAt = r.now.Add(r.cfg.PlacementPoll)
		for _, name := range slices.Sorted(maps.Keys(rm.waiting)) {
			if _, asked := rm.asking[name]; asked {
				continue
			}
			carrier := name
			if !r.askThen(carrier, kindPositions, wire.ScopeRead, nil, func(id RequestID) { rm.asking[carrier] = id },
				func(a Answer) { r.carrierAnswered(t, carrier, a) }) {
				return
			}
		}
	}
}

// carrierAnswered takes how far a carrier holds the table (its positions, less what it
// does not hold whole: holds.go): once that is at or past what the removal wants of every
// origin, the carrier is no longer waited for.
func (r *Replica) carrierAnswered(table, carrier string, a Answer) {
	rm := r.removals[table]
	if rm == nil || rm.asking[carrier] != a.ID {
		return // removed or planned again since
	}
	delete(rm.asking, carrier)
	if a.Code != "" {
		return // unreachable, down, timed out: asked again at the next poll
	}
	have, ok := parsePositions(a.Body, table)
	if !ok {
		return
	}
	for o, seq := range rm.want {
		if have[o] < seq {
			return
		}
	}
	delete(rm.waiting, carrier)
}

// removalsDue is when a removal next asks its carriers (zero: none waits).
func (r *Replica) removalsDue() time.Time {
	var next time.Time
	for _, rm := range r.removals {
		if len(rm.waiting) > len(rm.asking) && (next.IsZero() || rm.nextAt.Before(next)) {
			next = rm.nextAt
		}
	}
	return next
}

// Removals lists the tables waiting to be removed and the carriers each waits for.
func (r *Replica) Removals() []RemovalStatus {
	var out []RemovalStatus
	for _, t := range slices.Sorted(maps.Keys(r.removals)) {
		out = append(out, RemovalStatus{Table: t, Waiting: slices.Sorted(maps.Keys(r.removals[t].waiting))})
	}
	return out
}

// kindPositions is the request kind of a node's applied positions and the tables it is
// filling: no body; the answer is positionsAnswer (protocol/SPEC.md, Version 4).
const kindPositions = "positions"

// positionsAnswer is the answer of kind positions: the node's applied seq of every origin
// it holds, by origin, and the tables it was added to and has not filled.
type positionsAnswer struct {
	Positions []storedSeqs `cbor:"1,keyasint,omitempty"`
	Filling   []string     `cbor:"2,keyasint,omitempty"`
	// Holds: the tables the node does not hold whole, each with how far it holds them
	// (holds.go; an origin left out: none of it).
	Holds []heldAnswer `cbor:"3,keyasint,omitempty"`
}

func servePositions(r *Replica, _ []byte) (wire.Code, string, []byte) {
	if r.cfg.HoldUnsynced {
		// A removal drops a table's records on this answer: what it says this node holds
		// must survive a power loss first (a fill's records, its end, the entries applied).
		if !r.syncNow() {
			return wire.CodeInternal, "this node's store did not sync", nil
		}
	}
	var a positionsAnswer
	for _, o := range r.originOrder {
		if st := r.origins[o]; st.applied.Seq > 0 {
			a.Positions = append(a.Positions, storedSeqs{Origin: o, Seq: st.applied.Seq})
		}
	}
	a.Filling = slices.Sorted(maps.Keys(r.fills))
	for _, t := range r.partialTables() {
		h, _ := r.hold(t)
		var seqs []storedSeqs
		for _, s := range holdSeqs(h) {
			seqs = append(seqs, storedSeqs{Origin: s.Origin, Seq: s.Seq})
		}
		a.Holds = append(a.Holds, heldAnswer{Table: t, Seqs: seqs})
	}
	b, err := wire.Marshal(a)
	if err != nil {
		return wire.CodeInternal, err.Error(), nil
	}
	return "", "", b
}

// parsePositions reads a positions answer: how far the node holds table.
func parsePositions(b []byte, table string) (map[wire.OriginID]uint64, bool) {
	var a positionsAnswer
	if err := wire.Unmarshal(b, &a); err != nil {
		return nil, false
	}
	for _, h := range a.Holds {
		if h.Table == table {
			return loadSeqs(h.Seqs), true
		}
	}
	return loadSeqs(a.Positions), true
}

// A node added to a table (docs/design.md §24.4) holds runs where the table's past entries
// were: it fills the table by a copy of that table alone (the base copy's request from the
// table's first key, its chunks of that table merged by last-writer-wins, the copy left
// once it reaches another table), from a carrier that holds this node's map generation and
// has applied, of every origin, what this node had applied when it was added: the
// snapshot then holds every entry of the table this node was not sent. Its logs are not
// raised: it is past those entries already. Entries after are applied as they come.

// storedFill is one table a node owes a fill, with its positions when it was added.
type storedFill struct {
	Table string       `cbor:"1,keyasint"`
	Want  []storedSeqs `cbor:"2,keyasint,omitempty"`
	// From are the nodes that carried the table under the map before (none: every node):
	// a table moved whole to new carriers is held, until its removal there, by them alone.
	From []string `cbor:"3,keyasint,omitempty"`
	// Covered is how far the fills so far brought the table, of each origin of Want.
	Covered []storedSeqs `cbor:"4,keyasint,omitempty"`
	// Since is the seq from which this node's own entries wrote none of the table before
	// it was added (0: none known).
	Since uint64 `cbor:"5,keyasint,omitempty"`
}

// fill is a table this node owes a fill: its positions when it was added, and who carried
// the table before.
type fill struct {
	want    map[wire.OriginID]uint64
	covered map[wire.OriginID]uint64 // how far the fills so far brought the table
	from    []string                 // nil: every node
	since   uint64                   // this node's own entries from this seq wrote none of it
}

type storedSeqs struct {
	Origin wire.OriginID `cbor:"1,keyasint"`
	Seq    uint64        `cbor:"2,keyasint"`
}

func storeFills(fills map[string]*fill) []storedFill {
	var out []storedFill
	for _, t := range slices.Sorted(maps.Keys(fills)) {
		f := fills[t]
		out = append(out, storedFill{Table: t, From: f.from, Want: storeSeqs(f.want), Covered: storeSeqs(f.covered), Since: f.since})
	}
	return out
}

func loadFills(fs []storedFill) map[string]*fill {
	if len(fs) == 0 {
		return nil
	}
	out := map[string]*fill{}
	for _, f := range fs {
		out[f.Table] = &fill{want: loadSeqs(f.Want), covered: loadSeqs(f.Covered), from: f.From, since: f.Since}
	}
	return out
}

// Filling reports whether this node carries table and has not filled it yet: its reads go
// to a carrier that holds it.
func (r *Replica) Filling(table []byte) bool { return r.fills[string(table)] != nil }

// FillCount is how many tables this node owes a fill: the shell reads the list again when
// it changes (a fill ended) or the map does.
func (r *Replica) FillCount() int { return len(r.fills) }

// maybeFill starts a fill when one is owed and no copy runs, from a node that holds the
// whole table (fillSources).
func (r *Replica) maybeFill() {
	if len(r.fills) == 0 || r.cp.take != nil || r.cp.state != nil || r.cp.rewound || r.now.Before(r.cp.retryAt) {
		return
	}
	for _, t := range slices.Sorted(maps.Keys(r.fills)) {
		for _, tier := range r.fillSources(t, r.fills[t]) {
			for _, c := range r.connList {
				if c.version < v4 || !r.copyable(c) || !slices.Contains(tier, c.peerName) || r.linkExcludes(c, []byte(t)) {
					continue // a link that excludes the table brings none of it (§24.6)
				}
				from, key := copyPointBefore([]byte(t))
				if !r.checkConn(c, c.sess.V3().RequestCopy(from, key)) {
					return
				}
				r.cp.take = &copyTake{conn: c.id, peer: c.peerName, origin: c.peerOrigin, snap: map[wire.OriginID]wire.CopyPosition{}, runStart: r.now, fill: t}
				r.copyEvent(CopyEvent{Peer: c.peerName, Kind: CopyFilling})
				return
			}
		}
	}
}

// fillSources are the nodes a fill of table may come from, in tiers, each merged copy bringing the
// table as far as its source holds it (HOLDS): those that carried it under the map before
// and carry it still first, since they hold it whole; then those that carried it before
// (the table moved whole, or its carriers are away), which hold it until the new carriers
// hold what they held (removeTables); then those added with this node, which hold what
// their own fills brought. A source that would bring nothing this fill lacks is left for
// CopyRetry (fillUseful).
func (r *Replica) fillSources(table string, f *fill) [][]string {
	m := &r.cmap.cur
	before := func(n string) bool { return f.from == nil || slices.Contains(f.from, n) }
	var both, former, added []string
	for _, n := range m.Placement[table] {
		switch {
		case n == r.id.Name:
		case before(n):
			both = append(both, n)
		default:
			added = append(added, n)
		}
	}
	for _, n := range f.from {
		if n != r.id.Name && !slices.Contains(both, n) {
			former = append(former, n)
		}
	}
	if len(m.Placement[table]) == 0 && f.from == nil {
		// Unplaced under both maps (this node held it and was added back as every node
		// was): every peer carries it.
		var all []string
		for _, c := range r.connList {
			all = append(all, c.peerName)
		}
		return [][]string{all}
	}
	// Last, any other node: one that holds none of the table still tells how far its own
	// entries write none of it (HOLDS's since), which is all a fill needs of an origin
	// that stopped writing the table long ago.
	var rest []string
	for _, c := range r.connList {
		if !slices.Contains(both, c.peerName) && !slices.Contains(former, c.peerName) && !slices.Contains(added, c.peerName) {
			rest = append(rest, c.peerName)
		}
	}
	return [][]string{both, former, added, rest}
}

// covers is how far the fill f is brought with the copy t merged: of each origin it wants,
// as far as the copy's source holds the table, or the fills before; and all it wants of an
// origin whose entries after that write none of the table: the source's own (HOLDS's
// since) and this node's own (its stop before it was added: fill.since).
func (r *Replica) covers(f *fill, t *copyTake) map[wire.OriginID]uint64 {
	src := t.sourceHold([]byte(t.fill))
	out := make(map[wire.OriginID]uint64, len(f.want))
	for o, w := range f.want {
		c := min(w, max(f.covered[o], src[o]))
		var since uint64
		switch o {
		case t.origin:
			since = t.since[t.fill]
		case r.id.Origin:
			since = f.since
		}
		if since > 0 && since <= c+1 {
			c = w
		}
		out[o] = c
	}
	return out
}

// fillUseful reports whether the copy t would bring its fill anything it lacks, as far as
// its source holds the table; one that would not is left, and its source left for
// CopyRetry.
func (r *Replica) fillUseful(c *conn, t *copyTake) bool {
	f := r.fills[t.fill]
	if f == nil {
		r.checkConn(c, c.sess.V3().AbortCopy(false, wire.CodeGoingAway, "table "+t.fill+" is no longer owed a fill"))
		r.cp.take = nil
		return false
	}
	after := r.covers(f, t)
	for o := range f.want {
		if after[o] > f.covered[o] {
			return true
		}
	}
	r.checkConn(c, c.sess.V3().AbortCopy(false, wire.CodeGoingAway,
		c.peerName+" holds table "+t.fill+" no further than this node's fills brought it"))
	r.cp.busy[c.peerName] = r.now.Add(r.cfg.CopyRetry)
	r.cp.take = nil
	return false
}

// fillChunk merges a chunk of the table being filled: a copied version is written where it
// is newer than this node's (last-writer-wins; this node applied none of the table's
// entries it was not sent, so whether it applied a version says nothing here). A chunk of
// another table ends the fill.
func (r *Replica) fillChunk(c *conn, t *copyTake, v *wire.ChunkView) {
	// Every chunk the source sent counts, those of the tables around it too: the fill's
	// cost on the link, against the table's size.
	r.counters.FillBytes += uint64(len(v.Raw()))
	if !t.judged {
		// Every COPYBEGIN came before the first chunk: the snapshot's holds are known.
		t.judged = true
		if !r.fillUseful(c, t) {
			return
		}
	}
	switch bytes.Compare(v.Table, []byte(t.fill)) {
	case -1: // a table before it, after the copy's resume point (copyPointBefore)
		r.checkConn(c, c.sess.V3().AckChunk())
		return
	case 1:
		r.checkConn(c, c.sess.V3().AbortCopy(false, wire.CodeGoingAway, "table "+t.fill+" is filled"))
		r.fillDone(t)
		return
	}
	var fix []store.Record
	var hlc wire.HLC
	it := v.Records()
	for {
		cr, more, _ := it.Next() // the session checked every record
		if !more {
			break
		}
		hlc = max(hlc, cr.HLC)
		l, has, err := r.store.Get(v.Table, cr.Key)
		if !r.check(err) {
			return
		}
		if has && !store.NewerVersion(store.Version{Token: cr.Token, HLC: cr.HLC, Origin: cr.Origin}, l.Version()) {
			continue
		}
		fix = append(fix, store.Record{Table: bytes.Clone(v.Table), Key: bytes.Clone(cr.Key), Value: bytes.Clone(cr.Value),
			Deleted: cr.Deleted, HLC: cr.HLC, Origin: cr.Origin, Token: cr.Token, Via: cr.Via, ViaHLC: cr.ViaHLC})
	}
	if len(fix) > 0 && !r.check(r.store.Repair(fix)) {
		return
	}
	feedWritten(&r.feeds.copied, fix)
	r.storedHLC = max(r.storedHLC, hlc)
	r.stored(fix)
	r.hlc = max(r.hlc, hlc) // later local writes order after every copied version
	r.counters.FillRecords += uint64(len(fix))
	r.checkConn(c, c.sess.V3().AckChunk())
}

// fillDone ends a copy of a fill: the table is as far as the copy's source holds it (its
// snapshot's positions, less what HOLDS said), and no longer owed once that is every
// position the fill wants; else the fill goes on from another source (CopyRetry for this
// one), in the map's control value either way.
func (r *Replica) fillDone(t *copyTake) {
	r.cp.take = nil
	f := r.fills[t.fill]
	if f == nil {
		return
	}
	n := &fill{want: f.want, covered: r.covers(f, t), from: f.from, since: f.since}
	done := true
	for o, w := range f.want {
		done = done && n.covered[o] >= w
	}
	fills := maps.Clone(r.fills)
	fills[t.fill] = n
	if done {
		delete(fills, t.fill)
	}
	// The control value is durable as it is written: the records it says are here must
	// be first (a power loss would keep the claim and lose them).
	if !r.syncNow() {
		return
	}
	cs := &r.cmap
	if !r.check(r.writeMap(cs.cur, cs.publisher, cs.published, cs.appliedAt, fills, r.held)) {
		return
	}
	r.fills = fills
	if !done {
		r.cp.busy[t.peer] = r.now.Add(r.cfg.CopyRetry)
		r.copyEvent(CopyEvent{Peer: t.peer, Kind: CopyStopped})
		return
	}
	r.counters.TablesFilled++
	r.copyEvent(CopyEvent{Peer: t.peer, Kind: CopyFilled})
}

// nameChars are the characters of a table name, in byte order.
const nameChars = "-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

// copyPointBefore is a COPY resume point just before table's first record (a copy's
// request names the record after which it begins, never a table's start): the highest
// table name below table with a key of 0xFF, so that no other table's records come
// between; (nil, nil), the snapshot's start, for the lowest name. A table the point names
// (a prefix of table's name) may still send its records with longer keys: the fill passes
// them over.
func copyPointBefore(table []byte) ([]byte, []byte) {
	n := len(table)
	i := strings.IndexByte(nameChars, table[n-1])
	switch {
	case i > 0:
		p := append(bytes.Clone(table[:n-1]), nameChars[i-1])
		for len(p) < maxTableName {
			p = append(p, nameChars[len(nameChars)-1])
		}
		return p, []byte{0xff}
	case n > 1:
		return bytes.Clone(table[:n-1]), []byte{0xff}
	}
	return nil, nil
}

// StoredCarries reads the cluster map a store holds (a stopped node's, for plait check)
// and reports which tables its node carries under it: every table when it holds no map
// or no placement.
func StoredCarries(s store.Store) (func(table []byte) bool, error) {
	id, err := s.Identity()
	if err != nil {
		return nil, err
	}
	raw, err := s.Control(controlMap)
	if err != nil || raw == nil {
		return nil, err
	}
	var sm storedMap
	if err := wire.Unmarshal(raw, &sm); err != nil {
		return nil, errorf("the stored cluster map does not decode: %v", err)
	}
	m, err := clustermap.Decode(sm.Map.Document)
	if err != nil {
		return nil, errorf("the stored cluster map: %v", err)
	}
	if len(m.Placement) == 0 {
		return nil, nil
	}
	return func(table []byte) bool { return m.Carries(id.Name, table) }, nil
}
