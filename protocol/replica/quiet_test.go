package replica_test

import (
	"slices"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// The quiet control plane on version-4 links (quiet.go): QUIET, heads only where needed,
// heads implied by DATA, holds released, lag kept honest.

// threeNodes is a harness with nodes A, B and C of one configuration, not yet connected.
func threeNodes(t *testing.T, cfg replica.Config) (h *harness, a, b, c *node) {
	t.Helper()
	h = newHarness(t)
	return h, h.addNode("A", cfg), h.addNode("B", cfg), h.addNode("C", cfg)
}

// headFrames counts the HEADS frames from sent to that advertise origin o.
func (h *harness) headFrames(from, to string, o wire.OriginID) int {
	n := 0
	for _, f := range h.frames {
		if hd, ok := f.body.(*wire.Heads); ok && f.from == from && f.to == to &&
			slices.ContainsFunc(hd.Heads, func(x wire.Head) bool { return x.Origin == o }) {
			n++
		}
	}
	return n
}

// quietFrames lists the QUIET frames from sent to, in order.
func (h *harness) quietFrames(from, to string) []*wire.Quiet {
	var out []*wire.Quiet
	for _, f := range h.frames {
		if q, ok := f.body.(*wire.Quiet); ok && f.from == from && f.to == to {
			out = append(out, q)
		}
	}
	return out
}

// toldQuiet is the quiet set from told to, by the QUIET frames recorded.
func (h *harness) toldQuiet(from, to string) map[wire.OriginID]bool {
	set := map[wire.OriginID]bool{}
	for _, q := range h.quietFrames(from, to) {
		for _, o := range q.Loud {
			delete(set, o)
		}
		for _, o := range q.Quiet {
			set[o] = true
		}
	}
	return set
}

// TestQuietMesh: in a triangle every node takes every origin from its own node, so each
// tells each peer the third origin is quiet (never the peer's own), and no node advertises
// to a peer the third node's origin: A's writes reach B and C with no HEADS of A between B
// and C, and none from A either once its first went (DATA is the head), while B's and C's
// status show A's head exact.
func TestQuietMesh(t *testing.T) {
	noAE := replica.Config{AntiEntropyInterval: -1} // no ranges asked: the heads counted are advertisement's only
	h, a, b, c := threeNodes(t, noAE)
	h.connect(b, a)
	h.connect(c, a)
	h.connect(c, b)
	a.write(put("t", "a0", "v"))
	h.advance(time.Second)
	for _, p := range []struct {
		from, to string
		want     *node
	}{{"A", "B", c}, {"A", "C", b}, {"B", "A", c}, {"B", "C", a}, {"C", "A", b}, {"C", "B", a}} {
		if got := h.toldQuiet(p.from, p.to); len(got) != 1 || !got[p.want.origin] {
			t.Errorf("%s's quiet set told %s = %v, want %s's origin only", p.from, p.to, got, p.want.name)
		}
	}
	fromA := h.headFrames("A", "B", a.origin) + h.headFrames("A", "C", a.origin)
	for i := range 5 {
		a.write(put("t", string(rune('k'+i)), "v"))
		h.advance(300 * time.Millisecond)
	}
	h.advance(2 * time.Second)
	if n := h.headFrames("B", "C", a.origin) + h.headFrames("C", "B", a.origin); n != 0 {
		t.Errorf("%d HEADS of A between B and C, which both take A from A", n)
	}
	if n := h.headFrames("A", "B", a.origin) + h.headFrames("A", "C", a.origin); n != fromA {
		t.Errorf("A sent %d HEADS of its origin to its subscribers while they kept up, want none", n-fromA)
	}
	for _, n := range []*node{b, c} {
		if st := n.originStatus(a); st.AppliedSeq != 6 || st.HeadSeq != 6 || st.SourcePeer != "A" {
			t.Errorf("%s's status of A = %+v, want applied and head 6 from A", n.name, st)
		}
	}
}

// TestQuietFirstAdvertisementWaits: a node advertises nothing to a version-4 peer before
// the peer's first QUIET; once it comes (the connection made again), the full
// advertisement goes.
func TestQuietFirstAdvertisementWaits(t *testing.T) {
	h, a, b, c := threeNodes(t, replica.Config{})
	h.connect(b, a)
	a.write(put("t", "a", "v"))
	b.write(put("t", "b", "v"))
	h.pump()
	h.drop = func(from, to string, f wire.Decoded) bool {
		_, quiet := f.Value.(*wire.Quiet)
		return quiet && from == "C" && to == "B"
	}
	cb := h.connect(c, b)
	h.advance(time.Second)
	for _, o := range []*node{a, b} {
		if _, ever := h.headsSent("B", "C", o.origin); ever {
			t.Errorf("B advertised %s's origin to C before C's first QUIET", o.name)
		}
	}
	h.drop = nil
	h.disconnect(cb)
	h.connect(c, b)
	h.pump()
	for _, o := range []*node{a, b} {
		if now, _ := h.headsSent("B", "C", o.origin); !now {
			t.Errorf("B does not advertise %s's origin to C after C's first QUIET", o.name)
		}
	}
	if st := c.originStatus(a); st.AppliedSeq != 1 || st.SourcePeer != "B" {
		t.Errorf("C's status of A = %+v, want applied 1 from B", st)
	}
}

// TestQuietLoudAtOnce: B loses its direct source of A: it tells C at once that A is loud,
// C advertises its head of A to B at once, and B takes A from C within the heads interval
// of A's next write (the move delay is not waited for: B has no source).
func TestQuietLoudAtOnce(t *testing.T) {
	h, a, b, c := threeNodes(t, replica.Config{})
	ba := h.connect(b, a)
	h.connect(c, a)
	h.connect(c, b)
	writeN(a, 0, 2)
	h.advance(time.Second)
	if got := h.toldQuiet("B", "C"); !got[a.origin] {
		t.Fatalf("B's quiet set told C = %v, want A's origin in it", got)
	}
	if _, ever := h.headsSent("C", "B", a.origin); ever {
		t.Fatal("C advertised A to B, which takes A from A")
	}
	h.disconnect(ba) // no time passes from here to the checks below
	qs := h.quietFrames("B", "C")
	if last := qs[len(qs)-1]; !slices.Contains(last.Loud, a.origin) {
		t.Errorf("B's last QUIET to C = %+v, want A loud", last)
	}
	if got := h.lastHead("C", "B", a.origin); got != 2 {
		t.Errorf("C's head of A to B once B lost A = %d, want 2 at once", got)
	}
	lost := h.now
	a.write(put("t", "k", "v"))
	h.pump()
	h.tickDeadlines(lost.Add(replica.DefaultHeadsInterval))
	if st := b.originStatus(a); st.AppliedSeq != 3 || st.SourcePeer != "C" {
		t.Errorf("B's status of A a heads interval after A's write = %+v, want applied 3 from C", st)
	}
}

// TestQuietSubscriberHeads: in a chain A - B - C, C takes A from B, which takes it from A:
// B sends C no HEADS of A while C keeps up (each entry is the head, and C's status shows
// it exact); an entry lost at the tail makes C's cursor late, and B's head of A goes after
// a heads round of it, so that C's stall rule asks again.
func TestQuietSubscriberHeads(t *testing.T) {
	h, a, b, c := threeNodes(t, replica.Config{})
	h.connect(b, a)
	h.connect(c, b)
	a.write(put("t", "k0", "v"))
	h.advance(time.Second)
	if st := c.originStatus(a); st.SourcePeer != "B" || st.AppliedSeq != 1 {
		t.Fatalf("C's status of A = %+v, want applied 1 from B", st)
	}
	before := h.headFrames("B", "C", a.origin)
	for i := range 4 {
		a.write(put("t", string(rune('k'+i)), "v"))
		h.advance(400 * time.Millisecond)
	}
	h.advance(time.Second)
	if n := h.headFrames("B", "C", a.origin) - before; n != 0 {
		t.Errorf("B sent C %d HEADS of A while C kept up, want none", n)
	}
	if st := c.originStatus(a); st.AppliedSeq != 5 || st.HeadSeq != 5 || st.LagSeq != 0 {
		t.Errorf("C's status of A = %+v, want applied and head 5", st)
	}

	dropped := h.dropOnce(b, c, a, 6)
	a.write(put("t", "lost", "v"))
	h.pump()
	if !*dropped {
		t.Fatal("entry 6 was not sent")
	}
	h.drop = nil
	if got := h.lastHead("B", "C", a.origin); got >= 6 {
		t.Errorf("B's head of A to C at once = %d, want it to wait for C's cursor", got)
	}
	h.advance(2*replica.DefaultHeadsInterval + advanceStep)
	if got := h.lastHead("B", "C", a.origin); got != 6 {
		t.Errorf("B's head of A to C two heads rounds after entry 6 = %d, want 6 (C's cursor is late)", got)
	}
	if st := c.originStatus(a); st.AppliedSeq != 5 || st.HeadSeq != 6 {
		t.Errorf("C's status of A with entry 6 lost = %+v, want applied 5, head 6", st)
	}
	h.advance(replica.DefaultStallTimeout)
	if st := c.originStatus(a); st.AppliedSeq != 6 || st.SourcePeer != "B" {
		t.Errorf("C's status of A after the stall timeout = %+v, want applied 6 from B", st)
	}
	if got := c.rep.Counters(); got.GapsDetected != 1 || got.ResendsRequested != 1 {
		t.Errorf("C's counters: %d gaps, %d resends; want 1 and 1", got.GapsDetected, got.ResendsRequested)
	}
}

// TestQuietLagBehindASlowRelay: C takes A from the relay B, whose entries of A stop
// reaching it; D, which also takes A from A and links C, advertises A's head to C (A is
// loud at C: its source is a relay), so that C's status shows the lag within a heads round,
// before B's own head (C's cursor late) could tell it.
func TestQuietLagBehindASlowRelay(t *testing.T) {
	h, a, b, c := threeNodes(t, replica.Config{})
	d := h.addNode("D", replica.Config{})
	h.connect(b, a)
	h.connect(d, a)
	h.connect(c, b)
	h.connect(c, d)
	a.write(put("t", "k0", "v"))
	h.advance(time.Second)
	if st := c.originStatus(a); st.SourcePeer != "B" || st.AppliedSeq != 1 {
		t.Fatalf("C's status of A = %+v, want applied 1 from B", st)
	}
	if got := h.toldQuiet("C", "D"); got[a.origin] {
		t.Fatal("C told D that A is quiet; it takes A from a relay")
	}
	h.drop = func(from, to string, f wire.Decoded) bool {
		o, seq, ok := dataSeq(f)
		return ok && from == "B" && to == "C" && o == a.origin && seq >= 2
	}
	a.write(put("t", "k1", "v"))
	a.write(put("t", "k2", "v"))
	h.pump()
	wrote := h.now
	h.tickDeadlines(wrote.Add(replica.DefaultHeadsInterval))
	if got := h.lastHead("B", "C", a.origin); got >= 3 {
		t.Fatalf("B's head of A to C = %d: this test wants D's head first", got)
	}
	if st := c.originStatus(a); st.AppliedSeq != 1 || st.HeadSeq != 3 || st.LagSeq != 2 || st.SourcePeer != "B" {
		t.Errorf("C's status of A behind the slow relay = %+v, want applied 1, head 3 (D's), lag 2, source B", st)
	}
}

// TestQuietHoldReleased: B holds A's entries for C while C takes A from it; once C takes A
// from A itself it unsubscribes, and B, which told C that A is quiet (so C advertises A to
// B no more, and C's hold would not advance), releases C's hold on A: B's retention purges
// A's log past C's old position and holds nothing back for C.
func TestQuietHoldReleased(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: time.Minute})
	c := h.addNode("C", replica.Config{})
	h.connect(b, a)
	cb := h.connect(c, b)
	writeN(a, 0, 2)
	h.advance(time.Second)
	if st := c.originStatus(a); st.SourcePeer != "B" || st.AppliedSeq != 2 {
		t.Fatalf("C's status of A = %+v, want applied 2 from B", st)
	}
	h.connect(c, a) // C takes A from A: it unsubscribes A from B
	if st := c.originStatus(a); st.SourcePeer != "A" {
		t.Fatalf("C's source of A = %q, want A", st.SourcePeer)
	}
	h.disconnect(cb) // whatever C would still tell B, it cannot
	h.connect(c, b)
	writeN(a, 2, 6)
	h.advance(4 * time.Second)
	if entries, bytes := b.rep.RetentionHeld("C"); entries != 0 || bytes != 0 {
		t.Errorf("C holds %d entries (%d bytes) back on B, want none: its hold on A was released", entries, bytes)
	}
	b.wantFloor(a, 7) // all but the head
	holds, _ := b.store.Holds()
	for _, hd := range holds {
		if hd.Peer == "C" && hd.Origin == a.origin {
			t.Errorf("B's store keeps C's hold on A: %+v", hd)
		}
	}
}

