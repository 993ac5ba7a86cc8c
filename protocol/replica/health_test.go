package replica_test

import (
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// health is what n reports of origin of and of its connection to the peer named peer.
func health(n *node, of *node, peer string) (replica.Health, replica.Health) {
	n.h.t.Helper()
	return n.originStatus(of).Health, n.peerStatus(peer).Health
}

// TestHealthRule walks one origin through the four healths on C, its peer A with it: up
// to date; behind by more than HealthyLag while A's entries are lost on the way (heads
// arrive, data does not) and before the lag grew, catching up; further behind than at the
// sample HealthWindow ago, falling behind; nothing applied for StallTimeout, stalled; the
// data let through again, healthy. (A peer whose liveness expires is closed: the shell
// reports it dialing, and TestPeerHealth has it stalled.)
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestHealthRule(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{HealthWindow: 2 * time.Second, MaxVersion: 3})
	h.connect(a, c)
	a.write(put("t", "k1", "v"))
	h.pump()
	if o, p := health(c, a, "A"); o != replica.HealthHealthy || p != replica.HealthHealthy {
		t.Fatalf("applied everything: origin %s, peer %s; want healthy, healthy", o, p)
	}
	if o := c.originStatus(c).Health; o != replica.HealthHealthy {
		t.Errorf("C's own origin is %s, want healthy", o)
	}

	lose := true
	h.drop = func(from, to string, f wire.Decoded) bool {
		_, _, data := dataSeq(f)
		return lose && data && from == "A"
	}
	h.advance(1500 * time.Millisecond)
	c.rep.SampleLag(c.clock()) // lag 0 at the window's start
	a.write(put("t", "k2", "v"))
	h.advance(100 * time.Millisecond) // A's heads tell C of entry 2
	st := c.originStatus(a)
	if st.LagSeq != 1 || st.LagMs < 1500 {
		t.Fatalf("C's status of A = %+v, want 1 entry and at least 1.5 s behind", st)
	}
	// The lag in entries (1) is above the sample of 0 taken within the window.
	if o, p := health(c, a, "A"); o != replica.HealthFallingBehind || p != replica.HealthFallingBehind {
		t.Errorf("behind and further behind than 1.6 s ago: origin %s, peer %s; want falling-behind, falling-behind", o, p)
	}
	c.rep.SampleLag(c.clock()) // too soon after the last: not taken
	h.advance(2 * time.Second)
	c.rep.SampleLag(c.clock()) // lag 1, the window's oldest sample from now on
	h.advance(100 * time.Millisecond)
	// Not grown since the oldest sample in the window (the 0 is older than it), and not
	// yet waiting StallTimeout (2.1 s of 3 s since the head became known).
	if o := c.originStatus(a).Health; o != replica.HealthCatchingUp {
		t.Errorf("behind by as much as 2 s ago: %s, want catching-up", o)
	}
	h.advance(replica.DefaultStallTimeout)
	if o, p := health(c, a, "A"); o != replica.HealthStalled || p != replica.HealthStalled {
		t.Errorf("nothing applied for the stall timeout: origin %s, peer %s; want stalled, stalled", o, p)
	}
	lose = false
	h.advance(replica.DefaultStallTimeout) // the next stall asks again, and the entry arrives
	if o, p := health(c, a, "A"); o != replica.HealthHealthy || p != replica.HealthHealthy || c.originStatus(a).AppliedSeq != 2 {
		t.Errorf("caught up: origin %s, peer %s, applied %d; want healthy, healthy, 2", o, p, c.originStatus(a).AppliedSeq)
	}

	hist := c.rep.LagHistory()
	if len(hist) != 1 || hist[0].Origin != a.origin || len(hist[0].Samples) != 2 ||
		hist[0].Samples[0].LagSeq != 0 || hist[0].Samples[1].LagSeq != 1 || hist[0].Samples[1].LagMs < 1500 {
		t.Errorf("C's lag history = %+v, want A's two samples: 0, then 1 entry 1.5 s", hist)
	}
}

