package replica

import (
	"crypto/sha256"
	"strconv"
	"time"

	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Receiving: the replica's own check of every entry a session delivers, then apply
// (last-writer-wins) and acknowledge.

// receive decides what to do with an entry a session checked against its channel (version
// 2) or receive vector (version 1), against what this node applied: apply it when it
// extends the origin's log, count a duplicate when the log holds it (checking it is the
// same entry), and treat anything else as a gap or a divergence. It then acknowledges what
// is durable (persist before ack).
func (r *Replica) receive(c *conn, v wire.TxnView, pos uint64) {
	if r.storage.err != nil {
		// Degraded: nothing is applied or acknowledged, and the view (which aliases the
		// received message) is not kept. The stream resumes from the applied seq once a
		// new replica runs on the reopened store.
		return
	}
	st := r.origin(v.Origin)
	h := v.Hash()
	switch {
	case v.Origin == r.id.Origin:
		// Sessions refuse this node's own entries; reaching here is a bug.
		r.check(errorf("a session delivered this node's own entry %d", v.Seq))
		return
	case v.Seq <= r.floor(v.Origin).Seq:
		// Below the floor: the entry is gone from the log, so there is nothing to compare;
		// the chain held at the floor already covers it.
		r.counters.DuplicatesReceived++
	case v.Seq <= st.applied.Seq:
		raw, err := r.store.Entry(v.Origin, v.Seq)
		if _, ok := skipped(err); ok {
			// This node holds the entry as part of a run it was not sent: nothing to
			// compare it with, and nothing of it to apply behind the position.
			r.counters.DuplicatesReceived++
			break
		}
		if !r.check(err) {
			return
		}
		if sha256.Sum256(raw) != h && v.Origin == c.peerOrigin && c.version >= 2 {
			r.peerRewound(c, st, "its entry at seq "+strconv.FormatUint(v.Seq, 10)+" differs from the one applied here")
			return
		}
		if sha256.Sum256(raw) != h {
			r.divergedHere(c, st, v.Seq, "entry "+strconv.FormatUint(v.Seq, 10)+" differs from the one applied")
			return
		}
		r.counters.DuplicatesReceived++
	case r.holding(st), r.retryWaiting(st):
		// Held back for the clock, or an entry that failed waits for its retry: what the
		// channel still had in flight is dropped unacknowledged, and comes again when the
		// hold ends. Version 1 has no channel to stop: its connection goes (nothing of it
		// after the entry was processed, so its peer cursor is before it), and the redial
		// streams the entry again.
		if c.version == 1 {
			r.closeConn(c, wire.CodeGoingAway, "origin "+st.id.String()+" is held back")
		}
		return
	case v.Seq == st.applied.Seq+1 && v.Prev != st.applied.Hash && v.Origin == c.peerOrigin && c.version >= 2:
		r.peerRewound(c, st, "its entry at seq "+strconv.FormatUint(v.Seq, 10)+" does not extend the log applied here")
		return
	case v.Seq == st.applied.Seq+1 && v.Prev != st.applied.Hash:
		r.divergedHere(c, st, v.Seq, "entry "+strconv.FormatUint(v.Seq, 10)+" does not extend the applied chain")
		return
	case v.Seq > st.applied.Seq+1:
		// The session's position is ahead of the store's: nothing can be applied from this
		// stream. Count the gap and resume the stream from the applied position.
		r.counters.GapsDetected++
		r.restream(c, st)
		return
	default:
		if r.hiddenIn(c, st, &v) {
			// An operation of a table this node carries, which the link excludes: applied
			// without it, the entry would pass that table's change for good (links.go).
			r.counters.EntriesRefusedExcluded++
			r.refuseHidden(c, st, ReasonLinkHides)
			return
		}
		if until, ahead := r.aheadOfClock(v.HLC); ahead {
			r.holdAhead(c, st, &v, until)
			return
		}
		if st.stuck == StuckClockAhead {
			st.stuck, st.stuckUntil = "", time.Time{}
		}
		if err := r.apply(&v, h, c, pos); err != nil {
			if entryFault(err) {
				r.applyFailed(c, st, v.Seq, err)
			} else {
				r.check(err)
			}
			return
		}
		if c.version == 1 {
			st.legacySource = c.peerName
		}
	}
	if c.version == 1 {
		c.v1LastPos[v.Origin] = pos
		r.check(c.sess.V1().Ack(pos))
	} else {
		r.check(c.sess.V2().Ack(v.Origin, v.Seq))
	}
}

// divergedHere handles an entry the session accepted that contradicts this node's log.
func (r *Replica) divergedHere(c *conn, st *originState, seq uint64, why string) {
	r.counters.Divergences++
	st.diverged, st.divergedAt = true, seq
	if c.version == 1 {
		r.closeConn(c, wire.CodeDivergence, "origin "+st.id.String()+": "+why)
		return
	}
	r.unsubscribe(c, st.id)
	r.exclude(c, st.id)
	if st.source == c.id {
		r.loseSource(st, ReasonDiverged)
	}
}

// restream resumes an origin's stream from the applied position after a gap the session
// could not see.
func (r *Replica) restream(c *conn, st *originState) {
	if c.version == 1 {
		r.closeConn(c, wire.CodeGapDetected, "origin "+st.id.String()+" is ahead of the applied log")
		return
	}
	r.unsubscribe(c, st.id)
	if st.source == c.id {
		r.subscribe(c, st, st.applied.Seq)
	}
}

// rewindV1 moves a version-1 peer cursor back before an entry that never arrived: a gap
// in origin o shows that the missing entry lies after the last entry of o processed on
// this connection, and the scalar cursor may have passed it since. Without such an entry
// it could lie anywhere: the peer's whole log is asked for again (its entries are then
// duplicates, the price of version 1).
func (r *Replica) rewindV1(c *conn, o wire.OriginID) {
	pos := c.v1LastPos[o]
	r.check(r.store.SetPeerCursor(c.peerOrigin, pos))
}

// apply writes one entry that extends its origin's log: the last-writer-wins winners, the
// log entry and the cursor, atomically; then it updates what the replica knows and fans
// the entry out. A failure is the caller's to classify (entryFault, check): nothing of the
// entry is written or known then.
func (r *Replica) apply(v *wire.TxnView, h wire.Hash, from *conn, pos uint64) error {
	st := r.origin(v.Origin)
	b := &store.Batch{Origin: v.Origin, Seq: v.Seq, Hash: h, Txn: v.Raw()}
	if err := r.lww(v, b, from); err != nil {
		return err
	}
	r.leafEntry(v, b) // leaf.go: a leaf's own writes come back as no-ops
	if len(r.passed) > 0 {
		// It passes operations of tables this node holds and does not carry.
		err := r.stopHolds(v.Origin, v.Seq-1, r.passed)
		r.passed = r.passed[:0]
		if err != nil {
			return err
		}
	}
	if !st.namePersisted {
		b.Name = st.name
	}
	if from != nil && from.version == 1 {
		b.PeerOrigin, b.PeerCursor = from.peerOrigin, pos
	}
	twice, err := r.leafMark(v, b)
	if err != nil {
		return err
	}
	pos, err = r.store.Apply(b)
	if err != nil {
		return err
	}
	if twice {
		r.counters.LeafWritesTwice++
	}
	r.arrivals = pos
	r.logApplied(v.Origin, len(b.Txn))
	st.namePersisted = st.namePersisted || b.Name != ""
	// Every position, hold and clock below is the delivering identity's (docs/design.md
	// §27.1): a format-3 entry's HLC is above its leaf's (§27.2), so raising the clocks to
	// it covers the conflict HLCs it wrote.
	st.applied.Seq, st.applied.Hash, st.appliedHLC = v.Seq, h, v.HLC
	st.progressAt, st.appliedAt = r.now, r.now
	if v.Seq >= st.headSeq {
		st.headSeq, st.headHLC = v.Seq, v.HLC
	}
	if st.diverged && v.Seq >= st.divergedAt {
		st.diverged = false // the chain goes on past the entry that diverged
	}
	r.hlc = max(r.hlc, v.HLC)
	r.storedHLC = max(r.storedHLC, v.HLC)
	r.stored(b.Records)
	r.counters.TxnsApplied++
	st.retrySucceeded()
	r.headsDirty[v.Origin] = true
	if v.Origin == r.id.Origin {
		r.leftHead() // a local write: the peers level with it are behind from now
	}
	for _, c := range r.connList {
		if c.established && c.version == 1 && c != from && c.peerOrigin != v.Origin {
			r.check(c.sess.V1().Observe(vector.Entry{Origin: v.Origin, Seq: v.Seq, Hash: h}))
		}
	}
	return nil
}

// leafMark sets b.Leaf for a format-3 entry on a node that keeps leaf marks (MaxLeaves > 0,
// docs/design.md §27.3): every such entry it applies, its own and other hubs', raises the
// leaf's mark in the same write, so its marks index the highest leaf seq re-originated
// anywhere it has seen. It reports whether the entry's leaf seq is at or below the mark
// held (a write re-originated by two hubs across a move: applied all the same, its
// versions equal, counted once applied). A core node (MaxLeaves 0) keeps no marks.
func (r *Replica) leafMark(v *wire.TxnView, b *store.Batch) (twice bool, err error) {
	if v.Format() != wire.TxnFormat3 || r.cfg.MaxLeaves <= 0 {
		return false, nil
	}
	m, found, err := r.store.LeafMark(v.Leaf.Origin)
	if err != nil {
		return false, err
	}
	b.Leaf = &store.LeafMark{Leaf: v.Leaf.Origin, Seq: v.Leaf.Seq, Hash: v.Leaf.Hash, Carrier: v.Origin, At: v.Seq}
	if r.cfg.Mutations.ReoriginateTwiceAfterCrash && v.Origin == r.id.Origin {
		// The mutation: the mark of this node's own re-originated entry is not written with
		// it, only kept in memory (hub.go's leafMarkOf reads it), so a crash loses it.
		if r.hub.unwritten == nil {
			r.hub.unwritten = map[wire.OriginID]store.LeafMark{}
		}
		r.hub.unwritten[v.Leaf.Origin] = *b.Leaf
		b.Leaf = nil
	}
	return found && v.Leaf.Seq <= m.Seq, nil
}

// conflictOf is the conflict identity of the versions entry v writes (docs/design.md
// §27.1): the leaf's HLC and origin for a format-3 entry (a hub's re-originated leaf
// write, token zero), the entry's own otherwise.
func conflictOf(v *wire.TxnView) (wire.HLC, wire.OriginID) { return v.Conflict() }

// lww puts into b the record versions the transaction wins: an operation replaces a record
// when its version is not older than the record's by the conflict order (store.NewerVersion:
// carries a token, token, HLC, origin; docs/design.md §25.4), and its record carries the
// transaction's token. The version is the conflict identity (conflictOf): a format-3
// entry's records carry the leaf's HLC and origin, and the entry's origin and HLC as Via
// and ViaHLC (docs/design.md §27.1). Equal versions come from one origin, whose entries
// every node applies in seq order, or from one leaf write that two hubs re-originated
// (§27.3: the same operations; the record keeps the Via of the first, as the store's audit
// and reseed expect, §27.8), so the outcome is the same everywhere. A later operation
// of one transaction on the same key replaces an earlier one. A transaction newer than
// every stored version (beatsStored: a local write, or an origin's entries arriving in
// order, while no stored version carries a token) wins without reading the store.
func (r *Replica) lww(v *wire.TxnView, b *store.Batch, from *conn) error {
	read := !r.beatsStored(v)
	chlc, corigin := conflictOf(v)
	var via wire.OriginID
	var viaHLC wire.HLC
	if v.Format() == wire.TxnFormat3 {
		via, viaHLC = v.Origin, v.HLC
		if r.cfg.Mutations.HubHLCForConflicts {
			chlc, corigin = v.HLC, v.Origin // the mutation: the hub's identity decides conflicts
		}
	}
	ver := store.Version{Token: v.Token, HLC: chlc, Origin: corigin}
	ignoreTokens := r.cfg.Mutations.IgnoreTokens
	if ignoreTokens {
		read, ver.Token = true, wire.Token{}
	}
	r.passed = r.passed[:0]
	if r.lwwIdx == nil || len(r.lwwIdx) > 4096 { // a huge transaction's map is not kept
		r.lwwIdx = map[string]int{}
	}
	idx := r.lwwIdx // the record index of each table and key seen in this transaction
	clear(idx)
	b.Records = make([]store.Record, 0, v.NumOps)
	// Without placement or excluded tables anywhere every operation applies: the checks
	// below stay off the write path.
	st, filtered := r.origins[v.Origin], len(r.cmap.cur.Placement) > 0 || len(r.linkTables) > 0
	// An untokened entry in a fenced table is counted: it orders below every token.
	untokenedFenced := v.Token.IsZero() && len(r.cmap.cur.FencedTables) > 0
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		if untokenedFenced && r.cmap.cur.Fenced(op.Table) {
			r.counters.WritesUntokenedFenced++
		}
		if filtered && st != nil {
			r.placed(st, op.Table)
		}
		if filtered && !r.appliesOn(from, op.Table) {
			if r.held[string(op.Table)] != nil {
				r.passed = append(r.passed, op.Table)
			}
			continue // the entry is stored whole, for its chain; its records are not (§24.2, §24.6)
		}
		rec := store.Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete, HLC: chlc, Origin: corigin, Token: v.Token,
			Via: via, ViaHLC: viaHLC}
		r.lwwKey = append(append(append(r.lwwKey[:0], op.Table...), 0), op.Key...) // no table name holds a 0 byte
		if i, ok := idx[string(r.lwwKey)]; ok {
			if b.Records[i].Table != nil {
				b.Records[i] = rec
			}
			continue
		}
		idx[string(r.lwwKey)] = len(b.Records)
		if !read {
			b.Records = append(b.Records, rec)
			continue
		}
		old, found, err := r.store.Get(op.Table, op.Key)
		if err != nil {
			return err
		}
		ov := old.Version()
		if ignoreTokens {
			ov.Token = wire.Token{}
		}
		if found && (store.NewerVersion(ov, ver) || !via.IsZero() && ov == ver) {
			// The stored version wins; later ops of this key too. An equal one is a leaf
			// write another hub delivered first (§27.3): it keeps that hub's Via.
			b.Records = append(b.Records, store.Record{})
			continue
		}
		b.Records = append(b.Records, rec)
	}
	kept := b.Records[:0]
	for _, rec := range b.Records {
		if rec.Table != nil {
			kept = append(kept, rec)
		}
	}
	b.Records = kept
	return nil
}

// beatsStored reports whether every version of transaction v is newer than every stored
// version (store.NewerVersion), so that last-writer-wins need read none: a tokened one whose
// token is above every stored token (storedToken); an untokened one while no stored version
// carries a token, and above every stored HLC (storedHLC) by its conflict HLC: a format-3
// entry's leaf HLC, never its entry HLC, which is above the leaf's and says nothing of how
// old the leaf's write is (docs/design.md §27.1).
func (r *Replica) beatsStored(v *wire.TxnView) bool {
	if !v.Token.IsZero() {
		return v.Token.Compare(r.storedToken) > 0
	}
	chlc, _ := conflictOf(v)
	return r.storedToken.IsZero() && chlc > r.storedHLC
}

// stored notes record versions written: storedHLC and storedToken rise to theirs.
func (r *Replica) stored(recs []store.Record) {
	for i := range recs {
		r.storedHLC = max(r.storedHLC, recs[i].HLC)
		if recs[i].Token.Compare(r.storedToken) > 0 {
			r.storedToken = recs[i].Token
		}
	}
}
