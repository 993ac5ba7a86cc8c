package protocol_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"plait/protocol"
	"plait/protocol/handshake"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// TestAdvertisedVersions: this build implements exactly 1..4; configuration narrows it
// (a configured max of 1 is `--protocol-max 1`), never widens it (a max of 5 is clamped to
// 4), and the HELLO on the wire carries what Advertised reports.
func TestAdvertisedVersions(t *testing.T) {
	if r := handshake.Implemented(); r != (handshake.Range{Min: 1, Max: 4}) {
		t.Fatalf("implemented %v, want 1..4", r)
	}
	for _, c := range []struct {
		min, max uint64
		lo, hi   uint64 // advertised; 0..0: refused with bad-argument
	}{
		{0, 0, 1, 4},
		{1, 1, 1, 1}, // --protocol-max 1
		{0, 1, 1, 1},
		{1, 2, 1, 2}, // --protocol-max 2
		{0, 3, 1, 3}, // --protocol-max 3
		{0, 5, 1, 4}, // clamped to 4
		{1, 5, 1, 4},
		{1, 0, 1, 4},
		{2, 0, 2, 4},
		{2, 2, 2, 2},
		{2, 5, 2, 4},
		{0, 2, 1, 2},
		{3, 0, 3, 4},
		{3, 3, 3, 3},
		{4, 0, 4, 4},
		{4, 4, 4, 4},
		{4, 5, 4, 4},
		{2, 1, 0, 0},
		{5, 0, 0, 0},
		{5, 5, 0, 0},
		{5, 6, 0, 0},
	} {
		cfg := prototest.Config(wire.RoleDialer, "a", 1)
		cfg.MinVersion, cfg.MaxVersion = c.min, c.max
		s, err := protocol.New(cfg)
		if c.hi == 0 {
			we, isWire := err.(*wire.Error)
			if s != nil || !isWire || we.Code != wire.CodeBadArgument || we.Class != wire.ClassLocal {
				t.Errorf("configured %d..%d: %v, %v; want bad-argument", c.min, c.max, s, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("configured %d..%d: %v", c.min, c.max, err)
			continue
		}
		if lo, hi := s.Advertised(); lo != c.lo || hi != c.hi {
			t.Errorf("configured %d..%d advertises %d..%d, want %d..%d", c.min, c.max, lo, hi, c.lo, c.hi)
		}
		must(t, s.Start(prototest.Epoch, prototest.Nonce(1)))
		h := frames(t, s.Ready().Messages)[0].Value.(*wire.Hello)
		if h.MinVersion != c.lo || h.MaxVersion != c.hi {
			t.Errorf("configured %d..%d: HELLO offers %d..%d, want %d..%d", c.min, c.max, h.MinVersion, h.MaxVersion, c.lo, c.hi)
		}
	}
	// prototest's configurations: the newest version, and pinned to versions 3, 2 and 1.
	for _, c := range []struct {
		cfg    protocol.Config
		lo, hi uint64
	}{
		{prototest.Config(wire.RoleListener, "b", 2), 1, 4},
		{prototest.ConfigV3(wire.RoleListener, "b", 2), 1, 3},
		{prototest.ConfigV2(wire.RoleListener, "b", 2), 1, 2},
		{prototest.ConfigV1(wire.RoleListener, "b", 2), 1, 1},
	} {
		s, err := protocol.New(c.cfg)
		must(t, err)
		if lo, hi := s.Advertised(); lo != c.lo || hi != c.hi {
			t.Errorf("%+v advertises %d..%d, want %d..%d", c.cfg, lo, hi, c.lo, c.hi)
		}
	}
}

// TestNegotiateRule: the negotiated version is the highest in both ranges (for builds that
// implement more than one version), and none is an error naming both ranges.
func TestNegotiateRule(t *testing.T) {
	for _, c := range []struct {
		local, peer handshake.Range
		want        uint64 // 0: none
	}{
		{handshake.Range{Min: 1, Max: 1}, handshake.Range{Min: 1, Max: 1}, 1},
		{handshake.Range{Min: 1, Max: 3}, handshake.Range{Min: 2, Max: 5}, 3},
		{handshake.Range{Min: 2, Max: 5}, handshake.Range{Min: 1, Max: 3}, 3},
		{handshake.Range{Min: 1, Max: 4}, handshake.Range{Min: 4, Max: 4}, 4},
		{handshake.Range{Min: 1, Max: 1}, handshake.Range{Min: 3, Max: 5}, 0},
		{handshake.Range{Min: 4, Max: 6}, handshake.Range{Min: 1, Max: 3}, 0},
	} {
		v, _, err := handshake.Negotiate(c.local, c.peer, nil, nil)
		if c.want == 0 {
			want := "local " + c.local.String() + ", peer " + c.peer.String()
			if err == nil || err.Code != wire.CodeUnsupportedVersion || !strings.Contains(err.Message, want) {
				t.Errorf("%v with %v: %v, want unsupported-version naming %q", c.local, c.peer, err, want)
			}
			continue
		}
		if err != nil || v != c.want {
			t.Errorf("%v with %v: %d, %v; want %d", c.local, c.peer, v, err, c.want)
		}
	}
}

// transcript orders two HELLO bodies by role: the dialer's first.
func transcript(self wire.Role, own, peer []byte) (d, l []byte) {
	if self == wire.RoleDialer {
		return own, peer
	}
	return peer, own
}

// TestVersionNegotiationWithHandPlayedPeer: a peer played by hand, offering each range,
// against a session of either role, of this build (1..2) and configured to version 1 (as
// `--protocol-max 1`, what release 0.1 implements).
func TestVersionNegotiationWithHandPlayedPeer(t *testing.T) {
	for _, local := range []handshake.Range{{Min: 1, Max: 2}, {Min: 1, Max: 1}} {
		for _, role := range []wire.Role{wire.RoleListener, wire.RoleDialer} {
			other := 1 - role
			for _, c := range []struct {
				min, max uint64
				version  uint64 // 0: unsupported
				v1       uint64 // the version against a local 1..1
			}{
				{1, 1, 1, 1},
				{1, 2, 2, 1},
				{1, 5, 2, 1},
				{2, 2, 2, 0},
				{2, 7, 2, 0},
				{3, 5, 0, 0},
			} {
				version := c.version
				if local.Max == 1 {
					version = c.v1
				}
				name := "local " + local.String() + " " + role.String() + " vs " + handshake.Range{Min: c.min, Max: c.max}.String()
				t.Run(name, func(t *testing.T) {
					in := recordFed(t)
					cfg := prototest.Config(role, "s", 1)
					cfg.MaxVersion = local.Max
					s, err := protocol.New(cfg)
					must(t, err)
					must(t, s.Start(prototest.Epoch, prototest.Nonce(1)))
					own := s.Ready().Messages[0][wire.HeaderSize:]
					pb := prototest.HelloBody(&wire.Hello{Role: other, Name: "peer", Origin: prototest.Origin(7),
						MinVersion: c.min, MaxVersion: c.max, Nonce: prototest.Nonce(50)})
					must(t, in.receive(s, prototest.Epoch, helloFrame(pb)))
					rd := s.Ready()
					sent := frames(t, rd.Messages)
					if version == 0 {
						if s.State() != protocol.StateClosed {
							t.Fatalf("state %v", s.State())
						}
						e := s.Err()
						want := "local " + local.String() + ", peer " + handshake.Range{Min: c.min, Max: c.max}.String()
						if e.Code != wire.CodeUnsupportedVersion || e.Class != wire.ClassUnsupported || !strings.Contains(e.Message, want) ||
							e.Frame != wire.TypeHello || e.Offset != 0 {
							t.Fatalf("err %+v, want unsupported-version naming %q at the HELLO", e, want)
						}
						if len(sent) != 1 {
							t.Fatalf("sent %d frames; no AUTH may follow a failed negotiation", len(sent))
						}
						cl := sent[0].Value.(*wire.Close)
						if cl.Code != wire.CodeUnsupportedVersion || cl.Class != wire.ClassUnsupported || !strings.Contains(cl.Message, want) {
							t.Fatalf("CLOSE %+v, want its message to name %q", cl, want)
						}
						if len(rd.Events) != 1 || rd.Events[0].Kind != protocol.EventClosed {
							t.Fatalf("events %v", kinds(rd.Events))
						}
						return
					}
					d, l := transcript(role, own, pb)
					if len(sent) != 1 || sent[0].Type != wire.TypeAuth {
						t.Fatalf("sent %+v, want AUTH", sent)
					}
					if !bytes.Equal(prototest.Frame(sent[0].Value), prototest.AuthFor(secret, role, d, l)) {
						t.Fatal("the session's AUTH is not the MAC over both HELLOs as they crossed the wire")
					}
					if s.State() != protocol.StateAuthenticating {
						t.Fatalf("state %v", s.State())
					}
					must(t, in.receive(s, prototest.Epoch, prototest.AuthFor(secret, other, d, l)))
					rd = s.Ready()
					if s.State() != protocol.StateEstablished || len(rd.Events) != 1 || rd.Events[0].Kind != protocol.EventHandshake {
						t.Fatalf("state %v, err %v, events %v", s.State(), s.Err(), kinds(rd.Events))
					}
					if len(rd.Messages) != 0 {
						t.Fatalf("sent %d messages once established; the caller starts the streams", len(rd.Messages))
					}
					h := rd.Events[0].Handshake
					want := protocol.HandshakeInfo{Version: version, PeerName: "peer", PeerOrigin: prototest.Origin(7),
						PeerMin: c.min, PeerMax: c.max, Authenticated: true}
					if h.Version != want.Version || h.PeerName != want.PeerName || h.PeerOrigin != want.PeerOrigin ||
						h.PeerMin != want.PeerMin || h.PeerMax != want.PeerMax || !h.Authenticated || len(h.Caps) != 0 {
						t.Fatalf("handshake %+v, want %+v", h, want)
					}
					if got := s.Handshake(); got.Version != version || got.PeerMax != c.max {
						t.Fatalf("Handshake() %+v", got)
					}
				})
			}
		}
	}
}

// TestNegotiationBetweenSessions: two sessions of this build negotiate version 4; a
// session of this build and one configured to version 3, 2 or 1 (as `--protocol-max`, or
// as releases 0.3, 0.2 and 0.1, which offer 1..3, 1..2 and 1..1) negotiate that version,
// in either role; each side reports the peer's range.
func TestNegotiationBetweenSessions(t *testing.T) {
	cur, v3, v2, v1 := prototest.Config, prototest.ConfigV3, prototest.ConfigV2, prototest.ConfigV1
	for _, c := range []struct {
		name             string
		dialer, listener func(wire.Role, string, byte) protocol.Config
		dMax, lMax       uint64 // advertised max versions
		version          uint64
	}{
		{"current with current", cur, cur, 4, 4, 4},
		{"current dialer with a version-3 listener", cur, v3, 4, 3, 3},
		{"version-3 dialer with a current listener", v3, cur, 3, 4, 3},
		{"current dialer with a version-2 listener", cur, v2, 4, 2, 2},
		{"version-2 dialer with a current listener", v2, cur, 2, 4, 2},
		{"current dialer with a version-1 listener", cur, v1, 4, 1, 1},
		{"version-1 dialer with a current listener", v1, cur, 1, 4, 1},
		{"version 3 with version 3", v3, v3, 3, 3, 3},
		{"version 1 with version 1", v1, v1, 1, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := established(t, c.dialer(wire.RoleDialer, "a", 1), c.listener(wire.RoleListener, "b", 2))
			for _, side := range []struct {
				s        *prototest.Side
				peerMax  uint64
				ownMax   uint64
				peerName string
			}{{p.D, c.lMax, c.dMax, "b"}, {p.L, c.dMax, c.lMax, "a"}} {
				ev := side.s.Last(protocol.EventHandshake)
				if ev == nil || ev.Handshake.Version != c.version || side.s.S.Handshake().Version != c.version {
					t.Fatalf("%s: handshake %+v, want version %d", side.peerName, ev, c.version)
				}
				h := ev.Handshake
				if h.PeerMin != 1 || h.PeerMax != side.peerMax || h.PeerName != side.peerName || !h.Authenticated {
					t.Fatalf("handshake %+v: want peer %s offering 1..%d", h, side.peerName, side.peerMax)
				}
				hello := frames(t, side.s.Sent[:1])[0].Value.(*wire.Hello)
				if hello.MinVersion != 1 || hello.MaxVersion != side.ownMax {
					t.Fatalf("HELLO offers %d..%d, want 1..%d", hello.MinVersion, hello.MaxVersion, side.ownMax)
				}
			}
			// The negotiated version decides which commands the session takes.
			v1err, v2err := p.D.S.V1().Subscribe(0, nil), p.D.S.V2().Subscribe(nil)
			if c.version == 1 {
				if v1err != nil || v2err == nil || v2err.(*wire.Error).Code != wire.CodeInvalidState {
					t.Fatalf("version 1: Subscribe %v, SubscribeOrigins %v", v1err, v2err)
				}
			} else if v2err != nil || v1err == nil || v1err.(*wire.Error).Code != wire.CodeInvalidState {
				t.Fatalf("version 2: Subscribe %v, SubscribeOrigins %v", v1err, v2err)
			}
			v4err := p.D.S.V4().Forget(1) // version 4's commands: refused below 4, then about the id
			if code := v4err.(*wire.Error).Code; (c.version < 4) != (code == wire.CodeInvalidState) {
				t.Fatalf("version %d: Forget %v", c.version, v4err)
			}
		})
	}
}

// TestCapabilityIntersection: both sides end with the capabilities both offered.
func TestCapabilityIntersection(t *testing.T) {
	for _, c := range []struct {
		d, l, want []string
	}{
		{nil, nil, nil},
		{[]string{"a"}, nil, nil},
		{nil, []string{"a"}, nil},
		{[]string{"a"}, []string{"b"}, nil},
		{[]string{"a", "b", "c"}, []string{"b", "c", "d"}, []string{"b", "c"}},
		{[]string{"compress.zstd", "v2.credits"}, []string{"compress.zstd", "v2.credits"}, []string{"compress.zstd", "v2.credits"}},
		{[]string{"a", "c", "e", "g"}, []string{"b", "c", "d", "g", "h"}, []string{"c", "g"}},
	} {
		dc := prototest.Config(wire.RoleDialer, "a", 1)
		lc := prototest.Config(wire.RoleListener, "b", 2)
		dc.Capabilities, lc.Capabilities = c.d, c.l
		p := established(t, dc, lc)
		// Both sides speak version 4: anti-entropy (version 3) and the leaf role a build
		// offers by itself.
		want := handshake.WithCap(handshake.WithCap(slices.Clone(c.want), wire.CapAntiEntropy), wire.CapLeaf)
		for _, side := range []*prototest.Side{p.D, p.L} {
			ev := side.Last(protocol.EventHandshake)
			if ev == nil || !slices.Equal(ev.Handshake.Caps, want) || !slices.Equal(side.S.Handshake().Caps, want) {
				t.Errorf("%v ∩ %v: got %v, want %v", c.d, c.l, ev.Handshake.Caps, want)
			}
		}
	}
}

// rewriteHello returns a Pair tap that changes the HELLO one side sends, in flight.
func rewriteHello(from func(p *prototest.Pair) *prototest.Side, p *prototest.Pair, mod func(h *wire.Hello)) func(*prototest.Side, []byte) []byte {
	return func(s *prototest.Side, msg []byte) []byte {
		if s != from(p) {
			return msg
		}
		fs, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil {
			panic(err)
		}
		for i := range fs {
			if h, ok := fs[i].Value.(*wire.Hello); ok {
				mod(h)
			}
		}
		out, eerr := wire.EncodeMessage(fs)
		if eerr != nil {
			panic(eerr)
		}
		return out
	}
}

// assertAuthFailed: both sides closed themselves with auth-failed on the peer's AUTH,
// sent a CLOSE saying so, and neither reported a handshake.
func assertAuthFailed(t *testing.T, p *prototest.Pair) {
	t.Helper()
	for _, side := range []*prototest.Side{p.D, p.L} {
		e := side.S.Err()
		if side.S.State() != protocol.StateClosed || e == nil || e.Code != wire.CodeAuthFailed || e.Class != wire.ClassRefused || e.Frame != wire.TypeAuth {
			t.Fatalf("err %+v, state %v", e, side.S.State())
		}
		if ev := side.Last(protocol.EventClosed); ev == nil || ev.ByPeer {
			t.Fatalf("closed event %+v", ev)
		}
		if side.Count(protocol.EventHandshake) != 0 || side.S.Handshake().Version != 0 {
			t.Fatal("a handshake was reported")
		}
		fs := frames(t, side.Sent)
		cl, ok := fs[len(fs)-1].Value.(*wire.Close)
		if !ok || cl.Code != wire.CodeAuthFailed || cl.Class != wire.ClassRefused {
			t.Fatalf("last frame sent %+v", fs[len(fs)-1])
		}
		for _, f := range fs {
			if f.Type != wire.TypeHello && f.Type != wire.TypeAuth && f.Type != wire.TypeClose {
				t.Fatalf("sent %s before it was established", f.Type)
			}
		}
	}
}

// TestManInTheMiddle: a HELLO altered in flight makes both sides' MACs disagree.
func TestManInTheMiddle(t *testing.T) {
	dialer := func(p *prototest.Pair) *prototest.Side { return p.D }
	listener := func(p *prototest.Pair) *prototest.Side { return p.L }
	for _, c := range []struct {
		name string
		from func(p *prototest.Pair) *prototest.Side
		mod  func(h *wire.Hello)
		fail bool
	}{
		{"unchanged (control)", dialer, func(h *wire.Hello) {}, false},
		{"dialer's capabilities narrowed", dialer, func(h *wire.Hello) { h.Caps = h.Caps[1:] }, true},
		{"listener's capabilities dropped", listener, func(h *wire.Hello) { h.Caps = nil }, true},
		{"dialer's message limit lowered", dialer, func(h *wire.Hello) { h.MaxMessage, h.MaxFrame = 64<<10, 64<<10-wire.HeaderSize }, true},
		{"listener's max frame body lowered", listener, func(h *wire.Hello) { h.MaxFrame = wire.MinMaxFrame }, true},
		{"listener's max frame body dropped", listener, func(h *wire.Hello) { h.MaxFrame = 0 }, true},
		// Not self-connect: identity is checked only after the MAC, so nobody on the path
		// can make a node refuse a genuine peer.
		{"dialer's origin replaced by the listener's", dialer, func(h *wire.Hello) { h.Origin = prototest.Origin(2) }, true},
		{"listener's origin replaced by the dialer's", listener, func(h *wire.Hello) { h.Origin = prototest.Origin(1) }, true},
		{"dialer's name changed", dialer, func(h *wire.Hello) { h.Name = "mallory" }, true},
		{"listener's nonce replaced", listener, func(h *wire.Hello) { h.Nonce = prototest.Nonce(99) }, true},
		{"an unknown key added to the dialer's HELLO", dialer, func(h *wire.Hello) { h.Extra = wire.Extra{40: hx("01")} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dc := prototest.Config(wire.RoleDialer, "a", 1)
			lc := prototest.Config(wire.RoleListener, "b", 2)
			dc.Capabilities = []string{"x", "y", "z"}
			lc.Capabilities = []string{"x", "y", "z"}
			lc.Limits.MaxFrameBody = 1 << 20 // advertised in key 9
			p, err := prototest.NewPair(dc, lc)
			must(t, err)
			p.Tap = rewriteHello(c.from, p, c.mod)
			p.Pump(10)
			if !c.fail {
				if p.D.S.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
					t.Fatalf("a tap that changes nothing broke the handshake: %v / %v", p.D.S.Err(), p.L.S.Err())
				}
				return
			}
			assertAuthFailed(t, p)
		})
	}
}

