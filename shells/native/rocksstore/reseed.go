package rocksstore

import (
	"fmt"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/vector"
)

// A reseed: a node restored from a backup takes a new origin id (docs/design.md §20), its
// old origin's entries re-issued under it, in one batch.

// Reseed checks rs with store.CheckReseed, then writes it as one batch: the identity, the
// range deletion of the old origin's entries above the cut, its cursor, every log's floor
// record that changed, the arrival floor, and the new origin's name, entries, arrival
// positions, cursor and rewritten records.
func (s *Store) Reseed(rs *store.Reseed) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	cs, err := s.CopyState()
	if err != nil {
		return err
	}
	plan, err := store.CheckReseed(rs, store.ReseedView{Identity: s.id, Cursors: s.cursor, Logs: s.logs,
		Copying: cs != nil, ArrivalFloor: s.afloor, LastArrival: s.arrivals, Entry: s.Entry, Get: s.Get})
	if err != nil {
		return err
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	var ranges []grocksdb.Range
	wb.Put([]byte{pIdentity}, append(rs.Identity.Origin[:], rs.Identity.Name...))
	wb.Put(key(pName, rs.Identity.Origin[:]), []byte(rs.Identity.Name))
	if plan.To >= plan.From {
		r := grocksdb.Range{Start: key(pLog, rs.Old[:], u64(plan.From)), Limit: key(pLog, rs.Old[:], u64(plan.To+1))}
		wb.DeleteRange(r.Start, r.Limit)
		ranges = append(ranges, r)
	}
	wb.Put(key(pCursor, rs.Old[:]), s.cursorValue(plan.OldCursor, 0))
	ranges = append(ranges, s.putFloors(wb, plan.Logs, plan.ArrivalFloor)...)
	pos, tops := s.arrivals, s.tops()
	var last vector.Entry
	for i := range rs.Entries {
		b := &rs.Entries[i]
		pos++
		wb.Put(key(pLog, b.Origin[:], u64(b.Seq)), b.Txn)
		wb.Put(key(pArrival, u64(pos)), append(b.Origin[:], u64(b.Seq)...))
		tops = s.putRecords(wb, b.Records, tops)
		last = vector.Entry{Origin: b.Origin, Seq: b.Seq, Hash: b.Hash}
	}
	if len(rs.Entries) > 0 {
		wb.Put(key(pCursor, last.Origin[:]), s.cursorValue(last, plan.Logs[last.Origin].Bytes))
	}
	if err := s.write("reseed", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: reseeding to origin %s: %w", rs.Identity.Origin, err)
	}
	var cursor vector.Vector
	for _, e := range s.cursor.Entries() {
		if e.Origin != rs.Old {
			cursor.Advance(e)
		}
	}
	cursor.Advance(plan.OldCursor)
	if len(rs.Entries) > 0 {
		cursor.Advance(last)
	}
	s.cursor, s.logs, s.afloor, s.arrivals, s.id = cursor, plan.Logs, plan.ArrivalFloor, pos, rs.Identity
	s.setTops(tops)
	s.compactMu.Lock()
	s.toCompact = mergeRanges(append(s.toCompact, ranges...))
	s.compactMu.Unlock()
	return nil
}
