package replica_test

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// The rules a node applies to a hub's format-3 entries and the records they write
// (docs/design.md §27.1), on any node that receives them. The hub here is a node whose own
// log holds format-3 entries written by hand into its store (reoriginate), as a hub writes
// them: the hub's origin, seq, HLC and chain (the delivering identity), the leaf's origin,
// seq and HLC in the leaf block (the conflict identity).

// at is the HLC ms milliseconds after the harness's epoch.
func at(ms int64) wire.HLC { return wire.MakeHLC(uint64(epoch.UnixMilli()+ms), 0) }

// leafID is the origin of a leaf named name (i, which no harness node has).
func leafID(i byte, name string) wire.OriginID {
	var o wire.OriginID
	o[0], o[15] = 0xf0|i, 0xf0|i
	copy(o[1:15], name)
	return o
}

// leafWrite is one leaf transaction a hub re-originates.
type leafWrite struct {
	leaf    wire.OriginID
	seq     uint64
	leafHLC wire.HLC
	hlc     wire.HLC // the hub's entry's
	ops     []wire.Op
}

// reoriginate appends format-3 entries to hub's own log in its store, with their records
// (the conflict identity, Via the hub: a hand-made hub writes every operation, so tests
// give it keys no other write of its own touches), then restarts its replica on the store.
// Call it before hub is connected: the restart drops its connections.
func (n *node) reoriginate(ws ...leafWrite) []wire.TxnView {
	n.h.t.Helper()
	var out []wire.TxnView
	for _, w := range ws {
		vec, err := n.store.Vector()
		n.h.check(n, err)
		head := vec.Get(n.origin)
		leafHash := sha256.Sum256([]byte{byte(w.seq)})
		t := wire.Txn{Origin: n.origin, Seq: head.Seq + 1, HLC: w.hlc, Prev: head.Hash, Ops: w.ops,
			Leaf: &wire.LeafBlock{Origin: w.leaf, Seq: w.seq, HLC: w.leafHLC, Hash: leafHash}}
		enc, err := t.Encode()
		n.h.check(n, err)
		v, err := wire.ParseTxn(enc)
		n.h.check(n, err)
		b := &store.Batch{Origin: n.origin, Seq: t.Seq, Hash: v.Hash(), Txn: enc, Name: n.name,
			Leaf: &store.LeafMark{Leaf: w.leaf, Seq: w.seq, Hash: leafHash, Carrier: n.origin, At: t.Seq}}
		for _, op := range w.ops {
			b.Records = append(b.Records, store.Record{Table: op.Table, Key: op.Key, Value: op.Value, Deleted: op.Kind == wire.OpDelete,
				HLC: w.leafHLC, Origin: w.leaf, Via: n.origin, ViaHLC: w.hlc})
		}
		_, err = n.store.Apply(b)
		n.h.check(n, err)
		out = append(out, v)
	}
	n.start()
	return out
}

// wantRecord checks one record's value and both identities.
func wantRecord(t *testing.T, n *node, table, key, value string, hlc wire.HLC, origin, via wire.OriginID, viaHLC wire.HLC) {
	t.Helper()
	r, ok := n.get(table, key)
	switch {
	case !ok:
		t.Errorf("%s: %s/%s missing; want %q", n.name, table, key, value)
	case string(r.Value) != value || r.HLC != hlc || r.Origin != origin || r.Via != via || r.ViaHLC != viaHLC || !r.Token.IsZero():
		t.Errorf("%s: %s/%s = %q HLC %v origin %v via %v at %v token %v; want %q HLC %v origin %v via %v at %v, no token",
			n.name, table, key, r.Value, r.HLC, r.Origin, r.Via, r.ViaHLC, r.Token, value, hlc, origin, via, viaHLC)
	}
}

