package protocol_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// TestHandshakeEstablishes: two sessions establish the version both offer (the dialer's
// limit, 1 to 3) with the capabilities both offer, each knowing the other; until the
// caller asks, nothing but HELLO and AUTH was sent, and nothing is held.
func TestHandshakeEstablishes(t *testing.T) {
	for _, version := range []uint64{1, 2, 3, 4} {
		dc := prototest.Config(wire.RoleDialer, "a", 1)
		lc := prototest.Config(wire.RoleListener, "b", 2)
		dc.MaxVersion, lc.MaxVersion = version, 0 // the dialer's limit decides
		dc.Capabilities = []string{"x", "y", "z"}
		lc.Capabilities = []string{"w", "y", "z"}
		dc.ExpectedPeer, lc.ExpectedPeer = "b", "a"
		p := established(t, dc, lc)
		wantCaps := []string{"y", "z"}
		if version >= 3 {
			wantCaps = []string{wire.CapAntiEntropy, "y", "z"} // offered by every version-3 build
		}
		if version >= 4 {
			wantCaps = []string{wire.CapAntiEntropy, wire.CapLeaf, "y", "z"} // and the leaf role by every version-4 one
		}
		for _, c := range []struct {
			side             *prototest.Side
			peer             string
			peerOrigin       wire.OriginID
			peerMin, peerMax uint64
		}{{p.D, "b", prototest.Origin(2), 1, 4}, {p.L, "a", prototest.Origin(1), 1, version}} {
			ev := c.side.Last(protocol.EventHandshake)
			if ev == nil {
				t.Fatalf("version %d: no handshake event", version)
			}
			h := ev.Handshake
			if h.Version != version || h.PeerMin != c.peerMin || h.PeerMax != c.peerMax || h.PeerName != c.peer ||
				h.PeerOrigin != c.peerOrigin || !h.Authenticated || !slices.Equal(h.Caps, wantCaps) {
				t.Fatalf("version %d: handshake %+v", version, h)
			}
			s := c.side.S
			if !s.Connected(p.Now) || s.V2().Credits() != nil || s.HeldBytes() != 0 || s.ReadPaused() {
				t.Fatalf("version %d: connected %v, credits %v, held %d", version, s.Connected(p.Now), s.V2().Credits(), s.HeldBytes())
			}
			var types []wire.Type
			for _, f := range frames(t, c.side.Sent) {
				types = append(types, f.Type)
			}
			if !slices.Equal(types, []wire.Type{wire.TypeHello, wire.TypeAuth}) {
				t.Fatalf("version %d: sent %v before the caller asked for anything", version, types)
			}
		}
	}
}

func TestStreamV1(t *testing.T) {
	p := defaultPair(t)
	a := prototest.Origin(9)
	chain := prototest.Chain(a, 20, 2, 10)
	if err := p.D.S.V1().Subscribe(0, nil); err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	if ev := p.L.Last(protocol.EventSubscribed); ev == nil || ev.Position != 0 {
		t.Fatalf("no subscribe: %+v", p.L.Events)
	}
	if err := p.L.S.SetOriginName(a, "origin-a"); err != nil {
		t.Fatal(err)
	}
	for i, e := range chain {
		if err := p.L.S.V1().Offer(uint64(i+1), e.Raw); err != nil {
			t.Fatal(err)
		}
	}
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 20 {
		t.Fatalf("%d txns", n)
	}
	if ev := p.D.Last(protocol.EventOriginNamed); ev == nil || ev.Name != "origin-a" || ev.Origin != a {
		t.Fatal("origin name missing")
	}
	// Nothing is acknowledged before the caller says it is durable.
	if p.L.Count(protocol.EventAcked) != 0 {
		t.Fatal("acknowledged before Ack")
	}
	if p.D.S.HeldBytes() == 0 {
		t.Fatal("unacked bytes not held")
	}
	if err := p.D.S.V1().Ack(20); err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	if ev := p.L.Last(protocol.EventAcked); ev == nil || ev.Position != 20 {
		t.Fatal("ack missing")
	}
	if p.D.S.HeldBytes() != 0 {
		t.Fatalf("held %d after ack", p.D.S.HeldBytes())
	}
	// A duplicate is skipped and counted.
	if err := p.L.S.V1().Offer(21, chain[5].Raw); err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	if p.D.Count(protocol.EventDuplicate) != 1 || p.D.S.Stats().Duplicates != 1 {
		t.Fatal("duplicate not counted")
	}
	// A gap closes with gap-detected.
	more := prototest.ChainFrom(a, 20, chain[19].Hash, 3, 1, 5)
	if err := p.L.S.V1().Offer(22, more[1].Raw); err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	if ev := p.D.Last(protocol.EventGap); ev == nil || ev.Expected != 21 || ev.Txn.Seq != 22 {
		t.Fatalf("gap: %+v", ev)
	}
	if err := p.D.S.Err(); err == nil || err.Code != wire.CodeGapDetected {
		t.Fatalf("err %v", err)
	}
	if ev := p.L.Last(protocol.EventClosed); ev == nil || !ev.ByPeer || ev.Err.Code != wire.CodeGapDetected {
		t.Fatalf("peer close %+v", ev)
	}
}

