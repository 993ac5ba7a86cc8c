package replica

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// The base copy (docs/design.md §15). A node that no log can serve from its position takes
// a copy of a version-3 peer's records, merges it into its own, and then streams each
// origin from the positions the copy's snapshots cover, which the peer keeps for it. A
// node serves at most Config.MaxCopies copies at once, each from one snapshot of its store.
//
// The merge never replaces: a copied version wins only where it is newer than the
// receiver's, and a version this node already applied is never taken again; a record of
// the receiver that the sender's snapshot lacks is removed only when the snapshot's vector
// shows the sender applied the write that made it (the sender then deleted it, and
// dropped the tombstone); anything else the receiver holds stays, and its own writes
// replicate as before.

// copyTake is the copy this node is taking now, on one connection.
type copyTake struct {
	conn     ConnID
	peer     string
	origin   wire.OriginID                       // the source's own origin
	snap     map[wire.OriginID]wire.CopyPosition // the current snapshot's vector, as COPYBEGIN gives it
	merged   bool                                // the current snapshot's vector is in the state's
	total    CopyTotals
	runStart time.Time // this run of the copy (since the last resume)
	runBytes uint64
	fill     string // a table this node was added to, filled by this copy alone ("": a base copy)
	judged   bool   // judged worth taking from this snapshot (fillUseful, judgeCopy)
	// unsafe: the origins the copy must not raise, and why (unsafeRaises)
	unsafe map[wire.OriginID]bool
	why    string
	// holds: the tables the snapshot does not hold whole, and how far it holds them (HOLDS)
	holds map[string]map[wire.OriginID]uint64
	// since: of those tables, the seq from which the source's own entries write none of
	// it (HOLDS key 4)
	since map[string]uint64
	// hidden: the tables this node carries that the link to the source excludes when the
	// copy starts (links.go): the copy holds none of them, whatever its HOLDS say, so none
	// of their chunks is stored, none of their records is taken for deleted, and no origin
	// that may write them is raised (hideTables)
	hidden map[string]bool
}

// CopyTotals is what a sender says of its snapshot, for progress: 0 when unknown.
type CopyTotals struct {
	Tables, Records, Bytes uint64
}

// copyServe is a copy this node serves on one connection.
type copyServe struct {
	snap       store.Snapshot
	table, key []byte // the last record sent (nil: the request's point, or the start)
	records    uint64
	bytes      uint64
	started    time.Time
	total      CopyTotals
	pending    []store.Record // read from the snapshot, not yet sent (one chunk's worth at most)
	// vector is the copy's vector (COPYBEGIN) by origin: readAhead leaves out the records
	// it does not cover (Counters.CopyHeldBack counts them).
	vector map[wire.OriginID]wire.HLC
	// via: the peer's connection carries via blocks (version 4, chunk format 3); to an
	// older peer readAhead leaves out the records that need one (a hub's re-originated
	// leaf writes: docs/design.md §27.1).
	via    bool
	tables uint64 // tables reached
	limit  int    // the chunk size aimed at (Config.CopyChunk, lower after a peer's frame limit refused one)

	// read and recs are pending's and a chunk's record lists, kept for the next ones:
	// nothing holds them once SendChunk copied the chunk.
	read []store.Record
	recs []wire.CopyRecord
}

// copying is the replica's state of base copies.
type copying struct {
	state   *store.CopyState // the copy being taken, as the store holds it (nil: none)
	take    *copyTake        // the run taking it now (nil: none)
	serving map[ConnID]*copyServe
	retryAt time.Time            // no copy is asked for before then (after a refusal)
	busy    map[string]time.Time // peers that answered copy-busy, until then
	log     []CopyEvent
	rewound bool // a copy showed this node's own origin ahead of its log: no more copies
}

// CopyEvent is one copy starting, resuming, ending or stopping, for the shell's log.
type CopyEvent struct {
	At      time.Time
	Peer    string
	Kind    CopyEventKind
	Records uint64 // copied so far
	Bytes   uint64
	Err     *wire.Error // why it stopped (stopped, refused)
}

// CopyEventKind says what a CopyEvent reports.
type CopyEventKind string

// The copy events.
const (
	CopyStarted   CopyEventKind = "started"   // this node began taking a copy
	CopyResumed   CopyEventKind = "resumed"   // it went on with one, after the last record made durable
	CopyCompleted CopyEventKind = "completed" // the copy ended and its positions were taken
	CopyStopped   CopyEventKind = "stopped"   // the run stopped early; the copy resumes later
	CopyServed    CopyEventKind = "served"    // this node began serving a copy to Peer
	CopyRefused   CopyEventKind = "refused"   // this node refused a copy (its own origin ahead of its log)
	CopyFilling   CopyEventKind = "filling"   // this node began filling a table it was added to (tablemove.go)
	CopyFilled    CopyEventKind = "filled"    // it filled it
)