// TestHubEntryConflictIdentity (design §27.1 rows 11, 12): a format-3 entry's records
// carry the leaf's HLC and origin and the hub's as Via; a leaf write older than a stored
// version loses to it, though the hub's entry HLC is newer than both. Read by the hub's
// HLC (lww's version), or judged newer than every stored version by it without reading
// the store (beatsStored), the older leaf write would overwrite the newer one.
func TestHubEntryConflictIdentity(t *testing.T) {
	h := newHarness(t)
	x := h.addNode("X", replica.Config{})
	c := h.addNode("C", replica.Config{})
	hub := h.addNode("H", replica.Config{})
	leaf := leafID(1, "L")
	hub.reoriginate(
		leafWrite{leaf, 1, at(100), at(300), []wire.Op{put("t", "k", "leaf-old"), put("t", "only-leaf", "l")}},
	)
	x.skew = 200 * time.Millisecond
	x.write(put("t", "k", "x-new"))
	h.connect(x, c)
	if r, _ := c.get("t", "k"); string(r.Value) != "x-new" {
		t.Fatalf("C has k = %q before the hub; want x-new", r.Value)
	}
	h.connect(hub, c)
	if got := c.applied()[hub.origin]; got != 1 {
		t.Fatalf("C applied H to %d; want 1", got)
	}
	xr, _ := x.get("t", "k")
	wantRecord(t, c, "t", "k", "x-new", xr.HLC, x.origin, wire.OriginID{}, 0)
	wantRecord(t, c, "t", "only-leaf", "l", at(100), leaf, hub.origin, at(300))
	if n, _ := c.digest("t"); n != 2 {
		t.Errorf("C holds %d records of t; want 2", n)
	}
}

// TestHubEntryClocks (rows 13, 14): a receiver holds a format-3 entry back by its entry
// HLC (the delivering stream is what a hold can stop; the leaf HLC is below it), and its
// clock rises to the entry HLC, so that a local write after it orders after the leaf write
// it read. Held by the leaf HLC, an entry more than the bound ahead would be applied; a
// clock that did not rise would give the local write an HLC below the leaf's, and the
// value it overwrote would win (a lost update).
func TestHubEntryClocks(t *testing.T) {
	h := newHarness(t)
	c := h.addNode("C", replica.Config{})
	hub := h.addNode("H", replica.Config{})
	leaf := leafID(1, "L")
	bound := replica.DefaultMaxClockOffset.Milliseconds()
	hub.reoriginate(
		leafWrite{leaf, 1, at(bound - 100), at(bound - 50), []wire.Op{put("t", "k", "leaf")}},
		leafWrite{leaf, 2, at(bound - 10), at(bound + 400), []wire.Op{put("t", "k2", "ahead")}},
	)
	h.connect(hub, c)
	if got := c.applied()[hub.origin]; got != 1 {
		t.Fatalf("C applied H to %d; want 1 (entry 2's HLC is %d ms past the bound of C's clock, its leaf's is not)", got, 400)
	}
	if st := c.originStatus(hub); st.Stuck != replica.StuckClockAhead {
		t.Errorf("H at C: stuck %q; want %q", st.Stuck, replica.StuckClockAhead)
	}
	c.write(put("t", "k", "local"))
	if r, _ := c.get("t", "k"); string(r.Value) != "local" || r.Origin != c.origin || r.HLC <= at(bound-50) {
		t.Errorf("C's k after its own write = %q origin %v HLC %v; want local, C's, above the hub entry's %v", r.Value, r.Origin, r.HLC, at(bound-50))
	}
	h.advance(time.Second)
	if got := c.applied()[hub.origin]; got != 2 {
		t.Errorf("C applied H to %d once its clock caught up; want 2", got)
	}
}

