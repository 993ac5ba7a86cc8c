package replica_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// restoredA is A, B and C in a chain A–B–C, A having written 3 entries that both hold,
// then restored from a backup taken after its first: A's log ends at 1, its peers hold 3.
// With after, A writes that many entries after the restore, before any peer connects
// (its log forks from theirs at 2). The link A–B is not yet made again.
func restoredA(t *testing.T, after int) (h *harness, a, b, c *node) {
	h = newHarness(t)
	a = h.addNode("A", replica.Config{})
	b = h.addNode("B", replica.Config{})
	c = h.addNode("C", replica.Config{})
	ab := h.connect(a, b)
	h.connect(b, c)
	a.write(put("t", "k1", "v1"))
	backup := a.store.Clone()
	a.write(put("t", "k2", "v2"))
	a.write(put("t", "k3", "v3"), put("t", "k1", "v1b"))
	h.advance(time.Second)
	if got := c.applied()[a.origin]; got != 3 {
		t.Fatalf("C applied A up to %d, want 3", got)
	}
	h.disconnect(ab)
	a.store = backup
	a.restart()
	for i := range after {
		a.write(put("t", fmt.Sprint("new", i), "after the restore"), put("t", "k2", fmt.Sprint("new", i)))
	}
	return h, a, b, c
}

// wantRewound checks that a peer found a rewound, and a found itself so.
func wantRewound(t *testing.T, a, peer *node, ownSeq uint64) {
	t.Helper()
	rw := a.rep.Rewound()
	if rw == nil || rw.Peer != peer.name || rw.OwnSeq != ownSeq {
		t.Fatalf("A's rewind evidence = %+v, want peer %s and its own seq %d", rw, peer.name, ownSeq)
	}
	if got := peer.originStatus(a); !got.Rewound || got.Diverged || got.AppliedSeq != 3 {
		t.Errorf("%s's status of A = %+v, want rewound, not diverged, its 3 entries kept", peer.name, got)
	}
	if got := peer.rep.Counters().Divergences; got != 0 {
		t.Errorf("%s counted %d divergences, want none", peer.name, got)
	}
	if e := peer.rep.LastError("A"); e == nil || e.Err.Code != wire.CodeOriginRewound || e.Err.Class != wire.ClassRefused {
		t.Errorf("%s's last error for A = %+v, want origin-rewound", peer.name, e)
	}
	var we *wire.Error
	_, err := a.rep.Write(a.clock(), []wire.Op{put("t", "refused", "x")})
	if !errors.As(err, &we) || we.Code != wire.CodeOriginRewound || !strings.Contains(we.Message, "plait reseed") {
		t.Errorf("a write on rewound A: %v, want origin-rewound naming plait reseed", err)
	}
	if _, ok := a.get("t", "refused"); ok {
		t.Errorf("A applied a refused write")
	}
}

// reseed stops a, reseeds its store to a new origin id above its old one, and starts it.
func reseed(t *testing.T, a *node) {
	t.Helper()
	a.restart()
	n := a.origin
	n[0] = 0xf0
	if _, err := store.ReseedStore(a.store, n); err != nil {
		t.Fatalf("reseed: %v", err)
	}
	a.origin = n
	a.restart()
}

// TestRewindRestoredBackup: a node restored from a backup older than what its peers hold
// of it is found rewound at both ends when it connects; its peer keeps the entries; and
// after a reseed the three nodes converge with every write, the old origin's streamed back
// from the peers.
func TestRewindRestoredBackup(t *testing.T) {
	h, a, b, c := restoredA(t, 0)
	h.connect(a, b)
	h.advance(time.Second)
	wantRewound(t, a, b, 1)
	for _, n := range []*node{b, c} {
		if r, _ := n.get("t", "k1"); string(r.Value) != "v1b" {
			t.Errorf("%s: k1 = %q, want v1b, kept", n.name, r.Value)
		}
	}
	old := a.origin
	reseed(t, a)
	h.connect(a, b)
	h.advance(2 * time.Second)
	if a.rep.Rewound() != nil {
		t.Errorf("A is rewound after the reseed: %+v", a.rep.Rewound())
	}
	if got := a.applied()[old]; got != 3 {
		t.Errorf("A applied its old origin up to %d, want the peers' 3", got)
	}
	a.write(put("t", "k4", "after the reseed"))
	h.advance(time.Second)
	sameRecords(t, "t", a, b, c)
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		if _, ok := c.get("t", k); !ok {
			t.Errorf("C lacks %s", k)
		}
	}
	if got := b.rep.Counters().Divergences; got != 0 {
		t.Errorf("B counted %d divergences", got)
	}
}

