package protocol_test

import (
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Version 3: floors in HEADS and the PURGED answer.

// v3pair is an established version-3 pair: the dialer subscribes, the listener sends; the
// listener names origin o.
func v3pair(t *testing.T, o wire.OriginID) *prototest.Pair {
	t.Helper()
	p := established(t, prototest.ConfigV3(wire.RoleDialer, "r", 1), prototest.ConfigV3(wire.RoleListener, "s", 2))
	if v := p.D.S.Handshake().Version; v != 3 {
		t.Fatalf("version %d", v)
	}
	must(t, p.L.S.SetOriginName(o, "seven"))
	return p
}

// TestFloorsAdvertised: AdvertiseFloors sends the floors that moved, never one going back,
// and the subscriber's EventHeads carries them.
func TestFloorsAdvertised(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 6, 1, 4)
	p := v3pair(t, o)
	must(t, p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 2, Hash: chain[1].Hash}}))
	p.Pump(10)
	ev := p.D.Last(protocol.EventHeads)
	if ev == nil || len(ev.Heads.Floors) != 1 || ev.Heads.Floors[0].Seq != 2 || ev.Heads.Floors[0].Hash != chain[1].Hash {
		t.Fatalf("the subscriber's heads event: %+v", ev)
	}
	sent := len(p.L.Sent)
	must(t, p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 2, Hash: chain[1].Hash}})) // unmoved: nothing
	p.Pump(10)
	if len(p.L.Sent) != sent {
		t.Errorf("an unmoved floor was sent again")
	}
	if err := p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 1, Hash: chain[0].Hash}}); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("a floor going back: %v, want bad-argument", err)
	}
	other := prototest.Origin(9)
	if err := p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: other, Seq: 1, Hash: chain[0].Hash}}); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("a floor of an unnamed origin: %v, want bad-argument", err)
	}
}

// TestFloorsRefused: a floor going back closes with out-of-order; a floor of an origin the
// peer never named with unexpected-frame.
func TestFloorsRefused(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 6, 1, 4)
	for _, c := range []struct {
		name string
		msg  func(p *prototest.Pair) []byte
		code wire.Code
	}{
		{"a floor going back", func(p *prototest.Pair) []byte {
			must(t, p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 4, Hash: chain[3].Hash}}))
			p.Pump(10)
			return prototest.Frame(&wire.Heads{Floors: []wire.Floor{{Origin: o, Seq: 3, Hash: chain[2].Hash}}})
		}, wire.CodeOutOfOrder},
		{"a floor of an origin never named", func(p *prototest.Pair) []byte {
			return prototest.Frame(&wire.Heads{Floors: []wire.Floor{{Origin: prototest.Origin(9), Seq: 3, Hash: chain[2].Hash}}})
		}, wire.CodeUnexpectedFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := v3pair(t, o)
			msg := c.msg(p)
			must(t, p.D.S.Receive(p.Now, msg))
			if e := p.D.S.Err(); e == nil || e.Code != c.code || e.Frame != wire.TypeHeads {
				t.Fatalf("%x: %v, want %s at HEADS", msg, e, c.code)
			}
		})
	}
}

// TestFloorsOnVersion2: a version-2 receiver ignores key 3 of HEADS, and judges a HEADS that
// has nothing else as version 2 does (bad-field), as release 0.2 would.
func TestFloorsOnVersion2(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 2, 1, 4)
	p := established(t, prototest.ConfigV2(wire.RoleDialer, "r", 1), prototest.ConfigV2(wire.RoleListener, "s", 2))
	must(t, p.L.S.SetOriginName(o, "seven"))
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: 2, HLC: 2}}))
	p.Pump(10)
	with := prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: o, Seq: 2, HLC: 2}}, Floors: []wire.Floor{{Origin: o, Seq: 1, Hash: chain[0].Hash}}})
	must(t, p.D.S.Receive(p.Now, with))
	if ev := p.D.S.Ready(); p.D.S.Err() != nil || len(ev.Events) != 1 || len(ev.Events[0].Heads.Floors) != 0 {
		t.Fatalf("a HEADS with floors on version 2: %v, events %+v", p.D.S.Err(), ev.Events)
	}
	only := prototest.Frame(&wire.Heads{Floors: []wire.Floor{{Origin: o, Seq: 1, Hash: chain[0].Hash}}})
	must(t, p.D.S.Receive(p.Now, only))
	if e := p.D.S.Err(); e == nil || e.Code != wire.CodeBadField || e.Frame != wire.TypeHeads {
		t.Fatalf("%x: %v, want bad-field", only, e)
	}
	if err := p.L.S.V3().AdvertiseFloors([]wire.Floor{{Origin: o, Seq: 1, Hash: chain[0].Hash}}); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("AdvertiseFloors on version 2: %v, want invalid-state", err)
	}
}

// TestPurged: the sender answers a subscription below its floor with PURGED; the channel
// closes on both sides and the subscriber learns the floor. PURGED is refused on a channel
// never opened, with a floor not above the position asked, and below version 3.
func TestPurged(t *testing.T) {
	o := prototest.Origin(7)
	chain := prototest.Chain(o, 5, 1, 4)
	p := v3pair(t, o)
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: o, Seq: 1, Hash: chain[0].Hash}}))
	p.Pump(10)
	if err := p.L.S.V3().Purged(o, 1, chain[0].Hash); !isCode(err, wire.CodeBadArgument) {
		t.Errorf("Purged with the floor at the position asked: %v, want bad-argument", err)
	}
	must(t, p.L.S.V3().Purged(o, 3, chain[2].Hash))
	p.Pump(10)
	ev := p.D.Last(protocol.EventPurged)
	if ev == nil || ev.Origin != o || ev.Seq != 3 || ev.Hash != chain[2].Hash {
		t.Fatalf("purged event %+v", ev)
	}
	if err := p.D.S.V2().Ack(o, 1); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("Ack on the purged channel: %v, want invalid-state (closed)", err)
	}
	if err := p.L.S.V2().Send(chain[1].Raw); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("Send on the purged channel: %v, want invalid-state (closed)", err)
	}
	if p.D.S.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
		t.Fatal("a PURGED closed the connection")
	}

	for _, c := range []struct {
		name string
		v2   bool
		body *wire.Purged
		code wire.Code
	}{
		{"on a channel never opened", false, &wire.Purged{Channel: 5, Seq: 3, Hash: chain[2].Hash}, wire.CodeBadChannel},
		{"with a floor at the position asked", false, &wire.Purged{Channel: 1, Seq: 1, Hash: chain[0].Hash}, wire.CodeBadField},
		{"on a version-2 connection", true, &wire.Purged{Channel: 1, Seq: 3, Hash: chain[2].Hash}, wire.CodeUnexpectedFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p *prototest.Pair
			if c.v2 {
				p = established(t, prototest.ConfigV2(wire.RoleDialer, "r", 1), prototest.ConfigV2(wire.RoleListener, "s", 2))
				must(t, p.L.S.SetOriginName(o, "seven"))
			} else {
				p = v3pair(t, o)
			}
			must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: o, Seq: 1, Hash: chain[0].Hash}}))
			p.Pump(10)
			msg := prototest.Frame(c.body)
			must(t, p.D.S.Receive(p.Now, msg))
			if e := p.D.S.Err(); e == nil || e.Code != c.code || e.Frame != wire.TypePurged {
				t.Fatalf("%x: %v, want %s at PURGED", msg, e, c.code)
			}
		})
	}
}

func isCode(err error, code wire.Code) bool {
	we, ok := err.(*wire.Error)
	return ok && we.Code == code
}
