package replica_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestChainRelay: A-B-C, C never connected to A. Everything A writes reaches C through B,
// with C's status naming B as A's source and nothing re-delivered.
func TestChainRelay(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{})
	h.connect(a, b)
	h.connect(b, c)
	const n = 7
	for i := range n {
		if seq := a.write(put("t", fmt.Sprint("k", i), fmt.Sprint("v", i))); seq != uint64(i+1) {
			t.Fatalf("write %d: seq %d", i, seq)
		}
		h.pump()
	}
	h.advance(3 * time.Second)

	got := c.originStatus(a)
	want := replica.OriginStatus{Origin: a.origin, Name: "A", AppliedSeq: n, HeadSeq: n, LagSeq: 0, LagMs: 0,
		SourcePeer: "B", SourceChanges: 0, LogBytes: c.logBytes(a), Health: replica.HealthHealthy}
	if got != want {
		t.Errorf("C's status of A = %+v\nwant %+v", got, want)
	}
	if got := b.originStatus(a); got.SourcePeer != "A" || got.AppliedSeq != n || got.SourceChanges != 0 {
		t.Errorf("B's status of A = %+v, want source A, applied %d", got, n)
	}
	if got := a.originStatus(a); got.SourcePeer != "" || got.AppliedSeq != n {
		t.Errorf("A's status of itself = %+v, want no source, applied %d", got, n)
	}
	st := c.rep.Status(c.clock())
	if len(st.Peers) != 1 || st.Peers[0].Name != "B" || st.Peers[0].Version != 4 || st.Peers[0].State != "streaming" || !st.Peers[0].Connected {
		t.Errorf("C's peers = %+v, want only B, streaming version 4", st.Peers)
	}
	if st.Node.Name != "C" || st.Node.Origin != c.origin || st.Node.ProtocolMin != 1 || st.Node.ProtocolMax != 4 || !st.Node.Authenticated {
		t.Errorf("C's node status = %+v", st.Node)
	}
	wantCounters(t, c, replica.Counters{TxnsApplied: n})
	wantCounters(t, b, replica.Counters{TxnsApplied: n})
	// The origin counts its own writes as applied transactions.
	wantCounters(t, a, replica.Counters{TxnsApplied: n})
	for i := range n {
		r, ok := c.get("t", fmt.Sprint("k", i))
		if !ok || string(r.Value) != fmt.Sprint("v", i) || r.Origin != a.origin {
			t.Errorf("C: k%d = %+v, %v", i, r, ok)
		}
	}
	sameDigest(t, "t", a, b, c)
	if n, _ := c.digest("t"); n != 7 {
		t.Errorf("C holds %d live records, want 7", n)
	}
	// C's moves: the first source of A (B) and of B (B), none counted.
	for _, m := range c.takeMoves() {
		if m.Reason != replica.ReasonFirst || m.To != "B" || m.From != "" {
			t.Errorf("C: unexpected move %+v", m)
		}
	}
}

