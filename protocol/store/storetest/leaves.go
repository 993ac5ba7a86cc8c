package storetest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Fan-in hubs in the store (docs/design.md §27): a record a hub re-originated from a leaf
// keeps its conflict identity (the leaf's HLC and origin: its version) and its delivering
// identity (Via, ViaHLC: the entry's origin and HLC), through every write and read; a hub's
// leaf marks are written with the entry that carries them.

var (
	originH = Origin(0xd4) // a hub
	leafK   = Origin(0x1d)
	leafL   = Origin(0x1e)
	leafM   = Origin(0x1f)
)

// leafHLC is the HLC of a leaf's write at seq: below every chain's entry HLC, as a leaf
// write's HLC is below the hub entry's that carries it.
func leafHLC(seq uint64) wire.HLC { return wire.MakeHLC(1_600_000_000_000+seq, uint16(leafL[0])) }

// nextLeaf builds the chain's next entry as a hub's re-origination of the leaf write l
// (transaction format 3): its records have the leaf's HLC and origin, their via the chain's
// origin and the entry's HLC, and the batch carries the leaf's mark.
func (c *chain) nextLeaf(t testing.TB, l wire.LeafBlock, ops ...wire.Op) *store.Batch {
	t.Helper()
	c.seq++
	hlc := wire.MakeHLC(1_700_000_000_000+c.seq, uint16(c.origin[0]))
	txn, err := (&wire.Txn{Origin: c.origin, Seq: c.seq, HLC: hlc, Prev: c.prev, Leaf: &l, Ops: ops}).Encode()
	if err != nil {
		t.Fatalf("encoding seq %d: %v", c.seq, err)
	}
	b := &store.Batch{Origin: c.origin, Seq: c.seq, Hash: sha256.Sum256(txn), Txn: txn,
		Leaf: &store.LeafMark{Leaf: l.Origin, Seq: l.Seq, Hash: l.Hash, Carrier: c.origin, At: c.seq}}
	for _, op := range ops {
		b.Records = append(b.Records, store.Record{Table: op.Table, Key: op.Key, Value: op.Value,
			Deleted: op.Kind == wire.OpDelete, HLC: l.HLC, Origin: l.Origin, Via: c.origin, ViaHLC: hlc})
	}
	c.prev, c.last = b.Hash, b
	return b
}

// LeafChain returns hub's first n transactions as batches, each re-originating one write of
// leaf (transaction format 3): transaction seq carries the leaf's write seq, which puts the
// value "v<seq>" at key "<leaf>-<seq>" of table "t" at the leaf's HLC; the batch's records
// are that put (the leaf's HLC and origin, via the hub and the entry's HLC), and it carries
// the leaf's mark.
func LeafChain(t testing.TB, hub, leaf wire.OriginID, n int) []*store.Batch {
	t.Helper()
	c := &chain{origin: hub}
	out := make([]*store.Batch, n)
	for i := range out {
		seq := c.seq + 1
		out[i] = c.nextLeaf(t, leafBlock(leaf, seq), put("t", fmt.Sprintf("%x-%d", leaf[:2], seq), fmt.Sprintf("v%d", seq)))
	}
	return out
}

func leafBlock(leaf wire.OriginID, seq uint64) wire.LeafBlock {
	return wire.LeafBlock{Origin: leaf, Seq: seq, HLC: leafHLC(seq), Hash: wire.Hash{byte(seq), leaf[0]}}
}

func withVia(r store.Record, via wire.OriginID, viaHLC wire.HLC) store.Record {
	r.Via, r.ViaHLC = via, viaHLC
	return r
}