func TestWrongSecret(t *testing.T) {
	dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
	lc.Secret = []byte("other")
	p, _ := prototest.NewPair(dc, lc)
	p.Pump(10)
	for _, s := range []*prototest.Side{p.D, p.L} {
		if err := s.S.Err(); err == nil || !errors.Is(err, wire.NewError(wire.CodeAuthFailed, "")) {
			t.Fatalf("err %v", err)
		}
		if s.Count(protocol.EventHandshake) != 0 {
			t.Fatal("handshake completed")
		}
	}
}

func TestLiveness(t *testing.T) {
	p := defaultPair(t)
	start := p.Now
	p.Now = start.Add(protocol.DefaultPingInterval)
	_ = p.D.S.Tick(p.Now)
	p.Now = p.Now.Add(3 * time.Millisecond)
	p.Pump(10)
	if p.D.S.RTT() != 3*time.Millisecond {
		t.Fatalf("rtt %v", p.D.S.RTT())
	}
	dl := p.D.S.NextDeadline()
	if !p.D.S.Connected(dl.Add(-time.Nanosecond)) {
		t.Fatal("disconnected early")
	}
	_ = p.D.S.Tick(p.Now.Add(protocol.DefaultLivenessTimeout))
	if p.D.S.Connected(p.Now.Add(protocol.DefaultLivenessTimeout)) || p.D.S.Err().Code != wire.CodeLivenessTimeout {
		t.Fatalf("still connected, err %v", p.D.S.Err())
	}
	_ = bytes.Equal
}