const maxCopyEvents = 256

func (r *Replica) copyEvent(e CopyEvent) {
	e.At = r.now
	if len(r.cp.log) == maxCopyEvents {
		r.cp.log = append(r.cp.log[:0], r.cp.log[1:]...)
	}
	r.cp.log = append(r.cp.log, e)
}

// CopyEvents hands over the copy events since the last call (at most maxCopyEvents, the
// latest).
func (r *Replica) CopyEvents() []CopyEvent {
	e := r.cp.log
	r.cp.log = nil
	return e
}

// loadCopy reads the copy being taken, if any.
func (r *Replica) loadCopy() error {
	st, err := r.store.CopyState()
	if err != nil {
		return err
	}
	r.cp = copying{state: st, serving: map[ConnID]*copyServe{}, busy: map[string]time.Time{}}
	return nil
}

// ---- taking a copy ----

// blockedBy reports whether connection c holds origin st above this node's position but
// cannot serve it: its floor is above the applied seq (version 3).
func (r *Replica) blockedBy(c *conn, st *originState) bool {
	h, has := c.heads[st.id]
	return c.version >= 3 && c.floors[st.id] > st.applied.Seq && (c.direct(st.id) || has && h.Seq > st.applied.Seq)
}

// maybeCopy starts or resumes the copy when one is needed and none runs: a copy was left
// unfinished, or an origin has no candidate, no source that can bring it on (sourceless),
// and a version-3 peer holds it beyond a floor above this node's position.
func (r *Replica) maybeCopy() {
	if r.cp.take != nil || r.cp.rewound || r.now.Before(r.cp.retryAt) {
		return
	}
	// A source whose link excludes a table this node carries is the last choice: its copy
	// brings none of that table and raises no origin that may write it (hideTables).
	var pick *conn
	better := func(c *conn) bool {
		switch {
		case pick == nil:
			return true
		case r.linkHidesCarried(pick) != r.linkHidesCarried(c):
			return r.linkHidesCarried(pick)
		}
		return r.cp.state != nil && c.peerName == r.cp.state.Peer
	}
	if r.cp.state != nil {
		for _, c := range r.connList {
			r.passOverBelowV4(c)
			if r.copyable(c) && better(c) {
				pick = c
			}
		}
	} else {
		for _, st := range r.originList {
			if st.id == r.id.Origin || !r.sourceless(st) || len(r.candidates(st)) > 0 {
				continue
			}
			for _, c := range r.connList {
				if r.blockedBy(c, st) {
					r.passOverBelowV4(c)
				}
				if r.copyable(c) && r.blockedBy(c, st) && better(c) {
					pick = c
				}
			}
			if pick != nil {
				break
			}
		}
	}
	if pick != nil {
		r.startCopy(pick)
		return
	}
	r.maybeFill()
}

// sourceless reports whether an origin has no source that can bring it on: none, or one
// that holds nothing above the applied seq while a head above it is known and the origin
// has waited StallTimeout with nothing applied. Such a source is a relay no further than
// this node, and it may get no further: its only way to the origin may be this node, whose
// split horizon hides the origin from it while it is the source. Waiting for it, a node
// below every other peer's floor would wait for ever; the wait lets a relay that is about
// to receive the entries bring them first.
func (r *Replica) sourceless(st *originState) bool {
	if st.source == 0 {
		return true
	}
	return st.srcHead <= st.applied.Seq && st.headSeq > st.applied.Seq &&
		!r.now.Before(st.waitingSince().Add(r.cfg.StallTimeout))
}

// copyable reports whether a connection may serve a copy now: established at version 3,
// not busy, the link's direction lets this node take from the peer (a copy is taking,
// and a peer that does not send to this node pumps no copy to it either), and, while
// tables are placed or locks are on, at version 4 (canCopy).
func (r *Replica) copyable(c *conn) bool { return r.canCopy(c) && r.copySource(c) }

// copySource is copyable but for what the map asks of the source (canCopy).
func (r *Replica) copySource(c *conn) bool {
	if !c.established || c.version < 3 || c.sess.State() != protocol.StateEstablished || !r.receivesFrom(c) {
		return false
	}
	if until, ok := r.cp.busy[c.peerName]; ok {
		if r.now.Before(until) {
			return false
		}
		delete(r.cp.busy, c.peerName)
	}
	return true
}

func (r *Replica) startCopy(c *conn) {
	var table, key []byte
	kind := CopyStarted
	if st := r.cp.state; st != nil {
		table, key, kind = st.Table, st.Key, CopyResumed
		r.counters.CopiesResumed++
	} else {
		r.counters.CopiesStarted++
	}
	if !r.checkConn(c, c.sess.V3().RequestCopy(table, key)) {
		return
	}
	r.cp.take = &copyTake{conn: c.id, peer: c.peerName, snap: map[wire.OriginID]wire.CopyPosition{}, runStart: r.now}
	r.hideTables(c, r.cp.take)
	ev := CopyEvent{Peer: c.peerName, Kind: kind}
	if st := r.cp.state; st != nil {
		ev.Records, ev.Bytes = st.Records, st.Bytes
	}
	r.copyEvent(ev)
}

