package replica_test

import (
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"plait/protocol/clustermap"
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
	coreLnk *link // H to C
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
	hc.coreLnk = h.connect(hc.hub, hc.core)
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
	// The horizon is the hub's clock less the map's leaf window (an hour), to the second.
	if d := hub.clock().Add(-time.Hour).Sub(st.Horizon); d < 0 || d > 2*time.Second {
		t.Errorf("the leaf's horizon %v is %v below the hub's clock less an hour, want 0 to 2s", st.Horizon, d)
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
	l.restart() // what it was told before is gone with its process: told again on connecting
	h.connect(l, hub)
	h.advance(100 * time.Millisecond)
	if st := l.rep.Status(l.clock()).Hub; st.ReoriginatedSeq != 3 || st.HubSeq != 3 || st.CoreSeq != 3 {
		t.Errorf("the leaf's hub status on connecting again: %+v, want seq 3 re-originated by hub seq 3, at the core", st)
	}
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

// TestHubRefusals: a leaf entry the hub may not write as its own is not re-originated: too
// old for the map's leaf window, of a table the hub does not carry, of a fenced table, too
// large once it carries the leaf block. Each moves the leaf's mark past it (the next entry
// is re-originated), is counted by reason, and is told to the leaf, whose record stays its
// own.
func TestHubRefusals(t *testing.T) {
	for _, c := range []struct {
		reason wire.Code
		setup  func(hc *hubCluster) // before the leaf writes
		write  []wire.Op
	}{
		{replica.LeafTooOld, func(hc *hubCluster) { hc.leaves[0].skew = -2 * time.Hour }, []wire.Op{put("t", "k", "old")}},
		{replica.LeafNotCarried, func(hc *hubCluster) {
			if _, err := hc.core.publish(mapDoc(2, hubWindow+`,"placement":{"p":["C"]}`, "C", "H")); err != nil {
				t.Fatal(err)
			}
		}, []wire.Op{put("p", "k", "v")}},
		{replica.LeafFenced, func(hc *hubCluster) {
			if _, err := hc.core.publish(mapDoc(2, hubWindow+`,"lock_homes":["C"],"fenced_tables":["f"]`, "C", "H")); err != nil {
				t.Fatal(err)
			}
		}, []wire.Op{put("f", "k", "v")}},
		{replica.LeafTooLarge, nil, []wire.Op{put("t", "k", string(make([]byte, 900)))}},
	} {
		t.Run(string(c.reason), func(t *testing.T) {
			hc := hubSetup(t, replica.Config{Write: replica.WriteLimits{MaxTxn: 1000}}, "", "L")
			h, hub, l := hc.h, hc.hub, hc.leaves[0]
			h.disconnect(hc.leafLnk[0])
			if c.reason == replica.LeafTooOld {
				c.setup(hc) // its clock behind by more than the window when it writes
			}
			l.write(c.write...) // offline: under the map it held when it wrote
			l.skew = 0
			if c.setup != nil && c.reason != replica.LeafTooOld {
				c.setup(hc)
			}
			h.advance(200 * time.Millisecond)
			h.connect(l, hub)
			h.advance(200 * time.Millisecond)
			l.write(put("t", "after", "1"))
			h.advance(200 * time.Millisecond)
			if got := hubEntries(t, hub, hub, l); len(got) != 1 || got[2] != 1 {
				t.Errorf("the hub's entries re-originate L's seqs %v, want 2 only", got)
			}
			st := hub.rep.Status(hub.clock()).Leaves
			if hub.rep.Counters().LeafWritesRefused != 1 || len(st.WritesRefusedByReason) != 1 ||
				st.WritesRefusedByReason[0].Code != c.reason || st.WritesRefusedByReason[0].Count != 1 {
				t.Errorf("hub: %d refused, by reason %v; want one %s", hub.rep.Counters().LeafWritesRefused, st.WritesRefusedByReason, c.reason)
			}
			hs := l.rep.Status(l.clock()).Hub
			if hs.ReoriginatedSeq != 2 || hs.Refused != 1 || hs.LastRefusedSeq != 1 || hs.LastRefusedReason != string(c.reason) ||
				l.rep.Counters().HubWritesRefused != 1 {
				t.Errorf("the leaf's hub status: %+v, want seq 1 refused %s and 2 re-originated", hs, c.reason)
			}
			if _, ok := hc.core.get(string(c.write[0].Table), "k"); ok {
				t.Errorf("the refused write reached the core")
			}
			if r, ok := l.get(string(c.write[0].Table), "k"); !ok || r.Origin != l.origin {
				t.Errorf("the leaf lost its refused write: %+v", r)
			}
		})
	}
}

// TestHubGateRefusals: a leaf is refused, with a named code counted by code, by a node
// that takes no leaves (not-a-hub), by a hub at its bound (too-many-leaves), when the map
// names the leaf as a member (leaf-is-member), and while the map has no leaf window
// (no-leaf-window); the leaf's last error names the code.
func TestHubGateRefusals(t *testing.T) {
	for _, c := range []struct {
		code   wire.Code
		hubCfg replica.Config
		extra  string
		leaf   string
	}{
		{wire.CodeTooManyLeaves, replica.Config{MaxLeaves: 1}, "", "L2"},
		{wire.CodeLeafIsMember, replica.Config{}, hubWindow, "M"},
		{wire.CodeNoLeafWindow, replica.Config{}, "-", "L2"},
	} {
		t.Run(string(c.code), func(t *testing.T) {
			var hc *hubCluster
			switch c.code {
			case wire.CodeLeafIsMember:
				hc = hubSetup(t, c.hubCfg, "")
				if _, err := hc.core.publish(mapDoc(2, hubWindow, "C", "H", "M")); err != nil {
					t.Fatal(err)
				}
			case wire.CodeNoLeafWindow:
				hc = hubSetup(t, c.hubCfg, c.extra)
			default:
				hc = hubSetup(t, c.hubCfg, c.extra, "L")
			}
			l := hc.addLeaf(c.leaf, replica.Config{})
			if e := l.rep.LastError("H"); e == nil || e.Err.Code != c.code {
				t.Fatalf("the leaf's last error: %+v, want %s", e, c.code)
			}
			st := hc.hub.rep.Status(hc.hub.clock()).Leaves
			if hc.hub.rep.Counters().LeavesRefused == 0 || len(st.LeavesRefusedByCode) != 1 || st.LeavesRefusedByCode[0].Code != c.code {
				t.Errorf("hub: leaves_refused %d, by code %v; want %s", hc.hub.rep.Counters().LeavesRefused, st.LeavesRefusedByCode, c.code)
			}
		})
	}
	t.Run("not-a-hub", func(t *testing.T) {
		h := newHarness(t)
		p := h.addNode("P", replica.Config{})
		l := h.addNode("L", replica.Config{Hub: "P"})
		l.write(put("t", "k", "v"))
		h.connect(l, p)
		if e := l.rep.LastError("P"); e == nil || e.Err.Code != wire.CodeNotAHub {
			t.Fatalf("the leaf's last error: %+v, want not-a-hub", e)
		}
		if p.rep.Counters().LeavesRefused != 1 || p.rep.Status(p.clock()).Leaves != nil {
			t.Errorf("P: leaves_refused %d; a node that is not a hub reports no leaves", p.rep.Counters().LeavesRefused)
		}
		if _, ok := p.applied()[l.origin]; ok {
			t.Errorf("P took the leaf's origin: %v", p.applied())
		}
	})
}

// TestLeafNeedsLeafCapability: a leaf closes the connection to a hub below version 4
// (no-leaf-capability) before anything crosses it, and refuses any peer but its hub.
func TestLeafNeedsLeafCapability(t *testing.T) {
	h := newHarness(t)
	hub := h.addNode("H", replica.Config{MaxVersion: 3})
	l := h.addNode("L", replica.Config{Hub: "H"})
	l.write(put("t", "k", "v"))
	h.connect(l, hub)
	if e := l.rep.LastError("H"); e == nil || e.Err.Code != wire.CodeNoLeafCapability {
		t.Fatalf("the leaf's last error: %+v, want no-leaf-capability", e)
	}
	if _, ok := hub.applied()[l.origin]; ok {
		t.Fatalf("the version-3 node took the leaf's origin")
	}
	p := h.addNode("P", replica.Config{})
	h.connect(p, l)
	if e := l.rep.LastError("P"); e == nil || e.Err.Code != wire.CodePeerNameMismatch {
		t.Fatalf("the leaf's last error of a peer that dialed it: %+v, want peer-name-mismatch", e)
	}
	if _, ok := p.applied()[l.origin]; ok {
		t.Fatalf("a peer took the leaf's origin")
	}
}

// TestLeafMovesHubs: a leaf that moves from hub H to hub H2, which has applied H's entries,
// resumes above H2's mark of it: H2 re-originates only its new writes, and the core holds
// each leaf write once.
func TestLeafMovesHubs(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "")
	h, c, hub := hc.h, hc.core, hc.hub
	h2 := h.addNode("H2", replica.Config{MaxLeaves: 2})
	h.connect(h2, c)
	if _, err := c.publish(mapDoc(2, hubWindow, "C", "H", "H2")); err != nil {
		t.Fatal(err)
	}
	h.advance(200 * time.Millisecond)
	l := hc.addLeaf("L", replica.Config{})
	for i := range 3 {
		l.write(put("t", "k", string(rune('a'+i))))
	}
	h.advance(300 * time.Millisecond)
	h.disconnect(hc.leafLnk[0])
	l.cfg.Hub = "H2"
	l.restart()
	h.connect(l, h2)
	l.write(put("t", "k", "d"))
	l.write(put("t", "j", "e"))
	h.advance(300 * time.Millisecond)
	if got := hubEntries(t, h2, h2, l); len(got) != 2 || got[4] != 1 || got[5] != 1 {
		t.Errorf("H2's entries re-originate L's seqs %v, want 4 and 5", got)
	}
	if got := hubEntries(t, c, hub, l); len(got) != 3 {
		t.Errorf("H's entries at the core re-originate L's seqs %v, want 1 to 3", got)
	}
	if got := h2.rep.Counters(); got.LeafWritesReoriginated != 2 || got.LeafWritesTwice != 0 {
		t.Errorf("H2: %d re-originated, %d twice; want 2 and 0", got.LeafWritesReoriginated, got.LeafWritesTwice)
	}
	if st := l.rep.Status(l.clock()).Hub; st.Name != "H2" || st.ReoriginatedSeq != 5 || st.CoreSeq != 5 {
		t.Errorf("the leaf's hub status at H2: %+v", st)
	}
	if r, _ := c.get("t", "k"); string(r.Value) != "d" || r.Via != h2.origin {
		t.Errorf("the core's t/k: %+v, want d via H2", r)
	}
}

// TestHubHoldsAheadLeafOnly: a leaf whose clock runs ahead of its hub's past the bound has
// its channel held (status counts it) while the hub's own writes and another leaf's go
// on; once the hub's clock catches up its entry is re-originated above its HLC.
func TestHubHoldsAheadLeafOnly(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L", "L2")
	h, c, hub, l, l2 := hc.h, hc.core, hc.hub, hc.leaves[0], hc.leaves[1]
	l.skew = 2 * time.Second
	l.write(put("t", "ahead", "1"))
	l2.write(put("t", "other", "1"))
	hub.write(put("t", "own", "1"))
	h.advance(300 * time.Millisecond)
	if st := hub.rep.Status(hub.clock()).Leaves; st.Held != 1 {
		t.Errorf("the hub's leaves: %d held, want 1", st.Held)
	}
	if _, ok := c.get("t", "ahead"); ok {
		t.Errorf("the write ahead of the hub's clock reached the core")
	}
	for _, k := range []string{"other", "own"} {
		if _, ok := c.get("t", k); !ok {
			t.Errorf("t/%s did not reach the core while the leaf ahead was held", k)
		}
	}
	h.advance(2 * time.Second)
	r, ok := c.get("t", "ahead")
	if !ok || r.Origin != l.origin || r.ViaHLC <= r.HLC {
		t.Errorf("t/ahead at the core after the hold: %+v (found %v)", r, ok)
	}
	if st := hub.rep.Status(hub.clock()).Leaves; st.Held != 0 {
		t.Errorf("the hub's leaves: %d held after the hold, want 0", st.Held)
	}
}

// TestHubAcksOnceSynced: a hub that holds unsynced entries back acknowledges a leaf's entry,
// and tells the leaf it re-originated it, only once the entry re-originating it is synced
// (persist before ack): a power loss must not lose a write the leaf was told is safe.
func TestHubAcksOnceSynced(t *testing.T) {
	hc := hubSetup(t, replica.Config{HoldUnsynced: true}, "", "L")
	h, c, hub, l := hc.h, hc.core, hc.hub, hc.leaves[0]
	l.write(put("t", "k", "v"))
	h.advance(200 * time.Millisecond)
	if got := hubEntries(t, hub, hub, l); got[1] != 1 {
		t.Fatalf("the hub's entries re-originate L's seqs %v, want 1", got)
	}
	if got := h.acked("H", "L", l.origin); got != 0 {
		t.Errorf("the hub acknowledged L's seq %d before its entry was synced", got)
	}
	if st := l.rep.Status(l.clock()).Hub; st.ReoriginatedSeq != 0 {
		t.Errorf("the leaf was told seq %d re-originated before it was synced", st.ReoriginatedSeq)
	}
	if _, ok := c.get("t", "k"); ok {
		t.Errorf("the core has the unsynced entry")
	}
	h.check(hub, hub.rep.Synced(hub.clock(), hub.rep.SyncPoint()))
	h.advance(200 * time.Millisecond)
	if got := h.acked("H", "L", l.origin); got != 1 {
		t.Errorf("the hub acknowledged L's seq %d once synced, want 1", got)
	}
	if st := l.rep.Status(l.clock()).Hub; st.ReoriginatedSeq != 1 || st.HubSeq != 1 || st.CoreSeq != 1 {
		t.Errorf("the leaf's hub status once synced: %+v", st)
	}
}

// TestLeafRetentionHoldsToCore: a leaf's retention keeps its own entries past RetainAge
// until its hub tells it the core has them (LEAFSTATE's core seq), not once the hub
// acknowledged them: then it purges them.
func TestLeafRetentionHoldsToCore(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "")
	h, hub := hc.h, hc.hub
	l := hc.addLeaf("L", replica.Config{RetainAge: 2 * time.Second})
	hc.coreLnk.hold = true // the core applies nothing of the hub's meanwhile
	writeN(l, 0, 5)
	h.advance(3 * time.Second)
	if got := h.acked("H", "L", l.origin); got != 5 {
		t.Fatalf("the hub acknowledged L up to %d, want 5", got)
	}
	if st := l.rep.Status(l.clock()).Hub; st.ReoriginatedSeq != 5 || st.CoreSeq != 0 {
		t.Fatalf("the leaf's hub status while the core is cut off: %+v", st)
	}
	l.wantFloor(l, 0) // past RetainAge, acknowledged, and kept: the core has none of it
	hc.coreLnk.hold = false
	h.advance(time.Second)
	if st := l.rep.Status(l.clock()).Hub; st.CoreSeq != 5 {
		t.Fatalf("the leaf's hub status once the core caught up: %+v", st)
	}
	l.wantFloor(l, 4) // the head stays
	_ = hub
}

