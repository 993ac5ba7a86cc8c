package replica

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// receive decides what to do with an entry a session checked against its channel (version
// 2) or receive vector (version 1), against what this node applied: apply it when it
// extends the origin's log, count a duplicate when the log holds it (checking it is the
// same entry), and treat anything else as a gap or a divergence. It then acknowledges what
// is durable (persist before ack).
func (r *Replica) receive(c *conn, v wire.TxnView, pos uint64) {
	st := r.origin(v.Origin)
	h := v.Hash()
	switch {
	case v.Origin == r.id.Origin:
		// Sessions refuse this node's own entries; reaching here is a bug.
		r.check(errors.New("replica: a session delivered this node's own entry " + strconv.FormatUint(v.Seq, 10)))
		return
	case v.Seq <= st.applied.Seq:
		raw, err := r.store.Entry(v.Origin, v.Seq)
		if !r.check(err) {
			return
		}
		if sha256.Sum256(raw) != h {
			r.divergedHere(c, st, v.Seq, "entry "+strconv.FormatUint(v.Seq, 10)+" differs from the one applied")
			return
		}
		r.counters.DuplicatesReceived++
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
		if !r.apply(&v, h, c, pos) {
			return
		}
		if c.version == 1 {
			st.legacySource = c.peerName
		}
	}
	if c.version == 1 {
		c.v1LastPos[v.Origin] = pos
		r.check(c.sess.Ack(pos))
	} else {
		r.check(c.sess.AckOrigin(v.Origin, v.Seq))
	}
}

// divergedHere handles an entry the session accepted that contradicts this node's log.
func (r *Replica) divergedHere(c *conn, st *originState, seq uint64, why string) {
	r.counters.Divergences++
	st.diverged, st.divergedAt = true, seq
	if c.version == 1 {
		_ = c.sess.Close(wire.CodeDivergence, "origin "+st.id.String()+": "+why)
		return
	}
	r.unsubscribe(c, st.id)
	c.excluded[st.id] = r.now.Add(r.cfg.DivergenceRetry)
	if st.source == c.id {
		r.loseSource(st, ReasonDiverged)
	}
}

// restream resumes an origin's stream from the applied position after a gap the session
// could not see.
func (r *Replica) restream(c *conn, st *originState) {
	if c.version == 1 {
		_ = c.sess.Close(wire.CodeGapDetected, "origin "+st.id.String()+" is ahead of the applied log")
		return
	}
	r.unsubscribe(c, st.id)
	if st.source == c.id {
		r.subscribe(c, st, st.applied.Seq)
	}
}

// apply writes one entry that extends its origin's log: the last-writer-wins winners, the
// log entry and the cursor, atomically; then it updates what the replica knows and fans
// the entry out.
func (r *Replica) apply(v *wire.TxnView, h wire.Hash, from *conn, pos uint64) bool {
	st := r.origin(v.Origin)
	b := &Batch{Origin: v.Origin, Seq: v.Seq, Hash: h, Txn: v.Raw()}
	if !r.lww(v, b) {
		return false
	}
	if !st.namePersisted {
		b.Name = st.name
	}
	if from != nil && from.version == 1 {
		b.PeerOrigin, b.PeerCursor = from.peerOrigin, pos
	}
	pos, err := r.store.Apply(b)
	if !r.check(err) {
		return false
	}
	r.arrivals = pos
	st.namePersisted = st.namePersisted || b.Name != ""
	st.applied.Seq, st.applied.Hash, st.appliedHLC = v.Seq, h, v.HLC
	st.progressAt = r.now
	if v.Seq >= st.headSeq {
		st.headSeq, st.headHLC = v.Seq, v.HLC
	}
	if st.diverged && v.Seq >= st.divergedAt {
		st.diverged = false // the chain goes on past the entry that diverged
	}
	r.hlc = max(r.hlc, v.HLC)
	r.storedHLC = max(r.storedHLC, v.HLC)
	r.counters.TxnsApplied++
	r.headsDirty[v.Origin] = true
	for _, id := range r.connOrder {
		if c := r.conns[id]; c.established && c.version == 1 && c != from && c.peerOrigin != v.Origin {
			r.check(c.sess.Observe(protocol.Cursor{Origin: v.Origin, Seq: v.Seq, Hash: h}))
		}
	}
	return true
}

