package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The suite's part on runs held as skips (docs/design.md §24.2): a Skip batch is one log
// row at the run's last seq, Entry answers the whole run inside it, purges take runs whole,
// and the audit follows the chain through a run's ends.

// SkipBatch returns the batch of the run of chain c from seq from to seq to (1-based, as
// the chain's Seq): its Prev, Hash and HLC are the chain's, so that the chain's next entry
// extends it.
func SkipBatch(t testing.TB, c []*store.Batch, from, to uint64, tables ...string) *store.Batch {
	t.Helper()
	last := c[to-1]
	v, err := wire.ParseTxn(last.Txn)
	if err != nil {
		t.Fatal(err)
	}
	sk := &store.Skip{From: from, HLC: v.HLC, Generation: 7}
	if from > 1 {
		sk.Prev = c[from-2].Hash
	}
	for _, tb := range tables {
		sk.Tables = append(sk.Tables, []byte(tb))
	}
	return &store.Batch{Origin: last.Origin, Seq: to, Hash: last.Hash, Skip: sk}
}

// runOf is the run Entry should answer for a Skip batch.
func runOf(b *store.Batch) *store.SkippedError {
	return &store.SkippedError{Origin: b.Origin, From: b.Skip.From, To: b.Seq, Prev: b.Skip.Prev, Hash: b.Hash,
		HLC: b.Skip.HLC, Tables: b.Skip.Tables, Generation: b.Skip.Generation}
}

// rowSize is the bytes a run adds to its log.
func rowSize(b *store.Batch) uint64 { return uint64(len(store.AppendSkipRow(nil, runOf(b)))) }

// applySkip applies a Skip batch, which takes no arrival position.
func applySkip(t *testing.T, s store.Store, b *store.Batch) {
	t.Helper()
	pos, err := s.Apply(b)
	if err != nil || pos != 0 {
		t.Fatalf("Apply of the run %d to %d of origin %x = %d, %v; want no arrival position", b.Skip.From, b.Seq, b.Origin[:2], pos, err)
	}
}

// checkRun checks that Entry answers the run of b for seq.
func checkRun(t *testing.T, s store.Store, b *store.Batch, seq uint64) {
	t.Helper()
	raw, err := s.Entry(b.Origin, seq)
	var run *store.SkippedError
	if !errors.As(err, &run) || !errors.Is(err, store.ErrSkipped) || raw != nil {
		t.Errorf("Entry(%x, %d) = %d bytes, %v; want the run %d to %d", b.Origin[:2], seq, len(raw), err, b.Skip.From, b.Seq)
		return
	}
	if want := runOf(b); !reflect.DeepEqual(run, want) {
		t.Errorf("Entry(%x, %d) answers the run %+v, want %+v", b.Origin[:2], seq, run, want)
	}
}

func checkAudit(t *testing.T, s store.Store, when string) {
	t.Helper()
	if problems, err := store.Audit(s, 0); err != nil || len(problems) != 0 {
		t.Errorf("the audit %s: %v, %v; want it clean", when, problems, err)
	}
}