// TestQuietHoldReleasedWhenToldQuiet: C took A from B, then from A itself; B, which takes
// A from the relay D, kept C's hold, advanced by C's heads of A. Once B takes A from A too
// it tells C that A is quiet, C advertises A to it no more, and B releases C's hold on A.
func TestQuietHoldReleasedWhenToldQuiet(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: time.Minute})
	c := h.addNode("C", replica.Config{})
	d := h.addNode("D", replica.Config{})
	h.connect(d, a)
	h.connect(b, d)
	h.connect(c, b)
	writeN(a, 0, 2)
	h.advance(time.Second)
	if st := c.originStatus(a); st.SourcePeer != "B" || st.AppliedSeq != 2 {
		t.Fatalf("C's status of A = %+v, want applied 2 from B", st)
	}
	h.connect(c, a)
	h.connect(b, a)
	h.advance(time.Second)
	if st, told := b.originStatus(a), h.toldQuiet("B", "C"); st.SourcePeer != "A" || !told[a.origin] || c.originStatus(a).SourcePeer != "A" {
		t.Fatalf("B's source of A %q, C's %q, B's quiet set told C %v; want A, A, A's origin in it", st.SourcePeer, c.originStatus(a).SourcePeer, told)
	}
	writeN(a, 2, 6)
	h.advance(4 * time.Second)
	if entries, bytes := b.rep.RetentionHeld("C"); entries != 0 || bytes != 0 {
		t.Errorf("C holds %d entries (%d bytes) back on B, want none: its hold on A was released", entries, bytes)
	}
	b.wantFloor(a, 7)
}