// onCopyBegin takes in part of the snapshot's vector. A position of this node's own origin
// above its log is an origin rewind (this data directory is older than its own history
// elsewhere): the copy is refused, and no other is asked for.
func (r *Replica) onCopyBegin(c *conn, b *wire.CopyBegin) {
	t := r.cp.take
	if t == nil || t.conn != c.id {
		return
	}
	if b.Tables != 0 || b.Records != 0 || b.Bytes != 0 {
		t.total = CopyTotals{Tables: b.Tables, Records: b.Records, Bytes: b.Bytes}
	}
	own := r.origin(r.id.Origin).applied.Seq
	for _, p := range b.Positions {
		if p.Origin == r.id.Origin && p.Seq > own {
			r.cp.rewound = true
			r.counters.CopiesRefused++
			r.ownRewound(c, RewindStatus{Peer: c.peerName, Seq: p.Seq, Hash: p.Hash, How: "copy"})
			err := wire.NewError(wire.CodeGoingAway, "origin rewind: the copy holds this node's own origin at seq "+
				strconv.FormatUint(p.Seq, 10)+", beyond its log's "+strconv.FormatUint(own, 10))
			r.recordError(c, err)
			r.copyEvent(CopyEvent{Peer: c.peerName, Kind: CopyRefused, Err: err})
			r.checkConn(c, c.sess.V3().AbortCopy(false, wire.CodeGoingAway, err.Message))
			r.cp.take = nil
			return
		}
		t.snap[p.Origin] = p
	}
	if t.fill != "" {
		return // judged at its first chunk, once every COPYBEGIN came (fillUseful)
	}
	unsafe, why := r.unsafeRaises(c, t, b.Positions)
	for o := range unsafe {
		if t.unsafe == nil {
			t.unsafe = map[wire.OriginID]bool{}
		}
		t.unsafe[o] = true
	}
	if why != "" && t.why == "" {
		t.why = why
	}
}

// judgeCopy decides, once every COPYBEGIN came, whether the copy t from the peer on c goes
// on (§24.2): one that may not raise some origins (unsafeRaises) goes on when it raises
// some other origin; those are left out of the copy's vector (mergedVector), so that no
// later snapshot of the copy raises them either, and come on the streams. Else it is
// refused, and another source asked later. It reports whether the copy goes on.
func (r *Replica) judgeCopy(c *conn, t *copyTake) bool {
	t.judged = true
	if len(t.unsafe) == 0 {
		return true
	}
	other := false
	for o, p := range t.snap {
		other = other || !t.unsafe[o] && r.raises(p)
	}
	if other {
		return true
	}
	r.counters.CopiesRefused++
	err := wire.NewError(wire.CodeGoingAway, t.why)
	r.recordError(c, err)
	r.copyEvent(CopyEvent{Peer: c.peerName, Kind: CopyRefused, Err: err})
	r.checkConn(c, c.sess.V3().AbortCopy(false, wire.CodeGoingAway, t.why))
	r.cp.busy[c.peerName] = r.now.Add(r.cfg.CopyRetry)
	r.cp.take = nil
	return false
}

// mergedVector is the state's vector with the current snapshot's merged in: per origin
// the lower position, and an origin only both hold (the first snapshot's as it is), and none the
// copy may not raise (unsafeRaises): left out once, never raised by a later snapshot.
func (r *Replica) mergedVector(st *store.CopyState, t *copyTake) []wire.CopyPosition {
	if st.Snapshots == 0 {
		out := make([]wire.CopyPosition, 0, len(t.snap))
		for _, p := range t.snap {
			if !t.unsafe[p.Origin] {
				out = append(out, p)
			}
		}
		slices.SortFunc(out, func(a, b wire.CopyPosition) int { return cmpOrigin(a.Origin, b.Origin) })
		return out
	}
	var out []wire.CopyPosition
	for _, p := range st.Vector {
		q, ok := t.snap[p.Origin]
		switch {
		case !ok || t.unsafe[p.Origin]:
		case q.Seq < p.Seq:
			out = append(out, q)
		default:
			out = append(out, p)
		}
	}
	return out
}

// nextState is the copy state after a chunk or the end: the current snapshot's vector
// merged in once.
func (r *Replica) nextState(t *copyTake) store.CopyState {
	var st store.CopyState
	if r.cp.state != nil {
		st = *r.cp.state
		st.Table, st.Key = bytes.Clone(st.Table), bytes.Clone(st.Key)
	} else {
		st.Started = r.now.UnixNano()
	}
	st.Peer = t.peer
	if !t.merged {
		st.Vector = r.mergedVector(&st, t)
		st.Snapshots++
	}
	return st
}