// testSkip: a run is one log row, its seqs read as the whole run, the next entry extends
// its hash, and it moves the cursor and the log's bytes but not the arrival order or
// RecordHLC.
func testSkip(t *testing.T, s store.Store) {
	a := Chain(t, originA, 10)
	apply(t, s, a[0], 1)
	apply(t, s, a[1], 2)
	hlc, err := s.RecordHLC()
	must(t, err)
	run := SkipBatch(t, a, 3, 6, "p", "q")
	run.Name = "alpha"
	applySkip(t, s, run)
	if v, err := s.Vector(); err != nil || v.Get(originA).Seq != 6 || v.Get(originA).Hash != a[5].Hash {
		t.Errorf("A's cursor after the run 3 to 6: %+v, %v; want 6 with entry 6's hash", v.Get(originA), err)
	}
	for _, seq := range []uint64{3, 4, 6} {
		checkRun(t, s, run, seq)
	}
	if raw, err := s.Entry(originA, 2); err != nil || string(raw) != string(a[1].Txn) {
		t.Errorf("Entry(A, 2) before the run = %v; want the entry", err)
	}
	if _, err := s.Entry(originA, 7); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Entry(A, 7) after the run, before it is applied: %v; want ErrNotFound", err)
	}
	if names, err := s.Names(); err != nil || names[originA] != "alpha" {
		t.Errorf("Names after a run named its origin = %v, %v", names, err)
	}
	if got, err := s.RecordHLC(); err != nil || got != hlc {
		t.Errorf("RecordHLC after a run = %d, %v; want %d: a run writes no record", got, err, hlc)
	}
	if last, err := s.LastArrival(); err != nil || last != 2 {
		t.Errorf("LastArrival after a run = %d, %v; want 2: a run takes no arrival position", last, err)
	}
	// The next entry follows the run's hash; a second run at the head.
	apply(t, s, a[6], 3)
	head := SkipBatch(t, a, 8, 10)
	applySkip(t, s, head)
	checkRun(t, s, run, 5)
	checkRun(t, s, head, 8)
	checkRun(t, s, head, 10)
	if raw, err := s.Entry(originA, 7); err != nil || string(raw) != string(a[6].Txn) {
		t.Errorf("Entry(A, 7) between two runs = %v; want the entry", err)
	}
	if _, err := s.Entry(originA, 11); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Entry(A, 11) past the head run: %v; want ErrNotFound", err)
	}
	arr, err := s.Arrivals(0, 10)
	must(t, err)
	if len(arr) != 3 || string(arr[2].Txn) != string(a[6].Txn) {
		t.Errorf("Arrivals = %d entries; want the 3 entries and no run", len(arr))
	}
	want := uint64(len(a[0].Txn)+len(a[1].Txn)+len(a[6].Txn)) + rowSize(run) + rowSize(head)
	if l := logOf(t, s, originA); l.Bytes != want || l.Floor != (store.Floor{}) || l.Below != 0 {
		t.Errorf("A's log = %+v, want bytes %d (3 entries and 2 run rows), no floor, below 0", l, want)
	}
	if v, err := s.Vector(); err != nil || v.Get(originA).Seq != 10 || v.Get(originA).Hash != a[9].Hash {
		t.Errorf("A's cursor after the head run: %+v, %v; want 10 with entry 10's hash", v.Get(originA), err)
	}
	checkAudit(t, s, "of a log with two runs")

	// A log that starts with a run, and one that is a run alone.
	b := Chain(t, originB, 3)
	applySkip(t, s, SkipBatch(t, b, 1, 2))
	apply(t, s, b[2], 4)
	c := Chain(t, originC, 1)
	applySkip(t, s, SkipBatch(t, c, 1, 1, "p"))
	checkRun(t, s, SkipBatch(t, b, 1, 2), 1)
	checkRun(t, s, SkipBatch(t, c, 1, 1, "p"), 1)
	checkAudit(t, s, "with logs that start with a run")
}

// testSkipExtends: a run right after a run the store holds extends it into one row (its
// first seq and Prev, the new end, the tables of both), and the log's bytes count the one
// row; a run after an entry, or one whose tables would pass MaxSkipTables, is a row of its
// own.
func testSkipExtends(t *testing.T, s store.Store) {
	a := Chain(t, originA, 8)
	apply(t, s, a[0], 1)
	applySkip(t, s, SkipBatch(t, a, 2, 2, "q"))
	applySkip(t, s, SkipBatch(t, a, 3, 3, "p"))
	applySkip(t, s, SkipBatch(t, a, 4, 5, "q"))
	one := SkipBatch(t, a, 2, 5, "p", "q")
	for _, seq := range []uint64{2, 3, 5} {
		checkRun(t, s, one, seq)
	}
	want := uint64(len(a[0].Txn)) + rowSize(one)
	if l := logOf(t, s, originA); l.Bytes != want {
		t.Errorf("A's log after three adjacent runs: %d bytes, want %d (an entry and one run row)", l.Bytes, want)
	}
	apply(t, s, a[5], 2)
	after := SkipBatch(t, a, 7, 7, "p")
	applySkip(t, s, after)
	checkRun(t, s, after, 7)
	checkRun(t, s, one, 4)
	// Tables past the bound: a row of its own.
	var many []string
	for i := range store.MaxSkipTables {
		many = append(many, fmt.Sprintf("t%02d", i))
	}
	last := SkipBatch(t, a, 8, 8, many...)
	applySkip(t, s, last)
	checkRun(t, s, after, 7)
	checkRun(t, s, last, 8)
	checkAudit(t, s, "of a log with extended runs")
}