// TestHealthWithinHealthyLag: an origin behind by less than HealthyLag in time is healthy
// (a stream under steady writes is always an entry or two behind); behind by more, it is
// not. Nothing applied yet, its lag in time is 0 and it is not healthy.
// Version 3, whose heads reach a subscriber at once and every peer whatever its sources
// (version 4's quiet control plane: quiet_test.go).
func TestHealthWithinHealthyLag(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxVersion: 3})
	c := h.addNode("C", replica.Config{HealthyLag: 500 * time.Millisecond, MaxVersion: 3})
	h.connect(a, c)
	h.dropOnce(a, c, a, 1)
	a.write(put("t", "k1", "v"))
	h.advance(100 * time.Millisecond)
	if st := c.originStatus(a); st.LagSeq != 1 || st.LagMs != 0 || st.Health != replica.HealthCatchingUp {
		t.Errorf("head known, nothing applied: %+v, want lag 1 entry, 0 ms, catching-up", st)
	}
	h.advance(replica.DefaultStallTimeout) // the stall's resend brings entry 1
	if st := c.originStatus(a); st.AppliedSeq != 1 || st.Health != replica.HealthHealthy {
		t.Fatalf("entry 1 applied: %+v, want healthy", st)
	}
	for _, c2 := range []struct {
		behind time.Duration
		want   replica.Health
	}{{400 * time.Millisecond, replica.HealthHealthy}, {600 * time.Millisecond, replica.HealthCatchingUp}} {
		seq := a.write(put("t", "k", "v")) // applied on C
		h.advance(c2.behind)
		h.dropOnce(a, c, a, seq+1)
		a.write(put("t", "k", "v")) // lost on the way: C learns of it from A's heads
		h.advance(50 * time.Millisecond)
		if st := c.originStatus(a); st.AppliedSeq != seq || st.LagSeq != 1 || st.LagMs != uint64(c2.behind.Milliseconds()) || st.Health != c2.want {
			t.Errorf("%s behind: %+v, want applied %d, lag 1 entry %d ms, %s", c2.behind, st, seq, c2.behind.Milliseconds(), c2.want)
		}
		h.advance(replica.DefaultStallTimeout) // the resend brings it
	}
}