// TestRestartResumes: a replica rebuilt with replica.New on the same store resumes with
// the same vector, continues its own log at n+1 chained to entry n with an HLC above every
// one it holds (even with its clock set back), and re-joins without duplicates.
func TestRestartResumes(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	l := h.connect(a, b)
	for i := range 3 {
		a.write(put("t", fmt.Sprint("a", i), "x"))
	}
	a.skew = 50 * time.Millisecond // A's clock is ahead: B must stay above A's timestamps
	for i := range 2 {
		b.write(put("t", fmt.Sprint("b", i), "y"))
	}
	a.write(put("t", "a3", "x"))
	a.skew = 0
	h.pump()
	h.disconnect(l)

	before := b.rep.Vector()
	_, last := b.entry(a, 4)
	b.restart()
	after := b.rep.Vector()
	if !slices.Equal(before, after) {
		t.Errorf("vector after restart = %+v\nwant %+v", after, before)
	}
	if got := b.originStatus(a); got.AppliedSeq != 4 || got.Name != "A" || got.SourcePeer != "" || got.SourceChanges != 0 {
		t.Errorf("B's status of A after restart = %+v", got)
	}
	if got := b.originStatus(b); got.AppliedSeq != 2 || got.Name != "B" {
		t.Errorf("B's status of itself after restart = %+v", got)
	}
	if got := b.rep.Counters(); got != (replica.Counters{}) {
		t.Errorf("counters after restart = %+v, want zero", got)
	}

	b.skew = -10 * time.Second // the clock went back across the restart
	if seq := b.write(put("t", "b2", "z")); seq != 3 {
		t.Fatalf("first write after restart: seq %d, want 3", seq)
	}
	raw2, _ := b.entry(b, 2)
	_, v3 := b.entry(b, 3)
	if v3.Prev != sha256.Sum256(raw2) {
		t.Errorf("entry 3 Prev = %x, want sha256 of entry 2 %x", v3.Prev, sha256.Sum256(raw2))
	}
	if v3.HLC != last.HLC+1 {
		t.Errorf("entry 3 HLC = %v (wall %d logical %d), want the successor of A's newest %d/%d",
			v3.HLC, v3.HLC.WallMillis(), v3.HLC.Logical(), last.HLC.WallMillis(), last.HLC.Logical())
	}
	b.skew = 0

	h.connect(a, b)
	a.write(put("t", "a4", "x"))
	h.pump()
	h.advance(2 * time.Second)
	if got := a.applied(); got[b.origin] != 3 || got[a.origin] != 5 {
		t.Errorf("A's vector = %v", got)
	}
	if got := b.applied(); got[b.origin] != 3 || got[a.origin] != 5 {
		t.Errorf("B's vector = %v", got)
	}
	wantCounters(t, b, replica.Counters{TxnsApplied: 2}) // B's own entry 3 and A's entry 5
	if got := a.rep.Counters(); got.DuplicatesReceived != 0 {
		t.Errorf("A received duplicates: %+v", got)
	}
	sameDigest(t, "t", a, b)
	if n, _ := b.digest("t"); n != 8 {
		t.Errorf("B holds %d live records, want 8", n)
	}
}

// TestVersion1Fallback: a node run with MaxVersion 1 talks version 1 to current nodes,
// in both directions and as a relay between two current nodes.
func TestVersion1Fallback(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{MaxVersion: 1})
	c := h.addNode("C", replica.Config{})
	h.connect(a, b)
	for _, n := range []*node{a, b} {
		other := map[string]string{"A": "B", "B": "A"}[n.name]
		if p := n.peerStatus(other); p.Version != 1 || p.State != "streaming" || !p.Connected {
			t.Errorf("%s's peer %s = version %d state %s connected %v, want version 1 streaming", n.name, other, p.Version, p.State, p.Connected)
		}
	}
	if st := b.rep.Status(b.clock()); st.Node.ProtocolMin != 1 || st.Node.ProtocolMax != 1 {
		t.Errorf("B's protocol range = %d..%d, want 1..1", st.Node.ProtocolMin, st.Node.ProtocolMax)
	}
	a.write(put("t", "from-a", "1"))
	b.write(put("t", "from-b", "2"))
	h.pump()
	h.advance(time.Second)
	for _, n := range []*node{a, b} {
		if r, ok := n.get("t", "from-a"); !ok || string(r.Value) != "1" {
			t.Errorf("%s: from-a = %+v %v", n.name, r, ok)
		}
		if r, ok := n.get("t", "from-b"); !ok || string(r.Value) != "2" {
			t.Errorf("%s: from-b = %+v %v", n.name, r, ok)
		}
	}

	// The relay: A (v2) - B (v1) - C (v2).
	h.connect(b, c)
	if p := c.peerStatus("B"); p.Version != 1 {
		t.Errorf("C's peer B version %d, want 1", p.Version)
	}
	for i := range 3 {
		a.write(put("t", fmt.Sprint("a", i), "x"))
		c.write(put("t", fmt.Sprint("c", i), "y"))
		h.pump()
	}
	h.advance(2 * time.Second)
	want := map[wire.OriginID]uint64{a.origin: 4, b.origin: 1, c.origin: 3}
	for _, n := range []*node{a, b, c} {
		if got := n.applied(); !maps.Equal(got, want) {
			t.Errorf("%s's vector = %v, want %v", n.name, got, want)
		}
	}
	ca, ha := a.digest("t")
	for _, n := range []*node{b, c} {
		if cn, hn := n.digest("t"); cn != ca || hn != ha {
			t.Errorf("%s digest %d %s, A %d %s", n.name, cn, hn, ca, ha)
		}
	}
	if ca != 8 {
		t.Errorf("A holds %d records, want 8", ca)
	}
	// Over version 1 the origin's source is the legacy peer that delivered its entries.
	if got := c.originStatus(a); got.SourcePeer != "B" || got.AppliedSeq != 4 || got.LagSeq != 0 {
		t.Errorf("C's status of A = %+v, want source B applied 4", got)
	}
	if got := a.originStatus(c); got.SourcePeer != "B" || got.AppliedSeq != 3 {
		t.Errorf("A's status of C = %+v, want source B applied 3", got)
	}
	for _, n := range []*node{a, b, c} {
		if got := n.rep.Counters(); got.ProtocolErrors != 0 || got.Divergences != 0 || got.GapsDetected != 0 {
			t.Errorf("%s counters = %+v", n.name, got)
		}
	}
	if got := c.originStatus(a).Name; got != "A" {
		t.Errorf("C names origin A %q through the version-1 relay", got)
	}
}

