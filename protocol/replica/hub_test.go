package replica_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Hubs and leaves (hub.go, leaf.go, docs/design.md §27.2-§27.7): a core node C, a hub H and
// leaves of H, on the harness. The map (published on C) lists C and H, with a leaf window.

const hubWindow = `,"leaf_window":3600`

type hubCluster struct {
	h       *harness
	core    *node
	hub     *node
	leaves  []*node
	leafLnk []*link
}

// hubSetup makes the core node C and the hub H (hubCfg, MaxLeaves 2 unless set), publishes
// a map of C and H with extra (the leaf window unless "-") on C, links H to C, then adds
// each named leaf (Hub "H") and connects it to H.
func hubSetup(t *testing.T, hubCfg replica.Config, extra string, leaves ...string) *hubCluster {
	t.Helper()
	h := newHarness(t)
	if hubCfg.MaxLeaves == 0 {
		hubCfg.MaxLeaves = 2
	}
	if extra == "" {
		extra = hubWindow
	} else if extra == "-" {
		extra = ""
	}
	hc := &hubCluster{h: h, core: h.addNode("C", replica.Config{}), hub: h.addNode("H", hubCfg)}
	h.connect(hc.hub, hc.core)
	if _, err := hc.core.publish(mapDoc(1, extra, "C", "H")); err != nil {
		t.Fatal(err)
	}
	h.advance(100 * time.Millisecond)
	for _, name := range leaves {
		hc.addLeaf(name, replica.Config{})
	}
	return hc
}

// addLeaf adds a leaf of H named name and connects it.
func (hc *hubCluster) addLeaf(name string, cfg replica.Config) *node {
	cfg.Hub = "H"
	l := hc.h.addNode(name, cfg)
	hc.leaves = append(hc.leaves, l)
	hc.leafLnk = append(hc.leafLnk, hc.h.connect(l, hc.hub))
	hc.h.advance(100 * time.Millisecond)
	return l
}

// hubEntries lists, per leaf seq of leaf, how many entries of n's log of hub's origin
// re-originate it.
func hubEntries(t *testing.T, n, hub, leaf *node) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	head := n.applied()[hub.origin]
	for s := uint64(1); s <= head; s++ {
		_, v := n.entry(hub, s)
		if v.Format() == wire.TxnFormat3 && v.Leaf.Origin == leaf.origin {
			out[v.Leaf.Seq]++
		}
	}
	return out
}