// TestDowngradeByHandPlayedDialer: a dialer offering 1..5, narrowed to 1..1 in flight, is
// caught by the MAC on both ends. Against this build (1..2) it is a real downgrade, from
// version 2 to 1; against a listener configured to version 1 it picks 1 either way, and
// the MAC still fails.
func TestDowngradeByHandPlayedDialer(t *testing.T) {
	in := recordFed(t)
	for _, local := range []uint64{2, 1} {
		for _, mitm := range []bool{false, true} {
			s, own := handshakeTarget(t, func(c *protocol.Config) { c.MaxVersion = local }) // listener "b"
			offered := prototest.HelloBody(&wire.Hello{Role: wire.RoleDialer, Name: "p", Origin: prototest.Origin(7),
				MinVersion: 1, MaxVersion: 5, Nonce: prototest.Nonce(40)})
			delivered := offered
			if mitm {
				delivered = prototest.HelloBody(&wire.Hello{Role: wire.RoleDialer, Name: "p", Origin: prototest.Origin(7),
					MinVersion: 1, MaxVersion: 1, Nonce: prototest.Nonce(40)})
			}
			must(t, in.receive(s, prototest.Epoch, helloFrame(delivered)))
			sent := frames(t, s.Ready().Messages)
			if len(sent) != 1 || sent[0].Type != wire.TypeAuth {
				t.Fatalf("local max %d, mitm %v: sent %+v", local, mitm, sent)
			}
			theirs := prototest.Frame(sent[0].Value)
			// The dialer checks the listener's AUTH against the HELLO it really sent.
			dialerAccepts := bytes.Equal(theirs, prototest.AuthFor(secret, wire.RoleListener, offered, own))
			if dialerAccepts == mitm {
				t.Fatalf("local max %d, mitm %v: the dialer would accept the listener's AUTH: %v", local, mitm, dialerAccepts)
			}
			// The dialer's AUTH covers the HELLO it sent.
			must(t, in.receive(s, prototest.Epoch, prototest.AuthFor(secret, wire.RoleDialer, offered, own)))
			rd := s.Ready()
			if !mitm {
				if s.State() != protocol.StateEstablished || s.Handshake().PeerMax != 5 || s.Handshake().Version != local {
					t.Fatalf("local max %d without a MITM: %v %+v", local, s.Err(), s.Handshake())
				}
				continue
			}
			e := s.Err()
			if e == nil || e.Code != wire.CodeAuthFailed || e.Frame != wire.TypeAuth || e.Offset != 0 {
				t.Fatalf("local max %d: listener err %+v", local, e)
			}
			if slices.ContainsFunc(rd.Events, func(ev protocol.Event) bool { return ev.Kind == protocol.EventHandshake }) {
				t.Fatal("handshake reported")
			}
			if fs := frames(t, rd.Messages); len(fs) != 1 || fs[0].Value.(*wire.Close).Code != wire.CodeAuthFailed {
				t.Fatalf("sent %+v", fs)
			}
		}
	}
}