// TestStallResend: the last entry of a stream is lost; the source's heads show it; after
// StallTimeout without progress the replica asks again from its applied seq.
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestStallResend(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	h.connect(a, c)
	a.write(put("t", "k1", "v"))
	h.pump()
	progress := h.now
	dropped := h.dropOnce(a, c, a, 2)
	a.write(put("t", "k2", "v"))
	h.pump()
	if !*dropped {
		t.Fatal("entry 2 was not sent")
	}
	if got := c.originStatus(a); got.AppliedSeq != 1 || got.HeadSeq != 2 || got.LagSeq != 1 {
		t.Fatalf("C's status of A = %+v, want applied 1 head 2", got)
	}
	if dl := c.rep.NextDeadline(); dl.IsZero() || dl.After(progress.Add(replica.DefaultStallTimeout)) {
		t.Errorf("C's next deadline %v is after the stall timeout %v", dl, progress.Add(replica.DefaultStallTimeout))
	}
	h.advance(replica.DefaultStallTimeout - advanceStep)
	if got := c.originStatus(a).AppliedSeq; got != 1 {
		t.Fatalf("C applied %d before the stall timeout", got)
	}
	wantCounters(t, c, replica.Counters{TxnsApplied: 1})
	h.advance(advanceStep)
	if got := c.originStatus(a); got.AppliedSeq != 2 || got.LagSeq != 0 || got.SourcePeer != "A" || got.SourceChanges != 0 {
		t.Errorf("C's status of A after the stall timeout = %+v, want applied 2 from A", got)
	}
	wantCounters(t, c, replica.Counters{TxnsApplied: 2, GapsDetected: 1, ResendsRequested: 1})
}

// TestReceivingDefersStall: the last entry of A's stream is lost, as in TestStallResend,
// but the shell tells C every half second that a message from A is still arriving
// (Receiving, as the native reader does on a slow link): for two stall timeouts nothing is
// asked again. Once it stops telling, the stall timeout runs from the last time.
func TestReceivingDefersStall(t *testing.T) {
	const every = 500 * time.Millisecond
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	c := h.addNode("C", replica.Config{})
	l := h.connect(a, c)
	a.write(put("t", "k1", "v"))
	h.pump()
	dropped := h.dropOnce(a, c, a, 2)
	a.write(put("t", "k2", "v"))
	h.pump()
	if !*dropped {
		t.Fatal("entry 2 was not sent")
	}
	for range 2 * int(replica.DefaultStallTimeout/every) {
		h.advance(every)
		h.check(c, c.rep.Receiving(c.clock(), l.listener.id))
	}
	wantCounters(t, c, replica.Counters{TxnsApplied: 1})
	h.advance(replica.DefaultStallTimeout - advanceStep)
	wantCounters(t, c, replica.Counters{TxnsApplied: 1})
	h.advance(advanceStep)
	if got := c.originStatus(a); got.AppliedSeq != 2 {
		t.Errorf("C's status of A one stall timeout after the last Receiving = %+v, want applied 2", got)
	}
	wantCounters(t, c, replica.Counters{TxnsApplied: 2, GapsDetected: 1, ResendsRequested: 1})
	if err := c.rep.Receiving(c.clock(), 999); err != replica.ErrUnknownConn {
		t.Errorf("Receiving on no connection: %v, want ErrUnknownConn", err)
	}
}