// TestLeafMarksAtHubs (design §27.3): a node with MaxLeaves > 0 raises a leaf's mark for
// every format-3 entry it applies, and counts leaf_writes_twice for an entry whose leaf
// seq is at or below its mark (a write two hubs re-originated across a move), applying it
// all the same; a core node (MaxLeaves 0) keeps no marks.
func TestLeafMarksAtHubs(t *testing.T) {
	h := newHarness(t)
	h1 := h.addNode("H1", replica.Config{})
	h2 := h.addNode("H2", replica.Config{})
	r := h.addNode("R", replica.Config{MaxLeaves: 1})
	c := h.addNode("C", replica.Config{})
	leaf := leafID(1, "L")
	w := func(seq uint64, ms int64, hub wire.HLC) leafWrite {
		return leafWrite{leaf, seq, at(ms), hub, []wire.Op{put("t", "k"+string(rune('0'+seq)), "v")}}
	}
	// The leaf wrote seqs 1 to 3 through H1, moved to H2 before H1's entry of 3 reached H2,
	// and H2 re-originated 3 again, then 4.
	h1.reoriginate(w(1, 10, at(20)), w(2, 30, at(40)), w(3, 50, at(60)))
	h2.reoriginate(w(3, 50, at(70)), w(4, 80, at(90)))
	h.connect(h1, r)
	h.connect(h1, c)
	m, ok, err := r.store.LeafMark(leaf)
	if err != nil || !ok || m.Seq != 3 || m.Carrier != h1.origin || m.At != 3 {
		t.Fatalf("R's mark of the leaf after H1: %+v %v %v; want seq 3 carried by H1 at 3", m, ok, err)
	}
	h.connect(h2, r)
	h.connect(h2, c)
	m, _, _ = r.store.LeafMark(leaf)
	if m.Seq != 4 || m.Carrier != h2.origin || m.At != 2 {
		t.Errorf("R's mark after H2: %+v; want seq 4 carried by H2 at 2", m)
	}
	got := r.rep.Counters()
	if got.LeafWritesTwice != 1 || r.applied()[h2.origin] != 2 {
		t.Errorf("R: leaf_writes_twice %d, H2 applied to %d; want 1 and 2", got.LeafWritesTwice, r.applied()[h2.origin])
	}
	if _, ok, _ := c.store.LeafMark(leaf); ok || c.rep.Counters().LeafWritesTwice != 0 {
		t.Errorf("C (MaxLeaves 0) holds a mark of the leaf, or counted %d twice; want none", c.rep.Counters().LeafWritesTwice)
	}
	nr, dr := r.digest("t")
	nc, dc := c.digest("t")
	if nr != 4 || nr != nc || dr != dc {
		t.Errorf("R holds %d records of t (%s), C %d (%s); want 4, alike", nr, dr, nc, dc)
	}
	// The version is one: the entry applied first wrote it, with its Via; the second, equal,
	// wrote nothing.
	wantRecord(t, r, "t", "k3", "v", at(50), leaf, h1.origin, at(60))
	wantRecord(t, c, "t", "k3", "v", at(50), leaf, h1.origin, at(60))
}

// absent fails the test when n holds a live record of table/key.
func absent(t *testing.T, n *node, table, key, why string) {
	t.Helper()
	if r, ok := n.get(table, key); ok && !r.Deleted {
		t.Errorf("%s: %s/%s = %q (origin %v, via %v): %s", n.name, table, key, r.Value, r.Origin, r.Via, why)
	}
}