// TestHubReoriginates: a leaf's writes reach the core as the hub's entries (format 3),
// their records carry the leaf's conflict identity with Via the hub on the hub and on the
// core; no vector names the leaf's origin but its own; the leaf is told (LEAFSTATE) what
// was re-originated, by which hub seq, and that the core has it; its own writes come back as
// no-ops.
func TestHubReoriginates(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L")
	h, c, hub, l := hc.h, hc.core, hc.hub, hc.leaves[0]
	l.write(put("t", "a", "1"))
	l.write(put("t", "b", "2"), put("t", "a", "3"))
	h.advance(500 * time.Millisecond)

	_, le1 := l.entry(l, 1)
	_, le2 := l.entry(l, 2)
	for _, n := range []*node{hub, c} {
		got := hubEntries(t, n, hub, l)
		if len(got) != 2 || got[1] != 1 || got[2] != 1 {
			t.Errorf("%s: hub entries re-originating L's seqs: %v, want 1 and 2 once each", n.name, got)
		}
		if _, ok := n.applied()[l.origin]; ok {
			t.Errorf("%s: its vector names the leaf's origin: %v", n.name, n.applied())
		}
		r, ok := n.get("t", "a")
		if !ok || string(r.Value) != "3" || r.Origin != l.origin || r.HLC != le2.HLC || r.Via != hub.origin || r.ViaHLC <= le2.HLC {
			t.Errorf("%s: t/a = %+v, want 3 at the leaf's HLC %v and origin, via the hub above it", n.name, r, le2.HLC)
		}
		for _, o := range n.rep.Vector() {
			if o.Origin == l.origin {
				t.Errorf("%s: status lists the leaf's origin", n.name)
			}
		}
	}
	if got := hub.rep.Counters().LeafWritesReoriginated; got != 2 {
		t.Errorf("hub: leaf_writes_reoriginated %d, want 2", got)
	}
	_, carrier := hub.entry(hub, hub.applied()[hub.origin])
	if carrier.Leaf.Seq != 2 || carrier.Leaf.Hash != le2.Hash() || carrier.Leaf.HLC != le2.HLC || carrier.HLC <= le2.HLC {
		t.Errorf("the hub's last entry carries %+v at %v, want L's seq 2 (hash %x) below it", carrier.Leaf, carrier.HLC, le2.Hash())
	}
	_ = le1
	st := l.rep.Status(l.clock()).Hub
	if st == nil || !st.Connected || st.Name != "H" || st.ReoriginatedSeq != 2 || st.HubSeq != carrier.Seq || st.CoreSeq != 2 ||
		st.Horizon.IsZero() || st.Refused != 0 {
		t.Errorf("the leaf's hub status: %+v, want seq 2 re-originated by hub seq %d and at the core", st, carrier.Seq)
	}
	if got := l.rep.Counters().LeafOwnWritesBack; got != 3 {
		t.Errorf("leaf: leaf_own_writes_back %d, want 3 (the operations of its two writes)", got)
	}
	if r, _ := l.get("t", "a"); !r.Via.IsZero() || r.Origin != l.origin {
		t.Errorf("the leaf's own record was rewritten by its write coming back: %+v", r)
	}
	if got := l.applied()[hub.origin]; got != hub.applied()[hub.origin] {
		t.Errorf("the leaf applied the hub's origin to %d, want %d", got, hub.applied()[hub.origin])
	}
	ls := hub.rep.Status(hub.clock()).Leaves
	if ls == nil || ls.Max != 2 || ls.Connected != 1 || ls.Marks != 1 || ls.Held != 0 || len(ls.Slowest) != 1 || ls.Slowest[0].Name != "L" ||
		ls.Slowest[0].Seq != 2 || len(ls.Lag) != 4 || ls.Lag[0].Leaves != 1 {
		t.Errorf("the hub's leaves status: %+v", ls)
	}
	if c.rep.Status(c.clock()).Leaves != nil || c.rep.Status(c.clock()).Hub != nil {
		t.Errorf("the core node reports leaves or a hub")
	}
}

// TestHubExactlyOnceAcrossRestart: a hub that crashes (its store reopened from a copy)
// after re-originating a leaf's entries resumes the leaf from its mark: every leaf seq is
// in the hub's log, and the core's, exactly once.
func TestHubExactlyOnceAcrossRestart(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L")
	h, c, hub, l := hc.h, hc.core, hc.hub, hc.leaves[0]
	for i := range 3 {
		l.write(put("t", "k", string(rune('a'+i))))
	}
	h.advance(200 * time.Millisecond)
	hub.store = hub.store.Clone() // the process crashed: a new one opens the store
	hub.restart()
	h.connect(hub, c)
	h.connect(l, hub)
	for i := range 2 {
		l.write(put("t", "k", string(rune('x'+i))))
	}
	h.advance(500 * time.Millisecond)
	for _, n := range []*node{hub, c} {
		got := hubEntries(t, n, hub, l)
		if len(got) != 5 {
			t.Errorf("%s: the hub's entries re-originate L's seqs %v, want 1 to 5", n.name, got)
		}
		for s, k := range got {
			if k != 1 {
				t.Errorf("%s: L's seq %d re-originated %d times", n.name, s, k)
			}
		}
	}
	if got := hub.rep.Counters(); got.LeafWritesReoriginated != 2 {
		t.Errorf("the restarted hub re-originated %d entries, want 2", got.LeafWritesReoriginated)
	}
	if st := l.rep.Status(l.clock()).Hub; st.ReoriginatedSeq != 5 || st.CoreSeq != 5 {
		t.Errorf("the leaf's hub status: %+v, want seq 5 re-originated and at the core", st)
	}
	if r, _ := c.get("t", "k"); string(r.Value) != "y" || r.Origin != l.origin {
		t.Errorf("the core's t/k: %+v, want the leaf's last write", r)
	}
}

