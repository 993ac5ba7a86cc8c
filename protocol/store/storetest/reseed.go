package storetest

import (
	"errors"
	"fmt"
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// newOrigin is the origin id the reseed tests give the store: above Identity's.
var newOrigin = Origin(0x6f)

// reseedable fills s with its own origin's entries 1 to 3 and A's 1 and 2, and purges its
// own log to 1: s1 puts k3 and k1, s2 puts k2 (which a2, newer, then takes), s3 puts k1
// again under tokenT (transaction format 2). Positions: s1 1, a1 2, s2 3, a2 4, s3 5.
func reseedable(t *testing.T, s store.Store) (own []*store.Batch) {
	t.Helper()
	self := &chain{origin: Identity.Origin}
	a := &chain{origin: originA}
	own = []*store.Batch{self.next(t, put("t", "k3", "x"), put("t", "k1", "old"))}
	apply(t, s, own[0], 1)
	apply(t, s, a.next(t, put("t", "other", "o")), 2)
	own = append(own, self.next(t, put("t", "k2", "s")))
	apply(t, s, own[1], 3)
	a2 := a.next(t, put("t", "k2", "a")) // A's HLC sorts after the store's own at one seq
	apply(t, s, a2, 4)
	own = append(own, self.nextTokened(t, tokenT, put("t", "k1", "new")))
	apply(t, s, own[2], 5)
	must(t, s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: Identity.Origin, To: 1}}, ArrivalFloor: 1}))
	return own
}

// testReseed: Reseed gives the store the new identity, cuts its old origin's log back to
// its floor, and writes the re-issued entries with the records they rewrite.
func testReseed(t *testing.T, s store.Store) {
	own := reseedable(t, s)
	hlcBefore, err := s.RecordHLC()
	must(t, err)
	rs, err := store.ReseedStore(s, newOrigin)
	must(t, err)
	if len(rs.Entries) != 2 {
		t.Fatalf("re-issued %d entries, want 2 (the old origin's above its floor)", len(rs.Entries))
	}
	if id, err := s.Identity(); err != nil || id != (store.Identity{Origin: newOrigin, Name: Identity.Name}) {
		t.Errorf("Identity after the reseed = %+v, %v", id, err)
	}
	v, err := s.Vector()
	must(t, err)
	if old := v.Get(Identity.Origin); old.Seq != 1 || old.Hash != own[0].Hash {
		t.Errorf("the old origin's cursor = %+v, want its floor 1", old)
	}
	if n := v.Get(newOrigin); n.Seq != 2 || n.Hash != rs.Entries[1].Hash {
		t.Errorf("the new origin's cursor = %+v, want 2", n)
	}
	for seq, want := range map[uint64]error{1: store.ErrPurged, 2: store.ErrNotFound, 3: store.ErrNotFound} {
		if _, err := s.Entry(Identity.Origin, seq); !errors.Is(err, want) {
			t.Errorf("Entry(old, %d) = %v, want %v", seq, err, want)
		}
	}
	for i, b := range own[1:] {
		raw, err := s.Entry(newOrigin, uint64(i+1))
		must(t, err)
		nv, err1 := wire.ParseTxn(raw)
		ov, err2 := wire.ParseTxn(b.Txn)
		must(t, errors.Join(err1, err2))
		if nv.Origin != newOrigin || nv.HLC != ov.HLC || nv.Token != ov.Token || fmt.Sprint(nv.Txn().Ops) != fmt.Sprint(ov.Txn().Ops) {
			t.Errorf("re-issued entry %d: origin %s, HLC %d, token %v, want the old entry's HLC %d, token %v and operations", i+1, nv.Origin, nv.HLC, nv.Token, ov.HLC, ov.Token)
		}
	}
	ver := func(key string) (wire.HLC, wire.OriginID, string) {
		r, _ := get(t, s, "t", key)
		return r.HLC, r.Origin, string(r.Value)
	}
	if h, o, val := ver("k1"); h != hlcOf(t, own[2]) || o != newOrigin || val != "new" {
		t.Errorf("k1 = %d %s %q, want s3's version with the new origin", h, o, val)
	}
	if r, _ := get(t, s, "t", "k1"); r.Token != tokenT {
		t.Errorf("k1's token = %v, want s3's %v, kept by its re-issue", r.Token, tokenT)
	}
	if _, o, val := ver("k2"); o != originA || val != "a" {
		t.Errorf("k2 = %s %q, want A's, which s2 never won", o, val)
	}
	if h, o, _ := ver("k3"); h != hlcOf(t, own[0]) || o != Identity.Origin {
		t.Errorf("k3 = %d %s, want s1's version as it was (s1 is below the floor, not re-issued)", h, o)
	}
	if h, err := s.RecordHLC(); err != nil || h != hlcBefore {
		t.Errorf("RecordHLC = %d, %v; want %d, unchanged", h, err, hlcBefore)
	}
	if f, err := s.ArrivalFloor(); err != nil || f != 5 {
		t.Errorf("ArrivalFloor = %d, %v; want 5, the last arrival before", f, err)
	}
	arr, err := s.Arrivals(5, 10)
	must(t, err)
	if len(arr) != 2 || arr[0].Pos != 6 || string(arr[1].Txn) != string(rs.Entries[1].Txn) {
		t.Errorf("Arrivals(5) = %d entries from %d, want the re-issued ones at 6 and 7", len(arr), firstPos(arr))
	}
	logs, err := s.Logs()
	must(t, err)
	if l := logs[Identity.Origin]; l.Floor.Seq != 1 || l.Below != 1 || l.Bytes != 0 {
		t.Errorf("the old origin's log = %+v", l)
	}
	if l := logs[newOrigin]; l.Bytes != uint64(len(rs.Entries[0].Txn)+len(rs.Entries[1].Txn)) {
		t.Errorf("the new origin's log = %+v", l)
	}
	if l := logs[originA]; l.Below != 2 {
		t.Errorf("A's log = %+v, want below 2 (its entries left the arrival order)", l)
	}
	names, err := s.Names()
	must(t, err)
	if names[newOrigin] != Identity.Name {
		t.Errorf("the new origin's name = %q", names[newOrigin])
	}
}

