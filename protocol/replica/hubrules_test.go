package replica_test

import (
	"crypto/sha256"
	"testing"
	"time"

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
	// The version is one: the entry applied last rewrote it, equal, with its own Via.
	wantRecord(t, r, "t", "k3", "v", at(50), leaf, h2.origin, at(70))
	wantRecord(t, c, "t", "k3", "v", at(50), leaf, h2.origin, at(70))
}