// TestStallDeadline: a shell that ticks only at NextDeadline resumes a stalled origin in
// time. A's entry 2 is lost on the way to C a while after C applied entry 1, while A's
// heads tell C of it; C's next deadline is no later than its last progress (the apply of
// entry 1, then the resubscription) plus the stall timeout, and ticking at it resumes the
// channel, a gap and a resend request each time. The stall timeout is shorter than every
// session timer, so no other deadline would tick C in time.
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestStallDeadline(t *testing.T) {
	const stall = 300 * time.Millisecond // PINGs go every second
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{StallTimeout: stall, MaxVersion: 3})
	h.connect(a, c)
	a.write(put("t", "k1", "v"))
	h.pump()
	progress := h.now // C applied entry 1
	lost := 0
	h.drop = func(from, to string, f wire.Decoded) bool {
		if o, seq, ok := dataSeq(f); ok && from == "A" && to == "C" && o == a.origin && seq == 2 && lost < 2 {
			lost++ // the first send and the first resend
			return true
		}
		return false
	}
	h.now = h.now.Add(100 * time.Millisecond) // before any timer of A or C
	a.write(put("t", "k2", "v"))
	h.pump()
	if got := c.originStatus(a); lost != 1 || got.AppliedSeq != 1 || got.HeadSeq != 2 {
		t.Fatalf("C's status of A = %+v with %d entries lost, want applied 1 head 2 and entry 2 lost", got, lost)
	}
	for round, want := range []replica.Counters{
		{TxnsApplied: 1, GapsDetected: 1, ResendsRequested: 1}, // the resend is lost too
		{TxnsApplied: 2, GapsDetected: 2, ResendsRequested: 2},
	} {
		due := progress.Add(stall)
		if dl := c.rep.NextDeadline(); dl.IsZero() || dl.After(due) {
			t.Fatalf("round %d: C's next deadline %v is later than its last progress %v plus the stall timeout",
				round, dl.Sub(epoch), progress.Sub(epoch))
		}
		h.tickDeadlines(due.Add(-time.Millisecond))
		wantCounters(t, c, replica.Counters{TxnsApplied: 1, GapsDetected: uint64(round), ResendsRequested: uint64(round)})
		h.tickDeadlines(due)
		if got := c.originStatus(a); got.AppliedSeq != want.TxnsApplied || got.SourcePeer != "A" {
			t.Errorf("round %d: C's status of A at the stall deadline = %+v, want applied %d from A", round, got, want.TxnsApplied)
		}
		wantCounters(t, c, want)
		progress = due // the resubscription
	}
	if lost != 2 {
		t.Errorf("%d sends of entry 2 lost, want 2", lost)
	}
}

// TestGapResend: an entry lost in the middle of a stream shows as a gap when the next one
// arrives; the replica has it sent again and applies both, nothing twice.
func TestGapResend(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{})
	h.connect(a, b)
	h.connect(b, c)
	a.write(put("t", "k1", "v"))
	h.pump()
	dropped := h.dropOnce(b, c, a, 2)
	a.write(put("t", "k2", "v"))
	a.write(put("t", "k3", "v"))
	h.pump()
	h.advance(100 * time.Millisecond)
	if !*dropped {
		t.Fatal("entry 2 was not sent")
	}
	if got := c.originStatus(a); got.AppliedSeq != 3 || got.SourcePeer != "B" || got.SourceChanges != 0 {
		t.Errorf("C's status of A = %+v, want applied 3 from B", got)
	}
	got := c.rep.Counters()
	if got.TxnsApplied != 3 || got.GapsDetected != 1 || got.ResendsRequested != 1 || got.DuplicatesReceived != 0 || got.ProtocolErrors != 0 {
		t.Errorf("C's counters = %+v, want 3 applied, 1 gap, 1 resend, no duplicates", got)
	}
	sameDigest(t, "t", a, b, c)
}

// TestDuplicateConnection: when both sides dial each other, the connection dialed by the
// node with the lower origin id survives, on both sides.
func TestDuplicateConnection(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{}) // the lower origin id
	b := h.addNode("B", replica.Config{})
	ab := h.open(a, b)
	ba := h.open(b, a)
	h.pump()
	if ab.dialer.closed || ab.listener.closed {
		t.Errorf("the connection A dialed was closed")
	}
	if !ba.dialer.closed || !ba.listener.closed {
		t.Errorf("the connection B dialed survived")
	}
	for _, n := range []*node{a, b} {
		ps := n.rep.Status(n.clock()).Peers
		if len(ps) != 1 || ps[0].State != "streaming" {
			t.Errorf("%s's peers = %+v, want one streaming", n.name, ps)
		}
	}
	if c := a.rep.Conns(); len(c) != 1 || c[0] != ab.dialer.id {
		t.Errorf("A's connections = %v, want [%d]", c, ab.dialer.id)
	}
	a.write(put("t", "k", "v"))
	b.write(put("t", "k2", "v"))
	h.pump()
	if a.applied()[b.origin] != 1 || b.applied()[a.origin] != 1 {
		t.Errorf("no replication over the surviving connection")
	}
	for _, n := range []*node{a, b} {
		if got := n.rep.Counters(); got.DuplicatesReceived != 0 || got.ProtocolErrors != 0 {
			t.Errorf("%s counters = %+v", n.name, got)
		}
	}
}