// TestPeerHealth: the peer rule on its own: a peer without a live streaming connection is
// stalled whatever its origins; a live one takes the worst health of the origins it
// sources (not of the others), and a copy it serves this node makes it catching-up at
// least.
func TestPeerHealth(t *testing.T) {
	live := replica.PeerStatus{Name: "A", State: replica.PeerStreaming, Connected: true}
	origins := []replica.OriginStatus{
		{Name: "X", SourcePeer: "A", Health: replica.HealthCatchingUp},
		{Name: "Y", SourcePeer: "B", Health: replica.HealthStalled},
		{Name: "Z", SourcePeer: "A", Health: replica.HealthHealthy},
	}
	copying := live
	copying.Copy = &replica.CopyProgress{Direction: "receiving"}
	serving := live
	serving.Copy = &replica.CopyProgress{Direction: "serving"}
	for _, c := range []struct {
		name    string
		p       replica.PeerStatus
		origins []replica.OriginStatus
		want    replica.Health
	}{
		{"live, nothing sourced", live, nil, replica.HealthHealthy},
		{"live, sources X and Z", live, origins, replica.HealthCatchingUp},
		{"live, sources a falling-behind origin", live, []replica.OriginStatus{{SourcePeer: "A", Health: replica.HealthFallingBehind}}, replica.HealthFallingBehind},
		{"copy from it", copying, nil, replica.HealthCatchingUp},
		{"copy to it", serving, nil, replica.HealthHealthy},
		{"streaming, liveness expired", replica.PeerStatus{Name: "A", State: replica.PeerStreaming}, nil, replica.HealthStalled},
		{"handshaking", replica.PeerStatus{Name: "A", State: replica.PeerHandshaking, Connected: true}, nil, replica.HealthStalled},
		{"dialing", replica.PeerStatus{Name: "A", State: replica.PeerConnecting}, nil, replica.HealthStalled},
		{"backoff", replica.PeerStatus{Name: "A", State: replica.PeerBackoff}, nil, replica.HealthStalled},
	} {
		if got := replica.PeerHealth(c.p, c.origins); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestLagHistoryBound: the history keeps LagHistory / LagSampleEvery samples an origin, the
// oldest dropped past it; at most MaxLagSamples, one past it refused by New.
func TestLagHistoryBound(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	c := h.addNode("C", replica.Config{LagSampleEvery: time.Second, LagHistory: 3 * time.Second})
	h.connect(a, c)
	for i := range 4 {
		a.write(put("t", "k", "v")) // applied at once: lag 0, sample times tell them apart
		h.pump()
		c.rep.SampleLag(c.clock())
		if got := len(c.rep.LagHistory()[0].Samples); got != min(i+1, 3) {
			t.Fatalf("after %d samples %d are kept, want %d", i+1, got, min(i+1, 3))
		}
		h.advance(time.Second)
	}
	s := c.rep.LagHistory()[0].Samples
	if !s[0].At.Equal(epoch.Add(time.Second)) || !s[2].At.Equal(epoch.Add(3*time.Second)) {
		t.Errorf("kept samples at %v .. %v, want the last three (1 s .. 3 s after the start)", s[0].At.Sub(epoch), s[2].At.Sub(epoch))
	}

	for _, c := range []struct {
		every, history time.Duration
		ok             bool
	}{
		{time.Second, replica.MaxLagSamples * time.Second, true},
		{time.Second, (replica.MaxLagSamples + 1) * time.Second, false},
		{time.Second, 500 * time.Millisecond, false},
		{-time.Second, time.Minute, false},
	} {
		store := memstore.New(store.Identity{Origin: wire.OriginID{9: 9}, Name: "N"})
		_, err := replica.New(replica.Config{LagSampleEvery: c.every, LagHistory: c.history}, store)
		if (err == nil) != c.ok {
			t.Errorf("every %s, history %s: %v, want ok %v", c.every, c.history, err, c.ok)
		}
	}
}

// TestPeerBehindCountsFromTheWrite: a peer level with this node's origin is not behind
// until the next local write, however long its position sat still before. C takes all of
// A's origin, then A writes nothing for longer than StallTimeout; A's next write goes to
// C, whose acknowledgements (CURSOR) are lost on the way back. The lag counts from that
// write: healthy within HealthyLag of it, catching-up after, stalled once C has not moved
// for StallTimeout since; once C's acknowledgement arrives it is healthy again. (A's
// retention steps count a hold at the head as advancing, once a RetentionInterval: an
// hour here, so that nothing but the write itself can tell the rule when C fell behind.)
func TestPeerBehindCountsFromTheWrite(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetentionInterval: time.Hour})
	c := h.addNode("C", replica.Config{})
	h.connect(c, a)
	a.write(put("t", "k", "v"))
	h.advance(100 * time.Millisecond)
	lose := false
	h.drop = func(from, to string, f wire.Decoded) bool {
		_, cursor := f.Value.(*wire.Cursor)
		return lose && cursor && from == "C"
	}
	h.advance(replica.DefaultStallTimeout + 2*time.Second) // level, with nothing written
	if p := a.peerStatus("C"); p.Behind.LagSeq != 0 || p.Health != replica.HealthHealthy || !p.Connected {
		t.Fatalf("C level and idle: %+v, health %s, connected %v; want 0 behind, healthy", p.Behind, p.Health, p.Connected)
	}
	lose = true
	a.write(put("t", "k", "v"))
	h.advance(100 * time.Millisecond)
	if got := c.originStatus(a).AppliedSeq; got != 2 {
		t.Fatalf("C applied A's entry %d, want 2", got)
	}
	if p := a.peerStatus("C"); p.Behind.LagSeq != 1 || p.Behind.Health != replica.HealthHealthy || p.Health != replica.HealthHealthy {
		t.Errorf("C 1 behind for 0.1 s (its position 5.1 s old): %+v, health %s; want healthy", p.Behind, p.Health)
	}
	h.advance(time.Second)
	if p := a.peerStatus("C"); p.Behind.LagSeq != 1 || p.Behind.Health != replica.HealthCatchingUp || p.Health != replica.HealthCatchingUp {
		t.Errorf("C 1 behind for 1.1 s: %+v, health %s; want catching-up", p.Behind, p.Health)
	}
	h.advance(2 * time.Second)
	if p := a.peerStatus("C"); p.Behind.Health != replica.HealthStalled || p.Health != replica.HealthStalled || !p.Connected {
		t.Errorf("C 1 behind for 3.1 s: %+v, health %s, connected %v; want stalled while connected", p.Behind, p.Health, p.Connected)
	}
	lose = false
	a.write(put("t", "k", "v")) // C acknowledges this one
	h.advance(100 * time.Millisecond)
	if p := a.peerStatus("C"); p.Behind.LagSeq != 0 || p.Health != replica.HealthHealthy {
		t.Errorf("C's acknowledgement arrived: %+v, health %s; want 0 behind, healthy", p.Behind, p.Health)
	}
}