// TestOfferAnnouncesOrigins: Offer sends an origin's ORIGIN frame before its first entry on
// the connection, once, for each origin; the receiver records the names and applies the
// entries.
func TestOfferAnnouncesOrigins(t *testing.T) {
	p := streaming(t, protocol.Limits{}, protocol.Limits{})
	a, b := prototest.Origin(10), prototest.Origin(11)
	ca, cb := prototest.Chain(a, 3, 1, 4), prototest.Chain(b, 2, 1, 4)
	must(t, p.L.S.SetOriginName(a, "A"))
	must(t, p.L.S.SetOriginName(b, "B"))
	p.L.Drain()
	for i, e := range []prototest.Entry{ca[0], cb[0], ca[1], cb[1], ca[2]} {
		must(t, p.L.S.V1().Offer(uint64(i+1), e.Raw))
	}
	sent := frames(t, p.L.Drain())
	var got []string
	for _, f := range sent {
		switch v := f.Value.(type) {
		case *wire.Origin:
			got = append(got, "ORIGIN "+v.Name)
		case *wire.Txn1:
			got = append(got, "TXN1 "+map[wire.OriginID]string{a: "A", b: "B"}[v.Txn.Origin])
		default:
			got = append(got, f.Type.String())
		}
	}
	want := []string{"ORIGIN A", "TXN1 A", "ORIGIN B", "TXN1 B", "TXN1 A", "TXN1 B", "TXN1 A"}
	if !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	if p.L.S.Stats().TxnsSent != 5 {
		t.Fatalf("TxnsSent %d", p.L.S.Stats().TxnsSent)
	}
	// Delivered (as the shell would): the receiver applies all five and knows both names.
	n := len(p.D.Events)
	for _, f := range sent {
		must(t, p.D.S.Receive(p.Now, prototest.RawFrame(f.Type, 0, 0, f.Body)))
	}
	p.D.Drain()
	var named []string
	applied := 0
	for _, ev := range p.D.Events[n:] {
		switch ev.Kind {
		case protocol.EventOriginNamed:
			named = append(named, ev.Name)
		case protocol.EventTxn:
			applied++
		}
	}
	if !slices.Equal(named, []string{"A", "B"}) || applied != 5 || p.D.S.Err() != nil {
		t.Fatalf("named %v, applied %d, err %v", named, applied, p.D.S.Err())
	}
}

// TestOfferNeedsOriginName: Offer refuses an entry of an origin without a name (bad-argument)
// and changes nothing; once named, the same position is accepted.
func TestOfferNeedsOriginName(t *testing.T) {
	p := streaming(t, protocol.Limits{}, protocol.Limits{})
	l := p.L.S
	p.L.Drain()
	err := l.V1().Offer(1, fxChain[0].Raw)
	if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeBadArgument || we.Class != wire.ClassLocal || !strings.Contains(we.Message, fxOrigin.String()) {
		t.Fatalf("Offer of an unnamed origin: %v", err)
	}
	if l.HasReady() || l.Stats().TxnsSent != 0 {
		t.Fatal("a refused Offer queued something")
	}
	must(t, l.SetOriginName(fxOrigin, "nine"))
	must(t, l.V1().Offer(1, fxChain[0].Raw))
	fs := frames(t, p.L.Drain())
	if len(fs) != 2 || fs[0].Value.(*wire.Origin).Name != "nine" || fs[1].Value.(*wire.Txn1).Position != 1 {
		t.Fatalf("sent %+v", fs)
	}
}

// TestTxnOfSubscribedOriginNeedsOrigin: the receive vector (Subscribe, Observe) does not
// name an origin; only the peer's ORIGIN on this connection does.
func TestTxnOfSubscribedOriginNeedsOrigin(t *testing.T) {
	in := recordFed(t)
	for _, named := range []bool{false, true} {
		p := defaultPair(t)
		d := p.D.S
		must(t, d.V1().Subscribe(0, []vector.Entry{{Origin: fxOrigin, Seq: 2, Hash: fxChain[1].Hash}}))
		must(t, d.V1().Observe(vector.Entry{Origin: fxOrigin, Seq: 2, Hash: fxChain[1].Hash}))
		p.D.Drain()
		msg := txn1(1, fxChain[2].Raw)
		if named {
			msg = cat(originFrame(fxOrigin, "nine"), msg)
		}
		n := len(p.D.Events)
		must(t, in.receive(d, p.Now, msg))
		p.D.Drain()
		if !named {
			if e := d.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame || e.Frame != wire.TypeTxn1 || e.Offset != 0 {
				t.Fatalf("TXN1 of a subscribed but unnamed origin: %v", e)
			}
			continue
		}
		if ev := p.D.Last(protocol.EventTxn); d.Err() != nil || ev == nil || ev.Txn.Seq != 3 || len(p.D.Events[n:]) != 2 {
			t.Fatalf("named: err %v, events %v", d.Err(), kinds(p.D.Events[n:]))
		}
	}
}

