package replica

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/wire"
)

// Local writes: the next entry of this node's own origin, its HLC timestamp, and the
// group commit that makes it servable.

// ErrTxnTooLarge marks a refused write (bad-argument) whose transaction encodes to more
// than the write limit's MaxTxn: the HTTP API answers it as too large.
var ErrTxnTooLarge = errors.New("replica: the transaction is too large")

// Write applies a local transaction: the next seq of this node's origin, chained to its
// last entry, with an HLC timestamp above every one this node has seen. It returns the seq.
// The operations are checked against the write limits, and their tables against the
// cluster map's placement (mixed-placement, a *clustermap.Error); a refused write changes
// nothing.
func (r *Replica) Write(now time.Time, ops []wire.Op) (uint64, error) {
	return r.write(now, wire.Token{}, ops)
}

// WriteTokened is Write under a fencing token (docs/design.md §25.4): the entry is of
// transaction format 2, its records carry tok and order by it on every node, above every
// untokened version and every lower token, whatever the clocks say. The operations write one
// (table, key), the key the token was granted for (bad-argument otherwise), and tok is a
// token (generation and home not zero). Format 2 is written only while every member of the
// cluster map is known to speak version 4 (the writer gates, protocol/SPEC.md "Later
// formats"): otherwise the write is refused with the gate's *clustermap.Error
// (cluster-not-v4). Whether tok is live is the caller's (the lock API's) to know; tests write
// through it too.
func (r *Replica) WriteTokened(now time.Time, tok wire.Token, ops []wire.Op) (uint64, error) {
	if tok.IsZero() {
		return 0, wire.NewError(wire.CodeBadArgument, "a tokened write needs a token")
	}
	return r.write(now, tok, ops)
}

func (r *Replica) write(now time.Time, tok wire.Token, ops []wire.Op) (uint64, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.setNow(now)
	if err := r.storageRefusal(); err != nil {
		return 0, err
	}
	if err := r.checkOps(ops); err != nil {
		return 0, err
	}
	if !tok.IsZero() {
		if err := r.RequireV4(); err != nil {
			return 0, err
		}
	}
	if err := r.placementRefusal(ops); err != nil {
		return 0, err
	}
	if err := r.leafWriteRefusal(tok, ops); err != nil {
		return 0, err
	}
	if err := r.fenceRefusal(tok, ops); err != nil {
		return 0, err
	}
	if err := r.clockRefusal(); err != nil {
		return 0, err
	}
	if err := r.rewindRefusal(); err != nil {
		return 0, err
	}
	st := r.origins[r.id.Origin]
	last := r.hlc
	t := wire.Txn{Origin: r.id.Origin, Seq: st.applied.Seq + 1, HLC: r.advanceClock(now), Prev: st.applied.Hash, Token: tok, Ops: ops}
	enc, err := t.Encode()
	if err == nil && len(enc) > r.maxTxn() {
		err = fmt.Errorf("the transaction encodes to %d bytes; the limit is %d", len(enc), r.maxTxn())
	}
	if err != nil {
		r.hlc = last // a refused write changes nothing
		werr := wire.NewError(wire.CodeBadArgument, err.Error())
		if len(enc) > r.maxTxn() {
			return 0, errors.Join(ErrTxnTooLarge, werr)
		}
		return 0, werr
	}
	v, err := wire.ParseTxn(enc)
	if err != nil {
		return 0, wire.NewError(wire.CodeInternal, err.Error())
	}
	if err := r.apply(&v, v.Hash(), nil, 0); err != nil {
		r.hlc = last // nothing of the write was stored
		if entryFault(err) {
			// A store that refuses the batch, or a record it cannot read (a local write
			// reads the ones that may beat it: beatsStored): the write is refused, the node
			// goes on.
			return 0, wire.NewError(wire.CodeInternal, "the write was not applied: "+err.Error())
		}
		r.check(err)
		if serr := r.settleFailed(); serr != nil {
			return 0, serr
		}
		if err := r.failure(); err != nil {
			return 0, err
		}
		return 0, wire.NewError(wire.CodeInternal, "a local write was not applied")
	}
	return t.Seq, r.settle()
}