// TestCopyLeafRecords (design §27.1 rows 1 to 5): a base copy of leaf writes judges each
// record by the hub entry that wrote it (its via block), orders versions by the leaf's.
// B and A applied the hub's first entry (k3, k4); B deleted k3, A deleted k4, and each
// dropped its tombstone; A alone applied the hub's third entry (k6). B then copies from A:
//
//   - k6 comes in chunk format 3 with its via block: the chunk check finds the hub in the
//     copy's vector (row 1), A does not hold it back (row 2), B writes it with the hub as
//     Via (row 5). Judged by the leaf's origin, which no vector holds, A would hold it back
//     and B would refuse the chunk;
//   - k3, in A's snapshot, is a version B applied (its hub entry is at or below B's
//     position of the hub: row 3, seen), so B does not write it: B deleted it. Judged by
//     the leaf's origin it would be new to B, and the deleted key would come back;
//   - k4, absent from A's snapshot, is a version A applied (row 4, superseded): A deleted
//     it, and B removes it. Judged by the leaf's origin, B would keep it.
func TestCopyLeafRecords(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{})
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: time.Second})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: time.Second})
	leaf := leafID(1, "L")
	// The hub only sends: A and B learn of each other's writes from nobody.
	reoriginate := func(ws ...leafWrite) {
		hub.reoriginate(ws...)
		for _, p := range []string{"A", "B"} {
			h.check(hub, hub.rep.SetLink(hub.clock(), p, settings(wire.LinkSend)))
		}
	}
	reoriginate(leafWrite{leaf, 1, at(10), at(20), []wire.Op{put("t", "k3", "l"), put("t", "k4", "l")}})
	ha, hb := h.connect(hub, a), h.connect(hub, b)
	h.disconnect(ha)
	h.disconnect(hb)
	b.write(del("t", "k3"))
	a.write(del("t", "k4"))
	h.advance(2 * time.Second)
	b.write(put("u", "b", "1")) // retention keeps an origin's head: these let the deletes go
	a.write(put("u", "a", "1"))
	// The hub's next entry is newer than both deletes: each node's tombstone horizon
	// passes them once it applied it.
	reoriginate(leafWrite{leaf, 2, at(2000), at(2010), []wire.Op{put("t", "k5", "l")}})
	ha, hb = h.connect(hub, a), h.connect(hub, b)
	h.disconnect(hb)
	h.disconnect(ha)
	reoriginate(leafWrite{leaf, 3, at(2020), at(2030), []wire.Op{put("t", "k6", "l")}},
		leafWrite{leaf, 4, at(2040), at(2050), []wire.Op{put("u", "k7", "l")}}) // A's log keeps its head, this
	ha = h.connect(hub, a)
	h.disconnect(ha)
	h.advance(3 * time.Second)
	for _, n := range []*node{a, b} {
		if n.rep.Counters().TombstonesDropped == 0 || n.logOf(n).Floor.Seq != 1 {
			t.Fatalf("%s dropped %d tombstones, its own floor %d; the test needs its delete purged and dropped",
				n.name, n.rep.Counters().TombstonesDropped, n.logOf(n).Floor.Seq)
		}
	}
	if f := a.logOf(hub).Floor.Seq; f != 3 {
		t.Fatalf("A's floor of the hub is %d; the test needs the entry of k6 purged, so that only a copy brings it to B", f)
	}
	h.connect(b, a)
	bc, ac := b.rep.Counters(), a.rep.Counters()
	if bc.CopiesCompleted != 1 || bc.BadChunks != 0 || ac.CopyHeldBack != 0 {
		t.Fatalf("B completed %d copies, %d bad chunks; A held back %d records; want 1, 0, 0 (B's copy events %+v)", bc.CopiesCompleted, bc.BadChunks, ac.CopyHeldBack, b.rep.CopyEvents())
	}
	wantRecord(t, b, "t", "k6", "l", at(2020), leaf, hub.origin, at(2030))
	absent(t, b, "t", "k3", "B deleted it; the copy brought back the leaf's put it had applied")
	absent(t, b, "t", "k4", "A deleted it, and the copy's snapshot shows it")
	wantRecord(t, b, "t", "k5", "l", at(2000), leaf, hub.origin, at(2010))
}