// TestLivenessWhilePaused: a side that paused its reads does not close for liveness, however
// long it stays paused; once reads resume, the liveness timeout runs again. The same
// silence without the pause closes (the control).
func TestLivenessWhilePaused(t *testing.T) {
	for _, paused := range []bool{false, true} {
		l := protocol.Limits{}
		if paused {
			l.MaxUnackedBytes = 1
		}
		p := fixture(t, l)
		s := p.D.S
		if s.ReadPaused() != paused {
			t.Fatalf("paused %v", s.ReadPaused())
		}
		for i := 1; i <= 30; i++ {
			must(t, s.Tick(p.Now.Add(time.Duration(i)*time.Second)))
		}
		if !paused {
			if e := s.Err(); e == nil || e.Code != wire.CodeLivenessTimeout {
				t.Fatalf("not paused: err %v after 30 s of silence", e)
			}
			continue
		}
		if s.State() != protocol.StateEstablished || s.Stats().ProtocolErrors != 0 {
			t.Fatalf("paused: closed after 30 s: %v", s.Err())
		}
		resumed := p.Now.Add(30 * time.Second)
		must(t, s.V1().Ack(3))
		if s.ReadPaused() {
			t.Fatal("still paused")
		}
		// Resuming makes a Tick due at once, and that Tick restarts the liveness clock.
		if !s.Connected(resumed) || s.NextDeadline().After(resumed) {
			t.Fatalf("resumed: connected %v, deadline %v after resuming", s.Connected(resumed), s.NextDeadline().Sub(resumed))
		}
		must(t, s.Tick(resumed))
		if !s.Connected(resumed.Add(protocol.DefaultLivenessTimeout - time.Nanosecond)) {
			t.Fatal("not connected within the timeout after resuming")
		}
		must(t, s.Tick(resumed.Add(protocol.DefaultLivenessTimeout-time.Nanosecond)))
		if s.State() != protocol.StateEstablished {
			t.Fatalf("closed before the timeout after resuming: %v", s.Err())
		}
		must(t, s.Tick(resumed.Add(protocol.DefaultLivenessTimeout)))
		if e := s.Err(); e == nil || e.Code != wire.CodeLivenessTimeout {
			t.Fatalf("resumed: err %v, want liveness-timeout", e)
		}
	}
}

// TestHeldBytesHandshake: the peer's HELLO body is held during the handshake, and counted in
// HeldBytes, up to the HELLO bound; it is released once established or closed.
func TestHeldBytesHandshake(t *testing.T) {
	in := recordFed(t)
	for _, c := range []struct {
		name string
		size int // the peer's HELLO body
		ok   bool
	}{
		{"small HELLO, valid AUTH", len(peerHello(nil)), true},
		{"16 KiB HELLO, valid AUTH", 16 << 10, true},
		{"16 KiB HELLO, wrong AUTH", 16 << 10, false},
	} {
		s, own := handshakeTarget(t, nil)
		if s.HeldBytes() != 0 {
			t.Fatalf("%s: held %d before the peer's HELLO", c.name, s.HeldBytes())
		}
		pb := helloOfSize(c.size, nil)
		must(t, in.receive(s, prototest.Epoch, helloFrame(pb)))
		auth := len(prototest.AuthFor(secret, wire.RoleListener, nil, nil)) // the AUTH queued
		if got := s.HeldBytes(); got != c.size+auth {
			t.Fatalf("%s: held %d, want the %d-byte HELLO and the %d-byte AUTH", c.name, got, c.size, auth)
		}
		s.Ready()
		if got := s.HeldBytes(); got != c.size || s.State() != protocol.StateAuthenticating {
			t.Fatalf("%s: held %d in state %v, want the %d-byte HELLO", c.name, got, s.State(), c.size)
		}
		key := secret
		if !c.ok {
			key = []byte("wrong")
		}
		must(t, in.receive(s, prototest.Epoch, prototest.AuthFor(key, wire.RoleDialer, pb, own)))
		s.Ready()
		if (s.State() == protocol.StateEstablished) != c.ok || s.HeldBytes() != 0 {
			t.Fatalf("%s: state %v, held %d after the AUTH", c.name, s.State(), s.HeldBytes())
		}
	}
}