// testVia: a record's via and via HLC round-trip through Apply (a format-3 entry), Get,
// Scan, a snapshot, Repair and ApplyCopy; a record without one reads without one; the audit
// replays a format-3 entry by its leaf block; DropTombstones matches a tombstone by its
// version only, whatever via it is named with.
func testVia(t *testing.T, s store.Store) {
	hub := &chain{origin: originH}
	b1 := hub.nextLeaf(t, leafBlock(leafL, 1), put("t", "a", "1"), put("t", "b", "2"))
	apply(t, s, b1, 1)
	a := &chain{origin: originA}
	apply(t, s, a.next(t, put("t", "plain", "p")), 2)
	e1 := hlcOf(t, b1)
	wantA := withVia(rec("t", "a", "1", leafHLC(1), leafL), originH, e1)
	if r, ok := get(t, s, "t", "a"); !ok || fmtRecord(r) != fmtRecord(wantA) {
		t.Errorf("Get of a re-originated record = %s, want %s", fmtRecord(r), fmtRecord(wantA))
	}
	if r, _ := get(t, s, "t", "plain"); !r.Via.IsZero() || r.ViaHLC != 0 {
		t.Errorf("a plain record has a via: %s", fmtRecord(r))
	}
	wantT := []store.Record{wantA, withVia(rec("t", "b", "2", leafHLC(1), leafL), originH, e1), rec("t", "plain", "p", hlcA(1), originA)}
	if got := fmtRecords(scan(t, s, "t", nil)); got != fmtRecords(wantT) {
		t.Errorf("Scan:\n%s\nwant\n%s", got, fmtRecords(wantT))
	}
	sn, err := s.Snapshot()
	must(t, err)
	if got := fmtRecords(snapshotRecords(t, sn, nil, nil)); got != fmtRecords(wantT) {
		t.Errorf("snapshot:\n%s\nwant\n%s", got, fmtRecords(wantT))
	}
	sn.Release()
	checkAudit(t, s, "of a re-originated entry")
	// A leaf delete, re-originated: a tombstone with its via.
	b2 := hub.nextLeaf(t, leafBlock(leafL, 2), del("t", "b"))
	apply(t, s, b2, 3)
	if r, _ := get(t, s, "t", "b"); !r.Deleted || r.Via != originH || r.ViaHLC != hlcOf(t, b2) || r.Origin != leafL || r.HLC != leafHLC(2) {
		t.Errorf("the re-originated tombstone = %s", fmtRecord(r))
	}
	// Repair and ApplyCopy write vias as they are.
	repaired := withVia(rec("w", "r", "fixed", leafHLC(7), leafM), originB, 77)
	must(t, s.Repair([]store.Record{repaired}))
	if r, _ := get(t, s, "w", "r"); fmtRecord(r) != fmtRecord(repaired) {
		t.Errorf("after Repair: %s, want %s", fmtRecord(r), fmtRecord(repaired))
	}
	copied := withVia(rec("u", "k", "v", leafHLC(8), leafM), originC, 88)
	copiedTomb := withVia(tomb("u", "gone", leafHLC(9), leafM), originC, 99)
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{copied, copiedTomb}, State: store.CopyState{Peer: "p"}}))
	if got, want := fmtRecords(scan(t, s, "u", nil)), fmtRecords([]store.Record{copiedTomb, copied}); got != want {
		t.Errorf("after ApplyCopy:\n%s\nwant\n%s", got, want)
	}
	// DropTombstones: a tombstone named with another via (the same leaf write delivered by
	// another hub), or none, is the same version, and goes; one of another version stays.
	must(t, s.DropTombstones([]store.Record{withVia(tomb("t", "b", leafHLC(2), leafL), originB, 12345)}))
	if r, ok := get(t, s, "t", "b"); ok {
		t.Errorf("a tombstone named with another via stayed: %s", fmtRecord(r))
	}
	must(t, s.DropTombstones([]store.Record{withVia(tomb("u", "gone", leafHLC(9)+1, leafM), originC, 99)}))
	if _, ok := get(t, s, "u", "gone"); !ok {
		t.Error("a tombstone was dropped by another version with its via")
	}
	must(t, s.DropTombstones([]store.Record{tomb("u", "gone", leafHLC(9), leafM)}))
	if r, ok := get(t, s, "u", "gone"); ok {
		t.Errorf("a tombstone named without its via stayed: %s", fmtRecord(r))
	}
}

func leafMarks(t *testing.T, s store.Store) []store.LeafMark {
	t.Helper()
	var out []store.LeafMark
	must(t, s.LeafMarks(func(m store.LeafMark) bool { out = append(out, m); return true }))
	return out
}