// TestLeafNoLocks: a leaf takes no locks: a lock request, a tokened write and a write of a
// fenced table are refused leaf-no-locks, nothing written; a transaction that fits MaxTxn
// but not with the leaf block its hub adds is refused as too large.
func TestLeafNoLocks(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, hubWindow+`,"lock_homes":["C"],"fenced_tables":["f"]`)
	l := hc.addLeaf("L", replica.Config{Write: replica.WriteLimits{MaxTxn: 1000}})
	if a, ok := l.answerOf(l.acquire("k", time.Second, 0)); !ok || a.Code != replica.CodeLeafNoLocks {
		t.Errorf("a lock request at the leaf: %+v (answered %v), want leaf-no-locks", a, ok)
	}
	if _, err := l.rep.Write(l.clock(), []wire.Op{put("t", "a", "1"), put("f", "k", "v")}); mapCode(err) != replica.CodeLeafNoLocks {
		t.Errorf("a write of a fenced table at the leaf: %v, want leaf-no-locks", err)
	}
	tok := wire.Token{Generation: 1, Home: hc.core.origin, Counter: 1}
	if _, err := l.rep.WriteTokened(l.clock(), tok, []wire.Op{put("t", "k", "v")}); mapCode(err) != replica.CodeLeafNoLocks {
		t.Errorf("a tokened write at the leaf: %v, want leaf-no-locks", err)
	}
	big := put("t", "big", string(make([]byte, 1000-wire.LeafBlockSize-50)))
	if _, err := l.rep.Write(l.clock(), []wire.Op{big}); !errors.Is(err, replica.ErrTxnTooLarge) {
		t.Errorf("a write that fits MaxTxn only without the leaf block: %v, want too large", err)
	}
	if got := l.applied()[l.origin]; got != 0 {
		t.Errorf("the leaf wrote %d entries, want none", got)
	}
}