// advanceClock advances the hybrid logical clock for a local write and returns the
// write's timestamp: the wall clock when it is ahead of every timestamp seen, otherwise
// the last one's logical successor. (Tick is the timer input; this is the clock.)
func (r *Replica) advanceClock(now time.Time) wire.HLC {
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

// checkOps checks a local write against the bounds of docs/contract.md §6.1.
func (r *Replica) checkOps(ops []wire.Op) error {
	if len(ops) == 0 {
		return wire.NewError(wire.CodeBadArgument, "a write needs at least one operation")
	}
	for i, op := range ops {
		at := "operation " + strconv.Itoa(i) + ": "
		switch {
		case !ValidTable(op.Table):
			return wire.NewError(wire.CodeBadArgument, at+"a table name is 1 to 64 of [A-Za-z0-9_.-]")
		case len(op.Key) == 0 || len(op.Key) > r.cfg.Write.MaxKey:
			return wire.NewError(wire.CodeBadArgument, at+"a key is 1 to "+strconv.Itoa(r.cfg.Write.MaxKey)+" bytes")
		case op.Kind == wire.OpPut && len(op.Value) > r.cfg.Write.MaxValue:
			return wire.NewError(wire.CodeBadArgument, at+"a value is at most "+strconv.Itoa(r.cfg.Write.MaxValue)+" bytes")
		case op.Kind == wire.OpDelete && len(op.Value) != 0:
			return wire.NewError(wire.CodeBadArgument, at+"a delete carries no value")
		case op.Kind != wire.OpPut && op.Kind != wire.OpDelete:
			return wire.NewError(wire.CodeBadArgument, at+"unknown operation kind "+strconv.Itoa(int(op.Kind)))
		}
	}
	return nil
}

// placementRefusal refuses, with a *clustermap.Error of code mixed-placement, a write whose
// tables are not placed alike under the node's map (docs/design.md §24.1): no node could
// apply all of it. It is judged at the write under the map held then; a map adopted later
// does not undo a write accepted before it (§24.2 takes such entries as they come).
func (r *Replica) placementRefusal(ops []wire.Op) error {
	m := &r.cmap.cur
	if len(m.Placement) == 0 {
		return nil
	}
	tables := make([][]byte, len(ops))
	for i, op := range ops {
		tables[i] = op.Table
	}
	if err := m.CheckTables(tables); err != nil {
		r.counters.WritesRefusedMixedPlacement++
		return err
	}
	// The tables are placed alike: this node carries all of them or none.
	if !m.Carries(r.id.Name, tables[0]) {
		r.counters.WritesRefusedNotCarried++
		return &clustermap.Error{Code: clustermap.CodeNotCarried, Message: "this node (" + r.id.Name +
			") does not carry table " + string(tables[0]) + ": its carriers are " + strings.Join(m.Placement[string(tables[0])], ", ")}
	}
	return nil
}

// fenceRefusal refuses a write without a token of any table the cluster map fences
// (lock-required, a *clustermap.Error; docs/design.md §25.6): its versions would order
// below every token written to the key before (§25.4), so the write would be lost in
// silence where the key was ever written under a lock, and land unordered where it was
// not. A tokened write names one key, the lock's (WriteTokened). A table's untokened
// versions made before it was fenced, or by a node below version 4, are applied and
// counted (writes_untokened_fenced); this refuses only new ones.
func (r *Replica) fenceRefusal(tok wire.Token, ops []wire.Op) error {
	m := &r.cmap.cur
	if !tok.IsZero() || len(m.FencedTables) == 0 || r.cfg.Mutations.UnfencedWrites {
		return nil
	}
	for _, op := range ops {
		if m.Fenced(op.Table) {
			r.counters.WritesRefusedLockRequired++
			return &clustermap.Error{Code: clustermap.CodeLockRequired, Message: "table " + string(op.Table) + " is fenced: its writes carry a live lock's token"}
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
		if r.confirmsNeedSync() {
			return true
		}
		for _, c := range r.connList {
			if c.version == 1 && c.v1Subscribed {
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

// SyncedSeq is, with HoldUnsynced, the highest local seq durable against power loss: what
// Synced covered, and what the replica synced itself (before it serves a copy of its
// store, which holds the local writes). A shell answers a local write once its seq is at
// or below it: after such a sync of the replica's own NeedsSync may be false with writes
// the shell has not yet answered.
func (r *Replica) SyncedSeq() uint64 { return r.synced }

// Synced tells the replica that a Store.Sync started at p returned: with HoldUnsynced,
// the entries it covers may now be served.
func (r *Replica) Synced(now time.Time, p SyncPoint) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.setNow(now)
	if p.Seq > r.synced {
		// The synced entry's timestamp: the head's, kept in memory, when nothing was written
		// since the sync began (one write at a time: the store is not read on the way from
		// the fsync to the peers); else the entry's own.
		hlc := r.origins[r.id.Origin].appliedHLC
		if own := r.origins[r.id.Origin]; own.applied.Seq != p.Seq {
			raw, err := r.store.Entry(r.id.Origin, p.Seq)
			if !r.check(err) {
				return r.fatal
			}
			v, err := wire.ParseTxn(raw)
			if !r.check(err) {
				return r.fatal
			}
			hlc = v.HLC
		}
		r.synced, r.syncedHLC = p.Seq, hlc
		r.headsDirty[r.id.Origin] = true // the head peers may now be told of
	}
	r.syncedArrive = max(r.syncedArrive, p.Arrival)
	return r.settle()
}