// TestQuietHoldKeptForSubscriber: C takes A from B, which takes it from the relay D; once
// B takes A from A itself it tells C that A is quiet while C still takes A from it: C's
// hold on A stays, and holds A's entries back while C is away.
func TestQuietHoldKeptForSubscriber(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{RetainAge: time.Second, RetainHold: time.Minute})
	c := h.addNode("C", replica.Config{})
	d := h.addNode("D", replica.Config{})
	h.connect(d, a)
	h.connect(b, d)
	cb := h.connect(c, b)
	writeN(a, 0, 2)
	h.advance(time.Second)
	h.connect(b, a)
	h.advance(time.Second)
	if got := h.toldQuiet("B", "C"); !got[a.origin] || c.originStatus(a).SourcePeer != "B" || b.originStatus(a).SourcePeer != "A" {
		t.Fatalf("B's quiet set told C = %v, C's source of A %q, B's %q; want A quiet, B, A", got,
			c.originStatus(a).SourcePeer, b.originStatus(a).SourcePeer)
	}
	h.disconnect(cb)
	writeN(a, 2, 6)
	h.advance(3 * time.Second)
	if entries, _ := b.rep.RetentionHeld("C"); entries != 5 {
		t.Errorf("C holds %d entries back on B, want 5 (3 to 7; 8 is the head)", entries)
	}
	b.wantFloor(a, 2)
}