// mapCode is the code of a *clustermap.Error (a write's refusal by the map), else "".
func mapCode(err error) wire.Code {
	var me *clustermap.Error
	if errors.As(err, &me) {
		return wire.Code(me.Code)
	}
	return ""
}

// TestHubGateShutHolds: while a later map shuts the gate (a member of unknown version),
// a connected leaf's channel is held: nothing is re-originated, status counts the hold;
// once a map opens it again, the leaf's waiting entries are re-originated.
func TestHubGateShutHolds(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L")
	h, c, hub, l := hc.h, hc.core, hc.hub, hc.leaves[0]
	if _, err := c.publish(mapDoc(2, hubWindow, "C", "H", "D")); err != nil {
		t.Fatal(err)
	}
	h.advance(200 * time.Millisecond)
	l.write(put("t", "k", "v"))
	h.advance(200 * time.Millisecond)
	if got := hubEntries(t, hub, hub, l); len(got) != 0 {
		t.Errorf("the hub re-originated %v while its gate was shut", got)
	}
	if st := hub.rep.Status(hub.clock()).Leaves; st.Held != 1 || st.Connected != 1 {
		t.Errorf("the hub's leaves while the gate is shut: %+v, want the leaf connected and held", st)
	}
	if _, err := c.publish(mapDoc(3, hubWindow, "C", "H")); err != nil {
		t.Fatal(err)
	}
	h.advance(300 * time.Millisecond)
	if got := hubEntries(t, hub, hub, l); len(got) != 1 || got[1] != 1 {
		t.Errorf("the hub's entries re-originate L's seqs %v once the gate opened, want 1", got)
	}
	if st := hub.rep.Status(hub.clock()).Leaves; st.Held != 0 {
		t.Errorf("the hub's leaves once the gate opened: %+v, want none held", st)
	}
}