// TestAntiEntropyLeafRecords (design §27.1 rows 6 to 8): C1 and C2 hold one leaf write
// that two hubs re-originated (a leaf that moved), each applied last through another hub,
// so their records' Via differ:
//
//   - their ranges hash alike (the digest leaves the via block out) and compare as the
//     same version (row 8): nothing differs, nothing is repaired;
//   - a record C1 lost comes back from C2 (row 6): C2's version is not in flight, since
//     C1 applied the hub entry that wrote it. Judged by the leaf's origin, which C1
//     applied nowhere, it would be in flight for ever;
//   - a record C1 holds at the same version with other contents is rewritten from the log
//     (row 7): the hub entry is found in the hub's log by its entry HLC, and its operation
//     by the leaf block. Looked for in the leaf's log, or in the hub's by the leaf HLC, it
//     is not found, and the record is flagged a conflict instead.
func TestAntiEntropyLeafRecords(t *testing.T) {
	h := newHarness(t)
	ae := replica.Config{AntiEntropyInterval: 10 * time.Millisecond}
	h1 := h.addNode("H1", replica.Config{})
	h2 := h.addNode("H2", replica.Config{})
	c1 := h.addNode("C1", ae)
	c2 := h.addNode("C2", ae)
	leaf := leafID(1, "L")
	ops := []wire.Op{put("t", "k1", "a"), put("t", "k2", "b"), put("t", "k3", "c")}
	h1.reoriginate(leafWrite{leaf, 1, at(10), at(20), ops})
	h2.reoriginate(leafWrite{leaf, 1, at(10), at(30), ops})
	h.check(h1, h1.rep.SetLink(h1.clock(), "C1", settings(wire.LinkSend)))
	h.check(h2, h2.rep.SetLink(h2.clock(), "C2", settings(wire.LinkSend)))
	h.connect(h1, c1)
	h.connect(h2, c2)
	h.connect(c1, c2)
	r1, _ := c1.get("t", "k1")
	r2, _ := c2.get("t", "k1")
	if r1.Via == r2.Via || r1.Version() != r2.Version() {
		t.Fatalf("C1's k1 via %v, C2's via %v, versions %v %v: the test needs one version through two hubs", r1.Via, r2.Via, r1.Version(), r2.Version())
	}
	h.advance(time.Second)
	for _, n := range []*node{c1, c2} {
		if got := n.rep.Counters(); got.AntiEntropyRangesCompared == 0 || got.AntiEntropyRangesDiffering != 0 || got.AntiEntropyRecordsRepaired != 0 {
			t.Fatalf("%s: %d ranges compared, %d differing, %d repaired; want some, 0, 0", n.name,
				got.AntiEntropyRangesCompared, got.AntiEntropyRangesDiffering, got.AntiEntropyRecordsRepaired)
		}
	}
	c1.store.Corrupt([]byte("t"), []byte("k1"), nil)
	altered, _ := c1.get("t", "k2")
	altered.Value = []byte("altered")
	c1.store.Corrupt([]byte("t"), []byte("k2"), &altered)
	h.advance(time.Second)
	got := c1.rep.Counters()
	k1, _ := c2.get("t", "k1")
	wantRecord(t, c1, "t", "k1", "a", at(10), leaf, k1.Via, k1.ViaHLC)
	if r, _ := c1.get("t", "k2"); string(r.Value) != "b" || r.Version() != altered.Version() {
		t.Errorf("C1's k2 = %q at %v; want b, from the log, at %v", r.Value, r.Version(), altered.Version())
	}
	if got.AntiEntropyRecordsRepaired != 2 || got.AntiEntropyConflicts != 0 || got.AntiEntropyInFlight != 0 {
		t.Errorf("C1: %d repaired, %d conflicts, %d in flight; want 2, 0, 0", got.AntiEntropyRecordsRepaired, got.AntiEntropyConflicts, got.AntiEntropyInFlight)
	}
	sameRecords(t, "t", c1, c2)
}

// TestTombstoneHorizonLeafWindow (design §27.4): with the map's leaf_window W, a node
// keeps a tombstone until every origin's applied HLC, less W, is past it, its own clock
// included: a hub's later entry may carry a leaf's put up to W older than the entry. C
// applied the hub's entries up to one newer than X's delete of k, and its own clock went
// on (its writes); the hub's next entry, just above its last, re-originates the leaf's put
// of k, older than the delete and within W of the entry. Dropped by a horizon without W
// for the hub's origin (or without W at all), the tombstone would be gone, and the put
// would bring the deleted key back. A node alone (no other origin) keeps its tombstones
// within W of its own clock, and drops them once the window passed.
func TestTombstoneHorizonLeafWindow(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{})
	c := h.addNode("C", replica.Config{RetainAge: time.Second})
	x := h.addNode("X", replica.Config{})
	leaf := leafID(1, "L")
	hub.reoriginate(leafWrite{leaf, 1, at(10), at(20), []wire.Op{put("t", "k", "leaf")}},
		leafWrite{leaf, 2, at(150), at(200), []wire.Op{put("t", "other", "leaf")}})
	h.check(hub, hub.rep.SetLink(hub.clock(), "C", settings(wire.LinkSend)))
	if _, err := c.publish([]byte(`{"generation":1,"leaf_window":2,"nodes":[{"name":"C"},{"name":"H"},{"name":"X"}]}`)); err != nil {
		t.Fatal(err)
	}
	hc := h.connect(hub, c)
	h.disconnect(hc)
	x.skew = 100 * time.Millisecond
	x.write(del("t", "k")) // before X sees the hub's entries, which would raise its clock
	h.connect(x, c)
	tomb, _ := c.get("t", "k")
	if !tomb.Deleted || tomb.HLC >= at(200) {
		t.Fatalf("C's k = %+v; the test needs X's delete at an HLC below the hub's second entry", tomb)
	}
	h.advance(3 * time.Second)
	c.write(put("u", "c", "1")) // C's clock, 3 s on: its own term is past the delete
	h.advance(2 * time.Second)
	if got := c.rep.Counters().TombstonesDropped; got != 0 {
		t.Errorf("C dropped %d tombstones within the leaf window of the hub's applied HLC", got)
	}
	// The leaf's put of k, older than X's delete, in the hub's next entry.
	hub.reoriginate(leafWrite{leaf, 3, at(50), at(210), []wire.Op{put("t", "k", "leaf-old")}})
	h.check(hub, hub.rep.SetLink(hub.clock(), "C", settings(wire.LinkSend)))
	h.connect(hub, c)
	if got := c.applied()[hub.origin]; got != 3 {
		t.Fatalf("C applied the hub to %d; want 3", got)
	}
	if r, ok := c.get("t", "k"); !ok || !r.Deleted {
		t.Errorf("C's k = %q (deleted %v, origin %v): the leaf's put older than X's delete came back", r.Value, r.Deleted, r.Origin)
	}

	alone := h.addNode("A", replica.Config{RetainAge: time.Second})
	if _, err := alone.publish([]byte(`{"generation":1,"leaf_window":5,"nodes":[{"name":"A"}]}`)); err != nil {
		t.Fatal(err)
	}
	alone.write(put("t", "k", "v"))
	alone.write(del("t", "k"))
	h.advance(3 * time.Second)
	if got := alone.rep.Counters().TombstonesDropped; got != 0 {
		t.Errorf("A alone dropped %d tombstones within the leaf window of its own clock", got)
	}
	h.advance(4 * time.Second)
	alone.write(put("t", "tick", "v")) // its clock moves with its writes
	h.advance(time.Second)
	if got := alone.rep.Counters().TombstonesDropped; got != 1 {
		t.Errorf("A alone dropped %d tombstones once the window passed; want 1", got)
	}
}