// offsetOf returns the offset of the first frame of type typ in any of msgs.
func offsetOf(t *testing.T, msgs [][]byte, typ wire.Type) int {
	t.Helper()
	for _, m := range msgs {
		fs, _ := wire.DecodeMessage(m, wire.DefaultMaxMessage, wire.MaxFrameBody)
		for _, f := range fs {
			if f.Type == typ {
				return f.Offset
			}
		}
	}
	t.Fatalf("no %s frame", typ)
	return -1
}

// TestNegotiationSecrets: a wrong secret is auth-failed on both sides, naming the AUTH
// frame where it was received; an empty secret on both sides establishes, unauthenticated.
func TestNegotiationSecrets(t *testing.T) {
	for _, c := range []struct {
		name   string
		d, l   []byte
		ok     bool
		authed bool
	}{
		{"same secret", []byte("s"), []byte("s"), true, true},
		{"both empty", nil, nil, true, false},
		{"different secrets", []byte("s"), []byte("t"), false, false},
		{"one empty", []byte("s"), nil, false, false},
		{"one byte differs", []byte("secret"), []byte("secreT"), false, false},
		{"prefix", []byte("secret"), []byte("secret2"), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dc := prototest.Config(wire.RoleDialer, "a", 1)
			lc := prototest.Config(wire.RoleListener, "b", 2)
			dc.Secret, lc.Secret = c.d, c.l
			p, err := prototest.NewPair(dc, lc)
			must(t, err)
			p.Pump(10)
			if c.ok {
				for _, side := range []*prototest.Side{p.D, p.L} {
					ev := side.Last(protocol.EventHandshake)
					if side.S.State() != protocol.StateEstablished || ev == nil || ev.Handshake.Authenticated != c.authed {
						t.Fatalf("state %v err %v event %+v", side.S.State(), side.S.Err(), ev)
					}
				}
				return
			}
			assertAuthFailed(t, p)
			if got, want := p.D.S.Err().Offset, offsetOf(t, p.L.Sent, wire.TypeAuth); got != want {
				t.Fatalf("dialer: AUTH at offset %d, want %d", got, want)
			}
			if got, want := p.L.S.Err().Offset, offsetOf(t, p.D.Sent, wire.TypeAuth); got != want {
				t.Fatalf("listener: AUTH at offset %d, want %d", got, want)
			}
		})
	}
}