// seen reports whether this node applied the write that made a version, given the
// delivering identity (hlc, o) of the entry that wrote it (store.Record.Delivering: the
// hub's entry for a re-originated leaf write, docs/design.md §27.1): its origin's entries
// carry strictly increasing timestamps, so an entry at or below the applied one's
// timestamp is applied. A leaf's origin is applied nowhere downstream of its hub, and a
// leaf HLC orders nothing in the hub's log.
func (r *Replica) seen(hlc wire.HLC, o wire.OriginID) bool {
	st := r.origins[o]
	return st != nil && st.applied.Seq > 0 && hlc <= st.appliedHLC
}

// coveredLocal lists this node's records in the range a chunk covers: after (fromTable,
// fromKey) (nil: the start) up to and including (toTable, toKey) (nil: the end).
// Every table is listed: a copied version is written only where it is newer than the one
// listed (onChunk), whoever sent it.
func (r *Replica) coveredLocal(fromTable, fromKey, toTable, toKey []byte) ([]store.Record, bool) {
	tables, err := r.store.Tables()
	if !r.check(err) {
		return nil, false
	}
	var out []store.Record
	for _, t := range tables {
		if fromTable != nil && bytes.Compare(t, fromTable) < 0 {
			continue
		}
		if toTable != nil && bytes.Compare(t, toTable) > 0 {
			break
		}
		var after []byte
		if fromTable != nil && bytes.Equal(t, fromTable) {
			after = fromKey
		}
		last := toTable != nil && bytes.Equal(t, toTable)
		ok := r.scanReadable(t, after, func(rec store.Record) bool { // a damaged record: absent, the copy writes it
			if last && bytes.Compare(rec.Key, toKey) > 0 {
				return false
			}
			out = append(out, rec)
			return true
		})
		if !ok {
			return nil, false
		}
	}
	return out, true
}

// superseded lists the records of local absent from the copied set that the snapshot shows
// the sender deleted: live versions whose write its vector covers (by the delivering
// identity of the entry that wrote each, §27.1), of a table it holds whole. A table it
// does not (HOLDS: it does not carry it, or fills it) may lack a record it never took,
// which is not its to remove (§24.2).
func (r *Replica) superseded(local []store.Record, copied map[string]bool, t *copyTake) []store.Record {
	var out []store.Record
	for _, l := range local {
		if l.Deleted || copied[string(l.Key)] || !t.sourceWhole(l.Table) {
			continue
		}
		o, hlc := l.Delivering()
		if p, ok := t.snap[o]; r.cfg.Mutations.ReplacingCopy || ok && hlc <= p.HLC {
			out = append(out, store.Record{Table: l.Table, Key: l.Key})
		}
	}
	return out
}