// lww puts into b the record versions the transaction wins: an operation replaces a record
// when its version (HLC timestamp, then origin id) is not older than the record's. Equal
// versions come only from one origin, whose entries every node applies in seq order, so
// the outcome is the same everywhere. A later operation of one transaction on the same key
// replaces an earlier one. A transaction newer than every stored version (a local write,
// or an origin's entries arriving in order) wins without reading the store.
func (r *Replica) lww(v *wire.TxnView, b *Batch) bool {
	read := v.HLC <= r.storedHLC
	if r.lwwIdx == nil || len(r.lwwIdx) > 4096 { // a huge transaction's map is not kept
		r.lwwIdx = map[string]int{}
	}
	idx := r.lwwIdx // the record index of each table and key seen in this transaction
	clear(idx)
	b.Records = make([]Record, 0, v.NumOps)
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		rec := Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete, HLC: v.HLC, Origin: v.Origin}
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
		if !r.check(err) {
			return false
		}
		if found && newer(old.HLC, old.Origin, v.HLC, v.Origin) {
			b.Records = append(b.Records, Record{}) // the stored version wins; later ops of this key too
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
	return true
}

// newer reports whether version (h1, o1) is strictly newer than (h2, o2).
func newer(h1 wire.HLC, o1 wire.OriginID, h2 wire.HLC, o2 wire.OriginID) bool {
	if h1 != h2 {
		return h1 > h2
	}
	return bytes.Compare(o1[:], o2[:]) > 0
}

// ErrTxnTooLarge marks a refused write (bad-argument) whose transaction encodes to more
// than the write limit's MaxTxn: the HTTP API answers it as too large.
var ErrTxnTooLarge = errors.New("replica: the transaction is too large")

// Write applies a local transaction: the next seq of this node's origin, chained to its
// last entry, with an HLC timestamp above every one this node has seen. It returns the seq.
// The operations are checked against the write limits; a refused write changes nothing.
func (r *Replica) Write(now time.Time, ops []wire.Op) (uint64, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.now = now
	if err := r.checkOps(ops); err != nil {
		return 0, err
	}
	st := r.origins[r.id.Origin]
	last := r.hlc
	t := wire.Txn{Origin: r.id.Origin, Seq: st.applied.Seq + 1, HLC: r.tick(now), Prev: st.applied.Hash, Ops: ops}
	enc, err := t.Encode()
	if err == nil && len(enc) > r.cfg.Write.MaxTxn {
		err = errors.New("the transaction encodes to " + strconv.Itoa(len(enc)) + " bytes; the limit is " + strconv.Itoa(r.cfg.Write.MaxTxn))
	}
	if err != nil {
		r.hlc = last // a refused write changes nothing
		werr := wire.Errorf(wire.CodeBadArgument, err.Error())
		if len(enc) > r.cfg.Write.MaxTxn {
			return 0, errors.Join(ErrTxnTooLarge, werr)
		}
		return 0, werr
	}
	v, err := wire.ParseTxn(enc)
	if err != nil {
		return 0, wire.Errorf(wire.CodeInternal, err.Error())
	}
	if !r.apply(&v, v.Hash(), nil, 0) {
		return 0, r.fatal
	}
	return t.Seq, r.settle()
}

