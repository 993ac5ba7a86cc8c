package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The suite's part on the base copy: snapshots, copied chunks, the end of a copy, and
// dropped tombstones; anti-entropy's repairs.

func rec(table, key, value string, hlc wire.HLC, o wire.OriginID) store.Record {
	return store.Record{Table: []byte(table), Key: []byte(key), Value: []byte(value), HLC: hlc, Origin: o}
}

func tomb(table, key string, hlc wire.HLC, o wire.OriginID) store.Record {
	return store.Record{Table: []byte(table), Key: []byte(key), Deleted: true, HLC: hlc, Origin: o}
}

// snapshotRecords lists what a snapshot holds after (table, key).
func snapshotRecords(t *testing.T, sn store.Snapshot, table, key []byte) []store.Record {
	t.Helper()
	var out []store.Record
	must(t, sn.Records(table, key, func(r store.Record) bool { out = append(out, r); return true }))
	return out
}

// testSnapshot: a snapshot holds the records as they were when it opened, whatever is
// written after; it lists them in (table, key) order, tables by their names' bytes (a
// longer name may sort first), from after any point, tombstones included.
func testSnapshot(t *testing.T, s store.Store) {
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("b", "k1", "1"), put("aa", "k2", "2"), put("aa", "k1", "3"), put("c", "k", "4")), 1)
	apply(t, s, c.next(t, del("c", "k")), 2)
	sn, err := s.Snapshot()
	must(t, err)
	defer sn.Release()
	apply(t, s, c.next(t, put("b", "k0", "5"), put("aa", "k1", "6"), put("a", "z", "7")), 3)

	h1, h2 := hlcA(1), hlcA(2)
	want := []store.Record{rec("aa", "k1", "3", h1, originA), rec("aa", "k2", "2", h1, originA), rec("b", "k1", "1", h1, originA), tomb("c", "k", h2, originA)}
	for _, c := range []struct {
		name       string
		table, key string
		want       []store.Record
	}{
		{"from the start", "", "", want},
		{"after aa/k1", "aa", "k1", want[1:]},
		{"after aa/k0, a key it does not hold", "aa", "k0", want},
		{"after ab/a, a table it does not hold", "ab", "a", want[2:]},
		{"after the last record", "c", "k", nil},
	} {
		var table, key []byte
		if c.table != "" {
			table, key = []byte(c.table), []byte(c.key)
		}
		if got := fmtRecords(snapshotRecords(t, sn, table, key)); got != fmtRecords(c.want) {
			t.Errorf("the snapshot %s:\n%s\nwant\n%s", c.name, got, fmtRecords(c.want))
		}
	}
	n := 0
	must(t, sn.Records(nil, nil, func(store.Record) bool { n++; return n < 2 }))
	if n != 2 {
		t.Errorf("fn returning false after 2 records was called %d times", n)
	}
	tables, records, _, err := sn.Size()
	must(t, err)
	if tables != 3 || records == 0 {
		t.Errorf("Size: %d tables, %d records; want 3 tables and an estimate above 0", tables, records)
	}
	// The store itself moved on.
	if r, ok := get(t, s, "aa", "k1"); !ok || string(r.Value) != "6" {
		t.Errorf("the store's aa/k1 = %s", fmtRecord(r))
	}
}

// hlcA is the HLC of seq of a chain of originA.
func hlcA(seq uint64) wire.HLC { return wire.MakeHLC(1_700_000_000_000+seq, uint16(originA[0])) }