// onChunk merges one chunk: each copied version this node has not seen and that is newer
// than its own is written; its own records in the range the chunk covers that the sender
// deleted are removed; the copy state moves to the chunk's last record, in the same write.
func (r *Replica) onChunk(c *conn, v *wire.ChunkView) {
	if r.storage.err != nil {
		return // degraded: the copy stopped (degrade) and resumes from its state later
	}
	t := r.cp.take
	if t == nil || t.conn != c.id {
		return
	}
	if t.fill != "" {
		r.fillChunk(c, t, v)
		return
	}
	if !t.judged && !r.judgeCopy(c, t) {
		return
	}
	next := r.nextState(t)
	local, ok := r.coveredLocal(next.Table, next.Key, v.Table, v.Last)
	if !ok {
		return
	}
	mine := make(map[string]store.Record, len(local))
	for _, l := range local {
		if bytes.Equal(l.Table, v.Table) {
			mine[string(l.Key)] = l
		}
	}
	b := &store.CopyBatch{Records: make([]store.Record, 0, v.Count)}
	// copied holds the chunk's keys that this node holds too: superseded looks up only
	// those.
	copied := make(map[string]bool, len(mine))
	// The chunk's winners are copied out of the message into one buffer (the chunk's
	// bytes bound their keys and values), each slice capped at its own bytes.
	table := bytes.Clone(v.Table)
	carried, filling := r.carries(table) && !t.hidden[string(table)], r.fills[string(table)] != nil
	buf := make([]byte, 0, len(v.Raw()))
	var hlc wire.HLC
	it := v.Records()
	for {
		cr, more, _ := it.Next() // the session checked every record
		if !more {
			break
		}
		hlc = max(hlc, cr.HLC)
		old, has := mine[string(cr.Key)]
		if has {
			copied[string(cr.Key)] = true
		}
		switch {
		case !carried:
			continue // a table this node does not carry (§24.4), or the link excludes (§24.6), is not stored
		case r.cfg.Mutations.ReplacingCopy:
		case !filling && r.seen(copyDelivering(&cr)):
			// Applied here already: what this node holds is that version or later. Not
			// so of a table it fills: it passed that table's entries before.
			continue
		case has && !store.NewerVersion(store.Version{Token: cr.Token, HLC: cr.HLC, Origin: cr.Origin}, old.Version()):
			continue // this node's own version is newer
		}
		rec := store.Record{Table: table, Deleted: cr.Deleted, HLC: cr.HLC, Origin: cr.Origin, Token: cr.Token, Via: cr.Via, ViaHLC: cr.ViaHLC}
		rec.Key, buf = carve(buf, cr.Key)
		if cr.Value != nil {
			rec.Value, buf = carve(buf, cr.Value)
		}
		b.Records = append(b.Records, rec)
	}
	b.Deletes = r.supersededAcross(local, v.Table, copied, t)
	if !bytes.Equal(next.Table, v.Table) {
		next.Tables++
	}
	next.Table, next.Key = bytes.Clone(v.Table), bytes.Clone(v.Last)
	next.Records += uint64(v.Count)
	next.Bytes += uint64(len(v.Raw()))
	next.Deleted += uint64(len(b.Deletes))
	b.State = next
	if r.cfg.Mutations.CopyCursorApart {
		// test-only: the records first, the cursor in a write of its own after them
		b.State = r.stateOrEmpty()
		if !r.check(r.store.ApplyCopy(b)) {
			return
		}
		b = &store.CopyBatch{State: next}
	}
	if !r.check(r.store.ApplyCopy(b)) {
		return
	}
	feedWritten(&r.feeds.copied, b.Records)
	feedWritten(&r.feeds.copied, b.Deletes)
	t.merged = true
	t.runBytes += uint64(len(v.Raw()))
	r.cp.state = &next
	r.storedHLC = max(r.storedHLC, hlc)
	r.stored(b.Records)
	r.hlc = max(r.hlc, hlc) // later local writes order after every copied version
	r.counters.CopyRecords += uint64(v.Count)
	r.counters.CopyBytes += uint64(len(v.Raw()))
	r.checkConn(c, c.sess.V3().AckChunk())
}

// copyDelivering is a copied record's delivering identity, as seen takes it: its via
// block's when it has one, its version's otherwise (store.Record.Delivering).
func copyDelivering(cr *wire.CopyRecord) (wire.HLC, wire.OriginID) {
	if cr.Via.IsZero() {
		return cr.HLC, cr.Origin
	}
	return cr.ViaHLC, cr.Via
}

// carve appends b to buf, which has room for it, and returns the copy, capped at its
// length, and buf after it.
func carve(buf, b []byte) ([]byte, []byte) {
	n := len(buf)
	buf = append(buf, b...)
	return buf[n:len(buf):len(buf)], buf
}

// supersededAcross is superseded over a chunk's whole range: the records of the chunk's
// table are judged against the chunk's keys, those of tables before it (wholly covered) as
// absent.
func (r *Replica) supersededAcross(local []store.Record, table []byte, copied map[string]bool, t *copyTake) []store.Record {
	var same, other []store.Record
	for _, l := range local {
		if bytes.Equal(l.Table, table) {
			same = append(same, l)
		} else {
			other = append(other, l)
		}
	}
	out := r.superseded(same, copied, t)
	return append(out, r.superseded(other, map[string]bool{}, t)...)
}

// stateOrEmpty is the copy state as the store holds it (for the CopyCursorApart mutation).
func (r *Replica) stateOrEmpty() store.CopyState {
	if r.cp.state != nil {
		return *r.cp.state
	}
	return store.CopyState{Peer: r.cp.take.peer, Started: r.now.UnixNano()}
}