func leafMark(t *testing.T, s store.Store, leaf wire.OriginID) (store.LeafMark, bool) {
	t.Helper()
	m, ok, err := s.LeafMark(leaf)
	must(t, err)
	return m, ok
}

// testLeafMarks: Apply writes a batch's leaf mark with its entry, raising it only; a batch
// Apply refuses writes no mark; PutLeafMark raises only; LeafMarks lists by leaf origin;
// DropLeafMarks forgets the leaves named.
func testLeafMarks(t *testing.T, s store.Store) {
	if m, ok := leafMark(t, s, leafL); ok {
		t.Fatalf("LeafMark of an empty store = %+v", m)
	}
	if ms := leafMarks(t, s); len(ms) != 0 {
		t.Fatalf("LeafMarks of an empty store = %+v", ms)
	}
	hub := &chain{origin: originH}
	b1 := hub.nextLeaf(t, leafBlock(leafL, 3), put("t", "a", "1"))
	apply(t, s, b1, 1)
	wantL := store.LeafMark{Leaf: leafL, Seq: 3, Hash: leafBlock(leafL, 3).Hash, Carrier: originH, At: 1}
	if m, ok := leafMark(t, s, leafL); !ok || m != wantL {
		t.Fatalf("LeafMark(L) after its entry = %+v, %v; want %+v", m, ok, wantL)
	}
	apply(t, s, hub.nextLeaf(t, leafBlock(leafM, 1), put("t", "m", "1")), 2)
	// A lower leaf seq (the write re-originated twice, across a move) is applied, and
	// leaves the mark where it is.
	apply(t, s, hub.nextLeaf(t, leafBlock(leafL, 2), put("t", "a2", "1")), 3)
	if m, _ := leafMark(t, s, leafL); m != wantL {
		t.Errorf("LeafMark(L) after a lower leaf seq = %+v, want %+v", m, wantL)
	}
	// Refused batches write no mark: one out of order, one whose mark is not its leaf block.
	before := dump(t, s, originH)
	late := hub.nextLeaf(t, leafBlock(leafL, 9), put("t", "x", "1"))
	skipped := hub.nextLeaf(t, leafBlock(leafL, 10), put("t", "y", "1"))
	if _, err := s.Apply(skipped); !errors.Is(err, store.ErrNotNext) {
		t.Errorf("Apply of seq %d after %d: %v, want ErrNotNext", skipped.Seq, late.Seq-1, err)
	}
	forged := *late
	forged.Leaf = &store.LeafMark{Leaf: leafL, Seq: 11, Hash: late.Leaf.Hash, Carrier: originH, At: late.Seq}
	if _, err := s.Apply(&forged); err == nil {
		t.Error("Apply of a batch whose mark is not its entry's leaf block: no error")
	}
	plain := &chain{origin: originA}
	noLeaf := plain.next(t, put("t", "p", "1"))
	noLeaf.Leaf = &store.LeafMark{Leaf: leafL, Seq: 12, Hash: wire.Hash{1}, Carrier: originA, At: 1}
	if _, err := s.Apply(noLeaf); err == nil {
		t.Error("Apply of a format-1 entry with a leaf mark: no error")
	}
	if after := dump(t, s, originH); after != before {
		t.Errorf("a refused Apply wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	apply(t, s, late, 4)
	wantL = store.LeafMark{Leaf: leafL, Seq: 9, Hash: late.Leaf.Hash, Carrier: originH, At: 4}
	if m, _ := leafMark(t, s, leafL); m != wantL {
		t.Errorf("LeafMark(L) = %+v, want %+v", m, wantL)
	}
	apply(t, s, skipped, 5)
	wantL = store.LeafMark{Leaf: leafL, Seq: 10, Hash: skipped.Leaf.Hash, Carrier: originH, At: 5}
	// PutLeafMark raises only; it refuses a mark without a leaf or a seq.
	must(t, s.PutLeafMark(store.LeafMark{Leaf: leafL, Seq: 5, Hash: wire.Hash{5}, Carrier: originA, At: 9}))
	if m, _ := leafMark(t, s, leafL); m != wantL {
		t.Errorf("LeafMark(L) after a lower PutLeafMark = %+v, want %+v", m, wantL)
	}
	wantK := store.LeafMark{Leaf: leafK, Seq: 4, Hash: wire.Hash{4}, Carrier: originH, At: 4}
	must(t, s.PutLeafMark(wantK))
	wantK.Seq, wantK.Hash = 6, wire.Hash{6}
	must(t, s.PutLeafMark(wantK))
	if m, ok := leafMark(t, s, leafK); !ok || m != wantK {
		t.Errorf("LeafMark(K) after PutLeafMark = %+v, %v; want %+v", m, ok, wantK)
	}
	for _, bad := range []store.LeafMark{{Seq: 1}, {Leaf: leafM}} {
		if err := s.PutLeafMark(bad); err == nil {
			t.Errorf("PutLeafMark(%+v): no error", bad)
		}
	}
	// LeafMarks lists by leaf origin (K, L, M: K was put last), and stops when told.
	var order []wire.OriginID
	for _, m := range leafMarks(t, s) {
		order = append(order, m.Leaf)
	}
	if len(order) != 3 || order[0] != leafK || order[1] != leafL || order[2] != leafM {
		t.Errorf("LeafMarks lists %x, want K, L, M", order)
	}
	n := 0
	must(t, s.LeafMarks(func(store.LeafMark) bool { n++; return false }))
	if n != 1 {
		t.Errorf("fn returning false was called %d times", n)
	}
	// DropLeafMarks: the named leaves (one it does not hold) only.
	must(t, s.DropLeafMarks([]wire.OriginID{leafL, Origin(0x2a)}))
	must(t, s.DropLeafMarks(nil))
	if _, ok := leafMark(t, s, leafL); ok {
		t.Error("L's mark is held after DropLeafMarks")
	}
	if ms := leafMarks(t, s); len(ms) != 2 || ms[0] != wantK || ms[1].Leaf != leafM {
		t.Errorf("LeafMarks after dropping L = %+v", ms)
	}
	// A dropped leaf starts over: its next mark is written whatever its seq.
	apply(t, s, hub.nextLeaf(t, leafBlock(leafL, 1), put("t", "again", "1")), 6)
	if m, ok := leafMark(t, s, leafL); !ok || m.Seq != 1 || m.At != 6 {
		t.Errorf("LeafMark(L) after its drop and an entry = %+v, %v", m, ok)
	}
	checkAudit(t, s, "of re-originated entries")
}

// hubReseedable fills s with its own origin's entries as a hub: s1 a plain put of p; s2
// re-originates L's write 1 (k and j; A's later put of j wins it); s3 re-originates M's
// write 1 (m); s4 re-originates N's write 1 (n) whose record arrived first through hub H
// (its via H). Positions: s1 1, s2 2, a1 3, s3 4, s4 5.
func hubReseedable(t *testing.T, s store.Store) (own []*store.Batch) {
	t.Helper()
	self := &chain{origin: Identity.Origin}
	a := &chain{origin: originA}
	own = append(own, self.next(t, put("t", "p", "plain")))
	own = append(own, self.nextLeaf(t, leafBlock(leafL, 1), put("t", "k", "leaf"), put("t", "j", "leaf")))
	apply(t, s, own[0], 1)
	apply(t, s, own[1], 2)
	apply(t, s, a.next(t, put("t", "j", "a")), 3)
	own = append(own, self.nextLeaf(t, leafBlock(leafM, 1), put("t", "m", "leaf")))
	apply(t, s, own[2], 4)
	own = append(own, self.nextLeaf(t, leafBlock(leafK, 1), put("t", "n", "leaf")))
	own[3].Records[0].Via, own[3].Records[0].ViaHLC = originH, own[3].Records[0].ViaHLC-1
	apply(t, s, own[3], 5)
	return own
}

// testReseedLeafWrites: a reseed re-issues a format-3 entry with its leaf block unchanged;
// the records it rewrites keep their version (the leaf's HLC and origin) and take the new
// origin as their via; a record of the leaf write another hub delivered first keeps that
// hub's via; the audit holds after.
func testReseedLeafWrites(t *testing.T, s store.Store) {
	own := hubReseedable(t, s)
	checkAudit(t, s, "of a hub's entries")
	rs, err := store.ReseedStore(s, newOrigin)
	must(t, err)
	if len(rs.Entries) != 4 {
		t.Fatalf("re-issued %d entries, want 4", len(rs.Entries))
	}
	for i, b := range own {
		raw, err := s.Entry(newOrigin, uint64(i+1))
		must(t, err)
		nv, err1 := wire.ParseTxn(raw)
		ov, err2 := wire.ParseTxn(b.Txn)
		must(t, errors.Join(err1, err2))
		if nv.Format() != ov.Format() || nv.Leaf != ov.Leaf || nv.HLC != ov.HLC || nv.Origin != newOrigin {
			t.Errorf("re-issued entry %d: format %d, leaf %+v, HLC %d; want the old one's %d, %+v, %d", i+1,
				nv.Format(), nv.Leaf, nv.HLC, ov.Format(), ov.Leaf, ov.HLC)
		}
	}
	for _, c := range []struct {
		key  string
		want store.Record
	}{
		{"p", rec("t", "p", "plain", hlcOf(t, own[0]), newOrigin)},
		{"k", withVia(rec("t", "k", "leaf", leafHLC(1), leafL), newOrigin, hlcOf(t, own[1]))},
		{"j", rec("t", "j", "a", hlcA(1), originA)},
		{"m", withVia(rec("t", "m", "leaf", leafHLC(1), leafM), newOrigin, hlcOf(t, own[2]))},
		{"n", own[3].Records[0]},
	} {
		if r, _ := get(t, s, "t", c.key); fmtRecord(r) != fmtRecord(c.want) {
			t.Errorf("t/%s after the reseed = %s, want %s", c.key, fmtRecord(r), fmtRecord(c.want))
		}
	}
	checkAudit(t, s, "after a hub's reseed")
}

// testReseedLeafWritesRefused: CheckReseed refuses a rewritten record that the entry does
// not deliver (another via, or the plain rewrite of a leaf write) or whose version is not
// the leaf write's, and a via on a plain entry's record, writing nothing.
func testReseedLeafWritesRefused(t *testing.T, s store.Store) {
	hubReseedable(t, s)
	before := dump(t, s, Identity.Origin, originA, newOrigin)
	v, err := store.ReseedViewOf(s)
	must(t, err)
	rs, err := store.PlanReseed(v, newOrigin)
	must(t, err)
	if len(rs.Entries[1].Records) != 1 || len(rs.Entries[0].Records) != 1 {
		t.Fatalf("the plan rewrites %d and %d records of entries 1 and 2, want 1 and 1", len(rs.Entries[0].Records), len(rs.Entries[1].Records))
	}
	bad := []func(rs *store.Reseed){
		func(rs *store.Reseed) { rs.Entries[1].Records[0].Via = originA },
		func(rs *store.Reseed) { rs.Entries[1].Records[0].ViaHLC++ },
		func(rs *store.Reseed) {
			r := &rs.Entries[1].Records[0]
			r.Origin, r.Via, r.ViaHLC = newOrigin, wire.OriginID{}, 0
		},
		func(rs *store.Reseed) { rs.Entries[1].Records[0].HLC++ },
		func(rs *store.Reseed) {
			rs.Entries[0].Records[0].Via, rs.Entries[0].Records[0].ViaHLC = newOrigin, rs.Entries[0].Records[0].HLC
		},
	}
	for i, f := range bad {
		c := *rs
		c.Entries = append([]store.Batch(nil), rs.Entries...)
		for j := range c.Entries {
			c.Entries[j].Records = append([]store.Record(nil), rs.Entries[j].Records...)
		}
		f(&c)
		if err := s.Reseed(&c); !errors.Is(err, store.ErrBadReseed) {
			t.Errorf("bad reseed %d: %v, want ErrBadReseed", i, err)
		}
	}
	if after := dump(t, s, Identity.Origin, originA, newOrigin); after != before {
		t.Errorf("a refused reseed wrote:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