// TestAuthReplay: an AUTH recorded on one connection does not verify on another, because
// the listener's nonce differs; replayed into a listener with the same nonce (the control)
// it would.
func TestAuthReplay(t *testing.T) {
	dc := prototest.Config(wire.RoleDialer, "a", 1)
	lc := prototest.Config(wire.RoleListener, "b", 2)
	p := established(t, dc, lc)
	// Record the dialer's HELLO and AUTH frames from connection 1.
	var hello, auth []byte
	for _, m := range p.D.Sent {
		fs, _ := wire.DecodeMessage(m, wire.DefaultMaxMessage, wire.MaxFrameBody)
		for _, f := range fs {
			end := f.Offset + wire.HeaderSize + len(f.Body)
			switch f.Type {
			case wire.TypeHello:
				hello = m[f.Offset:end]
			case wire.TypeAuth:
				auth = m[f.Offset:end]
			}
		}
	}
	if hello == nil || auth == nil {
		t.Fatal("nothing recorded")
	}
	in := recordFed(t)
	for _, c := range []struct {
		nonce byte
		ok    bool
	}{
		{2, true},  // the recorded connection's nonce: the same transcript
		{3, false}, // a fresh connection
		{200, false},
	} {
		s, err := protocol.New(lc)
		must(t, err)
		must(t, s.Start(prototest.Epoch, prototest.Nonce(c.nonce)))
		s.Ready()
		must(t, in.receive(s, prototest.Epoch, hello))
		must(t, in.receive(s, prototest.Epoch, auth))
		rd := s.Ready()
		if c.ok {
			if s.State() != protocol.StateEstablished {
				t.Fatalf("nonce %d: the control replay failed: %v", c.nonce, s.Err())
			}
			continue
		}
		if e := s.Err(); e == nil || e.Code != wire.CodeAuthFailed || e.Frame != wire.TypeAuth {
			t.Fatalf("nonce %d: replayed AUTH: %v", c.nonce, e)
		}
		if slices.ContainsFunc(rd.Events, func(ev protocol.Event) bool { return ev.Kind == protocol.EventHandshake }) {
			t.Fatalf("nonce %d: handshake reported", c.nonce)
		}
	}

	// Reflection: the listener's own AUTH sent back to it does not verify (the MAC covers
	// the sender's role).
	s, own := handshakeTarget(t, nil)
	pb := peerHello(nil)
	must(t, in.receive(s, prototest.Epoch, helloFrame(pb)))
	sent := frames(t, s.Ready().Messages)
	must(t, in.receive(s, prototest.Epoch, prototest.Frame(sent[0].Value)))
	if e := s.Err(); e == nil || e.Code != wire.CodeAuthFailed {
		t.Fatalf("reflected AUTH: %v", e)
	}
	if !bytes.Equal(prototest.Frame(sent[0].Value), prototest.AuthFor(secret, wire.RoleListener, pb, own)) {
		t.Fatal("the listener's AUTH is not its MAC over the transcript")
	}
}