// TestHubDropsMarksAfterLeafHold: a hub forgets the mark of a leaf not seen for LeafHold,
// and keeps a connected leaf's.
func TestHubDropsMarksAfterLeafHold(t *testing.T) {
	hc := hubSetup(t, replica.Config{LeafHold: 2 * time.Second}, "", "L", "L2")
	h, hub, l, l2 := hc.h, hc.hub, hc.leaves[0], hc.leaves[1]
	l.write(put("t", "a", "1"))
	l2.write(put("t", "b", "1"))
	h.advance(200 * time.Millisecond)
	if st := hub.rep.Status(hub.clock()).Leaves; st.Marks != 2 {
		t.Fatalf("the hub keeps %d marks, want 2", st.Marks)
	}
	h.disconnect(hc.leafLnk[0])
	h.advance(time.Second)
	if st := hub.rep.Status(hub.clock()).Leaves; st.Marks != 2 {
		t.Errorf("the hub keeps %d marks before the leaf hold passed, want 2", st.Marks)
	}
	h.advance(2 * time.Second)
	st := hub.rep.Status(hub.clock()).Leaves
	if st.Marks != 1 {
		t.Errorf("the hub keeps %d marks after the leaf hold passed, want L2's only", st.Marks)
	}
	if _, ok, _ := hub.store.LeafMark(l2.origin); !ok {
		t.Errorf("the connected leaf's mark was dropped")
	}
}