// TestQuietMeshRepairsALostRecord: in a triangle each node takes every origin from its own
// node, so no peer advertises to another the third origin; a record a node lost must come
// back from a peer's answer to its anti-entropy range, as on version 3. On version 4 it
// does not yet (docs/design.md §28.4): every peer looks behind on the origins both take
// from their own nodes, and the version-4 case is skipped until that is solved.
func TestQuietMeshRepairsALostRecord(t *testing.T) {
	for _, v := range []uint64{3, 4} {
		if v == 4 {
			t.Skip("version 4: a quiet mesh shows no peer's position of the origins both take from their own nodes, so anti-entropy repairs no record a node lacks (docs/design.md §28.4)")
		}
		cfg := replica.Config{AntiEntropyInterval: 10 * time.Millisecond, MaxVersion: v}
		h, a, b, c := threeNodes(t, cfg)
		h.connect(b, a)
		h.connect(c, a)
		h.connect(c, b)
		for _, n := range []*node{a, b, c} {
			n.write(put("t", "x", n.name))
		}
		h.advance(2 * time.Second) // every QUIET went: no head of a third origin goes from here
		a.write(put("t", "k", "1"))
		c.write(put("t", "j", "1"))
		b.write(put("t", "i", "1"))
		h.advance(2 * time.Second)
		lost, _ := b.get("t", "k")
		b.store.Corrupt([]byte("t"), []byte("k"), nil)
		h.advance(3 * time.Second)
		if r, ok := b.get("t", "k"); !ok || r.HLC != lost.HLC || b.rep.Counters().AntiEntropyPeerBehind != 0 {
			t.Errorf("version %d: B's lost t/k = %+v (held %v), %d records held by a peer behind; want it back, none",
				v, r, ok, b.rep.Counters().AntiEntropyPeerBehind)
		}
	}
}