// onCopyEnd ends the copy: the records after the last chunk that the sender deleted are
// removed, and each origin's log rises to the copy's position where it is above this
// node's, never for this node's own origin.
func (r *Replica) onCopyEnd(c *conn) {
	t := r.cp.take
	if t == nil || t.conn != c.id {
		return
	}
	if t.fill != "" {
		r.fillDone(t) // the table was the snapshot's last
		return
	}
	if !t.judged && !r.judgeCopy(c, t) {
		return
	}
	next := r.nextState(t)
	local, ok := r.coveredLocal(next.Table, next.Key, nil, nil)
	if !ok {
		return
	}
	e := &store.CopyEnd{Deletes: r.superseded(local, map[string]bool{}, t)}
	for _, p := range next.Vector {
		if st := r.origins[p.Origin]; r.raises(p) {
			l := store.CopiedLog{Origin: p.Origin, Position: p}
			if st != nil && !st.namePersisted {
				l.Name = st.name
			}
			e.Logs = append(e.Logs, l)
		}
	}
	if held := r.heldTables(); len(held) > 0 {
		// The copy raises these logs past entries of the tables this node holds and does
		// not carry, whose chunks it did not store: it holds them as far as before.
		for _, l := range e.Logs {
			var was uint64
			if st := r.origins[l.Origin]; st != nil {
				was = st.applied.Seq
			}
			if !r.check(r.stopHolds(l.Origin, was, held)) {
				return
			}
		}
	}
	if !r.check(r.store.EndCopy(e)) {
		return
	}
	feedWritten(&r.feeds.copied, e.Deletes)
	r.feeds.copiesEnded++
	logs, err := r.store.Logs()
	if !r.check(err) {
		return
	}
	af, err := r.store.ArrivalFloor()
	if !r.check(err) {
		return
	}
	r.ret.logs, r.ret.afloor = logs, af
	r.feedsLogsChanged()
	for _, l := range e.Logs {
		st := r.origin(l.Origin)
		st.namePersisted = st.namePersisted || l.Name != ""
		st.applied.Seq, st.applied.Hash, st.appliedHLC = l.Position.Seq, l.Position.Hash, l.Position.HLC
		st.progressAt, st.appliedAt = r.now, r.now
		if st.applied.Seq >= st.headSeq {
			st.headSeq, st.headHLC = st.applied.Seq, st.appliedHLC
		}
		st.diverged = false
		r.hlc = max(r.hlc, st.appliedHLC)
		r.headsDirty[l.Origin] = true
		if src := r.conns[st.source]; src != nil {
			r.subscribe(src, st, st.applied.Seq) // from the copied position: nothing below it again
		}
	}
	r.routeAll = true
	r.counters.CopiesCompleted++
	r.copyEvent(CopyEvent{Peer: t.peer, Kind: CopyCompleted, Records: next.Records, Bytes: next.Bytes})
	r.cp.state, r.cp.take = nil, nil
}

// onCopyAborted handles a copy stopped early: the one this node takes resumes later
// (another peer first, when this one was busy); one it serves is released.
func (r *Replica) onCopyAborted(c *conn, ev *protocol.Event) {
	if ev.Outgoing {
		r.stopServing(c.id)
		return
	}
	t := r.cp.take
	if t == nil || t.conn != c.id {
		return
	}
	r.stopTaking(ev.Err)
	if ev.Err != nil {
		switch ev.Err.Code {
		case wire.CodeCopyBusy:
			r.cp.busy[c.peerName] = r.now.Add(r.cfg.CopyRetry)
			r.cp.retryAt = time.Time{} // another peer may serve it now
		case wire.CodeBadChunk:
			r.counters.BadChunks++
			r.recordError(c, ev.Err) // the peer whose chunk it was, for the operator
		}
	}
}

// stopTaking ends the run taking the copy; the copy resumes after CopyRetry.
func (r *Replica) stopTaking(err *wire.Error) {
	t := r.cp.take
	if t == nil {
		return
	}
	ev := CopyEvent{Peer: t.peer, Kind: CopyStopped, Err: err}
	if st := r.cp.state; st != nil {
		ev.Records, ev.Bytes = st.Records, st.Bytes
	}
	r.copyEvent(ev)
	r.cp.take = nil
	r.cp.retryAt = r.now.Add(r.cfg.CopyRetry)
}

// ---- serving a copy ----

