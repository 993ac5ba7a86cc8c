package protocol_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

func established(t *testing.T, dc, lc protocol.Config) *prototest.Pair {
	t.Helper()
	p, err := prototest.NewPair(dc, lc)
	if err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	for _, s := range []*prototest.Side{p.D, p.L} {
		if s.S.State() != protocol.StateEstablished {
			t.Fatalf("state %v, err %v", s.S.State(), s.S.Err())
		}
	}
	return p
}

func defaultPair(t *testing.T) *prototest.Pair {
	return established(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2))
}

func TestHandshakeEstablishes(t *testing.T) {
	dc := prototest.Config(wire.RoleDialer, "a", 1)
	lc := prototest.Config(wire.RoleListener, "b", 2)
	dc.Capabilities = []string{"x", "y", "z"}
	lc.Capabilities = []string{"w", "y", "z"}
	dc.ExpectedPeer = "b"
	p := established(t, dc, lc)
	for _, c := range []struct {
		side       *prototest.Side
		peer       string
		peerOrigin wire.OriginID
	}{{p.D, "b", prototest.Origin(2)}, {p.L, "a", prototest.Origin(1)}} {
		ev := c.side.Last(protocol.EventHandshake)
		if ev == nil {
			t.Fatal("no handshake event")
		}
		h := ev.Handshake
		if h.Version != 1 || h.PeerName != c.peer || h.PeerOrigin != c.peerOrigin || !h.Authenticated {
			t.Fatalf("handshake %+v", h)
		}
		if len(h.Caps) != 2 || h.Caps[0] != "y" || h.Caps[1] != "z" {
			t.Fatalf("caps %v", h.Caps)
		}
		if !c.side.S.Connected(p.Now) {
			t.Fatal("not connected")
		}
	}
}

func TestStreamV1(t *testing.T) {
	p := defaultPair(t)
	a := prototest.Origin(9)
	chain := prototest.Chain(a, 20, 2, 10)
	if err := p.D.S.Subscribe(0, nil); err != nil {
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
		if err := p.L.S.Offer(uint64(i+1), e.Raw); err != nil {
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
	if err := p.D.S.Ack(20); err != nil {
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
	if err := p.L.S.Offer(21, chain[5].Raw); err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	if p.D.Count(protocol.EventDuplicate) != 1 || p.D.S.Stats().Duplicates != 1 {
		t.Fatal("duplicate not counted")
	}
	// A gap closes with gap-detected.
	more := prototest.ChainFrom(a, 20, chain[19].Hash, 3, 1, 5)
	if err := p.L.S.Offer(22, more[1].Raw); err != nil {
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
	dc := prototest.Config(wire.RoleDialer, "a", 1)
	lc := prototest.Config(wire.RoleListener, "b", 2)
	lc.Secret = []byte("other")
	p, _ := prototest.NewPair(dc, lc)
	p.Pump(10)
	for _, s := range []*prototest.Side{p.D, p.L} {
		if err := s.S.Err(); err == nil || !errors.Is(err, wire.Errorf(wire.CodeAuthFailed, "")) {
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