// dataOf rewrites, in a message from the leaf, the DATA frames of its origin with seq
// matching: each is replaced by what fn returns (nil: left as it is).
func alterData(t *testing.T, msg []byte, fn func(d *wire.Data) [][]byte) []byte {
	t.Helper()
	frames, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, f := range frames {
		body, err := f.Value.AppendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		bodies := [][]byte{body}
		if d, ok := f.Value.(*wire.Data); ok {
			if b := fn(d); b != nil {
				bodies = b
			}
		}
		for _, b := range bodies {
			out = wire.AppendHeader(out, wire.Header{Type: f.Value.FrameType(), Flags: f.Flags, Channel: f.Channel, Length: uint32(len(b))})
			out = append(out, b...)
		}
	}
	return out
}

// TestHubLeafDuplicatesAndRewind: a leaf entry the hub receives twice is re-originated
// once and counted a duplicate; an entry that does not extend the one at the leaf's mark
// (the leaf's log went back) closes the leaf's connection with leaf-rewound, and nothing of
// it is re-originated.
func TestHubLeafDuplicatesAndRewind(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L")
	h, hub, l := hc.h, hc.hub, hc.leaves[0]
	h.alter = func(from, to string, msg []byte) []byte {
		if from != "L" {
			return msg
		}
		return alterData(t, msg, func(d *wire.Data) [][]byte {
			body, _ := d.AppendBody(nil)
			return [][]byte{body, body} // every entry twice
		})
	}
	l.write(put("t", "a", "1"))
	l.write(put("t", "b", "2"))
	h.advance(200 * time.Millisecond)
	if got := hubEntries(t, hub, hub, l); len(got) != 2 || got[1] != 1 || got[2] != 1 {
		t.Errorf("the hub's entries re-originate L's seqs %v, want 1 and 2 once each", got)
	}
	if got := hub.rep.Counters(); got.LeafWritesDuplicate < 2 || got.LeafWritesReoriginated != 2 {
		t.Errorf("hub counters: %d duplicates, %d re-originated; want at least 2 and 2", got.LeafWritesDuplicate, got.LeafWritesReoriginated)
	}
	// Entry 3 arrives with another prev than entry 2's hash, as a leaf restored from an
	// older copy that wrote again would send it.
	h.alter = func(from, to string, msg []byte) []byte {
		if from != "L" {
			return msg
		}
		return alterData(t, msg, func(d *wire.Data) [][]byte {
			if d.Txn.Seq != 3 {
				return nil
			}
			d.Txn.Prev = sha256.Sum256([]byte("another chain"))
			enc, err := d.Txn.Encode()
			if err != nil {
				t.Fatal(err)
			}
			d.Hash = sha256.Sum256(enc)
			body, _ := d.AppendBody(nil)
			return [][]byte{body}
		})
	}
	l.write(put("t", "c", "3"))
	h.advance(200 * time.Millisecond)
	if got := hubEntries(t, hub, hub, l); len(got) != 2 {
		t.Errorf("after the rewound entry the hub's entries re-originate L's seqs %v, want 1 and 2", got)
	}
	if e := hub.rep.LastError("L"); e == nil || e.Err.Code != wire.CodeLeafRewound {
		t.Errorf("the hub's last error of L: %+v, want leaf-rewound", e)
	}
	if e := l.rep.LastError("H"); e == nil || e.Err.Code != wire.CodeLeafRewound {
		t.Errorf("the leaf's last error of H: %+v, want leaf-rewound", e)
	}
}
