//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// TestFaultyPeer: a peer built on the protocol core (corePeer) completes the handshake,
// skips one entry, then corrupts one, without closing the connection. The node counts the
// gap and the resend it asks for, reports the divergence, never applies the corrupt entry,
// and stays up.
func TestFaultyPeer(t *testing.T) {
	n := serve(t, "N")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	origin := wire.OriginID{0xfa, 0x01}
	f := dialCore(ctx, t, n.URL, nil, protocol.Config{Role: wire.RoleDialer, Name: "F", Origin: origin,
		Secret: []byte(secret), ExpectedPeer: "N"})
	s := f.s
	if s.State() != protocol.StateEstablished {
		t.Fatalf("the handshake failed: %v", s.Err())
	}
	chain := prototest.ChainAt(stampBase, origin, 0, wire.Hash{}, 5, 1, 8)
	if err := s.SetOriginName(origin, "F"); err != nil {
		t.Fatal(err)
	}
	if err := s.V2().AdvertiseHeads([]wire.Head{{Origin: origin, Seq: 5, HLC: wire.MakeHLC(stampBase+5, 0)}}); err != nil {
		t.Fatal(err)
	}
	f.flush()
	for f.channel == 0 { // the node takes F's origin from F itself
		f.receive(ctx)
	}
	for _, e := range chain[:2] {
		if err := s.V2().Send(e.Raw); err != nil {
			t.Fatal(err)
		}
	}
	f.flush()
	f.rawData(chain[3].Hash, chain[3].Raw) // entry 3 skipped: 4 arrives next
	for !hasEvent(f.events, protocol.EventResend) {
		f.receive(ctx)
	}
	for _, e := range chain[2:4] { // the resend asked from 3
		if err := s.V2().Send(e.Raw); err != nil {
			t.Fatal(err)
		}
	}
	f.flush()
	corrupt := append([]byte(nil), chain[4].Raw...)
	corrupt[len(corrupt)-1] ^= 0xff // the hash sent with it stays the real one
	f.rawData(chain[4].Hash, corrupt)
	waitFor(t, "the node reporting the faults", 20*time.Second, func() bool {
		c := n.status().Counters
		return c.GapsDetected >= 1 && c.ResendsRequested >= 1 && c.Divergences >= 1
	})
	if o := n.origin("F"); o.AppliedSeq != 4 {
		t.Errorf("the node applied F up to %d, want 4: never the corrupt entry 5", o.AppliedSeq)
	}
	if s, _ := n.get("/healthz"); s != 200 {
		t.Errorf("the node is down after the faults: healthz %d", s)
	}
	n.stop()
	n.check()
}

func hasEvent(evs []protocol.Event, k protocol.EventKind) bool {
	for _, e := range evs {
		if e.Kind == k {
			return true
		}
	}
	return false
}