// TestSelfConnectAfterAuth: a peer with this node's own origin id is refused with
// self-connect only once its AUTH verifies: the session answers its HELLO with AUTH as
// usual, and a wrong MAC is auth-failed, not self-connect. Both sides of a node talking to
// itself close with self-connect.
func TestSelfConnectAfterAuth(t *testing.T) {
	t.Run("hand-played peer", func(t *testing.T) {
		in := recordFed(t)
		for _, c := range []struct {
			name   string
			secret []byte
			expect string // the listener's ExpectedPeer
			code   wire.Code
		}{
			{"valid MAC", secret, "", wire.CodeSelfConnect},
			{"valid MAC, unexpected name", secret, "q", wire.CodeSelfConnect},
			{"wrong MAC", []byte("wrong"), "", wire.CodeAuthFailed},
		} {
			s, own := handshakeTarget(t, func(cfg *protocol.Config) { cfg.ExpectedPeer = c.expect }) // listener, origin 2
			pb := peerHello(func(h *wire.Hello) { h.Origin = prototest.Origin(2) })
			must(t, in.receive(s, prototest.Epoch, helloFrame(pb)))
			rd := s.Ready()
			if s.State() != protocol.StateAuthenticating || len(rd.Events) != 0 {
				t.Fatalf("%s: a HELLO with our origin id: state %v, err %v, events %v", c.name, s.State(), s.Err(), kinds(rd.Events))
			}
			sent := frames(t, rd.Messages)
			if len(sent) != 1 || !bytes.Equal(prototest.Frame(sent[0].Value), prototest.AuthFor(secret, wire.RoleListener, pb, own)) {
				t.Fatalf("%s: sent %+v, want the listener's AUTH", c.name, sent)
			}
			must(t, in.receive(s, prototest.Epoch, prototest.AuthFor(c.secret, wire.RoleDialer, pb, own)))
			rd = s.Ready()
			e := s.Err()
			if s.State() != protocol.StateClosed || e == nil || e.Code != c.code || e.Frame != wire.TypeAuth || e.Offset != 0 {
				t.Fatalf("%s: err %+v, want %s at the AUTH", c.name, e, c.code)
			}
			if fs := frames(t, rd.Messages); len(fs) != 1 || fs[0].Value.(*wire.Close).Code != c.code {
				t.Fatalf("%s: sent %+v", c.name, fs)
			}
			if slices.ContainsFunc(rd.Events, func(ev protocol.Event) bool { return ev.Kind == protocol.EventHandshake }) {
				t.Fatalf("%s: handshake reported", c.name)
			}
		}
	})
	t.Run("a node dialing itself", func(t *testing.T) {
		dc := prototest.Config(wire.RoleDialer, "a", 5)
		lc := prototest.Config(wire.RoleListener, "a", 5)
		p, err := prototest.NewPair(dc, lc)
		must(t, err)
		p.Pump(10)
		for _, side := range []*prototest.Side{p.D, p.L} {
			e := side.S.Err()
			if e == nil || e.Code != wire.CodeSelfConnect || e.Class != wire.ClassRefused || e.Frame != wire.TypeAuth {
				t.Fatalf("err %+v", e)
			}
			if ev := side.Last(protocol.EventClosed); ev == nil || ev.ByPeer || side.Count(protocol.EventHandshake) != 0 {
				t.Fatalf("events %v", kinds(side.Events))
			}
			var types []wire.Type
			for _, f := range frames(t, side.Sent) {
				types = append(types, f.Type)
			}
			if !slices.Equal(types, []wire.Type{wire.TypeHello, wire.TypeAuth, wire.TypeClose}) {
				t.Fatalf("sent %v", types)
			}
		}
	})
	t.Run("a node dialing itself with another secret", func(t *testing.T) {
		dc := prototest.Config(wire.RoleDialer, "a", 5)
		lc := prototest.Config(wire.RoleListener, "a", 5)
		lc.Secret = []byte("other")
		p, err := prototest.NewPair(dc, lc)
		must(t, err)
		p.Pump(10)
		assertAuthFailed(t, p)
	})
}

