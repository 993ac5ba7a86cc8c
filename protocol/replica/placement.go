package replica

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"maps"
	"slices"
	"strconv"

	"plait/protocol"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Placement (docs/design.md §24): which tables this node and its peers carry, as the
// cluster map's placement says (clustermap.Map.Carries, the one answer to it).

// carries reports whether this node carries table under its map: it writes and stores
// that table's records, and applies an entry's operations of it.
func (r *Replica) carries(table []byte) bool { return r.cmap.cur.Carries(r.id.Name, table) }

// skipped reports whether a store's answer for one seq is a run it holds as a skip (a
// *store.SkippedError), and the run.
func skipped(err error) (*store.SkippedError, bool) {
	var sk *store.SkippedError
	ok := errors.As(err, &sk)
	return sk, ok
}

// placed notes the placed tables of an origin's entry or run: a source of the origin must
// carry those of them this node carries (canServe).
func (r *Replica) placed(st *originState, table []byte) {
	if !r.cmap.cur.Placed(table) && !r.linkTables[string(table)] || st.writes[string(table)] {
		return
	}
	if st.writes == nil {
		st.writes = map[string]bool{}
	}
	st.writes[string(table)] = true
}

// canServe reports whether the peer on c can send this node every entry of origin st it
// needs (§24.2, the relay rule): the origin's own node always; a version-4 relay that
// carries every placed table the origin was seen to write and this node carries; a
// version-3 relay only while the origin was seen to write none of them (it knows no
// placement, so nothing says what it holds).
func (r *Replica) canServe(c *conn, st *originState) bool {
	if c.direct(st.id) || len(st.writes) == 0 || r.cfg.Mutations.AnyRelay {
		return true
	}
	for t := range st.writes {
		if r.carries([]byte(t)) && r.cmap.cur.Placed([]byte(t)) && (c.version < v4 || !r.cmap.cur.Carries(c.peerName, []byte(t))) {
			return false
		}
	}
	return true
}

// leftOut reports whether the entry raw is left out of the stream to the peer on c: none
// of its operations is of a table the peer carries. It returns the entry's HLC and its
// tables (sorted, distinct: all placed, since every node carries the others).
func (r *Replica) leftOut(c *conn, raw []byte) (wire.HLC, [][]byte, bool) {
	v, err := wire.ParseTxn(raw)
	if err != nil {
		return 0, nil, false // sent whole: the peer's checks say what is wrong with it
	}
	var tables [][]byte
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		if r.cmap.cur.Carries(c.peerName, op.Table) && (!r.linkExcludes(c, op.Table) || r.cfg.Mutations.IgnoreLinks) {
			return 0, nil, false
		}
		tables = insertTable(tables, op.Table)
	}
	return v.HLC, tables, true
}

// insertTable adds t to the sorted, distinct list ts.
func insertTable(ts [][]byte, t []byte) [][]byte {
	i, found := slices.BinarySearchFunc(ts, t, bytes.Compare)
	if found {
		return ts
	}
	return slices.Insert(ts, i, bytes.Clone(t))
}

// skipRun is a run of entries left out of one stream and not yet sent as a SKIP: its end
// (seq, chain hash, HLC) and the tables its entries write.
type skipRun struct {
	on     bool
	to     uint64
	hash   wire.Hash
	hlc    wire.HLC
	tables [][]byte
}

// addRun extends the stream's run to seq (hash, hlc) with the tables of what it adds,
// sending the run first when the tables would pass a SKIP's bound. It reports false when
// the connection cannot take more now.
func (r *Replica) addRun(c *conn, o wire.OriginID, s *outStream, seq uint64, hash wire.Hash, hlc wire.HLC, tables [][]byte) bool {
	merged := s.run.tables
	for _, t := range tables {
		merged = insertTable(merged, t)
	}
	if s.run.on && len(merged) > wire.MaxSkipTables {
		if !r.flushRun(c, o, s) {
			return false
		}
		merged = nil
		for _, t := range tables {
			merged = insertTable(merged, t)
		}
	}
	s.run = skipRun{on: true, to: seq, hash: hash, hlc: hlc, tables: merged}
	return true
}