// testApplyCopy: a chunk's records, deletions and copy state are written together; RecordHLC
// rises to the highest HLC copied; a table that loses its last record is no longer listed.
func testApplyCopy(t *testing.T, s store.Store) {
	if st, err := s.CopyState(); err != nil || st != nil {
		t.Fatalf("the copy state of an empty store: %+v, %v", st, err)
	}
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "old", "1"), put("u", "only", "2")), 1)
	state := store.CopyState{Peer: "p", Table: []byte("t"), Key: []byte("k2"), Snapshots: 1, Records: 2, Bytes: 99, Started: 7, Tables: 1,
		Vector: []wire.CopyPosition{{Origin: originB, Seq: 4, Hash: wire.Hash{4}, HLC: 40}}}
	must(t, s.ApplyCopy(&store.CopyBatch{
		Records: []store.Record{rec("t", "k1", "a", 1<<62, originB), tomb("t", "k2", 5, originB)},
		Deletes: []store.Record{{Table: []byte("t"), Key: []byte("old")}, {Table: []byte("u"), Key: []byte("only")}},
		State:   state}))
	got, err := s.CopyState()
	must(t, err)
	if got == nil || got.Peer != "p" || string(got.Key) != "k2" || got.Records != 2 || got.Bytes != 99 || got.Started != 7 ||
		len(got.Vector) != 1 || got.Vector[0] != state.Vector[0] {
		t.Fatalf("CopyState = %+v", got)
	}
	if got := fmtRecords(scan(t, s, "t", nil)); got != fmtRecords([]store.Record{rec("t", "k1", "a", 1<<62, originB), tomb("t", "k2", 5, originB)}) {
		t.Errorf("table t after the chunk: %s", got)
	}
	if h, _ := s.RecordHLC(); h != 1<<62 {
		t.Errorf("RecordHLC = %d, want the copied %d", h, uint64(1<<62))
	}
	tables, err := s.Tables()
	must(t, err)
	if len(tables) != 1 || string(tables[0]) != "t" {
		t.Errorf("Tables after u lost its only record: %q", tables)
	}
	// A later chunk replaces the state.
	state.Key, state.Records = []byte("k9"), 3
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{rec("t", "k9", "b", 3, originB)}, State: state}))
	if got, _ := s.CopyState(); got == nil || string(got.Key) != "k9" || got.Records != 3 {
		t.Errorf("CopyState after a second chunk = %+v", got)
	}
}