// TestPeerBehind: A's view of how far C is behind A's own origin, from C's position (its
// subscription, then its acknowledgements and heads): none while C keeps up; with the
// link held (nothing delivered either way), A's writes put C behind: healthy while its
// position moved within HealthyLag, then falling behind against the sample of 0 taken
// before, stalled once it has not moved for StallTimeout; released, C catches up and is
// healthy again. The peer's health follows, and the lag history has C's samples.
func TestPeerBehind(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	c := h.addNode("C", replica.Config{})
	l := h.connect(c, a)
	a.write(put("t", "k", "v"))
	h.advance(100 * time.Millisecond)
	if b := a.peerStatus("C").Behind; !b.Known || b.LagSeq != 0 || b.Health != replica.HealthHealthy {
		t.Fatalf("C caught up: %+v, want known, 0 behind, healthy", b)
	}
	a.rep.SampleLag(a.clock())
	l.hold = true
	for range 3 {
		a.write(put("t", "k", "v"))
	}
	h.advance(500 * time.Millisecond)
	if p := a.peerStatus("C"); p.Behind.LagSeq != 3 || p.Behind.Health != replica.HealthHealthy || p.Health != replica.HealthHealthy {
		t.Errorf("C 3 behind, its position 0.6 s old: %+v, health %s; want healthy", p.Behind, p.Health)
	}
	h.advance(time.Second)
	if p := a.peerStatus("C"); p.Behind.Health != replica.HealthFallingBehind || p.Health != replica.HealthFallingBehind {
		t.Errorf("C 3 behind after 1.6 s, 0 at the window's sample: %+v, health %s; want falling-behind", p.Behind, p.Health)
	}
	h.advance(1500 * time.Millisecond)
	if p := a.peerStatus("C"); p.Behind.Health != replica.HealthStalled || p.Health != replica.HealthStalled || !p.Connected {
		t.Errorf("C's position 3.1 s old: %+v, health %s, connected %v; want stalled while still connected", p.Behind, p.Health, p.Connected)
	}
	l.hold = false
	h.advance(200 * time.Millisecond)
	if p := a.peerStatus("C"); p.Behind.LagSeq != 0 || p.Health != replica.HealthHealthy {
		t.Errorf("released: %+v, health %s; want 0 behind, healthy", p.Behind, p.Health)
	}
	a.rep.SampleLag(a.clock())
	hist := a.rep.PeerLagHistory()
	if len(hist) != 1 || hist[0].Peer != "C" || len(hist[0].Samples) != 2 || hist[0].Samples[0].LagSeq != 0 || hist[0].Samples[1].LagSeq != 0 {
		t.Errorf("A's peer lag history = %+v, want C's two samples of 0", hist)
	}
	if b := c.rep.PeerBehindOf("A", c.clock()); !b.Known {
		t.Errorf("C's view of A: %+v, want known (A subscribed to C's origin)", b)
	}
	if b := a.rep.PeerBehindOf("Z", a.clock()); b.Known || b.Health != replica.HealthHealthy {
		t.Errorf("a peer never seen: %+v, want unknown and healthy", b)
	}
}