// TestHubAsksAgainForALostLeafEntry: a leaf's last entry lost on an open connection (the
// leaf's heads advertise it, nothing more comes) is asked for again after the stall timeout
// and re-originated once, as routing does for an origin's lost tail; a leaf's origin is no
// origin at the hub, so routing's own stall rule does not see it.
func TestHubAsksAgainForALostLeafEntry(t *testing.T) {
	hc := hubSetup(t, replica.Config{}, "", "L")
	h, c, hub, l := hc.h, hc.core, hc.hub, hc.leaves[0]
	l.write(put("t", "a", "1"))
	h.advance(200 * time.Millisecond)
	dropped := h.dropOnce(l, hub, l, 2)
	l.write(put("t", "b", "2"))
	h.advance(200 * time.Millisecond)
	if !*dropped {
		t.Fatal("the leaf's entry 2 was not sent")
	}
	if got := hubEntries(t, hub, hub, l); got[2] != 0 {
		t.Fatalf("the hub re-originated the lost entry before asking again: %v", got)
	}
	h.advance(replica.DefaultStallTimeout + 200*time.Millisecond)
	for _, n := range []*node{hub, c} {
		if got := hubEntries(t, n, hub, l); len(got) != 2 || got[1] != 1 || got[2] != 1 {
			t.Errorf("%s: hub entries re-originating L's seqs: %v, want 1 and 2 once each", n.name, got)
		}
	}
}
