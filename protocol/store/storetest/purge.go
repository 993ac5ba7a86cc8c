package storetest

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The suite's part on bounded history: log bytes, floors, the arrival floor, purges and
// retention holds.

// holdTime is a deterministic time for hold n.
func holdTime(n int) time.Time { return time.Unix(1_800_000_000+int64(n), 123).UTC() }

// logOf is one origin's Log, failing the test when the store cannot say.
func logOf(t *testing.T, s store.Store, o wire.OriginID) store.Log {
	t.Helper()
	logs, err := s.Logs()
	must(t, err)
	return logs[o]
}

// testLogBytes: every Apply adds its transaction encoding's size to its origin's log.
func testLogBytes(t *testing.T, s store.Store) {
	a, b := Chain(t, originA, 3), Chain(t, originB, 2)
	var wantA, wantB uint64
	for i, batch := range []*store.Batch{a[0], b[0], a[1], b[1], a[2]} {
		apply(t, s, batch, uint64(i+1))
		if batch.Origin == originA {
			wantA += uint64(len(batch.Txn))
		} else {
			wantB += uint64(len(batch.Txn))
		}
		if got := logOf(t, s, originA).Bytes; got != wantA {
			t.Errorf("after %d applies, A's log holds %d bytes, want %d", i+1, got, wantA)
		}
		if got := logOf(t, s, originB).Bytes; got != wantB {
			t.Errorf("after %d applies, B's log holds %d bytes, want %d", i+1, got, wantB)
		}
	}
	logs, err := s.Logs()
	must(t, err)
	if len(logs) != 2 {
		t.Errorf("Logs lists %d origins, want the 2 of the vector", len(logs))
	}
	if l := logs[originA]; l.Floor != (store.Floor{}) || l.Below != 0 {
		t.Errorf("A's log before any purge = %+v, want no floor and below 0", l)
	}
}

// testPurge: a purge removes entries from the logs' floors up and arrival positions up to
// the arrival floor, keeps what it must (the stragglers below the arrival floor), and the
// store answers ErrPurged below the floors.
func testPurge(t *testing.T, s store.Store) {
	a, b := Chain(t, originA, 4), Chain(t, originB, 3)
	// positions: 1 a1, 2 b1, 3 a2, 4 b2, 5 a3, 6 a4, 7 b3
	for i, batch := range []*store.Batch{a[0], b[0], a[1], b[1], a[2], a[3], b[2]} {
		apply(t, s, batch, uint64(i+1))
	}
	bytesA := logOf(t, s, originA).Bytes

	// A loses 1 and 2; the arrival floor goes to 4: b1 and b2 leave the arrival order but
	// stay in B's log.
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 2}}, ArrivalFloor: 4}))
	la := logOf(t, s, originA)
	wantFloor := store.Floor{Seq: 2, Hash: sha256.Sum256(a[1].Txn), HLC: hlcOf(t, a[1])}
	if la.Floor != wantFloor || la.Below != 2 || la.Bytes != bytesA-uint64(len(a[0].Txn)+len(a[1].Txn)) {
		t.Errorf("A's log after the purge = %+v, want floor %+v, below 2, bytes %d", la, wantFloor, bytesA-uint64(len(a[0].Txn)+len(a[1].Txn)))
	}
	if lb := logOf(t, s, originB); lb.Floor != (store.Floor{}) || lb.Below != 2 {
		t.Errorf("B's log after the purge = %+v, want no floor and below 2", lb)
	}
	if f, err := s.ArrivalFloor(); err != nil || f != 4 {
		t.Errorf("ArrivalFloor = %d, %v; want 4", f, err)
	}
	for _, seq := range []uint64{1, 2} {
		if _, err := s.Entry(originA, seq); !errors.Is(err, store.ErrPurged) {
			t.Errorf("Entry(A, %d) after the purge: %v, want ErrPurged", seq, err)
		}
	}
	if raw, err := s.Entry(originA, 3); err != nil || string(raw) != string(a[2].Txn) {
		t.Errorf("Entry(A, 3) = %v; want the entry", err)
	}
	for _, seq := range []uint64{1, 2} { // stragglers: in the log, out of the arrival order
		if raw, err := s.Entry(originB, seq); err != nil || string(raw) != string(b[seq-1].Txn) {
			t.Errorf("Entry(B, %d) = %v; want the entry, kept below the arrival floor", seq, err)
		}
	}
	if _, err := s.Arrivals(3, 10); !errors.Is(err, store.ErrPurged) {
		t.Errorf("Arrivals(3) below the arrival floor: %v, want ErrPurged", err)
	}
	arr, err := s.Arrivals(4, 10)
	must(t, err)
	if len(arr) != 3 || arr[0].Pos != 5 || arr[2].Pos != 7 {
		t.Errorf("Arrivals(4) = %d entries from %d, want positions 5 to 7", len(arr), firstPos(arr))
	}
	if v, err := s.Vector(); err != nil || v.Get(originA).Seq != 4 {
		t.Errorf("A's cursor after the purge: %+v, %v; want 4", v.Get(originA), err)
	}

	// The stragglers go without moving the arrival floor; B's head (3) stays.
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originB, To: 2}}, ArrivalFloor: 4}))
	if lb := logOf(t, s, originB); lb.Floor.Seq != 2 || lb.Below != 2 || lb.Bytes != uint64(len(b[2].Txn)) {
		t.Errorf("B's log after its stragglers went = %+v, want floor 2, below 2, bytes of entry 3", lb)
	}
	// An apply after a purge extends the log as before.
	next := &chain{origin: originA, seq: a[3].Seq, prev: a[3].Hash}
	a5 := next.next(t, put("t", "k", "v"))
	apply(t, s, a5, 8)
	if l := logOf(t, s, originA); l.Bytes != uint64(len(a[2].Txn)+len(a[3].Txn)+len(a5.Txn)) {
		t.Errorf("A's log bytes after one more apply = %d", l.Bytes)
	}
}