// flushRun sends the stream's run as one SKIP, if it has one. It reports false when the
// connection cannot take more now (the run stays, and goes at the next pump).
func (r *Replica) flushRun(c *conn, o wire.OriginID, s *outStream) bool {
	if !s.run.on {
		return true
	}
	if !r.nameOrigins(c, o) {
		return false
	}
	if err := c.sess.V4().Skip(o, s.run.to, s.run.hash, s.run.hlc, s.run.tables, r.cmap.cur.Generation); err != nil {
		return r.sendRefused(c, err)
	}
	s.run = skipRun{}
	r.counters.SkipsSent++
	return true
}

// runPurged answers a peer below version 4 whose stream reached a run this node holds as
// a skip: it cannot be sent those entries, so to it they are purged (§24.3). A version-3
// peer is told the run's end as the floor (PURGED) and takes the origin elsewhere; an
// older one has no such answer, and the connection closes with purged.
func (r *Replica) runPurged(c *conn, o wire.OriginID, sk *store.SkippedError) bool {
	return r.purgedTo(c, o, sk.To, sk.Hash, "origin "+o.String()+": seqs "+strconv.FormatUint(sk.From, 10)+" to "+
		strconv.FormatUint(sk.To, 10)+" are held here as a run of tables this node does not carry")
}

// tokenPurged answers a peer below version 4 whose stream reached an entry of transaction
// format 2 (a fencing token, docs/design.md §25.4) or 3 (a hub's leaf block, §27), which its
// connection cannot carry: to it the entry is purged, as a run is (runPurged), with the
// entry as the floor.
func (r *Replica) tokenPurged(c *conn, o wire.OriginID, seq uint64, raw []byte) bool {
	return r.purgedTo(c, o, seq, sha256.Sum256(raw), "origin "+o.String()+": entry "+strconv.FormatUint(seq, 10)+
		" has transaction format "+strconv.Itoa(int(raw[0]))+", which a version-"+strconv.FormatUint(c.version, 10)+" connection does not carry")
}

// purgedTo tells a peer below version 4 that origin o's entries up to seq (chain hash hash)
// cannot be sent to it: a version-3 peer by PURGED with that floor, an older one by closing
// the connection with purged and why. It reports false when the connection cannot take
// more now.
func (r *Replica) purgedTo(c *conn, o wire.OriginID, seq uint64, hash wire.Hash, why string) bool {
	r.counters.PurgedAnswers++
	c.dropOut(o)
	if c.version < 3 {
		r.closeConn(c, wire.CodePurged, why)
		return false
	}
	return r.checkConn(c, c.sess.V3().Purged(o, seq, hash)) && c.sess.State() == protocol.StateEstablished
}