// TestLeafWindowNeverLowered (contract §22.11): a map that follows one with a leaf window
// keeps it or raises it; published lower, it is refused (leaf-window-lowered, the node's
// map kept); from a peer, refused and counted, the connection up.
func TestLeafWindowNeverLowered(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	doc := func(gen int, window string) []byte {
		return []byte(`{"generation":` + string(rune('0'+gen)) + window + `,"nodes":[{"name":"A"},{"name":"B"}]}`)
	}
	if _, err := b.publish(doc(1, `,"leaf_window":60`)); err != nil {
		t.Fatal(err)
	}
	_, err := b.publish(doc(2, `,"leaf_window":59`))
	var ce *clustermap.Error
	if !errors.As(err, &ce) || ce.Code != clustermap.CodeLeafWindowLowered || b.rep.MapGeneration() != 1 {
		t.Fatalf("B publishing a lower window: %v, generation %d; want leaf-window-lowered, 1 kept", err, b.rep.MapGeneration())
	}
	if _, err := b.publish(doc(2, `,"leaf_window":61`)); err != nil {
		t.Fatalf("B publishing a higher window: %v", err)
	}
	if _, err := a.publish(doc(3, ``)); err != nil { // A held no map: nothing to keep
		t.Fatal(err)
	}
	h.connect(a, b)
	if g, n := b.rep.MapGeneration(), b.rep.Counters().ClusterMapRefused; g != 2 || n != 1 || b.peerStatus("A").State != replica.PeerStreaming {
		t.Errorf("B after A's map without a window: generation %d, %d refused, A %s; want 2 kept, 1 refused, streaming", g, n, b.peerStatus("A").State)
	}
}

