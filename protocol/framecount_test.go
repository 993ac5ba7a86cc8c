package protocol_test

import (
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// framesOf counts the frames of msgs by type, reading their headers: what a session's
// Stats must say it sent, counted apart from the session.
func framesOf(t *testing.T, msgs [][]byte) (total uint64, by map[wire.Type]uint64) {
	t.Helper()
	by = map[wire.Type]uint64{}
	for _, m := range msgs {
		r := wire.NewReader(m, 0)
		for r.More() {
			f, err := r.Next()
			if err != nil {
				t.Fatalf("a sent message does not parse: %v", err)
			}
			total++
			by[f.Type]++
		}
	}
	return total, by
}

// checkFrames checks one direction of a pair: every frame from's session queued is in its
// FramesOut, by type, and to's FramesIn counts the same, and each says exactly want for
// the types want names.
func checkFrames(t *testing.T, name string, from, to *prototest.Side, want map[wire.Type]uint64) {
	t.Helper()
	total, by := framesOf(t, from.Sent)
	out, in := from.S.Stats(), to.S.Stats()
	if out.FramesOut != total || in.FramesIn != total {
		t.Errorf("%s: %d frames sent, FramesOut %d, FramesIn %d", name, total, out.FramesOut, in.FramesIn)
	}
	var sumOut, sumIn uint64
	for slot := range protocol.FrameSlots {
		sumOut += out.FramesOutByType[slot]
		sumIn += in.FramesInByType[slot]
	}
	if sumOut != out.FramesOut || sumIn != in.FramesIn {
		t.Errorf("%s: by type out %d in %d, totals out %d in %d", name, sumOut, sumIn, out.FramesOut, in.FramesIn)
	}
	for _, typ := range wire.Registered() {
		if out.FramesOutByType.Of(typ) != by[typ] || in.FramesInByType.Of(typ) != by[typ] {
			t.Errorf("%s %v: %d sent, out %d, in %d", name, typ, by[typ], out.FramesOutByType.Of(typ), in.FramesInByType.Of(typ))
		}
	}
	for typ, n := range want {
		if got := out.FramesOutByType.Of(typ); got != n {
			t.Errorf("%s %v: %d frames out, want %d", name, typ, got, n)
		}
	}
}

// TestStatsCountFrames runs a known exchange on each version (handshake, a subscription,
// three entries of one origin named once, their acknowledgements) and checks each side's
// frame counts, in total and by type, against the frames its messages carried.
func TestStatsCountFrames(t *testing.T) {
	o := prototest.Origin(9)
	chain := prototest.Chain(o, 3, 1, 20)
	for v := uint64(1); v <= 4; v++ {
		dc, lc := prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2)
		dc.MaxVersion, lc.MaxVersion = v, v
		p := established(t, dc, lc)
		must(t, p.L.S.SetOriginName(o, "nine"))
		dataType := wire.TypeData
		if v == 1 {
			dataType = wire.TypeTxn1
			must(t, p.D.S.V1().Subscribe(0, nil))
			p.Pump(10)
			for i, e := range chain {
				must(t, p.L.S.V1().Offer(uint64(i+1), e.Raw))
			}
			p.Pump(10)
		} else {
			must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: o}}))
			p.Pump(10)
			for _, e := range chain {
				must(t, p.L.S.V2().Send(e.Raw))
			}
			p.Pump(10)
			must(t, p.D.S.V2().Ack(o, 3))
			p.Pump(10)
		}
		if n := p.D.Count(protocol.EventTxn); n != 3 {
			t.Fatalf("version %d: %d entries received", v, n)
		}
		name := "version " + string(rune('0'+v))
		checkFrames(t, name+" dialer to listener", p.D, p.L, map[wire.Type]uint64{wire.TypeHello: 1, wire.TypeAuth: 1})
		checkFrames(t, name+" listener to dialer", p.L, p.D, map[wire.Type]uint64{wire.TypeHello: 1, wire.TypeAuth: 1, wire.TypeOrigin: 1, dataType: 3})
		if v >= 2 {
			if n := p.D.S.Stats().FramesOutByType.Of(wire.TypeSubscribe); n != 1 {
				t.Errorf("%s: %d SUBSCRIBE frames out", name, n)
			}
		}
	}
}

// TestStatsCountUnknownFrames: a frame of a type this build does not know counts in
// FramesIn, in the unknown bucket (slot 0), skipped when ignorable.
func TestStatsCountUnknownFrames(t *testing.T) {
	p := established(t, prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2))
	before := p.D.S.Stats()
	unknown := prototest.RawFrame(0xfe, 0, 0, nil)
	must(t, p.D.S.Receive(p.Now, prototest.Cat(unknown, unknown, prototest.Frame(&wire.Ping{ID: 7}))))
	after := p.D.S.Stats()
	if p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("state %v: %v", p.D.S.State(), p.D.S.Err())
	}
	if d := after.FramesIn - before.FramesIn; d != 3 {
		t.Errorf("FramesIn +%d, want 3", d)
	}
	if d := after.FramesInByType[0] - before.FramesInByType[0]; d != 2 {
		t.Errorf("unknown bucket +%d, want 2", d)
	}
	if d := after.FramesInByType.Of(0xfe) - before.FramesInByType.Of(0xfe); d != 2 {
		t.Errorf("Of(0xfe) +%d, want 2 (the unknown bucket)", d)
	}
	if d := after.FramesInByType.Of(wire.TypePing) - before.FramesInByType.Of(wire.TypePing); d != 1 {
		t.Errorf("PING +%d, want 1", d)
	}
}

// TestFrameSlots: every registered type has a slot of its own and a name; slot 0 is the
// unknown bucket; the registry fits FrameSlots.
func TestFrameSlots(t *testing.T) {
	if protocol.UsedFrameSlots() > protocol.FrameSlots {
		t.Fatalf("%d slots used of %d", protocol.UsedFrameSlots(), protocol.FrameSlots)
	}
	seen := map[int]bool{}
	for _, typ := range wire.Registered() {
		slot := protocol.FrameSlot(typ)
		if slot == 0 || seen[slot] {
			t.Errorf("%v: slot %d", typ, slot)
		}
		seen[slot] = true
		if got, ok := protocol.SlotType(slot); !ok || got != typ || protocol.SlotName(slot) != typ.String() {
			t.Errorf("slot %d: type %v %v, name %q; want %v", slot, got, ok, protocol.SlotName(slot), typ)
		}
	}
	if protocol.SlotName(0) != "unknown" || protocol.FrameSlot(0xfe) != 0 {
		t.Errorf("slot 0 %q, 0xfe in slot %d", protocol.SlotName(0), protocol.FrameSlot(0xfe))
	}
	// The bound: a registry of FrameSlots-1 types fits (with the unknown bucket), one
	// more does not (init refuses such a build).
	if !protocol.FrameSlotsFit(protocol.FrameSlots-1) || protocol.FrameSlotsFit(protocol.FrameSlots) {
		t.Errorf("FrameSlotsFit(%d) %v, FrameSlotsFit(%d) %v; want true, false", protocol.FrameSlots-1,
			protocol.FrameSlotsFit(protocol.FrameSlots-1), protocol.FrameSlots, protocol.FrameSlotsFit(protocol.FrameSlots))
	}
	if _, ok := protocol.SlotType(protocol.UsedFrameSlots()); ok {
		t.Errorf("slot %d past the registry has a type", protocol.UsedFrameSlots())
	}
}