// TestCloseMessageIsDetail: the CLOSE frame's message is the error's detail (frame, offset,
// reason) without the code and class it carries beside it, always valid UTF-8 and at most
// 1024 bytes; the peer reports it as the error's message.
func TestCloseMessageIsDetail(t *testing.T) {
	in := recordFed(t)
	long := strings.Repeat("é", 600) // 1200 bytes
	for _, c := range []struct {
		name string
		act  func(p *prototest.Pair)
		code wire.Code
		want string
	}{
		{"Close with a message", func(p *prototest.Pair) { must(t, p.D.S.Close(wire.CodeGoingAway, "shutting down")) },
			wire.CodeGoingAway, "shutting down"},
		{"Close with invalid UTF-8", func(p *prototest.Pair) { must(t, p.D.S.Close(wire.CodeGoingAway, "bye \xff\xfe!")) },
			wire.CodeGoingAway, "bye ?!"},
		{"Close with a message over 1024 bytes", func(p *prototest.Pair) { must(t, p.D.S.Close(wire.CodeGoingAway, long)) },
			wire.CodeGoingAway, long[:1024]},
		{"Close with an empty message", func(p *prototest.Pair) { must(t, p.D.S.Close(wire.CodeGoingAway, "")) },
			wire.CodeGoingAway, ""},
		{"a frame error", func(p *prototest.Pair) {
			must(t, in.receive(p.D.S, p.Now, cat(ping7, prototest.RawFrame(wire.TypePing, 1, 0, hx("a1 01 07")))))
		},
			wire.CodeBadFlags, "PING frame at offset 13: flags 0x1 not defined for this type"},
	} {
		p := defaultPair(t)
		c.act(p)
		sent := frames(t, p.D.Drain())
		cl := sent[len(sent)-1].Value.(*wire.Close)
		if cl.Code != c.code || cl.Message != c.want || !utf8.ValidString(cl.Message) {
			t.Fatalf("%s: CLOSE %s %q, want %s %q", c.name, cl.Code, cl.Message, c.code, c.want)
		}
		if e := p.D.S.Err(); e.Offset != wire.NoOffset && cl.Message != e.Detail() {
			t.Fatalf("%s: CLOSE message %q, Detail %q", c.name, cl.Message, e.Detail())
		}
		// The peer reports the message it received.
		for _, m := range frames(t, [][]byte{prototest.Frame(cl)}) {
			must(t, in.receive(p.L.S, p.Now, prototest.Frame(m.Value)))
		}
		if e := p.L.S.Err(); e == nil || e.Code != c.code || e.Message != c.want {
			t.Fatalf("%s: the peer reports %+v", c.name, e)
		}
	}
}

// TestOfferCountsOriginFrame: the send-buffer bound counts the ORIGIN frame that Offer
// queues before an origin's first entry: with room for the entry but not for its ORIGIN,
// the offer is refused, and with one byte more it is taken.
func TestOfferCountsOriginFrame(t *testing.T) {
	nine, eight := prototest.Origin(9), prototest.Origin(8)
	first := prototest.Chain(nine, 1, 1, 10)[0]
	second := prototest.Chain(eight, 1, 1, 10)[0]
	originFrame := func(o wire.OriginID, name string) int {
		return len(prototest.Frame(&wire.Origin{Origin: o, Name: name}))
	}
	txnFrame := func(e prototest.Entry) int { return wire.HeaderSize + 8 + len(e.Raw) }
	queued := originFrame(nine, "nine") + txnFrame(first)
	for _, extra := range []int{0, 1} {
		lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
		lc.Limits.MaxSendBuffer = queued + txnFrame(second) + originFrame(eight, "eight") - 1 + extra
		p := established(t, prototest.ConfigV1(wire.RoleDialer, "a", 1), lc)
		must(t, p.D.S.V1().Subscribe(0, nil))
		p.Pump(10)
		p.L.Drain()
		must(t, p.L.S.SetOriginName(nine, "nine"))
		must(t, p.L.S.SetOriginName(eight, "eight"))
		must(t, p.L.S.V1().Offer(1, first.Raw))
		if p.L.S.HeldBytes() != queued {
			t.Fatalf("held %d, want %d", p.L.S.HeldBytes(), queued)
		}
		err := p.L.S.V1().Offer(2, second.Raw)
		if extra == 0 {
			if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeSendBufferFull {
				t.Fatalf("one byte short of ORIGIN and TXN1: %v, want send-buffer-full", err)
			}
		} else if err != nil {
			t.Fatalf("room for ORIGIN and TXN1: %v", err)
		}
	}
}

