package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// PurgePlan is what a checked Purge writes: for each log it changes, the entries deleted
// and the log's state after; and the new arrival floor.
type PurgePlan struct {
	Logs         []PlannedLog // sorted by origin
	ArrivalFloor uint64
}

// PlannedLog is one log's part of a PurgePlan: its entries From to To are deleted (none
// when To < From), and Log is its state after.
type PlannedLog struct {
	Origin   wire.OriginID
	From, To uint64
	Log      Log
}

// PurgeView is what CheckPurge reads of a store: its logs, cursors and arrival positions
// as they are before the purge, and reads of its entries.
type PurgeView struct {
	Logs         map[wire.OriginID]Log
	Cursors      vector.Vector
	ArrivalFloor uint64
	LastArrival  uint64
	Entry        func(origin wire.OriginID, seq uint64) ([]byte, error)
	Arrivals     func(after uint64, limit int) ([]Arrival, error)
}

// CheckPurge is the check every Store's Purge makes before it writes anything, and the
// plan of what it writes. It refuses (an error wrapping ErrBadPurge) a log listed twice
// or unknown, a To not above the log's floor or not below its cursor, an arrival floor
// below the current one or beyond the last arrival, and an entry purged whose arrival
// position is above the new arrival floor. It reads the entries it purges (their sizes, and
// the new floor's hash and HLC) and the arrival positions the arrival floor passes (whose
// entries become the logs' Below).
//
// Runs held as skips (skip.go) go whole: a To inside a run is lowered to the run's From-1,
// since a floor needs the chain hash of its seq and nobody holds one inside a run (a log
// whose To is lowered to its floor loses nothing); a run at or below To goes, and a floor at
// its end takes its Hash and HLC. A run has no arrival position, so the arrival floor does
// not hold it back: only the entries purged must be at or below the log's Below, which
// rises to the new floor when runs above it go.
func CheckPurge(p *Purge, v PurgeView) (*PurgePlan, error) {
	bad := func(format string, args ...any) (*PurgePlan, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrBadPurge}, args...)...)
	}
	if p.ArrivalFloor < v.ArrivalFloor || p.ArrivalFloor > v.LastArrival {
		return bad("arrival floor %d outside %d..%d", p.ArrivalFloor, v.ArrivalFloor, v.LastArrival)
	}
	next := map[wire.OriginID]Log{} // the logs' states after, as far as known
	for _, l := range p.Logs {
		log, ok := v.Logs[l.Origin]
		_, twice := next[l.Origin]
		switch {
		case !ok:
			return bad("origin %s has no log", l.Origin)
		case twice:
			return bad("origin %s listed twice", l.Origin)
		case l.To <= log.Floor.Seq:
			return bad("origin %s: purge to %d is not above the floor %d", l.Origin, l.To, log.Floor.Seq)
		case l.To >= v.Cursors.Get(l.Origin).Seq:
			return bad("origin %s: purge to %d reaches the head %d", l.Origin, l.To, v.Cursors.Get(l.Origin).Seq)
		}
		next[l.Origin] = log
	}
	// The positions the arrival floor passes: their entries leave the arrival order.
	for after := v.ArrivalFloor; after < p.ArrivalFloor; {
		batch, err := v.Arrivals(after, int(min(p.ArrivalFloor-after, 1024)))
		if err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			return bad("the arrival order ends at %d, before %d", after, p.ArrivalFloor)
		}
		for _, a := range batch {
			if a.Pos > p.ArrivalFloor {
				break
			}
			t, err := wire.ParseTxn(a.Txn)
			if err != nil {
				return nil, errorf("arrival %d: %w", a.Pos, err)
			}
			log, ok := next[t.Origin]
			if !ok {
				log = v.Logs[t.Origin]
			}
			log.Below = max(log.Below, t.Seq)
			next[t.Origin] = log
			after = a.Pos
		}
	}
	plan := &PurgePlan{ArrivalFloor: p.ArrivalFloor}
	purged := map[wire.OriginID]uint64{}
	for _, l := range p.Logs {
		purged[l.Origin] = l.To
	}
	for o, log := range next {
		pl := PlannedLog{Origin: o, From: v.Logs[o].Floor.Seq + 1, Log: log}
		if to, ok := purged[o]; ok {
			floor, err := purgedLog(o, to, &pl.Log, v.Entry)
			if err != nil {
				return nil, err
			}
			pl.To, pl.Log.Floor, pl.Log.Below = floor.Seq, floor, max(pl.Log.Below, floor.Seq)
		}
		plan.Logs = append(plan.Logs, pl)
	}
	slices.SortFunc(plan.Logs, func(a, b PlannedLog) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	return plan, nil
}

// purgedLog walks log o from its floor up to seq to, as far as a purge takes it: entries
// one by one, each run whole (a run that ends above to stops the walk before it). It takes
// what goes from l.Bytes and returns the new floor; an entry above l.Below refuses the purge
// (ErrBadPurge).
func purgedLog(o wire.OriginID, to uint64, l *Log, entry func(wire.OriginID, uint64) ([]byte, error)) (Floor, error) {
	floor := l.Floor
	var last []byte // the last entry that goes, while it is the walk's last step
	for seq := floor.Seq + 1; seq <= to; {
		raw, err := entry(o, seq)
		var run *SkippedError
		switch {
		case errors.As(err, &run):
			if run.From != seq {
				return Floor{}, errorf("origin %s: seq %d is inside the run %d to %d, which the log does not reach", o, seq, run.From, run.To)
			}
			if run.To > to {
				to = seq - 1 // lowered: the floor is never inside a run
				continue
			}
			l.Bytes -= min(l.Bytes, uint64(len(AppendSkipRow(nil, run))))
			floor, last, seq = Floor{Seq: run.To, Hash: run.Hash, HLC: run.HLC}, nil, run.To+1
		case err != nil:
			return Floor{}, errorf("origin %s: purging entry %d: %w", o, seq, err)
		case seq > l.Below:
			return Floor{}, fmt.Errorf("%w: origin %s: purge to %d passes its entries still in the arrival order (from %d)", ErrBadPurge, o, to, l.Below+1)
		default:
			l.Bytes -= min(l.Bytes, uint64(len(raw)))
			floor.Seq, last, seq = seq, raw, seq+1
		}
	}
	if last != nil {
		t, err := wire.ParseTxn(last)
		if err != nil {
			return Floor{}, errorf("origin %s: entry %d: %w", o, floor.Seq, err)
		}
		floor = Floor{Seq: floor.Seq, Hash: sha256.Sum256(last), HLC: t.HLC}
	}
	return floor, nil
}