// TestHandshakeRefusals: a dialer that expects another name, or a different secret, or no
// common version, gets the connection closed with the matching code, recorded as the
// peer's last error.
func TestHandshakeRefusals(t *testing.T) {
	cases := []struct {
		name   string
		a, b   replica.Config
		expect string
		code   wire.Code
	}{
		{"name mismatch", replica.Config{}, replica.Config{}, "X", wire.CodePeerNameMismatch},
		{"secret mismatch", replica.Config{}, replica.Config{Secret: []byte("another secret")}, "B", wire.CodeAuthFailed},
		{"no common version", replica.Config{MinVersion: 2}, replica.Config{MaxVersion: 1}, "B", wire.CodeUnsupportedVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.addNode("A", tc.a)
			b := h.addNode("B", tc.b)
			l := h.openAs(a, b, tc.expect)
			h.pump()
			if !l.dialer.closed || !l.listener.closed {
				t.Fatalf("the connection is still open")
			}
			if n := len(a.rep.Conns()) + len(b.rep.Conns()); n != 0 {
				t.Errorf("%d connections left open", n)
			}
			e := a.rep.LastError(tc.expect)
			if e == nil || e.Err.Code != tc.code {
				t.Errorf("A's last error of %s = %+v, want code %s", tc.expect, e, tc.code)
			}
		})
	}
}

// TestVersion1Restart: a version-1 node restarted on its store resumes from its peer
// cursor: the entries written meanwhile on both sides arrive, none twice.
func TestVersion1Restart(t *testing.T) {
	h := newHarness(t)
	x := h.addNode("X", replica.Config{})
	y := h.addNode("Y", replica.Config{MaxVersion: 1})
	h.connect(x, y)
	for i := range 3 {
		x.write(put("t", fmt.Sprint("x", i), "v"))
		y.write(put("t", fmt.Sprint("y", i), "v"))
	}
	h.pump()
	y.restart()
	for i := range 2 {
		x.write(put("t", fmt.Sprint("x", i+3), "v"))
		y.write(put("t", fmt.Sprint("y", i+3), "v"))
	}
	h.connect(x, y)
	h.advance(time.Second)
	want := map[wire.OriginID]uint64{x.origin: 5, y.origin: 5}
	for _, n := range []*node{x, y} {
		if got := n.applied(); !maps.Equal(got, want) {
			t.Errorf("%s's vector = %v, want %v", n.name, got, want)
		}
	}
	wantCounters(t, x, replica.Counters{TxnsApplied: 10, ConnectionErrors: 1}) // Y restarted under it
	wantCounters(t, y, replica.Counters{TxnsApplied: 4})                       // since the restart: 2 own, 2 of X
	sameDigest(t, "t", x, y)
}

// TestHoldUnsynced: with HoldUnsynced, the local entries beyond the last Synced are not
// served, to version-2 and version-1 peers alike; Synced releases them.
func TestHoldUnsynced(t *testing.T) {
	for _, v := range []uint64{2, 1} {
		t.Run(fmt.Sprint("peer version ", v), func(t *testing.T) {
			h := newHarness(t)
			a := h.addNode("A", replica.Config{HoldUnsynced: true})
			b := h.addNode("B", replica.Config{MaxVersion: v})
			c := h.addNode("C", replica.Config{})
			h.connect(a, b)
			h.connect(b, c)
			a.write(put("t", "k1", "v"))
			a.write(put("t", "k2", "v"))
			h.advance(time.Second)
			if got := b.applied()[a.origin]; got != 0 {
				t.Fatalf("B applied %d entries of A before A synced", got)
			}
			h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
			a.write(put("t", "k3", "v")) // not synced
			h.advance(time.Second)
			for _, n := range []*node{b, c} {
				if got := n.applied()[a.origin]; got != 2 {
					t.Errorf("%s applied A up to %d, want the 2 synced entries", n.name, got)
				}
			}
			h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
			h.advance(time.Second)
			for _, n := range []*node{b, c} {
				if got := n.applied()[a.origin]; got != 3 {
					t.Errorf("%s applied A up to %d after the second sync, want 3", n.name, got)
				}
			}
			if v == 2 {
				if got := c.originStatus(a); got.SourcePeer != "B" || got.LagSeq != 0 {
					t.Errorf("C's status of A = %+v", got)
				}
			}
		})
	}
}