// membersOf lists, in order, the entries of member name in the MEMBERS frames from sent
// to.
func (h *harness) membersOf(from, to, name string) []wire.Member {
	var out []wire.Member
	for _, f := range h.frames {
		if m, ok := f.body.(*wire.Members); ok && f.from == from && f.to == to {
			for _, e := range m.Entries {
				if e.Name == name {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// TestQuietMembers: in a triangle, after its greeting (every entry it held when the
// connection opened), B passes C no member entry of A while C takes A from A itself (A
// sends C its own entry as it changes), where before every node passed every other node's
// entry to every peer; once C loses A and goes loud, B sends C A's latest entry at once.
func TestQuietMembers(t *testing.T) {
	h, a, b, c := threeNodes(t, replica.Config{})
	h.connect(b, a)
	ca := h.connect(c, a)
	h.connect(c, b)
	writeN(a, 0, 1)
	h.advance(time.Second)
	greeted := len(h.membersOf("B", "C", "A")) // B's greeting: every entry it held then
	if _, err := a.publish(mapDoc(1, "", "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	if got := a.rep.MapGeneration() + b.rep.MapGeneration() + c.rep.MapGeneration(); got != 3 {
		t.Fatalf("the map's generations on A, B and C add up to %d, want 3", got)
	}
	if got := h.membersOf("B", "C", "A")[greeted:]; len(got) != 0 {
		t.Errorf("B passed C A's entries %+v; C takes A from A", got)
	}
	if got := h.membersOf("A", "C", "A"); len(got) == 0 || got[len(got)-1].Generation != 1 {
		t.Fatalf("A's own entries to C = %+v, want its last at generation 1", got)
	}
	h.disconnect(ca)
	got := h.membersOf("B", "C", "A")[greeted:]
	if len(got) != 1 || got[0].Generation != 1 {
		t.Errorf("B's entries of A to C once C went loud on A = %+v, want A's, at generation 1, once", got)
	}
}