// TestAdvertisedFrameLimits: a session advertises its limits in HELLO (key 8 max message,
// key 9 max frame body), and keeps the peer's: Offer refuses, with frame-too-large, a
// transaction whose TXN1 body exceeds the peer's max frame body, and queues nothing for it.
func TestAdvertisedFrameLimits(t *testing.T) {
	for _, c := range []struct {
		limits     protocol.Limits
		frame, msg uint64
	}{
		{protocol.Limits{}, wire.MaxFrameBody, wire.DefaultMaxMessage},
		{protocol.Limits{MaxFrameBody: 1024}, 1024, wire.DefaultMaxMessage},
		{protocol.Limits{MaxFrameBody: 4096, MaxMessage: 65536}, 4096, 65536},
	} {
		cfg := prototest.Config(wire.RoleDialer, "a", 1)
		cfg.Limits = c.limits
		s, err := protocol.New(cfg)
		must(t, err)
		must(t, s.Start(prototest.Epoch, prototest.Nonce(1)))
		h := frames(t, s.Ready().Messages)[0].Value.(*wire.Hello)
		if f, m := h.Limits(); f != c.frame || m != c.msg {
			t.Errorf("limits %+v: HELLO advertises max frame body %d, max message %d; want %d, %d", c.limits, f, m, c.frame, c.msg)
		}
	}

	// A hand-played peer that advertises a max frame body of 1024 (the smallest allowed).
	s, own := handshakeTarget(t, nil) // listener, origin 2
	pb := peerHello(func(h *wire.Hello) { h.MaxFrame = wire.MinMaxFrame })
	must(t, s.Receive(prototest.Epoch, cat(helloFrame(pb), prototest.AuthFor(secret, wire.RoleDialer, pb, own), prototest.Frame(&wire.Subscribe1{}))))
	must(t, s.SetOriginName(fxOrigin, "nine"))
	s.Ready()
	if s.State() != protocol.StateEstablished {
		t.Fatalf("state %v, err %v", s.State(), s.Err())
	}
	over := entryOfBody(fxOrigin, wire.MinMaxFrame+1)
	budget := s.SendBudget()
	err := s.V1().Offer(1, over.Raw)
	if we, ok := err.(*wire.Error); !ok || we.Code != wire.CodeFrameTooLarge || we.Class != wire.ClassResourceLimit || we.Offset != wire.NoOffset {
		t.Fatalf("Offer of a %d-byte TXN1 body to a peer accepting %d: %v", 8+len(over.Raw), wire.MinMaxFrame, err)
	}
	if s.HasReady() || s.SendBudget() != budget || s.Stats().TxnsSent != 0 || s.State() != protocol.StateEstablished {
		t.Fatal("a refused Offer queued something or changed the session")
	}
	// The largest body the peer accepts goes out, at the same position, after its origin's
	// ORIGIN (which the refused Offer did not send).
	at := entryOfBody(fxOrigin, wire.MinMaxFrame)
	must(t, s.V1().Offer(1, at.Raw))
	fs := frames(t, s.Ready().Messages)
	if len(fs) != 2 || fs[0].Type != wire.TypeOrigin || fs[1].Type != wire.TypeTxn1 || len(fs[1].Body) != wire.MinMaxFrame {
		t.Fatalf("sent %+v", fs)
	}
	// The peer would accept it: it decodes within the advertised limit.
	msg := cat(prototest.Frame(fs[0].Value), prototest.RawFrame(wire.TypeTxn1, 0, 0, fs[1].Body))
	if _, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MinMaxFrame); err != nil {
		t.Fatalf("the peer would reject it: %v", err)
	}
}