// testPurgeRefuses: a purge the logs do not allow is refused with ErrBadPurge and writes
// nothing.
func testPurgeRefuses(t *testing.T, s store.Store) {
	a, b := Chain(t, originA, 3), Chain(t, originB, 2)
	// positions: 1 a1, 2 b1, 3 a2, 4 a3, 5 b2
	for i, batch := range []*store.Batch{a[0], b[0], a[1], a[2], b[1]} {
		apply(t, s, batch, uint64(i+1))
	}
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 1}}, ArrivalFloor: 1}))
	before := dump(t, s, originA, originB)
	for _, c := range []struct {
		name string
		p    store.Purge
	}{
		{"the head", store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 3}}, ArrivalFloor: 5}},
		{"not above the floor", store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 1}}, ArrivalFloor: 1}},
		{"an unknown origin", store.Purge{Logs: []store.PurgeLog{{Origin: originC, To: 1}}, ArrivalFloor: 1}},
		{"one origin twice", store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 2}, {Origin: originA, To: 2}}, ArrivalFloor: 3}},
		{"an entry above the arrival floor", store.Purge{Logs: []store.PurgeLog{{Origin: originA, To: 2}}, ArrivalFloor: 2}},
		{"the arrival floor back", store.Purge{ArrivalFloor: 0}},
		{"the arrival floor past the last arrival", store.Purge{ArrivalFloor: 6}},
	} {
		if err := s.Purge(&c.p); !errors.Is(err, store.ErrBadPurge) {
			t.Errorf("%s: Purge = %v, want ErrBadPurge", c.name, err)
		}
		if after := dump(t, s, originA, originB); after != before {
			t.Fatalf("%s: a refused purge changed the store:\nbefore:\n%s\nafter:\n%s", c.name, before, after)
		}
	}
}

// testHolds: holds are kept by peer and origin, replaced by a later one of the same pair,
// listed in order, and forgotten one at a time or per peer.
func testHolds(t *testing.T, s store.Store) {
	hs, err := s.Holds()
	must(t, err)
	if len(hs) != 0 {
		t.Fatalf("Holds of a new store = %+v", hs)
	}
	must(t, s.PutHolds([]store.Hold{
		{Peer: "Q", Origin: originA, Seq: 3, Since: holdTime(1)},
		{Peer: "P", Origin: originB, Seq: 5, Since: holdTime(2)},
		{Peer: "P", Origin: originA, Seq: 1, Since: holdTime(3)},
		{Peer: "P", Seq: 9, Since: holdTime(4)}, // a version-1 peer's hold on the arrival order
	}))
	must(t, s.PutHolds([]store.Hold{{Peer: "P", Origin: originA, Seq: 2, Since: holdTime(5)}}))
	want := []store.Hold{
		{Peer: "P", Seq: 9, Since: holdTime(4)},
		{Peer: "P", Origin: originA, Seq: 2, Since: holdTime(5)},
		{Peer: "P", Origin: originB, Seq: 5, Since: holdTime(2)},
		{Peer: "Q", Origin: originA, Seq: 3, Since: holdTime(1)},
	}
	checkHolds := func(want []store.Hold) {
		t.Helper()
		got, err := s.Holds()
		must(t, err)
		if len(got) != len(want) {
			t.Fatalf("Holds = %+v\nwant %+v", got, want)
		}
		for i := range got {
			if got[i].Peer != want[i].Peer || got[i].Origin != want[i].Origin || got[i].Seq != want[i].Seq ||
				!got[i].Since.Equal(want[i].Since) {
				t.Errorf("Holds[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
	checkHolds(want)
	must(t, s.PutHolds([]store.Hold{{Peer: "R", Origin: originB, Seq: 4, Since: holdTime(6)}}))
	must(t, s.DeleteHold("R", originB))
	must(t, s.DeleteHold("R", originA)) // none: nothing to do
	checkHolds(want)
	must(t, s.DeleteHolds("P"))
	checkHolds(want[3:])
	must(t, s.DeleteHolds("nobody"))
	checkHolds(want[3:])
}

func hlcOf(t *testing.T, b *store.Batch) wire.HLC {
	t.Helper()
	v, err := wire.ParseTxn(b.Txn)
	must(t, err)
	return v.HLC
}

func firstPos(arr []store.Arrival) uint64 {
	if len(arr) == 0 {
		return 0
	}
	return arr[0].Pos
}
