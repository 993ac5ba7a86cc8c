package protocol_test

import (
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// pingOf ticks s at now and returns the id of the PING it sent.
func pingOf(t *testing.T, p *prototest.Pair, s *prototest.Side, now time.Time) uint64 {
	t.Helper()
	must(t, s.S.Tick(now))
	for _, f := range frames(t, s.Drain()) {
		if b, ok := f.Value.(*wire.Ping); ok {
			return b.ID
		}
	}
	t.Fatal("no PING sent")
	return 0
}

// exchange runs one PING/PONG of the dialer at sent, answered by a PONG carrying the
// peer's wall clock peer, received rtt later; it returns when the PONG was received.
func exchange(t *testing.T, p *prototest.Pair, sent time.Time, rtt time.Duration, peer time.Time) time.Time {
	t.Helper()
	id := pingOf(t, p, p.D, sent)
	must(t, p.D.S.Receive(sent.Add(rtt), prototest.Frame(&wire.Pong{ID: id, Time: uint64(peer.UnixMicro())})))
	if p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("closed: %v", p.D.S.Err())
	}
	return sent.Add(rtt)
}

// TestClockOffsetEstimate: the offset of one exchange is the peer's time minus the
// midpoint of the round trip, and the estimate is the offset of the lowest-RTT exchange
// among the last protocol.ClockSamples, so that one slow, asymmetric exchange does not
// swing it.
func TestClockOffsetEstimate(t *testing.T) {
	p := established(t, prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2))
	if _, ok := p.D.S.ClockOffset(); ok {
		t.Fatal("measured before any PONG")
	}
	const skew = 90 * time.Second // the peer's clock is ahead
	now := p.Now.Add(protocol.DefaultPingInterval)
	// A symmetric exchange of 4 ms: the peer read its clock at the midpoint.
	now = exchange(t, p, now, 4*time.Millisecond, now.Add(skew+2*time.Millisecond))
	if off, ok := p.D.S.ClockOffset(); !ok || off != skew {
		t.Fatalf("offset %v %v, want %v", off, ok, skew)
	}
	// A slow exchange whose delay is all on the way back (the peer answered 2 ms after the
	// PING left, the PONG took 398 ms): its sample is 198 ms off, but its RTT is higher, so
	// the estimate stays.
	now = exchange(t, p, now.Add(protocol.DefaultPingInterval), 400*time.Millisecond, now.Add(protocol.DefaultPingInterval+skew+2*time.Millisecond))
	if off, _ := p.D.S.ClockOffset(); off != skew {
		t.Fatalf("a slow exchange moved the estimate to %v", off)
	}
	// The peer's clock is stepped back by 80 s: exchanges as fast as the best one take
	// over (ties go to the newest).
	const stepped = 10 * time.Second
	now = exchange(t, p, now.Add(protocol.DefaultPingInterval), 4*time.Millisecond, now.Add(protocol.DefaultPingInterval+stepped+2*time.Millisecond))
	if off, _ := p.D.S.ClockOffset(); off != stepped {
		t.Fatalf("offset %v after the step, want %v", off, stepped)
	}
	// The fast sample of the old clock ages out of the filter after ClockSamples exchanges.
	for range protocol.ClockSamples {
		now = exchange(t, p, now.Add(protocol.DefaultPingInterval), 8*time.Millisecond, now.Add(protocol.DefaultPingInterval-stepped+4*time.Millisecond))
	}
	if off, _ := p.D.S.ClockOffset(); off != -stepped {
		t.Fatalf("offset %v, want %v once every sample is of the new clock", off, -stepped)
	}
}

// TestPongTimeOnVersion3Only: a version-3 PONG carries the answering side's wall clock in
// microseconds; a version-1 or version-2 PONG is exactly the PONG of those versions, and
// a PONG without a time leaves the peer unmeasured; a version-4 PONG carries no time but
// a stamp that echoes the PING's, from which the dialer measures the peer.
func TestPongTimeOnVersion3Only(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dc, lc   protocol.Config
		timed    bool
		stamped  bool
		interval time.Duration // until the dialer's first PING
	}{
		{"v4", prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2), false, true, protocol.DefaultIdlePingInterval},
		{"v3", prototest.ConfigV3(wire.RoleDialer, "a", 1), prototest.ConfigV3(wire.RoleListener, "b", 2), true, false, protocol.DefaultPingInterval},
		{"v2", prototest.ConfigV2(wire.RoleDialer, "a", 1), prototest.ConfigV2(wire.RoleListener, "b", 2), false, false, protocol.DefaultPingInterval},
		{"v1", prototest.ConfigV1(wire.RoleDialer, "a", 1), prototest.ConfigV1(wire.RoleListener, "b", 2), false, false, protocol.DefaultPingInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := established(t, tc.dc, tc.lc)
			at := p.Now.Add(tc.interval)
			must(t, p.D.S.Tick(at))
			var ping []byte
			var id uint64
			for _, m := range p.D.Drain() {
				for _, f := range frames(t, [][]byte{m}) {
					if b, ok := f.Value.(*wire.Ping); ok {
						ping, id = m, b.ID
						if got := b.Stamp != nil; got != tc.stamped {
							t.Fatalf("PING stamped %v, want %v", got, tc.stamped)
						}
					}
				}
			}
			if ping == nil {
				t.Fatal("no PING sent")
			}
			answered := at.Add(time.Millisecond)
			must(t, p.L.S.Receive(answered, ping))
			var pong *wire.Pong
			var raw []byte
			for _, m := range p.L.Drain() {
				for _, f := range frames(t, [][]byte{m}) {
					if b, ok := f.Value.(*wire.Pong); ok {
						pong, raw = b, m
					}
				}
			}
			if pong == nil {
				t.Fatal("no PONG")
			}
			if want := uint64(answered.UnixMicro()); tc.timed && pong.Time != want {
				t.Fatalf("PONG time %d, want %d", pong.Time, want)
			}
			if !tc.timed && pong.Time != 0 {
				t.Fatalf("a version-%s PONG carries time %d", tc.name, pong.Time)
			}
			want := &wire.Pong{ID: id}
			if tc.stamped {
				// Answered at once: the echo of the PING's stamp, held for nothing.
				want.Stamp = &wire.Stamp{Time: uint64(answered.UnixMicro()), Echo: uint64(at.UnixMicro())}
			}
			if !tc.timed && string(raw) != string(prototest.Frame(want)) {
				t.Fatalf("PONG %x is not the PONG of %+v", raw, want)
			}
			must(t, p.D.S.Receive(at.Add(2*time.Millisecond), raw))
			if _, ok := p.D.S.ClockOffset(); ok != (tc.timed || tc.stamped) {
				t.Fatalf("measured %v, want %v", ok, tc.timed || tc.stamped)
			}
			if rtt := p.D.S.RTT(); (tc.timed || tc.stamped) && rtt != 2*time.Millisecond {
				t.Fatalf("round trip %v, want 2ms", rtt)
			}
		})
	}
}