// TestChannelBinding: sides over one TLS channel (equal exporter values) establish with
// tls-exporter negotiated and the handshake marked bound; a handshake relayed between two
// channels (different values) fails auth-failed on both sides even with the right secret;
// a side over TLS refuses a peer that does not bind (auth-failed on its HELLO); a binding
// past its bound is refused by New.
func TestChannelBinding(t *testing.T) {
	secret := []byte("0123456789abcdef")
	pair := func(db, lb []byte) *prototest.Pair {
		dc := prototest.Config(wire.RoleDialer, "a", 1)
		lc := prototest.Config(wire.RoleListener, "b", 2)
		dc.Secret, lc.Secret = secret, secret
		dc.ChannelBinding, lc.ChannelBinding = db, lb
		p, err := prototest.NewPair(dc, lc)
		must(t, err)
		p.Pump(10)
		return p
	}
	one := bytes.Repeat([]byte{1}, handshake.ExporterLength)
	other := bytes.Repeat([]byte{2}, handshake.ExporterLength)

	p := pair(one, slices.Clone(one))
	for _, side := range []*prototest.Side{p.D, p.L} {
		h := side.S.Handshake()
		if side.S.State() != protocol.StateEstablished || !h.Bound || !slices.Contains(h.Caps, handshake.CapTLSExporter) {
			t.Fatalf("same channel: state %v err %v handshake %+v", side.S.State(), side.S.Err(), h)
		}
	}

	assertAuthFailed(t, pair(one, other))

	p = pair(one, nil)
	if e := p.D.S.Err(); p.D.S.State() != protocol.StateClosed || e == nil || e.Code != wire.CodeAuthFailed || e.Frame != wire.TypeHello {
		t.Fatalf("bound dialer, unbound listener: dialer state %v err %+v", p.D.S.State(), e)
	}
	if p.L.S.State() == protocol.StateEstablished {
		t.Fatal("bound dialer, unbound listener: the listener established")
	}

	// Without a binding on either side nothing changes: no capability, not bound.
	p = pair(nil, nil)
	for _, side := range []*prototest.Side{p.D, p.L} {
		if h := side.S.Handshake(); side.S.State() != protocol.StateEstablished || h.Bound || slices.Contains(h.Caps, handshake.CapTLSExporter) {
			t.Fatalf("no binding: state %v handshake %+v", side.S.State(), h)
		}
	}

	cfg := prototest.Config(wire.RoleDialer, "a", 1)
	cfg.ChannelBinding = make([]byte, handshake.MaxChannelBinding)
	if _, err := protocol.New(cfg); err != nil {
		t.Fatalf("a binding at the bound: %v", err)
	}
	cfg.ChannelBinding = make([]byte, handshake.MaxChannelBinding+1)
	if _, err := protocol.New(cfg); err == nil || err.(*wire.Error).Code != wire.CodeBadArgument {
		t.Fatalf("a binding one past the bound: %v", err)
	}
}