// TestHoldUnsyncedAdvertisesAfterSync: once Synced makes the local entries servable, the
// peers are told the new head (HEADS), not only at the next write.
func TestHoldUnsyncedAdvertisesAfterSync(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{HoldUnsynced: true})
	b := h.addNode("B", replica.Config{})
	h.connect(a, b)
	a.write(put("t", "k1", "v"))
	h.pump()
	if now, _ := h.headsSent("A", "B", a.origin); now {
		t.Fatal("A advertised an unsynced head")
	}
	h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
	h.advance(time.Second)
	if got := b.applied()[a.origin]; got != 1 {
		t.Fatalf("B applied A up to %d, want 1", got)
	}
	if now, _ := h.headsSent("A", "B", a.origin); !now {
		t.Errorf("after Synced, A did not advertise its synced head to B")
	}
}

// TestDivergence: an origin that reissues a seq with other content (its store went back,
// as after a power loss with --sync none) is found rewound, not diverged: its peer keeps
// its own entry, takes nothing of the new timeline, does not pass it on, and the origin's
// node refuses local writes (rewind.go; rewind_test.go has the other ways it shows).
func TestDivergence(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{})
	ab := h.connect(a, b)
	h.connect(b, c)
	a.write(put("t", "k1", "v1"))
	a.write(put("t", "k2", "v2"))
	backup := a.store.Clone()
	a.write(put("t", "k3", "v3"))
	h.pump()
	h.disconnect(ab)
	a.store = backup // A loses its entry 3 and writes another one
	a.restart()
	if seq := a.write(put("t", "k3", "other")); seq != 3 {
		t.Fatalf("A's reissued seq = %d", seq)
	}
	a.write(put("t", "k4", "x"))
	h.connect(a, b)
	h.advance(2 * time.Second)
	if got := b.originStatus(a); got.AppliedSeq != 3 || got.Diverged || !got.Rewound {
		t.Errorf("B's status of A = %+v, want applied 3, rewound, not diverged", got)
	}
	if got := b.rep.Counters(); got.Divergences != 0 || got.TxnsApplied != 3 || got.ProtocolErrors != 0 {
		t.Errorf("B's counters = %+v, want no divergence", got)
	}
	if e := b.rep.LastError("A"); e == nil || e.Err.Code != wire.CodeOriginRewound {
		t.Errorf("B's last error for A = %+v, want origin-rewound", e)
	}
	for _, n := range []*node{b, c} {
		if r, _ := n.get("t", "k3"); string(r.Value) != "v3" {
			t.Errorf("%s: k3 = %q, want the first entry's v3", n.name, r.Value)
		}
		if _, ok := n.get("t", "k4"); ok {
			t.Errorf("%s applied an entry of the rewound timeline", n.name)
		}
	}
	if got := c.originStatus(a); got.AppliedSeq != 3 || got.Diverged {
		t.Errorf("C's status of A = %+v, want applied 3, not diverged", got)
	}
	rw := a.rep.Rewound()
	if _, v3 := b.entry(a, 3); rw == nil || rw.Peer != "B" || rw.Seq != 3 || rw.Hash != v3.Hash() || rw.OwnSeq != 4 || rw.How != "subscribe" {
		t.Errorf("A's rewind evidence = %+v", rw)
	}
	var we *wire.Error
	if _, err := a.rep.Write(a.clock(), []wire.Op{put("t", "k5", "y")}); !errors.As(err, &we) || we.Code != wire.CodeOriginRewound ||
		!strings.Contains(we.Message, "plait reseed") {
		t.Errorf("A's write on a rewound origin: %v, want origin-rewound naming plait reseed", err)
	}
	if _, err := b.rep.Write(b.clock(), []wire.Op{put("t", "b", "still running")}); err != nil {
		t.Errorf("B stopped: %v", err)
	}
}