// testSkipRefuses: a run that does not start at the cursor + 1 on the cursor's hash is
// refused with ErrNotNext, and one that breaks a run's rules with another error; either
// writes nothing. A run naming MaxSkipTables tables is kept with them.
func testSkipRefuses(t *testing.T, s store.Store) {
	a := Chain(t, originA, 6)
	apply(t, s, a[0], 1)
	apply(t, s, a[1], 2)
	origins := []wire.OriginID{originA, originB, peerQ}
	before := dump(t, s, origins...)
	with := func(f func(b *store.Batch)) *store.Batch {
		b := SkipBatch(t, a, 3, 5, "p")
		f(b)
		return b
	}
	many := func(n int) [][]byte {
		var out [][]byte
		for i := range n {
			out = append(out, fmt.Appendf(nil, "t%03d", i))
		}
		return out
	}
	notNext := map[string]*store.Batch{
		"ahead of the cursor":      SkipBatch(t, a, 4, 5),
		"at the cursor":            SkipBatch(t, a, 2, 5),
		"on another hash":          with(func(b *store.Batch) { b.Skip.Prev = a[0].Hash }),
		"from 1 on a cursor at 2":  SkipBatch(t, a, 1, 5),
		"a new origin from seq 2":  SkipBatch(t, Chain(t, originB, 3), 2, 3),
		"on a hash from seq 1 too": with(func(b *store.Batch) { b.Skip.From = 1 }),
	}
	other := map[string]*store.Batch{
		"zero origin":          with(func(b *store.Batch) { b.Origin = wire.OriginID{} }),
		"ending before it":     with(func(b *store.Batch) { b.Seq = 2 }),
		"HLC 0":                with(func(b *store.Batch) { b.Skip.HLC = 0 }),
		"no chain hash":        with(func(b *store.Batch) { b.Hash = wire.Hash{} }),
		"a transaction":        with(func(b *store.Batch) { b.Txn = a[2].Txn }),
		"records":              with(func(b *store.Batch) { b.Records = a[2].Records }),
		"a peer cursor":        with(func(b *store.Batch) { b.PeerOrigin, b.PeerCursor = peerQ, 9 }),
		"tables not ascending": with(func(b *store.Batch) { b.Skip.Tables = [][]byte{[]byte("q"), []byte("p")} }),
		"a table twice":        with(func(b *store.Batch) { b.Skip.Tables = [][]byte{[]byte("p"), []byte("p")} }),
		"a bad table name":     with(func(b *store.Batch) { b.Skip.Tables = [][]byte{[]byte("p/q")} }),
		"an empty table name":  with(func(b *store.Batch) { b.Skip.Tables = [][]byte{{}} }),
		"one table too many":   with(func(b *store.Batch) { b.Skip.Tables = many(store.MaxSkipTables + 1) }),
	}
	for name, b := range notNext {
		b.Name = "evil"
		if _, err := s.Apply(b); !errors.Is(err, store.ErrNotNext) {
			t.Errorf("%s: Apply = %v, want ErrNotNext", name, err)
		}
	}
	for name, b := range other {
		b.Name = "evil"
		if _, err := s.Apply(b); err == nil || errors.Is(err, store.ErrNotNext) {
			t.Errorf("%s: Apply = %v, want an error other than ErrNotNext", name, err)
		}
	}
	if after := dump(t, s, origins...); after != before {
		t.Fatalf("a refused run changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	full := with(func(b *store.Batch) { b.Skip.Tables = many(store.MaxSkipTables) })
	applySkip(t, s, full)
	checkRun(t, s, full, 4)
	if l := logOf(t, s, originA); l.Bytes != uint64(len(a[0].Txn)+len(a[1].Txn))+rowSize(full) {
		t.Errorf("A's log holds %d bytes after a run of %d tables, want %d", l.Bytes, store.MaxSkipTables,
			uint64(len(a[0].Txn)+len(a[1].Txn))+rowSize(full))
	}
	apply(t, s, a[5], 3)
	checkAudit(t, s, "after a run of the most tables")
}

// testSkipPurge: a purge's To inside a run is lowered to the run's start, a purge at or
// past a run's end takes it whole (its Hash and HLC become the floor), and a run needs no
// arrival position to go.
func testSkipPurge(t *testing.T, s store.Store) {
	a := Chain(t, originA, 10)
	// A: 1 2 entries (positions 1, 2), run 3-6, entry 7 (position 3), run 8-10 (the head).
	apply(t, s, a[0], 1)
	apply(t, s, a[1], 2)
	run := SkipBatch(t, a, 3, 6, "p")
	applySkip(t, s, run)
	apply(t, s, a[6], 3)
	head := SkipBatch(t, a, 8, 10, "p")
	applySkip(t, s, head)
	all := logOf(t, s, originA).Bytes

	// To 4, inside the run: lowered to 2.
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 4}}, ArrivalFloor: 2}))
	want := store.Log{Floor: store.Floor{Seq: 2, Hash: a[1].Hash, HLC: hlcOf(t, a[1])}, Below: 2,
		Bytes: all - uint64(len(a[0].Txn)+len(a[1].Txn))}
	if l := logOf(t, s, originA); l != want {
		t.Errorf("A's log after a purge to 4, inside the run 3 to 6 = %+v, want %+v", l, want)
	}
	if _, err := s.Entry(originA, 2); !errors.Is(err, store.ErrPurged) {
		t.Errorf("Entry(A, 2) after the purge: %v, want ErrPurged", err)
	}
	checkRun(t, s, run, 3)
	checkAudit(t, s, "after a purge lowered to a run's start")

	// To 3, the run's first seq: lowered to the floor, nothing goes.
	before := dump(t, s, originA)
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 3}}, ArrivalFloor: 2}))
	if after := dump(t, s, originA); after != before {
		t.Errorf("a purge lowered to the floor changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// To 6, the run's end: the run goes, though above Below and with no arrival position;
	// the floor is the run's end and Below rises to it.
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 6}}, ArrivalFloor: 2}))
	want = store.Log{Floor: store.Floor{Seq: 6, Hash: run.Hash, HLC: run.Skip.HLC}, Below: 6,
		Bytes: uint64(len(a[6].Txn)) + rowSize(head)}
	if l := logOf(t, s, originA); l != want {
		t.Errorf("A's log after a purge to the run's end = %+v, want %+v", l, want)
	}
	for _, seq := range []uint64{3, 6} {
		if _, err := s.Entry(originA, seq); !errors.Is(err, store.ErrPurged) {
			t.Errorf("Entry(A, %d) of the purged run: %v, want ErrPurged", seq, err)
		}
	}
	checkAudit(t, s, "after a run was purged")

	// To 9, inside the head run: lowered to 7, whose arrival position (3) the arrival floor
	// must pass.
	if err := s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 9}}, ArrivalFloor: 2}); !errors.Is(err, store.ErrBadPurge) {
		t.Errorf("a purge of entry 7, in the arrival order: %v, want ErrBadPurge", err)
	}
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 9}}, ArrivalFloor: 3}))
	want = store.Log{Floor: store.Floor{Seq: 7, Hash: a[6].Hash, HLC: hlcOf(t, a[6])}, Below: 7, Bytes: rowSize(head)}
	if l := logOf(t, s, originA); l != want {
		t.Errorf("A's log after a purge to 9, inside the head run = %+v, want %+v", l, want)
	}
	checkRun(t, s, head, 8)
	checkAudit(t, s, "after a purge lowered below the head run")

	// Across: entry, run, entry in one purge; the floor is the last entry's.
	b := Chain(t, originB, 5)
	apply(t, s, b[0], 4)
	applySkip(t, s, SkipBatch(t, b, 2, 3))
	apply(t, s, b[3], 5)
	apply(t, s, b[4], 6)
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originB, To: 4}}, ArrivalFloor: 5}))
	want = store.Log{Floor: store.Floor{Seq: 4, Hash: b[3].Hash, HLC: hlcOf(t, b[3])}, Below: 4, Bytes: uint64(len(b[4].Txn))}
	if l := logOf(t, s, originB); l != want {
		t.Errorf("B's log after a purge across a run = %+v, want %+v", l, want)
	}
	for _, seq := range []uint64{2, 3, 4} {
		if _, err := s.Entry(originB, seq); !errors.Is(err, store.ErrPurged) {
			t.Errorf("Entry(B, %d) after the purge across: %v, want ErrPurged", seq, err)
		}
	}
	checkAudit(t, s, "after a purge across a run")
}

