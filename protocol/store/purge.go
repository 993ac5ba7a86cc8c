package store

import (
	"bytes"
	"crypto/sha256"
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
			if to > log.Below {
				return bad("origin %s: purge to %d passes its entries still in the arrival order (from %d)", o, to, log.Below+1)
			}
			pl.To = to
			for seq := pl.From; seq <= to; seq++ {
				raw, err := v.Entry(o, seq)
				if err != nil {
					return nil, errorf("origin %s: purging entry %d: %w", o, seq, err)
				}
				pl.Log.Bytes -= min(pl.Log.Bytes, uint64(len(raw)))
				if seq == to {
					t, err := wire.ParseTxn(raw)
					if err != nil {
						return nil, errorf("origin %s: entry %d: %w", o, seq, err)
					}
					pl.Log.Floor = Floor{Seq: to, Hash: sha256.Sum256(raw), HLC: t.HLC}
				}
			}
		}
		plan.Logs = append(plan.Logs, pl)
	}
	slices.SortFunc(plan.Logs, func(a, b PlannedLog) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	return plan, nil
}
