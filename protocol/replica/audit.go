package replica

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strconv"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Audit checks a store's data offline (plait check): every origin's log is contiguous
// from seq 1 and its hash chain holds; each cursor names the last entry of its log; the
// arrival order holds every log entry exactly once; and the records are exactly what
// last-writer-wins makes of the logs replayed in arrival order. It returns the problems
// found, at most limit of them (0: no bound), or an error when the store cannot be read.
// It holds every record in memory while it runs.
func Audit(s Store, limit int) ([]string, error) {
	a := &audit{limit: limit}
	vec, err := s.Vector()
	if err != nil {
		return nil, err
	}
	last, err := s.LastArrival()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{} // (origin, seq) reached through the arrival order
	want := map[string]Record{}
	for pos := uint64(0); pos < last; {
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
			seen[id] = true
			replayLWW(want, &v)
		}
	}
	for _, e := range vec.Entries() {
		prev := wire.Hash{}
		for seq := uint64(1); seq <= e.Seq; seq++ {
			raw, err := s.Entry(e.Origin, seq)
			if err != nil {
				a.add("origin %s: log entry %d: %v", e.Origin, seq, err)
				break
			}
			v, err := wire.ParseTxn(raw)
			switch {
			case err != nil:
				a.add("origin %s: log entry %d: %v", e.Origin, seq, err)
			case v.Origin != e.Origin || v.Seq != seq:
				a.add("origin %s: log entry %d holds origin %s seq %d", e.Origin, seq, v.Origin, v.Seq)
			case v.Prev != prev:
				a.add("origin %s: log entry %d does not extend the chain of entry %d", e.Origin, seq, seq-1)
			case !seen[string(e.Origin[:])+strconv.FormatUint(seq, 10)]:
				a.add("origin %s: log entry %d is not in the arrival order", e.Origin, seq)
			}
			prev = sha256.Sum256(raw)
		}
		if prev != e.Hash {
			a.add("origin %s: the cursor at %d does not name the log's last entry", e.Origin, e.Seq)
		}
		if _, err := s.Entry(e.Origin, e.Seq+1); err == nil {
			a.add("origin %s: the log goes on past the cursor at %d", e.Origin, e.Seq)
		}
	}
	if len(seen) != countEntries(vec.Entries()) {
		a.add("the arrival order holds %d entries, the cursors cover %d", len(seen), countEntries(vec.Entries()))
	}
	tables, err := s.Tables()
	if err != nil {
		return nil, err
	}
	have := 0
	for _, t := range tables {
		err := s.Scan(t, nil, func(r Record) bool {
			have++
			k := recordKey(r.Table, r.Key)
			w, ok := want[k]
			switch {
			case !ok:
				a.add("record %s/%q is in no log", r.Table, r.Key)
			case w.Deleted != r.Deleted || w.HLC != r.HLC || w.Origin != r.Origin || !bytes.Equal(w.Value, r.Value):
				a.add("record %s/%q is not what last-writer-wins makes of the logs", r.Table, r.Key)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	if have != len(want) {
		a.add("%d records, while the logs write %d", have, len(want))
	}
	return a.problems, nil
}

type audit struct {
	problems []string
	limit    int
}

func (a *audit) add(format string, args ...any) {
	if a.limit == 0 || len(a.problems) < a.limit {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

func countEntries(es []vector.Entry) int {
	n := 0
	for _, e := range es {
		n += int(e.Seq)
	}
	return n
}

func recordKey(table, key []byte) string { return string(table) + "\x00" + string(key) }

// replayLWW applies a transaction to records by last-writer-wins, as the replica does.
func replayLWW(records map[string]Record, v *wire.TxnView) {
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		k := recordKey(op.Table, op.Key)
		if old, found := records[k]; found && newer(old.HLC, old.Origin, v.HLC, v.Origin) {
			continue
		}
		r := Record{Table: bytes.Clone(op.Table), Key: bytes.Clone(op.Key), Deleted: op.Kind == wire.OpDelete, HLC: v.HLC, Origin: v.Origin}
		if !r.Deleted {
			r.Value = bytes.Clone(op.Value)
		}
		records[k] = r
	}
}