// testSkipCopyEnd: a copy's end drops a raised log's runs with its entries, and the log
// goes on from the copied position.
func testSkipCopyEnd(t *testing.T, s store.Store) {
	a := Chain(t, originA, 6)
	apply(t, s, a[0], 1)
	applySkip(t, s, SkipBatch(t, a, 2, 3))
	must(t, s.EndCopy(&store.CopyEnd{Logs: []store.CopiedLog{{Origin: originA,
		Position: wire.CopyPosition{Origin: originA, Seq: 4, Hash: a[3].Hash, HLC: hlcOf(t, a[3])}}}}))
	if l := logOf(t, s, originA); l.Bytes != 0 || l.Floor.Seq != 4 {
		t.Errorf("A's log after the copy's end = %+v, want floor 4 and no bytes", l)
	}
	for _, seq := range []uint64{2, 3} {
		if _, err := s.Entry(originA, seq); !errors.Is(err, store.ErrPurged) {
			t.Errorf("Entry(A, %d) of a run a copy passed: %v, want ErrPurged", seq, err)
		}
	}
	applySkip(t, s, SkipBatch(t, a, 5, 5))
	apply(t, s, a[5], 2)
	checkAudit(t, s, "after a copy's end passed a run")
}

// tamperedRun is a store whose Entry answers one run of origin with a changed chain hash:
// what a damaged run row gives the audit.
type tamperedRun struct {
	store.Store
	origin wire.OriginID
	prev   bool // the run's Prev changed, else its Hash
}