// onCopyRequested serves a copy from a snapshot of this node's store, or refuses it when
// MaxCopies run already. The peer's holds are pinned at the snapshot's positions first, so
// that the logs it streams from after the copy are kept.
func (r *Replica) onCopyRequested(c *conn, req *wire.Copy) {
	if c.version < v4 && len(r.fills) > 0 {
		// A table it was added to is not whole here yet, and a peer below version 4 is not
		// told so (HOLDS): it would take records missing here for deleted (§24.4). Busy
		// sends it to another peer.
		r.counters.CopiesBusy++
		r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeCopyBusy, "this node is filling a table it was added to"))
		return
	}
	if c.version < v4 && !r.carriesAll() {
		// A peer below version 4 knows no placement: a copy without a table it holds would
		// lose that table there (§24.3). Busy sends it to another peer.
		r.counters.CopiesBusy++
		r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeCopyBusy,
			"this node does not carry every table the cluster map places, and a version-"+strconv.FormatUint(c.version, 10)+" peer takes them all"))
		return
	}
	if !r.sendsTo(c) {
		// The link's direction: nothing goes to this peer (it asked before this node's
		// LINK reached it). Busy sends it to another peer.
		r.counters.CopiesBusy++
		r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeCopyBusy, "this node does not send to "+c.peerName+" (the link's direction)"))
		return
	}
	if len(r.cp.serving) >= r.cfg.MaxCopies {
		r.counters.CopiesBusy++
		r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeCopyBusy,
			strconv.Itoa(len(r.cp.serving))+" copies are being served; the bound is "+strconv.Itoa(r.cfg.MaxCopies)))
		return
	}
	if r.cfg.HoldUnsynced && r.synced < r.origin(r.id.Origin).applied.Seq {
		// The snapshot holds this node's own writes: they must survive a power loss before
		// another node takes them.
		if !r.syncNow() {
			return
		}
	}
	snap, err := r.store.Snapshot()
	if !r.check(err) {
		return
	}
	var pos []wire.CopyPosition
	for _, o := range r.originOrder {
		if st := r.origins[o]; st.applied.Seq > 0 {
			pos = append(pos, wire.CopyPosition{Origin: o, Seq: st.applied.Seq, Hash: st.applied.Hash, HLC: st.appliedHLC})
			r.pinHold(c.peerName, o, st.applied.Seq)
		}
	}
	tables, records, size, err := snap.Size()
	if !r.check(err) {
		snap.Release()
		return
	}
	s := &copyServe{snap: snap, started: r.now, total: CopyTotals{Tables: tables, Records: records, Bytes: size},
		vector: make(map[wire.OriginID]wire.HLC, len(pos)), via: c.version >= v4}
	for _, p := range pos {
		s.vector[p.Origin] = p.HLC
	}
	if len(req.Table) > 0 {
		s.table, s.key = bytes.Clone(req.Table), bytes.Clone(req.Key)
	}
	named := true
	for _, p := range pos {
		named = named && r.nameOrigins(c, p.Origin)
	}
	if named && c.version >= v4 {
		named = r.sendHolds(c)
	}
	if !named || !r.checkConn(c, c.sess.V3().BeginCopy(pos, tables, records, size)) {
		snap.Release()
		return
	}
	r.cp.serving[c.id] = s
	r.counters.CopiesServed++
	r.copyEvent(CopyEvent{Peer: c.peerName, Kind: CopyServed})
}

// pinHold makes a peer's hold of an origin no higher than seq (a copy's position), written
// at once: the peer streams from there when its copy ends.
func (r *Replica) pinHold(peer string, o wire.OriginID, seq uint64) {
	if h := r.ret.holds[holdKey{peer, o}]; h != nil && h.seq <= seq && r.now.Sub(h.since) < r.cfg.RetainHold {
		h.since = r.now
		h.dirty = true
		return
	}
	r.holdAt(peer, o, seq, true)
}

// pumpCopy sends the chunks of the copy served on c while its credit lasts, and its end
// when the snapshot is read whole. It reports false when the connection cannot take more
// now.
func (r *Replica) pumpCopy(c *conn, s *copyServe) bool {
	for {
		if s.limit == 0 {
			s.limit = r.cfg.CopyChunk
		}
		if len(s.pending) == 0 {
			if !r.readAhead(s) {
				return false
			}
			if len(s.pending) == 0 {
				r.checkConn(c, c.sess.V3().EndCopy())
				r.stopServing(c.id)
				return c.sess.State() == protocol.StateEstablished
			}
		}
		// What the credit allows now: the receiver grants more once half its window is
		// used, so a chunk smaller than the limit goes rather than wait.
		room := c.sess.V3().CopyCredit() - wire.HeaderSize
		table := s.pending[0].Table
		size := wire.ChunkHeaderSize(table, len(s.pending))
		recs := s.recs[:0]
		for _, p := range s.pending {
			cr := wire.CopyRecord{Key: p.Key, Value: p.Value, Deleted: p.Deleted, HLC: p.HLC, Origin: p.Origin}
			if c.version >= v4 {
				// A token travels in chunk format 2, version 4's; an older peer is sent the
				// version without it (docs/design.md §25.4: it orders by HLC alone). A via
				// block travels in chunk format 3; readAhead kept the records that need
				// one from an older peer.
				cr.Token, cr.Via, cr.ViaHLC = p.Token, p.Via, p.ViaHLC
			}
			n := wire.ChunkSize(&cr)
			if len(recs) > 0 && size+n > min(s.limit, room) {
				break
			}
			if size+n > room {
				return true // the next record alone waits for its credit
			}
			recs = append(recs, cr)
			size += n
		}
		s.recs = recs
		// size is the chunk's (its header counted with every pending record: at least).
		body, err := wire.AppendChunk(make([]byte, 0, size), table, recs)
		if !r.check(err) {
			return false
		}
		if err := c.sess.V3().SendChunk(body); err != nil {
			var we *wire.Error
			if errors.As(err, &we) && we.Code == wire.CodeFrameTooLarge {
				if len(recs) == 1 {
					// One record the peer's frame limit cannot carry: this copy cannot be served.
					r.checkConn(c, c.sess.V3().AbortCopy(true, wire.CodeFrameTooLarge, we.Message))
					r.stopServing(c.id)
					return true
				}
				s.limit = len(body) / 2 // the peer's frame limit is lower: smaller chunks
				continue
			}
			return r.sendRefused(c, err)
		}
		if !bytes.Equal(s.table, table) {
			s.tables++
		}
		s.table, s.key = bytes.Clone(table), bytes.Clone(recs[len(recs)-1].Key)
		s.pending = s.pending[len(recs):]
		s.records += uint64(len(recs))
		s.bytes += uint64(len(body))
	}
}

