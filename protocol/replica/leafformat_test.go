package replica_test

import (
	"crypto/sha256"
	"errors"
	"testing"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// TestLeafEntryToOlderPeers: an entry of transaction format 3 (a leaf write a hub
// re-originated, docs/design.md §27) goes to a version-4 peer, and never on a connection
// below version 4, which carries format 1 only: to a version-3 peer it is purged (PURGED at
// the entry, the connection kept: it takes a base copy), and a version-2 or version-1 peer's connection is closed
// with purged, as for a format-2 entry; the entry before it reaches them all.
func TestLeafEntryToOlderPeers(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	d := h.addNode("D", replica.Config{MaxVersion: 2})
	e := h.addNode("E", replica.Config{MaxVersion: 1})
	a.write(put("t", "before", "1"))
	// A's next entry re-originates a leaf's write: written to its store as the hub would
	// write it, and A restarted on the store.
	raw, first := a.entry(a, 1)
	leaf := wire.OriginID{0x1e, 15: 0x1e}
	hlc := first.HLC + 2<<16
	l := wire.LeafBlock{Origin: leaf, Seq: 1, HLC: first.HLC + 1<<16, Hash: wire.Hash{1}}
	txn, err := (&wire.Txn{Origin: a.origin, Seq: 2, HLC: hlc, Prev: sha256.Sum256(raw), Leaf: &l,
		Ops: []wire.Op{put("t", "from-leaf", "l")}}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Apply(&store.Batch{Origin: a.origin, Seq: 2, Hash: sha256.Sum256(txn), Txn: txn,
		Records: []store.Record{{Table: []byte("t"), Key: []byte("from-leaf"), Value: []byte("l"), HLC: l.HLC, Origin: leaf,
			Via: a.origin, ViaHLC: hlc}}}); err != nil {
		t.Fatal(err)
	}
	a.restart()
	for _, n := range []*node{b, c, d, e} {
		h.connect(n, a)
	}
	h.pump()
	if got := a.rep.Counters().PurgedAnswers; got < 3 {
		t.Errorf("A's purged answers = %d, want one for each of C, D and E", got)
	}
	if got := b.applied()[a.origin]; got != 2 {
		t.Errorf("B's position in A = %d, want 2: a version-4 connection carries format 3", got)
	}
	for _, n := range []*node{c, d, e} {
		if got := n.rep.Counters().ProtocolErrors; got != 0 {
			t.Errorf("%s counts %d protocol errors: it was sent what its version does not carry", n.name, got)
		}
		if _, ok := n.get("t", "before"); !ok {
			t.Errorf("%s lacks the entry before the format-3 one", n.name)
		}
	}
	for _, n := range []*node{d, e} {
		if got := n.applied()[a.origin]; got != 1 {
			t.Errorf("%s's position in A = %d, want 1: the entry before the format-3 one", n.name, got)
		}
		if le := n.rep.LastError("A"); le == nil || le.Err.Code != wire.CodePurged {
			t.Errorf("%s's last error from A: %+v, want purged", n.name, le)
		}
	}
	// C took the rest by a base copy (the entry below the copy's floor in its log).
	if got := c.rep.Counters().CopyRecords; got == 0 {
		t.Error("C took no base copy")
	}
	if _, err := c.store.Entry(a.origin, 2); !errors.Is(err, store.ErrPurged) {
		t.Errorf("C's log of A at 2: %v, want purged (below the copy's floor)", err)
	}
	if got := c.peerStatus("A"); got.Version != 3 {
		t.Errorf("C's connection to A is at version %d, want 3 and open", got.Version)
	}
}