// testEndCopy: the end of a copy raises each listed log to its copied position — its
// cursor and floor there, every entry it held gone (ErrPurged), no bytes — raises the
// arrival floor to the last arrival (every other log then has all its entries below it),
// deletes what it lists and removes the copy state. A log whose cursor is at or above the
// position, or the store's own, is refused, writing nothing.
func testEndCopy(t *testing.T, s store.Store) {
	a, b := Chain(t, originA, 3), Chain(t, originB, 2)
	for i, batch := range []*store.Batch{a[0], b[0], a[1], b[1], a[2]} {
		apply(t, s, batch, uint64(i+1))
	}
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{rec("t", "copied", "x", 9, originC)}, State: store.CopyState{Peer: "p"}}))
	posA := wire.CopyPosition{Origin: originA, Seq: 10, Hash: wire.Hash{10}, HLC: 100}
	posC := wire.CopyPosition{Origin: originC, Seq: 5, Hash: wire.Hash{5}, HLC: 50}
	before := dump(t, s, originA, originB, originC)
	for _, e := range []*store.CopyEnd{
		{Logs: []store.CopiedLog{{Origin: originA, Position: wire.CopyPosition{Origin: originA, Seq: 3, Hash: wire.Hash{3}}}}}, // at the cursor
		{Logs: []store.CopiedLog{{Origin: Identity.Origin, Position: wire.CopyPosition{Origin: Identity.Origin, Seq: 3, Hash: wire.Hash{3}}}}},
		{Logs: []store.CopiedLog{{Origin: originC, Position: posC}, {Origin: originA, Position: posA}}}, // not ascending
		{Logs: []store.CopiedLog{{Origin: originA, Position: posC}}},                                    // another origin's position
		{Logs: []store.CopiedLog{{Origin: originA, Position: wire.CopyPosition{Origin: originA, Seq: 10}}}},
	} {
		if err := s.EndCopy(e); !errors.Is(err, store.ErrBadCopy) {
			t.Errorf("EndCopy(%+v) = %v, want ErrBadCopy", e.Logs, err)
		}
	}
	if after := dump(t, s, originA, originB, originC); after != before {
		t.Fatalf("a refused EndCopy wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if st, _ := s.CopyState(); st == nil {
		t.Fatal("a refused EndCopy removed the copy state")
	}

	must(t, s.EndCopy(&store.CopyEnd{Logs: []store.CopiedLog{{Origin: originA, Position: posA}, {Origin: originC, Position: posC, Name: "gamma"}},
		Deletes: []store.Record{{Table: []byte("t"), Key: []byte("copied")}}}))
	vec, err := s.Vector()
	must(t, err)
	if e := vec.Get(originA); e.Seq != 10 || e.Hash != posA.Hash {
		t.Errorf("A's cursor after the copy = %+v", e)
	}
	if e := vec.Get(originC); e.Seq != 5 || e.Hash != posC.Hash {
		t.Errorf("C's cursor after the copy = %+v", e)
	}
	if e := vec.Get(originB); e.Seq != 2 {
		t.Errorf("B's cursor moved: %+v", e)
	}
	if l := logOf(t, s, originA); l.Floor != (store.Floor{Seq: 10, Hash: posA.Hash, HLC: 100}) || l.Below != 10 || l.Bytes != 0 {
		t.Errorf("A's log after the copy = %+v", l)
	}
	if l := logOf(t, s, originB); l.Floor != (store.Floor{}) || l.Below != 2 || l.Bytes != uint64(len(b[0].Txn)+len(b[1].Txn)) {
		t.Errorf("B's log after the copy = %+v, want its entries kept, all below the arrival floor", l)
	}
	for seq := uint64(1); seq <= 10; seq++ {
		if _, err := s.Entry(originA, seq); !errors.Is(err, store.ErrPurged) {
			t.Errorf("Entry(A, %d) after the copy: %v, want ErrPurged", seq, err)
		}
	}
	if raw, err := s.Entry(originB, 2); err != nil || string(raw) != string(b[1].Txn) {
		t.Errorf("Entry(B, 2) after the copy: %v", err)
	}
	if af, _ := s.ArrivalFloor(); af != 5 {
		t.Errorf("ArrivalFloor after the copy = %d, want the last arrival, 5", af)
	}
	if _, err := s.Arrivals(4, 10); !errors.Is(err, store.ErrPurged) {
		t.Errorf("Arrivals below the new arrival floor: %v, want ErrPurged", err)
	}
	if st, err := s.CopyState(); err != nil || st != nil {
		t.Errorf("the copy state after the end: %+v, %v", st, err)
	}
	if names, err := s.Names(); err != nil || names[originC] != "gamma" {
		t.Errorf("C's name after the copy: %q, %v; want the one the end gave", names[originC], err)
	}
	if _, ok := get(t, s, "t", "copied"); ok {
		t.Error("a record the end deleted is still there")
	}
	// The log goes on from the copied position.
	next := &chain{origin: originA, seq: 10, prev: posA.Hash}
	apply(t, s, next.next(t, put("t", "after", "y")), 6)
	if l := logOf(t, s, originA); l.Floor.Seq != 10 || l.Bytes == 0 {
		t.Errorf("A's log after an entry on top of the copy = %+v", l)
	}
	// A copy that raises nothing leaves the arrival floor alone.
	must(t, s.ApplyCopy(&store.CopyBatch{State: store.CopyState{Peer: "q"}}))
	must(t, s.EndCopy(&store.CopyEnd{}))
	if af, _ := s.ArrivalFloor(); af != 5 {
		t.Errorf("ArrivalFloor after a copy that raised nothing = %d, want 5", af)
	}
}

// testDropTombstones: only a tombstone that is still the record's version is dropped; a
// put, or a tombstone of another version, stays.
func testDropTombstones(t *testing.T, s store.Store) {
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "a", "1"), put("t", "b", "2"), put("u", "c", "3")), 1)
	apply(t, s, c.next(t, del("t", "a"), del("t", "b"), del("u", "c")), 2)
	h2 := hlcA(2)
	must(t, s.DropTombstones([]store.Record{
		tomb("t", "a", h2, originA),   // dropped
		tomb("t", "b", h2+1, originA), // another version: kept
		tomb("t", "zz", h2, originA),  // absent: nothing
		tomb("u", "c", h2, originA),   // dropped, and u has nothing left
	}))
	if got := fmtRecords(scan(t, s, "t", nil)); got != fmtRecords([]store.Record{tomb("t", "b", h2, originA)}) {
		t.Errorf("table t: %s", got)
	}
	tables, err := s.Tables()
	must(t, err)
	if !slices.EqualFunc(tables, [][]byte{[]byte("t")}, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("Tables = %q, want [t]", tables)
	}
	apply(t, s, c.next(t, put("t", "b", "back")), 3)
	must(t, s.DropTombstones([]store.Record{tomb("t", "b", h2, originA)}))
	if r, ok := get(t, s, "t", "b"); !ok || string(r.Value) != "back" {
		t.Errorf("a put was dropped as a tombstone: %s", fmtRecord(r))
	}
}