// readAhead reads the next records of one table from the snapshot after the last one
// sent: as many as one chunk of the limit holds, header included (at least one), so that
// pumpCopy sends them as one chunk when the credit allows. (Reading past the limit left a
// chunk of one record after every full one.) The record that does not fit is read again
// by the next call, which starts after the last one sent.
func (r *Replica) readAhead(s *copyServe) bool {
	s.pending = s.read[:0]
	size := 0
	err := s.snap.Records(s.table, s.key, func(rec store.Record) bool {
		if len(s.pending) > 0 && !bytes.Equal(rec.Table, s.pending[0].Table) {
			return false
		}
		o, h := rec.Delivering()
		if hlc, ok := s.vector[o]; !ok || h > hlc || !s.via && !rec.Via.IsZero() {
			// A version this node's logs do not cover yet, by the entry that wrote it (the
			// hub's for a re-originated leaf write, §27.1): it came with a base copy this
			// node is still taking, or with a resumed one whose vector is the lower of
			// its snapshots' (design §15). The taker refuses it
			// (bad-chunk), and would refuse every later run as well while this node's
			// own copy waits on the taker: the record stays out, and its write reaches
			// the taker from the logs after the copy, above the positions it covers. A
			// leaf write to a peer below version 4, which takes no via block, stays out
			// too (its entry, of transaction format 3, is purged to that peer).
			r.counters.CopyHeldBack++
			return true
		}
		n := wire.ChunkSize(&wire.CopyRecord{Key: rec.Key, Value: rec.Value, Deleted: rec.Deleted, Token: rec.Token, Via: rec.Via})
		if len(s.pending) == 0 {
			size = wire.ChunkHeaderSize(rec.Table, s.limit) // a count of at most s.limit records
		} else if size+n > s.limit {
			return false
		}
		s.pending = append(s.pending, rec)
		size += n
		return size < s.limit
	})
	s.read = s.pending
	return r.check(err)
}

// stopServing releases a copy served on a connection.
func (r *Replica) stopServing(id ConnID) {
	if s := r.cp.serving[id]; s != nil {
		s.snap.Release()
		delete(r.cp.serving, id)
	}
}

// refreshCopyHolds keeps the holds of peers this node serves a copy to from lapsing: a copy
// of a large store takes longer than RetainHold may be.
func (r *Replica) refreshCopyHolds() {
	for id := range r.cp.serving {
		c := r.conns[id]
		if c == nil {
			continue
		}
		for k, h := range r.ret.holds {
			if k.peer == c.peerName {
				h.since = r.now
			}
		}
	}
}

// ---- progress ----

// CopyProgress is a copy in /v1/status's peers[].copy.
type CopyProgress struct {
	Direction  string // "receiving" or "serving"
	Records    uint64 // copied so far (receiving: since the copy began, resumes included)
	Bytes      uint64
	TablesDone uint64     // tables copied whole
	Total      CopyTotals // what the sender said of its snapshot (0: unknown)
	Rate       float64    // bytes per second over this run
	ETA        time.Duration
	Resumes    uint64
}

// copyProgress reports the copy this node takes from, or serves to, a connection.
func (r *Replica) copyProgress(id ConnID) *CopyProgress {
	var p *CopyProgress
	var elapsed float64
	var runBytes uint64
	if t := r.cp.take; t != nil && t.conn == id {
		p = &CopyProgress{Direction: "receiving", Total: t.total}
		if st := r.cp.state; st != nil {
			p.Records, p.Bytes = st.Records, st.Bytes
			p.TablesDone = max(st.Tables, 1) - 1
			p.Resumes = max(st.Snapshots, 1) - 1
		}
		elapsed, runBytes = r.now.Sub(t.runStart).Seconds(), t.runBytes
	} else if s := r.cp.serving[id]; s != nil {
		p = &CopyProgress{Direction: "serving", Records: s.records, Bytes: s.bytes, TablesDone: max(s.tables, 1) - 1, Total: s.total}
		elapsed, runBytes = r.now.Sub(s.started).Seconds(), s.bytes
	} else {
		return nil
	}
	if elapsed > 0 {
		p.Rate = float64(runBytes) / elapsed
	}
	// The bytes left, estimated from the records left at the bytes per record so far.
	if p.Records > 0 && p.Total.Records > p.Records && p.Rate > 0 {
		left := float64(p.Total.Records-p.Records) * float64(p.Bytes) / float64(p.Records)
		p.ETA = time.Duration(left / p.Rate * float64(time.Second))
	}
	return p
}
