package rocksstore

import (
	"bytes"
	"fmt"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The base copy's part of the store: snapshots served, the copy state taken, and the
// floors a copy's end writes (putFloors, which a reseed writes too). Each write is one batch.

// snapshot is a RocksDB snapshot and the read options that read through it.
type snapshot struct {
	s    *Store
	snap *grocksdb.Snapshot
	ro   *grocksdb.ReadOptions
}

// Snapshot opens a RocksDB snapshot of the whole key space. Its reads skip the block
// cache: a copy reads every record once, and would evict what the node's own reads need.
func (s *Store) Snapshot() (store.Snapshot, error) {
	sn := &snapshot{s: s, snap: s.db.NewSnapshot(), ro: grocksdb.NewDefaultReadOptions()}
	sn.ro.SetSnapshot(sn.snap)
	sn.ro.SetFillCache(false)
	return sn, nil
}

// Release frees the snapshot.
func (sn *snapshot) Release() {
	sn.s.db.ReleaseSnapshot(sn.snap)
	sn.ro.Destroy()
}

// tables lists the snapshot's tables from start on, in order.
func (sn *snapshot) tables(start []byte) ([][]byte, error) {
	var out [][]byte
	it := sn.s.db.NewIterator(sn.ro)
	defer it.Close()
	for it.Seek(key(pTable, start)); it.ValidForPrefix([]byte{pTable}); it.Next() {
		k := it.Key()
		out = append(out, bytes.Clone(k.Data()[1:]))
		k.Free()
	}
	return out, it.Err()
}

// Records calls fn for the records after (table, key), table by table: the store keeps a
// table's records under a prefix of its length and name, so tables are visited in the
// order of their names ('t' keys) and each one's records in key order.
func (sn *snapshot) Records(table, after []byte, fn func(store.Record) bool) error {
	names, err := sn.tables(table)
	if err != nil {
		return err
	}
	it := sn.s.db.NewIterator(sn.ro)
	defer it.Close()
	for _, t := range names {
		prefix := tablePrefix(t)
		start := prefix
		skip := table != nil && bytes.Equal(t, table)
		if skip {
			start = append(bytes.Clone(prefix), after...)
		}
		// Valid, then the key's prefix: ValidForPrefix would read the key a second time
		// (each a call into RocksDB, for every record of the copy).
		for it.Seek(start); it.Valid(); it.Next() {
			k := it.Key()
			if !bytes.HasPrefix(k.Data(), prefix) {
				k.Free()
				break
			}
			rk := k.Data()[len(prefix):]
			if skip && bytes.Equal(rk, after) {
				k.Free()
				continue
			}
			v := it.Value()
			r, err := decodeRecord(t, rk, v.Data())
			k.Free()
			v.Free()
			if err != nil {
				return err
			}
			if !fn(r) {
				return nil
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Size counts the snapshot's tables and estimates its records: RocksDB's estimate of its
// keys less the log entries and arrival positions this store holds, which it knows
// exactly. The bytes are not estimated (0).
func (sn *snapshot) Size() (tables, records, size uint64, err error) {
	names, err := sn.tables(nil)
	if err != nil {
		return 0, 0, 0, err
	}
	n, _ := sn.s.db.GetIntProperty("rocksdb.estimate-num-keys")
	var other uint64
	for o, l := range sn.s.logs {
		other += sn.s.cursor.Get(o).Seq - l.Floor.Seq + 2 // the entries, the cursor, the floor
	}
	other += sn.s.arrivals - sn.s.afloor + uint64(len(names))
	if n > other {
		records = n - other
	}
	return uint64(len(names)), records, 0, nil
}

// CopyState reads the copy being taken.
func (s *Store) CopyState() (*store.CopyState, error) {
	v, err := s.db.GetBytes(s.ro, []byte{pCopy})
	if err != nil || v == nil {
		return nil, err
	}
	var c store.CopyState
	if err := wire.Unmarshal(v, &c); err != nil {
		return nil, fmt.Errorf("rocksstore: the copy state is damaged: %w", err)
	}
	return &c, nil
}

// ApplyCopy writes one copied chunk as one batch: the records, the deletions, the copy
// state, RecordHLC and RecordToken. A table that loses its last record loses its 't' key too.
func (s *Store) ApplyCopy(b *store.CopyBatch) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	state, err := wire.Marshal(&b.State)
	if err != nil {
		return fmt.Errorf("rocksstore: encoding the copy state: %w", err)
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	tops := s.putRecords(wb, b.Records, s.tops())
	emptied, err := s.deleteRecords(wb, b.Deletes, b.Records)
	if err != nil {
		return err
	}
	wb.Put([]byte{pCopy}, state)
	for _, t := range emptied {
		wb.Delete(key(pTable, t))
	}
	if err := s.write("copy", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: writing a copied chunk: %w", err)
	}
	s.setTops(tops)
	return nil
}

// deleteRecords adds the deletion of recs to wb, and returns the tables it empties: those
// whose every record is deleted and none is put (puts: the batch's records).
func (s *Store) deleteRecords(wb *grocksdb.WriteBatch, recs, puts []store.Record) ([][]byte, error) {
	gone := map[string]map[string]bool{}
	for _, r := range recs {
		wb.Delete(append(tablePrefix(r.Table), r.Key...))
		if gone[string(r.Table)] == nil {
			gone[string(r.Table)] = map[string]bool{}
		}
		gone[string(r.Table)][string(r.Key)] = true
	}
	for _, r := range puts {
		delete(gone, string(r.Table))
	}
	var emptied [][]byte
	for t, keys := range gone {
		left := false
		err := s.each(tablePrefix([]byte(t)), nil, func(k, _ []byte) (bool, error) {
			left = !keys[string(k[len(tablePrefix([]byte(t))):])]
			return !left, nil
		})
		if err != nil {
			return nil, err
		}
		if !left {
			emptied = append(emptied, []byte(t))
		}
	}
	return emptied, nil
}

// EndCopy checks e with store.CheckCopyEnd, then writes it as one batch: the raised logs'
// cursors and floors, range deletions of the entries they held and of the arrival
// positions below the new arrival floor, the other logs' floors (their Below), the
// deletions, and the removal of the copy state.
func (s *Store) EndCopy(e *store.CopyEnd) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	plan, err := store.CheckCopyEnd(e, store.CopyEndView{Identity: s.id.Origin, Logs: s.logs, Cursors: s.cursor,
		ArrivalFloor: s.afloor, LastArrival: s.arrivals})
	if err != nil {
		return err
	}
	logs := store.LogsAfterCopy(plan, s.logs, s.cursor, s.afloor)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	var ranges []grocksdb.Range
	for _, rl := range plan.Logs {
		if rl.To >= rl.From {
			r := grocksdb.Range{Start: key(pLog, rl.Origin[:], u64(rl.From)), Limit: key(pLog, rl.Origin[:], u64(rl.To+1))}
			wb.DeleteRange(r.Start, r.Limit)
			ranges = append(ranges, r)
		}
		wb.Put(key(pCursor, rl.Origin[:]), s.cursorValue(rl.Cursor, 0))
	}
	for _, l := range e.Logs {
		if l.Name != "" {
			wb.Put(key(pName, l.Origin[:]), []byte(l.Name))
		}
	}
	ranges = append(ranges, s.putFloors(wb, logs, plan.ArrivalFloor)...)
	emptied, err := s.deleteRecords(wb, e.Deletes, nil)
	if err != nil {
		return err
	}
	for _, t := range emptied {
		wb.Delete(key(pTable, t))
	}
	wb.Delete([]byte{pCopy})
	if err := s.write("copy-end", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: ending the copy: %w", err)
	}
	for _, rl := range plan.Logs {
		s.cursor.Advance(rl.Cursor)
	}
	s.logs, s.afloor = logs, plan.ArrivalFloor
	s.compactMu.Lock()
	s.toCompact = mergeRanges(append(s.toCompact, ranges...))
	s.compactMu.Unlock()
	return nil
}

// putFloors adds to wb the floor record (floor and below) of every log of logs whose floor
// or below is not the store's, and, when afloor is above the arrival floor, the raise of the
// arrival floor to it with the range deletion of the positions it passes, whose range it
// returns for CompactLogs: what the end of a copy and a reseed both write.
func (s *Store) putFloors(wb *grocksdb.WriteBatch, logs map[wire.OriginID]store.Log, afloor uint64) []grocksdb.Range {
	for o, l := range logs {
		if l.Floor != s.logs[o].Floor || l.Below != s.logs[o].Below {
			wb.Put(key(pFloor, o[:]), floorValue(l))
		}
	}
	if afloor <= s.afloor {
		return nil
	}
	r := grocksdb.Range{Start: key(pArrival, u64(s.afloor+1)), Limit: key(pArrival, u64(afloor+1))}
	wb.DeleteRange(r.Start, r.Limit)
	wb.Put([]byte{pAFloor}, u64(afloor))
	return []grocksdb.Range{r}
}
