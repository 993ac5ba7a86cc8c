package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// Audit checks a store's data offline (plait check): every origin's log is contiguous
// from its floor up and its hash chain holds from the floor's hash, through the ends of the
// runs it holds as skips (a run's Prev is the previous entry's hash, and its Hash the next
// one's previous hash; a run is in no arrival order); each cursor names the
// last entry of its log; the log's bytes are what it holds; the arrival order above the
// arrival floor holds exactly the log entries above each log's Below, once each; and the
// records are what the conflict order (NewerVersion) makes of the logs, allowing for history the logs no
// longer hold: a record written by a purged or copied entry (at or below its origin's
// floor), or copied from a snapshot ahead of this node's log of its origin, stands where
// no kept entry overrides it; a tombstone may be dropped; and a record a kept entry wrote
// may be gone when a floor's timestamp is above its version (a delete below that floor
// removed it). A log a copy raised may hold no entry: its floor is then its cursor. It returns the
// problems found, at most limit of them (0: no bound), or an error when the store cannot
// be read. It holds every record in memory while it runs.
func Audit(s Store, limit int) ([]string, error) { return AuditCarried(s, limit, nil) }

// AuditCarried is Audit for a node that carries only the tables carried reports true for
// (nil: every table; docs/design.md §24): the operations of the others in its log are not
// replayed, since it stores none of their records, and a record whose version is inside a
// run its log holds as a skip (a table it was added to, filled by a copy) stands as one
// copied ahead does.
func AuditCarried(s Store, limit int, carried func(table []byte) bool) ([]string, error) {
	a := &audit{limit: limit, carried: carried}
	vec, err := s.Vector()
	if err != nil {
		return nil, err
	}
	logs, err := s.Logs()
	if err != nil {
		return nil, err
	}
	afloor, err := s.ArrivalFloor()
	if err != nil {
		return nil, err
	}
	last, err := s.LastArrival()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{} // (origin, seq) reached through the arrival order
	want := map[string]Record{}
	for pos := afloor; pos < last; {
		batch, err := s.Arrivals(pos, 256)
		if err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			a.add("arrival order ends at %d, before the last position %d", pos, last)
			break
		}
		for _, arr := range batch {
			if arr.Pos != pos+1 {
				a.add("arrival position %d follows %d", arr.Pos, pos)
			}
			pos = arr.Pos
			v, err := wire.ParseTxn(arr.Txn)
			if err != nil {
				a.add("arrival %d: %v", arr.Pos, err)
				continue
			}
			id := string(v.Origin[:]) + strconv.FormatUint(v.Seq, 10)
			if seen[id] {
				a.add("arrival %d: origin %s seq %d arrived twice", arr.Pos, v.Origin, v.Seq)
			}
			if v.Seq <= logs[v.Origin].Below {
				a.add("arrival %d: origin %s seq %d is in the arrival order, below its log's below %d", arr.Pos, v.Origin, v.Seq, logs[v.Origin].Below)
			}
			seen[id] = true
			a.replayLWW(want, &v)
		}
	}
	inOrder := 0                              // log entries the arrival order should hold
	headHLC := map[wire.OriginID]wire.HLC{}   // each log's last entry's timestamp (its floor's when it holds none)
	runs := map[wire.OriginID][][2]wire.HLC{} // the timestamps each log's runs span: (after, through]
	var floorHLC wire.HLC                     // the highest floor timestamp of any log
	for _, e := range vec.Entries() {
		l := logs[e.Origin]
		headHLC[e.Origin] = l.Floor.HLC
		floorHLC = max(floorHLC, l.Floor.HLC)
		if l.Floor.Seq > l.Below || l.Below > e.Seq || l.Floor.Seq > e.Seq {
			a.add("origin %s: floor %d, below %d and cursor %d are out of order", e.Origin, l.Floor.Seq, l.Below, e.Seq)
		}
		if l.Floor.Seq > 0 {
			if _, err := s.Entry(e.Origin, l.Floor.Seq); !errors.Is(err, ErrPurged) {
				a.add("origin %s: the entry at the floor %d is not reported purged (%v)", e.Origin, l.Floor.Seq, err)
			}
		}
		prev, held, skipped := l.Floor.Hash, uint64(0), uint64(0)
		for seq := l.Floor.Seq + 1; seq <= e.Seq; seq++ {
			raw, err := s.Entry(e.Origin, seq)
			var run *SkippedError
			if errors.As(err, &run) {
				// A run held as a skip: the chain goes through its ends; it is in no arrival
				// order and writes no record here.
				switch {
				case run.From != seq || run.To > e.Seq:
					a.add("origin %s: the run %d to %d does not fit the log at seq %d (cursor %d)", e.Origin, run.From, run.To, seq, e.Seq)
				case run.Prev != prev:
					a.add("origin %s: the run %d to %d does not extend the chain of entry %d", e.Origin, run.From, run.To, seq-1)
				}
				if run.To < seq {
					break // the walk would not move on
				}
				held += uint64(len(AppendSkipRow(nil, run)))
				skipped += run.To - max(run.From-1, min(l.Below, run.To))
				runs[e.Origin] = append(runs[e.Origin], [2]wire.HLC{headHLC[e.Origin], run.HLC})
				headHLC[e.Origin], prev, seq = run.HLC, run.Hash, run.To
				continue
			}
			if err != nil {
				a.add("origin %s: log entry %d: %v", e.Origin, seq, err)
				break
			}
			held += uint64(len(raw))
			v, err := wire.ParseTxn(raw)
			inIndex := seen[string(e.Origin[:])+strconv.FormatUint(seq, 10)]
			switch {
			case err != nil:
				a.add("origin %s: log entry %d: %v", e.Origin, seq, err)
			case v.Origin != e.Origin || v.Seq != seq:
				a.add("origin %s: log entry %d holds origin %s seq %d", e.Origin, seq, v.Origin, v.Seq)
			case v.Prev != prev:
				a.add("origin %s: log entry %d does not extend the chain of entry %d", e.Origin, seq, seq-1)
			case seq > l.Below && !inIndex:
				a.add("origin %s: log entry %d is not in the arrival order", e.Origin, seq)
			case seq <= l.Below:
				a.replayLWW(want, &v) // kept below the arrival floor: not replayed above
			}
			if err == nil {
				headHLC[e.Origin] = v.HLC
			}
			prev = sha256.Sum256(raw)
		}
		if prev != e.Hash {
			a.add("origin %s: the cursor at %d does not name the log's last entry", e.Origin, e.Seq)
		}
		if held != l.Bytes {
			a.add("origin %s: the log holds %d bytes, its count says %d", e.Origin, held, l.Bytes)
		}
		if _, err := s.Entry(e.Origin, e.Seq+1); err == nil {
			a.add("origin %s: the log goes on past the cursor at %d", e.Origin, e.Seq)
		}
		inOrder += int(e.Seq - min(e.Seq, l.Below) - skipped)
	}
	if len(seen) != inOrder {
		a.add("the arrival order holds %d entries, the logs above their below %d", len(seen), inOrder)
	}
	tables, err := s.Tables()
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	for _, t := range tables {
		err := s.Scan(t, nil, func(r Record) bool {
			k := recordKey(r.Table, r.Key)
			found[k] = true
			w, ok := want[k]
			// A record is explained by the log of the entry that delivered it (its Via and
			// ViaHLC for a leaf write a hub re-originated, else its origin and HLC:
			// docs/design.md §27.8): a leaf has no log here.
			o, hlc := r.Delivering()
			fromPurged := hlc <= logs[o].Floor.HLC // written by an entry no longer in the log
			// Copied from a snapshot that held more of the origin than this node's log: the
			// log catches up when the origin streams from the copy's position.
			copiedAhead := hlc > headHLC[o]
			fromRun := slices.ContainsFunc(runs[o], func(span [2]wire.HLC) bool { return hlc > span[0] && hlc <= span[1] })
			switch {
			case ok && w.Deleted == r.Deleted && w.Version() == r.Version() && bytes.Equal(w.Value, r.Value):
			case (fromPurged || copiedAhead || fromRun) && (!ok || NewerVersion(r.Version(), w.Version())):
			case !ok:
				a.add("record %s/%q is in no log", r.Table, r.Key)
			default:
				a.add("record %s/%q is not what last-writer-wins makes of the logs", r.Table, r.Key)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	missing := 0
	for k, w := range want {
		// A tombstone may be dropped (docs/design.md §14); a record may be gone by a delete
		// that is no longer in any log: one below a floor (purged, or taken by a copy whose
		// sender had dropped its tombstone).
		if !found[k] && !w.Deleted && w.HLC > floorHLC {
			missing++
		}
	}
	if missing > 0 {
		a.add("%d records that the logs write are missing", missing)
	}
	return a.problems, nil
}

type audit struct {
	problems []string
	limit    int
	carried  func(table []byte) bool // nil: every table
}

func (a *audit) add(format string, args ...any) {
	if a.limit == 0 || len(a.problems) < a.limit {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

func recordKey(table, key []byte) string { return string(table) + "\x00" + string(key) }

// replayLWW applies a transaction to records by the conflict order, as the replica does:
// by the entry's version, or, for a format-3 entry, by its leaf block's (the conflict
// identity, docs/design.md §27.8), the entry's origin and HLC then being the records' via.
// The records are compared by version only (Version), never by via: a node keeps the via of
// the first entry that wrote a version, whichever hub delivered it.
func (a *audit) replayLWW(records map[string]Record, v *wire.TxnView) {
	ver := Version{Token: v.Token, HLC: v.HLC, Origin: v.Origin}
	var via wire.OriginID
	var viaHLC wire.HLC
	if v.Format() == wire.TxnFormat3 {
		ver = Version{HLC: v.Leaf.HLC, Origin: v.Leaf.Origin}
		via, viaHLC = v.Origin, v.HLC
	}
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		if a.carried != nil && !a.carried(op.Table) {
			continue // a table this node does not carry: it stores none of its records
		}
		k := recordKey(op.Table, op.Key)
		if old, found := records[k]; found && NewerVersion(old.Version(), ver) {
			continue
		}
		r := Record{Table: bytes.Clone(op.Table), Key: bytes.Clone(op.Key), Deleted: op.Kind == wire.OpDelete,
			HLC: ver.HLC, Origin: ver.Origin, Token: ver.Token, Via: via, ViaHLC: viaHLC}
		if !r.Deleted {
			r.Value = bytes.Clone(op.Value)
		}
		records[k] = r
	}
}