// tick returns the next HLC timestamp of a local write: the wall clock when it is ahead
// of every timestamp seen, otherwise the last one's logical successor.
func (r *Replica) tick(now time.Time) wire.HLC {
	wall := uint64(max(now.UnixMilli(), 0))
	switch {
	case wall > r.hlc.WallMillis():
		r.hlc = wire.MakeHLC(wall, 0)
	case r.hlc.Logical() < 0xffff:
		r.hlc++
	default:
		r.hlc = wire.MakeHLC(r.hlc.WallMillis()+1, 0)
	}
	return r.hlc
}

// checkOps checks a local write against CONTRACT.md's bounds.
func (r *Replica) checkOps(ops []wire.Op) error {
	if len(ops) == 0 {
		return wire.Errorf(wire.CodeBadArgument, "a write needs at least one operation")
	}
	for i, op := range ops {
		at := "operation " + strconv.Itoa(i) + ": "
		switch {
		case !ValidTable(op.Table):
			return wire.Errorf(wire.CodeBadArgument, at+"a table name is 1 to 64 of [A-Za-z0-9_.-]")
		case len(op.Key) == 0 || len(op.Key) > r.cfg.Write.MaxKey:
			return wire.Errorf(wire.CodeBadArgument, at+"a key is 1 to "+strconv.Itoa(r.cfg.Write.MaxKey)+" bytes")
		case op.Kind == wire.OpPut && len(op.Value) > r.cfg.Write.MaxValue:
			return wire.Errorf(wire.CodeBadArgument, at+"a value is at most "+strconv.Itoa(r.cfg.Write.MaxValue)+" bytes")
		case op.Kind == wire.OpDelete && len(op.Value) != 0:
			return wire.Errorf(wire.CodeBadArgument, at+"a delete carries no value")
		case op.Kind != wire.OpPut && op.Kind != wire.OpDelete:
			return wire.Errorf(wire.CodeBadArgument, at+"unknown operation kind "+strconv.Itoa(int(op.Kind)))
		}
	}
	return nil
}

// ValidTable reports whether name is a table name: 1 to 64 of [A-Za-z0-9_.-].
func ValidTable(name []byte) bool {
	if len(name) == 0 || len(name) > maxTableName {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// NeedsSync reports, with HoldUnsynced, whether something applied waits for a sync
// before it may be served: a local entry, or an arrival position a subscribed version-1
// peer may be sent. The shell takes a SyncPoint, syncs the store (group commit) and hands
// the point back to Synced.
func (r *Replica) NeedsSync() bool {
	if !r.cfg.HoldUnsynced {
		return false
	}
	if r.synced < r.origins[r.id.Origin].applied.Seq {
		return true
	}
	if r.syncedArrive < r.arrivals {
		for _, id := range r.connOrder {
			if c := r.conns[id]; c.version == 1 && c.v1Subscribed {
				return true
			}
		}
	}
	return false
}

// SyncPoint is what a sync covers: the local origin's seq and the arrival position
// applied when it was taken.
type SyncPoint struct {
	Seq     uint64
	Arrival uint64
}

// SyncPoint returns what the next Store.Sync will cover. Take it before calling Sync: the
// replica may apply more while the sync runs.
func (r *Replica) SyncPoint() SyncPoint {
	return SyncPoint{Seq: r.origins[r.id.Origin].applied.Seq, Arrival: r.arrivals}
}

// Synced tells the replica that a Store.Sync started at p returned: with HoldUnsynced,
// the entries it covers may now be served.
func (r *Replica) Synced(now time.Time, p SyncPoint) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.now = now
	if p.Seq > r.synced {
		raw, err := r.store.Entry(r.id.Origin, p.Seq)
		if !r.check(err) {
			return r.fatal
		}
		v, err := wire.ParseTxn(raw)
		if !r.check(err) {
			return r.fatal
		}
		r.synced, r.syncedHLC = p.Seq, v.HLC
		r.headsDirty[r.id.Origin] = true // the head peers may now be told of
	}
	r.syncedArrive = max(r.syncedArrive, p.Arrival)
	return r.settle()
}