// receiveSkip takes a run of origin o that the peer on c left out of its stream (§24.2),
// which the session checked against the channel, against what this node applied: store it
// as one row and acknowledge its end; a run naming a table this node carries is refused,
// and the origin taken from a source that can send it: a relay that carries the table, or
// a link that does not exclude it (§24.6: a run the link left out is refused too).
func (r *Replica) receiveSkip(c *conn, o wire.OriginID, sk *wire.Skip) {
	if r.storage.err != nil {
		return // degraded: nothing is applied or acknowledged (as receive)
	}
	st := r.origin(o)
	switch {
	case o == r.id.Origin:
		r.check(errorf("a session delivered a run of this node's own origin, %d to %d", sk.From, sk.To))
		return
	case sk.To <= st.applied.Seq:
		r.counters.DuplicatesReceived++
		r.check(c.sess.V2().Ack(o, sk.To))
		return
	case r.holding(st), r.retryWaiting(st):
		return // as receive: what the channel had in flight comes again
	case sk.From != st.applied.Seq+1:
		r.counters.GapsDetected++
		r.restream(c, st)
		return
	case sk.Prev != st.applied.Hash:
		r.divergedHere(c, st, sk.From, "the run "+strconv.FormatUint(sk.From, 10)+" to "+strconv.FormatUint(sk.To, 10)+
			" does not extend the applied chain")
		return
	}
	for _, t := range sk.Tables {
		r.placed(st, t)
	}
	for _, t := range sk.Tables {
		if r.carries(t) && !r.cfg.Mutations.PassCarriedSkip {
			if r.linkExcludes(c, t) {
				// Left out by the link, not by the peer's placement: taken over a link
				// that hides none of the origin's tables, never passed (links.go).
				r.counters.SkipsRefused++
				r.refuseHidden(c, st, ReasonSkipRefused)
				return
			}
			r.refuseSkip(c, st, t)
			return
		}
	}
	if !r.check(r.stopHolds(o, sk.From-1, sk.Tables)) {
		return
	}
	b := &store.Batch{Origin: o, Seq: sk.To, Hash: sk.Hash,
		Skip: &store.Skip{From: sk.From, Prev: sk.Prev, Tables: sk.Tables, Generation: sk.Generation, HLC: sk.HLC}}
	if !st.namePersisted {
		b.Name = st.name
	}
	// The store keeps a run right after a run as one row (store.Extend): the log grows by
	// the merged row less the row it replaces, and a named feed whose position is at or
	// past the earlier run now has the whole merged row above it (runApplied).
	run, prev := store.SkippedOf(b), (*store.SkippedError)(nil)
	if sk.From > 1 {
		_, err := r.store.Entry(o, sk.From-1)
		if p, ok := skipped(err); ok {
			if ext, ok := store.Extend(p, run); ok {
				run, prev = ext, p
			}
		}
	}
	if _, err := r.store.Apply(b); !r.check(err) {
		return
	}
	r.runApplied(o, run, prev)
	st.namePersisted = st.namePersisted || b.Name != ""
	st.applied.Seq, st.applied.Hash, st.appliedHLC = sk.To, sk.Hash, sk.HLC
	st.progressAt, st.appliedAt = r.now, r.now
	if sk.To >= st.headSeq {
		st.headSeq, st.headHLC = sk.To, sk.HLC
	}
	if st.diverged && sk.To >= st.divergedAt {
		st.diverged = false
	}
	r.counters.SkipsReceived++
	r.headsDirty[o] = true
	r.check(c.sess.V2().Ack(o, sk.To))
}

// refuseSkip refuses a run that names table t, which this node carries: it never moves
// past it (§24.2). A peer whose map is older than this node's is asked again once its map
// catches up (onMap); one at this node's generation or later does not carry t, and is no
// source of the origin while the map stands (canServe, through st.writes).
func (r *Replica) refuseSkip(c *conn, st *originState, t []byte) {
	r.counters.SkipsRefused++
	r.unsubscribe(c, st.id)
	r.exclude(c, st.id)
	if max(c.peerGen, r.cmap.members[c.peerName].Generation) < r.cmap.cur.Generation {
		if c.skipWait == nil {
			c.skipWait = map[wire.OriginID]bool{}
		}
		c.skipWait[st.id] = true
	}
	if st.source == c.id {
		r.loseSource(st, ReasonSkipRefused)
	}
}

// mapCaughtUp lets the origins whose runs the peer on c had judged under an older map be
// taken from it again, now that it holds this node's generation or a later one.
func (r *Replica) mapCaughtUp(c *conn) {
	for o := range c.skipWait {
		if _, ok := c.excluded[o]; ok {
			r.unexclude(c, o)
		}
		r.routeSome[o] = true
	}
	c.skipWait = nil
}

// canCopy reports whether the peer on c may be this node's base copy source while tables
// are placed: a version-4 peer, which says how far its snapshot holds each table it does
// not hold whole (HOLDS). One that does not carry a table this node carries may still
// serve: its copy leaves that table alone here (sourceWhole), and is refused where it
// would pass entries that may write it (partialCopyRefusal). A version-3 peer holds every
// table, but whether it lost none of them to a copy of its own nothing says: it is no
// source while any table is placed. Nor while the map names lock homes or fences a table
// (belowV4Tokens).
func (r *Replica) canCopy(c *conn) bool {
	return len(r.cmap.cur.Placement) == 0 && len(r.held) == 0 && len(r.fills) == 0 && !r.belowV4Tokens(c) || c.version >= v4
}