// TestAntiEntropyLeafRecordFromAPeerBehind (design §27.1 row 9): as
// TestAntiEntropyNotFromAPeerBehind, with k a leaf's write the hub re-originated at an
// entry HLC above C's delete of it, the leaf's HLC below: B, whose copy from A removed k,
// does not take k back from D, which has not applied C's delete, since the record's
// conflict HLC is at or below what B applied of C. Judged by its delivering HLC (the
// hub's entry, above C's delete), k would be taken back: a deleted key back.
func TestAntiEntropyLeafRecordFromAPeerBehind(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{})
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: 2 * time.Second})
	b := h.addNode("B", replica.Config{RetainAge: 24 * time.Hour, AntiEntropyInterval: 10 * time.Millisecond})
	c := h.addNode("C", replica.Config{})
	d := h.addNode("D", replica.Config{})
	leaf := leafID(1, "L")
	hub.reoriginate(leafWrite{leaf, 1, at(10), at(400), []wire.Op{put("t", "k", "leaf")}})
	h.check(hub, hub.rep.SetLink(hub.clock(), "A", settings(wire.LinkSend)))
	ba, ca, db := h.connect(b, a), h.connect(c, a), h.connect(d, b)
	b.write(put("t", "b", "0"))
	c.write(put("t", "c", "1"))
	h.pump()
	h.disconnect(ca) // C deletes k without the hub's entry, which would raise its clock past it
	ha := h.connect(hub, a)
	h.disconnect(ha)
	if r, ok := d.get("t", "k"); !ok || r.Via != hub.origin {
		t.Fatalf("D's k = %+v, want the leaf's write through the hub", r)
	}
	h.disconnect(db)
	h.disconnect(ba)
	c.skew = 100 * time.Millisecond
	c.write(del("t", "k"))
	c.write(put("t", "c", "2"))
	h.advance(10 * time.Millisecond)
	b.write(put("t", "b", "1"))
	ba = h.connect(b, a)
	h.disconnect(ba)
	ca = h.connect(c, a)
	h.disconnect(ca)
	if r, _ := a.get("t", "k"); !r.Deleted || r.HLC <= at(10) || r.HLC >= at(400) {
		t.Fatalf("A's k = %+v; the test needs C's delete between the leaf's HLC and the hub entry's", r)
	}
	h.advance(5 * time.Second) // A drops k's tombstone and purges C's log past B
	if _, ok := a.get("t", "k"); ok {
		t.Fatal("A kept k's tombstone: the test needs it gone")
	}
	ba = h.connect(b, a)
	h.advance(time.Second)
	if got := b.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("B completed %d copies, want 1", got)
	}
	if _, ok := b.get("t", "k"); ok {
		t.Fatal("B holds k after the copy: the test needs the copy to remove it")
	}
	h.disconnect(ba)
	h.drop = func(from, to string, f wire.Decoded) bool { // D's copy of B is held back
		_, isCopy := f.Value.(*wire.Copy)
		return from == "D" && isCopy
	}
	h.connect(d, b)
	h.advance(2 * time.Second)
	if r, back := b.get("t", "k"); back {
		t.Errorf("B's k from D, which has not applied C's delete = %q (origin %v, via %v): a deleted key back", r.Value, r.Origin, r.Via)
	}
	if n := b.rep.Counters().AntiEntropyPeerBehind; n == 0 {
		t.Errorf("B counted no record held by a peer behind; counters %+v", b.rep.Counters())
	}
}

// TestFillLeafRecords (design §27.1 row 5, a table's fill): a node added to a placed table
// fills it from a carrier with the leaf's records as they are, the hub's entry as their
// Via; without it the records would have no delivering identity on the node.
func TestFillLeafRecords(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{})
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	leaf := leafID(1, "L")
	hub.reoriginate(leafWrite{leaf, 1, at(10), at(20), []wire.Op{put("t", "k", "leaf")}})
	h.check(hub, hub.rep.SetLink(hub.clock(), "A", settings(wire.LinkSend)))
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A","H"]}`, "A", "B", "H")); err != nil {
		t.Fatal(err)
	}
	h.connect(hub, a)
	if _, ok := b.get("t", "k"); ok || b.applied()[hub.origin] != 1 {
		t.Fatalf("B holds t/k, or applied the hub to %d: the test needs B past the hub's entry without t", b.applied()[hub.origin])
	}
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(3, `,"placement":{"t":["A","B","H"]}`, "A", "B", "H")); err != nil {
		t.Fatal(err)
	}
	h.advance(5 * time.Second)
	if cs := b.rep.Counters(); cs.TablesFilled != 1 || cs.FillRecords != 1 {
		t.Fatalf("B filled %d tables, %d records; want 1, 1", cs.TablesFilled, cs.FillRecords)
	}
	wantRecord(t, b, "t", "k", "leaf", at(10), leaf, hub.origin, at(20))
}