// TestMaxOutMessage: frames that fill MaxOutMessage exactly go in one message; with the
// bound one byte lower the last of them begins a second message. A frame larger than the
// bound still goes, alone.
func TestMaxOutMessage(t *testing.T) {
	nine := prototest.Origin(9)
	chain := prototest.Chain(nine, 3, 1, 10)
	originFrame := len(prototest.Frame(&wire.Origin{Origin: nine, Name: "nine"}))
	txnFrame := func(e prototest.Entry) int { return wire.HeaderSize + 8 + len(e.Raw) }
	full := originFrame + txnFrame(chain[0]) + txnFrame(chain[1])
	for _, c := range []struct {
		bound int
		sizes []int
	}{
		{full, []int{full, txnFrame(chain[2])}},
		{full - 1, []int{originFrame + txnFrame(chain[0]), txnFrame(chain[1]) + txnFrame(chain[2])}},
		{1, []int{originFrame, txnFrame(chain[0]), txnFrame(chain[1]), txnFrame(chain[2])}},
	} {
		lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
		lc.Limits.MaxOutMessage = c.bound
		p := established(t, prototest.ConfigV1(wire.RoleDialer, "a", 1), lc)
		must(t, p.D.S.V1().Subscribe(0, nil))
		p.Pump(10)
		p.L.Drain()
		must(t, p.L.S.SetOriginName(nine, "nine"))
		for i, e := range chain {
			must(t, p.L.S.V1().Offer(uint64(i+1), e.Raw))
		}
		var sizes []int
		for _, m := range p.L.Drain() {
			sizes = append(sizes, len(m))
		}
		if !slices.Equal(sizes, c.sizes) {
			t.Errorf("MaxOutMessage %d: messages of %v bytes, want %v", c.bound, sizes, c.sizes)
		}
	}
}

// TestReceivingKeepsLiveness: a session told that bytes of a message are arriving
// (Receiving) counts the peer alive from then: at the liveness timeout after its last
// whole message it stays open, and it closes one liveness timeout after the last Receiving.
func TestReceivingKeepsLiveness(t *testing.T) {
	p := defaultPair(t)
	at := p.Now.Add(protocol.DefaultLivenessTimeout - time.Millisecond)
	p.D.S.Receiving(at)
	if dl := p.D.S.NextDeadline(); dl.After(at.Add(protocol.DefaultLivenessTimeout)) {
		t.Errorf("next deadline %v is after the liveness timeout from the last Receiving", dl.Sub(p.Now))
	}
	due := p.Now.Add(protocol.DefaultLivenessTimeout)
	_ = p.D.S.Tick(due) // PINGs are queued and never delivered: no PONG comes
	if !p.D.S.Connected(due) || p.D.S.Err() != nil {
		t.Fatalf("closed at the liveness timeout after the last message though bytes arrived since: %v", p.D.S.Err())
	}
	_ = p.D.S.Tick(at.Add(protocol.DefaultLivenessTimeout))
	if e := p.D.S.Err(); e == nil || e.Code != wire.CodeLivenessTimeout {
		t.Fatalf("one liveness timeout after the last Receiving: %v, want liveness-timeout", e)
	}
}