// belowV4Tokens reports whether the peer on c is below version 4 while this node's map names
// lock homes or fences a table (docs/design.md §25.4): such a peer holds the versions of
// writes under locks without their tokens (its copies and repairs came over version 3), and
// its copy would raise this node's logs past the tokened entries, leaving it those versions
// ordered by clock where every version-4 node orders them by token. It is no copy source
// then, and no fill's (which asks version 4 anyway).
func (r *Replica) belowV4Tokens(c *conn) bool {
	m := &r.cmap.cur
	return c.version < v4 && (len(m.LockHomes) > 0 || len(m.FencedTables) > 0)
}

// passOverBelowV4 counts, once per connection, a peer that would have been this node's
// base copy source but for belowV4Tokens (Counters.CopySourcesBelowV4): a node whose only
// sources are such peers waits for a version-4 one, and the operator sees why.
func (r *Replica) passOverBelowV4(c *conn) {
	if !c.copyPassedOver && r.belowV4Tokens(c) && r.copySource(c) {
		c.copyPassedOver = true
		r.counters.CopySourcesBelowV4++
	}
}

// unsafeRaises lists the origins the copy t from the peer on c must not raise (with why,
// for the first): the copy would raise the origin's log past entries that may write a
// table this node carries (mayWrite), which the snapshot does not hold that far (HOLDS),
// unless the origin is the source's own and the source says that its entries it raises
// past write none of the table (HOLDS's since).
func (r *Replica) unsafeRaises(c *conn, t *copyTake, positions []wire.CopyPosition) (map[wire.OriginID]bool, string) {
	if r.cfg.Mutations.CopyPastCarried {
		return nil, ""
	}
	var out map[wire.OriginID]bool
	why := ""
	for _, table := range slices.Sorted(maps.Keys(t.holds)) {
		if !r.carries([]byte(table)) {
			continue
		}
		h := t.holds[table]
		for _, p := range positions {
			st := r.origins[p.Origin]
			if out[p.Origin] || !r.raises(p) || h[p.Origin] >= p.Seq {
				continue // not raised by the copy, or held as far as it is raised
			}
			if s := t.since[table]; p.Origin == c.peerOrigin && s > 0 && (st == nil && s <= 1 || st != nil && s <= st.applied.Seq+1) {
				continue // the source's own entries it raises past write none of the table
			}
			if r.mayWrite(st, table) {
				if out == nil {
					out = map[wire.OriginID]bool{}
					why = "the copy would raise origin " + p.Origin.String() + " past entries that may write table " + table +
						", which " + c.peerName + " holds only through seq " + strconv.FormatUint(h[p.Origin], 10)
				}
				out[p.Origin] = true
			}
		}
	}
	return out, why
}

// raises reports whether a copy's position p raises this node's log of its origin.
func (r *Replica) raises(p wire.CopyPosition) bool {
	st := r.origins[p.Origin]
	return p.Origin != r.id.Origin && (st == nil || p.Seq > st.applied.Seq)
}

// compared reports whether anti-entropy compares table with the peer on c (§24.2): it is
// carried on both sides. A peer below version 4 knows no placement and holds every table.
func (r *Replica) compared(c *conn, table []byte) bool {
	if r.linkExcludes(c, table) {
		return false // the link leaves it out both ways (§24.6)
	}
	m := &r.cmap.cur
	if !m.Placed(table) {
		return true
	}
	if r.Filling(table) {
		return false // its fill brings it (tablemove.go)
	}
	return m.Carries(r.id.Name, table) && (c.version < v4 || m.Carries(c.peerName, table))
}

// carriesAll reports whether this node carries every table its map places.
func (r *Replica) carriesAll() bool {
	for t := range r.cmap.cur.Placement {
		if !r.carries([]byte(t)) {
			return false
		}
	}
	return true
}