// TestRewindForkedAfterRestore: a restored node that wrote before any peer connected has a
// log that forks from its peers'; it is found rewound, not diverged, and its new writes
// reach no peer until the reseed re-issues them under the new origin: then the cluster
// converges with both timelines' writes, last-writer-wins deciding as before.
func TestRewindForkedAfterRestore(t *testing.T) {
	h, a, b, c := restoredA(t, 2)
	h.connect(a, b)
	h.advance(time.Second)
	wantRewound(t, a, b, 3)
	for _, n := range []*node{b, c} {
		if _, ok := n.get("t", "new0"); ok {
			t.Errorf("%s took an entry of the forked timeline", n.name)
		}
	}
	// A peer that never got A's entries connects: rewound A serves it none of the fork.
	d := h.addNode("D", replica.Config{})
	h.connect(d, a)
	h.advance(time.Second)
	if got := d.applied()[a.origin]; got != 0 {
		t.Errorf("D took A's origin up to %d from rewound A, want nothing", got)
	}
	reseed(t, a)
	h.connect(a, b)
	h.connect(d, a)
	h.advance(2 * time.Second)
	sameRecords(t, "t", a, b, c, d)
	for _, k := range []string{"k1", "k3", "new0", "new1"} {
		if _, ok := c.get("t", k); !ok {
			t.Errorf("C lacks %s", k)
		}
	}
	// k2 was written by the old timeline (v2) and twice after the restore: the newest wins.
	if r, _ := c.get("t", "k2"); string(r.Value) != "new1" || r.Origin != a.origin {
		t.Errorf("C: k2 = %q of %x, want the newest write, new1, under A's new origin", r.Value, r.Origin[:1])
	}
}

// TestRewindNotForBehindPeer: a peer that is merely behind (its position is in the node's
// log, with the same hash) shows no rewind, nor does a restart that lost nothing.
func TestRewindNotForBehindPeer(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	ab := h.connect(a, b)
	a.write(put("t", "k1", "v1"))
	h.advance(time.Second)
	h.disconnect(ab)
	a.write(put("t", "k2", "v2"))
	a.restart()
	h.connect(b, a)
	a.write(put("t", "k3", "v3"))
	h.advance(time.Second)
	if a.rep.Rewound() != nil || b.originStatus(a).Rewound || b.rep.Counters().OriginRewinds != 0 {
		t.Errorf("a peer behind showed a rewind: %+v, %+v", a.rep.Rewound(), b.originStatus(a))
	}
	if got := b.applied()[a.origin]; got != 3 {
		t.Errorf("B applied A up to %d, want 3", got)
	}
}

// TestRewindFoundByPeerHeads: the peer finds the rewind from the node's HEADS alone (its
// SUBSCRIBE, the node's own evidence, is lost here): it keeps its entries, marks the origin
// and closes the connection with origin-rewound.
func TestRewindFoundByPeerHeads(t *testing.T) {
	h, a, b, _ := restoredA(t, 0)
	h.drop = func(from, to string, f wire.Decoded) bool {
		return from == "B" && to == "A" && f.Type == wire.TypeSubscribe
	}
	h.connect(a, b)
	// A head below the applied seq is evidence only once no higher one follows for the
	// stall timeout (it may have been overtaken on its way): not yet, then found.
	h.advance(replica.DefaultStallTimeout - 100*time.Millisecond)
	if got := b.originStatus(a); got.Rewound || b.rep.Counters().OriginRewinds != 0 {
		t.Errorf("B's status of A before the stall timeout = %+v, want no rewind yet", got)
	}
	h.advance(time.Second)
	if got := b.originStatus(a); !got.Rewound || got.AppliedSeq != 3 {
		t.Errorf("B's status of A = %+v, want rewound, its 3 entries kept", got)
	}
	if got := b.rep.Counters(); got.OriginRewinds == 0 || got.Divergences != 0 {
		t.Errorf("B's counters = %+v, want the rewind counted, no divergence", got)
	}
	if e := b.rep.LastError("A"); e == nil || e.Err.Code != wire.CodeOriginRewound {
		t.Errorf("B's last error for A = %+v, want origin-rewound", e)
	}
}

// A head of the origin's own node overtaken by its next entries over a faster path (here
// a version-1 relay, which streams every origin) is below the applied seq when it arrives,
// and is no rewind: the origin's next head, right behind it, clears it.
func TestRewindNotForAnOvertakenHead(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{MaxVersion: 1})
	c := h.addNode("C", replica.Config{})
	h.connect(b, a)
	h.connect(c, b)
	ca := h.connect(c, a)
	a.write(put("t", "k0", "v"))
	h.pump()
	ca.hold = true // A's heads and entries to C wait; B streams A's entries to C meanwhile
	a.write(put("t", "k1", "v"))
	a.write(put("t", "k2", "v"))
	h.pump()
	if got := c.originStatus(a); got.AppliedSeq != 3 {
		t.Fatalf("C's status of A through B = %+v, want applied 3", got)
	}
	ca.hold = false
	h.pump()
	h.advance(replica.DefaultStallTimeout + time.Second)
	if got := c.originStatus(a); got.Rewound || got.AppliedSeq != 3 || c.rep.Counters().OriginRewinds != 0 {
		t.Errorf("C's status of A after A's held heads came = %+v, rewinds %d; want no rewind", got, c.rep.Counters().OriginRewinds)
	}
	if a.rep.Rewound() != nil {
		t.Errorf("A found itself rewound: %+v", a.rep.Rewound())
	}
}