// testReseedRefuses: a reseed CheckReseed refuses writes nothing.
func testReseedRefuses(t *testing.T, s store.Store) {
	reseedable(t, s)
	before := dump(t, s, Identity.Origin, originA, newOrigin)
	v, err := store.ReseedViewOf(s)
	must(t, err)
	if _, err := store.PlanReseed(v, Origin(0x11)); !errors.Is(err, store.ErrBadReseed) {
		t.Errorf("a new origin below the old one: %v, want ErrBadReseed", err)
	}
	rs, err := store.PlanReseed(v, newOrigin)
	must(t, err)
	bad := []func(rs *store.Reseed){
		func(rs *store.Reseed) { rs.Entries[1].Hash[0] ^= 1 },
		func(rs *store.Reseed) { rs.Entries = rs.Entries[1:] },
		func(rs *store.Reseed) { rs.Entries[1].Records[0].Origin = originA },
		func(rs *store.Reseed) { rs.Old = originA },
		func(rs *store.Reseed) { rs.Cut = store.Floor{} },
		func(rs *store.Reseed) { rs.Identity.Origin = originA },
	}
	for i, f := range bad {
		c := *rs
		c.Entries = append([]store.Batch(nil), rs.Entries...)
		c.Entries[1].Records = append([]store.Record(nil), rs.Entries[1].Records...)
		f(&c)
		if err := s.Reseed(&c); !errors.Is(err, store.ErrBadReseed) {
			t.Errorf("bad reseed %d: %v, want ErrBadReseed", i, err)
		}
	}
	if after := dump(t, s, Identity.Origin, originA, newOrigin); after != before {
		t.Errorf("a refused reseed wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// RunReseedReopen checks that a reseed survives a reopen (see RunReopen for open and
// reopen).
func RunReseedReopen(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	s := open(t)
	reseedable(t, s)
	_, err := store.ReseedStore(s, newOrigin)
	must(t, err)
	before := dump(t, s, Identity.Origin, originA, newOrigin)
	s = reopen(t, s)
	if after := dump(t, s, Identity.Origin, originA, newOrigin); after != before {
		t.Errorf("the reseeded store changed across a reopen:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
