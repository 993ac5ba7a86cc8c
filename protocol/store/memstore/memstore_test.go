package memstore_test

import (
	"bytes"
	"testing"

	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/store/storetest"
	"plait/protocol/wire"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return memstore.New(storetest.Identity) })
}

// TestStoreReopen: the in-memory store survives a simulated process crash as the same
// value.
func TestStoreReopen(t *testing.T) {
	storetest.RunReopen(t, func(*testing.T) store.Store { return memstore.New(storetest.Identity) },
		func(_ *testing.T, s store.Store) store.Store { return s })
}

// TestCloneIsDeep writes to a clone and checks that the original did not change, and the
// other way round.
func TestCloneIsDeep(t *testing.T) {
	a := storetest.Chain(t, storetest.Origin(1), 4)
	a[0].Name, a[0].PeerOrigin, a[0].PeerCursor = "one", storetest.Origin(9), 4
	orig := memstore.New(storetest.Identity)
	for _, b := range a[:3] {
		if _, err := orig.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := orig.PutControl("cluster-map", []byte("one")); err != nil {
		t.Fatal(err)
	}
	clone := orig.Clone()
	if v, _ := clone.Control("cluster-map"); string(v) != "one" {
		t.Errorf("clone Control(cluster-map) = %q, want the original's one", v)
	}
	if err := clone.PutControl("cluster-map", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if v, _ := orig.Control("cluster-map"); string(v) != "one" {
		t.Errorf("original Control(cluster-map) = %q after the clone's write, want one", v)
	}

	// The clone moves on: a new entry, a changed record, a new name and peer cursor.
	b := a[3]
	b.Records[0].Key = a[0].Records[0].Key
	b.Name, b.PeerOrigin, b.PeerCursor = "uno", storetest.Origin(9), 7
	if pos, err := clone.Apply(b); err != nil || pos != 4 {
		t.Fatalf("clone.Apply = %d, %v", pos, err)
	}
	if err := clone.SetPeerCursor(storetest.Origin(8), 2); err != nil {
		t.Fatal(err)
	}

	checkOriginal := func(when string) {
		t.Helper()
		v, _ := orig.Vector()
		if e := v.Get(storetest.Origin(1)); e.Seq != 3 {
			t.Errorf("%s: original cursor at seq %d, want 3", when, e.Seq)
		}
		if last, _ := orig.LastArrival(); last != 3 {
			t.Errorf("%s: original LastArrival = %d, want 3", when, last)
		}
		if _, err := orig.Entry(storetest.Origin(1), 4); err == nil {
			t.Errorf("%s: original has the clone's entry", when)
		}
		r, ok, _ := orig.Get(a[0].Records[0].Table, a[0].Records[0].Key)
		if !ok || !bytes.Equal(r.Value, a[0].Records[0].Value) {
			t.Errorf("%s: original record = %q, %v; want %q", when, r.Value, ok, a[0].Records[0].Value)
		}
		names, _ := orig.Names()
		if names[storetest.Origin(1)] != "one" {
			t.Errorf("%s: original names = %v", when, names)
		}
		for _, pc := range []struct {
			peer wire.OriginID
			pos  uint64
		}{{storetest.Origin(9), 4}, {storetest.Origin(8), 0}} {
			if pos, _ := orig.PeerCursor(pc.peer); pos != pc.pos {
				t.Errorf("%s: original PeerCursor(%x) = %d, want %d", when, pc.peer[:1], pos, pc.pos)
			}
		}
	}
	checkOriginal("after writes to the clone")

	// The original moves on differently; the clone keeps its own state.
	if err := orig.SetPeerCursor(storetest.Origin(8), 1); err != nil {
		t.Fatal(err)
	}
	if pos, err := orig.Apply(storetest.Chain(t, storetest.Origin(2), 1)[0]); err != nil || pos != 4 {
		t.Fatalf("orig.Apply = %d, %v", pos, err)
	}
	if arr, _ := clone.Arrivals(3, 1); len(arr) != 1 || !bytes.Equal(arr[0].Txn, b.Txn) {
		t.Errorf("clone Arrivals(3, 1) = %v, want its own seq 4", arr)
	}
	if _, err := clone.Entry(storetest.Origin(2), 1); err == nil {
		t.Errorf("clone has the original's entry")
	}
	if v, _ := clone.Control("cluster-map"); string(v) != "two" {
		t.Errorf("clone Control(cluster-map) = %q, want its own two", v)
	}
	if pos, _ := clone.PeerCursor(storetest.Origin(8)); pos != 2 {
		t.Errorf("clone PeerCursor = %d, want 2", pos)
	}
	r, ok, _ := clone.Get(b.Records[0].Table, b.Records[0].Key)
	if !ok || !bytes.Equal(r.Value, b.Records[0].Value) {
		t.Errorf("clone record = %q, %v; want %q", r.Value, ok, b.Records[0].Value)
	}
}