func (s tamperedRun) Entry(origin wire.OriginID, seq uint64) ([]byte, error) {
	raw, err := s.Store.Entry(origin, seq)
	var run *store.SkippedError
	if origin == s.origin && errors.As(err, &run) {
		c := *run
		if s.prev {
			c.Prev[0] ^= 1
		} else {
			c.Hash[0] ^= 1
		}
		return nil, &c
	}
	return raw, err
}

// testSkipAudit: the audit checks the chain at both ends of a run: the run's Prev against
// the entry before it, the next entry's previous hash against the run's Hash.
func testSkipAudit(t *testing.T, s store.Store) {
	a := Chain(t, originA, 5)
	apply(t, s, a[0], 1)
	applySkip(t, s, SkipBatch(t, a, 2, 3))
	apply(t, s, a[3], 2)
	apply(t, s, a[4], 3)
	checkAudit(t, s, "of a log with a run")
	for _, c := range []struct {
		name string
		prev bool
		want string
	}{
		{"a run on another hash", true, "the run 2 to 3 does not extend the chain of entry 1"},
		{"an entry that does not extend a run", false, "log entry 4 does not extend the chain of entry 3"},
	} {
		problems, err := store.Audit(tamperedRun{Store: s, origin: originA, prev: c.prev}, 0)
		if err != nil || !strings.Contains(strings.Join(problems, "\n"), c.want) {
			t.Errorf("%s: the audit says %q, %v; want a problem saying %q", c.name, problems, err, c.want)
		}
	}
}

// testSkipReseed: a reseed keeps another origin's runs as they are, below its log's below
// like the rest of the log, and the audit holds after it.
func testSkipReseed(t *testing.T, s store.Store) {
	own, a := Chain(t, Identity.Origin, 2), Chain(t, originA, 4)
	apply(t, s, own[0], 1)
	apply(t, s, a[0], 2)
	run := SkipBatch(t, a, 2, 3, "p")
	applySkip(t, s, run)
	apply(t, s, own[1], 3)
	apply(t, s, a[3], 4)
	before := logOf(t, s, originA)
	if _, err := store.ReseedStore(s, Origin(0x6f)); err != nil {
		t.Fatal(err)
	}
	if l := logOf(t, s, originA); l.Floor != before.Floor || l.Bytes != before.Bytes || l.Below != 4 {
		t.Errorf("A's log after the reseed = %+v, want %+v with below 4", l, before)
	}
	checkRun(t, s, run, 2)
	checkAudit(t, s, "after a reseed beside a run")
}