// testDropTable: DropTable deletes one table's records, tombstones included, and counts
// them and their bytes; the other tables (one whose name extends it included), the logs
// and the cursor vector stay; a table without records deletes nothing.
func testDropTable(t *testing.T, s store.Store) {
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "a", "1"), put("t", "bb", "22"), put("t1", "c", "3"), put("u", "d", "4")), 1)
	apply(t, s, c.next(t, del("t", "a")), 2)
	vec, err := s.Vector()
	must(t, err)
	n, size, err := s.DropTable([]byte("t"))
	must(t, err)
	if n != 2 || size < uint64(len("a")+len("bb")+len("22")) {
		t.Errorf("DropTable(t) = %d records, %d bytes; want 2 (a tombstone and a put), at least their 5 bytes of keys and values", n, size)
	}
	if got := scan(t, s, "t", nil); len(got) != 0 {
		t.Errorf("table t after DropTable: %s", fmtRecords(got))
	}
	if _, ok := get(t, s, "t1", "c"); !ok {
		t.Error("DropTable(t) deleted table t1's record")
	}
	if _, ok := get(t, s, "u", "d"); !ok {
		t.Error("DropTable(t) deleted table u's record")
	}
	tables, err := s.Tables()
	must(t, err)
	if !slices.EqualFunc(tables, [][]byte{[]byte("t1"), []byte("u")}, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("Tables = %q, want [t1 u]", tables)
	}
	after, err := s.Vector()
	must(t, err)
	if !reflect.DeepEqual(after.Entries(), vec.Entries()) {
		t.Errorf("the vector changed: %v, want %v", after.Entries(), vec.Entries())
	}
	if n, size, err := s.DropTable([]byte("zz")); err != nil || n != 0 || size != 0 {
		t.Errorf("DropTable of a table without records = %d, %d, %v", n, size, err)
	}
}

// testRepair: Repair writes record versions as they are (a put over a record, a tombstone,
// a record of a new table), leaves the logs and the cursor vector alone, and raises
// RecordHLC to its highest version.
func testRepair(t *testing.T, s store.Store) {
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "a", "1"), put("t", "b", "2")), 1)
	vec, err := s.Vector()
	must(t, err)
	logs, err := s.Logs()
	must(t, err)
	must(t, s.Repair([]store.Record{rec("t", "a", "fixed", 1<<61, originB), tomb("t", "c", 3, originB), rec("w", "k", "v", 4, originC)}))
	if got, want := fmtRecords(scan(t, s, "t", nil)), fmtRecords([]store.Record{rec("t", "a", "fixed", 1<<61, originB),
		scan(t, s, "t", nil)[1], tomb("t", "c", 3, originB)}); got != want || string(scan(t, s, "t", nil)[1].Key) != "b" {
		t.Errorf("table t after Repair: %s", got)
	}
	if got := fmtRecords(scan(t, s, "w", nil)); got != fmtRecords([]store.Record{rec("w", "k", "v", 4, originC)}) {
		t.Errorf("table w after Repair: %s", got)
	}
	tables, err := s.Tables()
	must(t, err)
	if len(tables) != 2 || string(tables[1]) != "w" {
		t.Errorf("Tables after Repair: %q", tables)
	}
	if h, _ := s.RecordHLC(); h != 1<<61 {
		t.Errorf("RecordHLC = %d, want the repaired %d", h, uint64(1<<61))
	}
	vec2, err := s.Vector()
	must(t, err)
	logs2, err := s.Logs()
	must(t, err)
	if fmt.Sprint(vec2.Entries()) != fmt.Sprint(vec.Entries()) || fmt.Sprint(logs2) != fmt.Sprint(logs) {
		t.Errorf("Repair moved the logs: %v %v, were %v %v", vec2.Entries(), logs2, vec.Entries(), logs)
	}
	if n, _ := s.LastArrival(); n != 1 {
		t.Errorf("LastArrival = %d after Repair, want 1", n)
	}
	// An empty repair writes nothing and is no error.
	must(t, s.Repair(nil))
}
