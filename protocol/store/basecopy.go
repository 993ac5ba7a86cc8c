package store

import (
	"bytes"
	"fmt"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// CopyEndPlan is what a checked CopyEnd writes: each raised log's state after, the entries
// it drops, and the arrival floor after.
type CopyEndPlan struct {
	Logs         []RaisedLog // sorted by origin
	ArrivalFloor uint64
}

// RaisedLog is one log's part of a CopyEndPlan: its entries From to To are dropped (none
// when To < From); its cursor becomes Cursor and its state Log.
type RaisedLog struct {
	Origin   wire.OriginID
	From, To uint64
	Cursor   vector.Entry
	Log      Log
}

// CopyEndView is what CheckCopyEnd reads of a store, as it is before the copy ends.
type CopyEndView struct {
	Identity     wire.OriginID
	Logs         map[wire.OriginID]Log
	Cursors      vector.Vector
	ArrivalFloor uint64
	LastArrival  uint64
}

// CheckCopyEnd is the check every Store's EndCopy makes before it writes anything, and the
// plan of what it writes. It refuses (an error wrapping ErrBadCopy) logs not ascending by
// origin, the store's own origin (a node never takes a copied position of its own log), and
// a position that is not above the log's cursor or lacks its chain hash. A raised log drops
// every entry it held; the arrival floor rises to the last arrival when any log is raised
// (the copied entries are in no arrival order, so a version-1 peer below must copy too).
func CheckCopyEnd(e *CopyEnd, v CopyEndView) (*CopyEndPlan, error) {
	plan := &CopyEndPlan{ArrivalFloor: v.ArrivalFloor}
	for i, l := range e.Logs {
		cur := v.Cursors.Get(l.Origin)
		switch {
		case i > 0 && bytes.Compare(e.Logs[i-1].Origin[:], l.Origin[:]) >= 0:
			return nil, fmt.Errorf("%w: logs not ascending by origin", ErrBadCopy)
		case l.Origin.IsZero() || l.Origin != l.Position.Origin:
			return nil, fmt.Errorf("%w: a log whose origin is not its position's", ErrBadCopy)
		case l.Origin == v.Identity:
			return nil, fmt.Errorf("%w: origin %s is this node's own", ErrBadCopy, l.Origin)
		case l.Position.Seq <= cur.Seq:
			return nil, fmt.Errorf("%w: origin %s: position %d is not above the cursor %d", ErrBadCopy, l.Origin, l.Position.Seq, cur.Seq)
		case l.Position.Hash == (wire.Hash{}):
			return nil, fmt.Errorf("%w: origin %s: position %d without its chain hash", ErrBadCopy, l.Origin, l.Position.Seq)
		}
		p := l.Position
		plan.Logs = append(plan.Logs, RaisedLog{Origin: l.Origin, From: v.Logs[l.Origin].Floor.Seq + 1, To: cur.Seq,
			Cursor: vector.Entry{Origin: l.Origin, Seq: p.Seq, Hash: p.Hash},
			Log:    Log{Floor: Floor{Seq: p.Seq, Hash: p.Hash, HLC: p.HLC}, Below: p.Seq}})
	}
	if len(plan.Logs) > 0 {
		plan.ArrivalFloor = v.LastArrival
	}
	return plan, nil
}

// LogsAfterCopy is every log's state after a CopyEndPlan: the raised ones as planned, and,
// when the arrival floor rose, every other one with all its entries below it.
func LogsAfterCopy(plan *CopyEndPlan, logs map[wire.OriginID]Log, cursors vector.Vector, oldFloor uint64) map[wire.OriginID]Log {
	out := make(map[wire.OriginID]Log, len(logs)+len(plan.Logs))
	for o, l := range logs {
		if plan.ArrivalFloor > oldFloor {
			l.Below = cursors.Get(o).Seq
		}
		out[o] = l
	}
	for _, rl := range plan.Logs {
		out[rl.Origin] = rl.Log
	}
	return out
}
