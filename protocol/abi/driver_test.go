package abi_test

import (
	"testing"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// results splits an output batch into its RESULT records and its final STATUS.
func results(t *testing.T, out []byte) ([]abi.ResultMsg, abi.StatusMsg) {
	t.Helper()
	recs, err := abi.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[len(recs)-1].Kind != abi.KindStatus {
		t.Fatalf("batch does not end with STATUS: %d records", len(recs))
	}
	var rs []abi.ResultMsg
	for _, r := range recs[:len(recs)-1] {
		if r.Kind != abi.KindResult {
			continue
		}
		var m abi.ResultMsg
		if err := abi.Unmarshal(r.Payload, &m); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, m)
	}
	var st abi.StatusMsg
	if err := abi.Unmarshal(recs[len(recs)-1].Payload, &st); err != nil {
		t.Fatal(err)
	}
	return rs, st
}

// TestUnknownCommand: an opcode the ABI does not define is refused with unknown-command
// (class local, about no frame), before and after OpConfigure, and the batch goes on.
//
// internal, the other ABI-level code, is a recovered panic inside the core: no command
// produces it without a defect, so no test does.
func TestUnknownCommand(t *testing.T) {
	unknown := []abi.Op{0x00, abi.OpDecode + 1, 0x7f, 0xff}
	var d abi.Driver
	var b abi.Batch
	for _, op := range unknown {
		b.Raw(op, []byte{1, 2, 3})
	}
	rs, st := results(t, d.Step(b.Bytes()))
	if st.Configured {
		t.Fatal("configured by unknown commands")
	}
	check := func(rs []abi.ResultMsg, first int) {
		t.Helper()
		for i, op := range unknown {
			r := rs[first+i]
			e := r.Err.Wire()
			if r.Op != uint8(op) || r.Index != uint64(first+i) || e == nil || e.Code != wire.CodeUnknownCommand ||
				e.Class != wire.ClassLocal || e.Offset != wire.NoOffset {
				t.Fatalf("op 0x%02x: result %+v, err %+v", uint8(op), r, e)
			}
		}
	}
	if len(rs) != len(unknown) {
		t.Fatalf("%d results", len(rs))
	}
	check(rs, 0)

	// After OpConfigure: the session is untouched by unknown commands around a valid one.
	b.Reset()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1)}))
	for _, op := range unknown {
		b.Raw(op, nil)
	}
	b.Start(prototest.Epoch, prototest.Nonce(1))
	rs, st = results(t, d.Step(b.Bytes()))
	if len(rs) != 2+len(unknown) || rs[0].Err != nil || rs[len(rs)-1].Err != nil {
		t.Fatalf("results %+v", rs)
	}
	check(rs, 1)
	if !st.Configured || st.State != uint8(protocol.StateHandshaking) || st.Err != nil {
		t.Fatalf("status %+v", st)
	}
}

// kinds lists the record kinds of an output batch, in order.
func kinds(t *testing.T, out []byte) []abi.Kind {
	t.Helper()
	recs, err := abi.Split(out)
	if err != nil {
		t.Fatal(err)
	}
	var ks []abi.Kind
	for _, r := range recs {
		ks = append(ks, r.Kind)
	}
	return ks
}

// TestOutputOrder: RESULTs in command order (a DECODED right after its DECODE's RESULT),
// then the batch's messages, then its events, then STATUS; the frames of several commands
// share one message, as natively between two calls of Ready.
func TestOutputOrder(t *testing.T) {
	var d abi.Driver
	var b abi.Batch
	ping := prototest.Frame(&wire.Ping{ID: 1})
	b.Decode(append(append([]byte(nil), ping...), prototest.RawFrame(0xfe, 0, 0, []byte{1})...))
	if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1)}); err != nil {
		t.Fatal(err)
	}
	b.Start(prototest.Epoch, prototest.Nonce(1))
	b.Receive(prototest.Epoch, prototest.RawFrame(0xfe, 0, 0, nil)) // before the peer's HELLO: skipped, counted
	out := d.Step(b.Bytes())
	want := []abi.Kind{abi.KindResult, abi.KindDecoded, abi.KindResult, abi.KindResult, abi.KindResult,
		abi.KindMessage, abi.KindEvent, abi.KindStatus}
	got := kinds(t, out)
	if len(got) != len(want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("kinds %v, want %v", got, want)
		}
	}
	recs, _ := abi.Split(out)
	var dec abi.DecodedMsg
	if err := abi.Unmarshal(recs[1].Payload, &dec); err != nil {
		t.Fatal(err)
	}
	if dec.Err != nil || len(dec.Frames) != 2 || !dec.Frames[0].Known || dec.Frames[1].Known ||
		dec.Frames[1].Type != 0xfe || dec.Frames[1].Offset != uint64(len(ping)) {
		t.Fatalf("decoded %+v", dec)
	}
	var ev abi.EventMsg
	if err := abi.Unmarshal(recs[6].Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if protocol.EventKind(ev.Kind) != protocol.EventIgnoredFrame || ev.Count != 1 || ev.Frame != 0xfe {
		t.Fatalf("event %+v", ev)
	}
}

// TestStatusBeforeStart: before START the last receive time is 0 and the limits in effect
// are the defaults.
func TestStatusBeforeStart(t *testing.T) {
	var d abi.Driver
	var b abi.Batch
	if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1)}); err != nil {
		t.Fatal(err)
	}
	_, st := results(t, d.Step(b.Bytes()))
	def := protocol.Limits{}.WithDefaults()
	if st.LastReceive != 0 || st.Limits == nil || st.Limits.MaxMessage != uint64(def.MaxMessage) ||
		st.Limits.LivenessTimeout != uint64(def.LivenessTimeout) || st.Liveness != int64(def.LivenessTimeout) ||
		st.MinVersion != 1 || st.MaxVersion != 1 {
		t.Fatalf("status %+v limits %+v", st, st.Limits)
	}
}

// TestOffersShareMessages: a batch of offers produces one message holding every frame.
func TestOffersShareMessages(t *testing.T) {
	// A native listener session plays the peer; the driver is the dialer that offers.
	lis, err := protocol.New(prototest.Config(wire.RoleListener, "l", 2))
	if err != nil {
		t.Fatal(err)
	}
	var d abi.Driver
	var b abi.Batch
	cfg := prototest.Config(wire.RoleDialer, "a", 1)
	if err := b.Configure(abi.ConfigMsg{Role: uint8(cfg.Role), Name: cfg.Name, Origin: cfg.Origin, Secret: cfg.Secret}); err != nil {
		t.Fatal(err)
	}
	b.Start(prototest.Epoch, prototest.Nonce(1))
	if err := lis.Start(prototest.Epoch, prototest.Nonce(2)); err != nil {
		t.Fatal(err)
	}
	exchange := func() []byte { // one round both ways; returns the driver's messages, joined
		var sent []byte
		for _, m := range lis.Ready().Messages {
			b.Receive(prototest.Epoch, m)
		}
		recs, _ := abi.Split(d.Step(b.Bytes()))
		b.Reset()
		for _, r := range recs {
			if r.Kind == abi.KindMessage {
				sent = append(sent, r.Payload...)
				if err := lis.Receive(prototest.Epoch, append([]byte(nil), r.Payload...)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return sent
	}
	for i := 0; i < 3; i++ {
		exchange()
	}
	if err := lis.Subscribe(0, nil); err != nil {
		t.Fatal(err)
	}
	exchange()
	chain := prototest.Chain(prototest.Origin(1), 10, 1, 10)
	b.Name(prototest.Origin(1), "a")
	for i, e := range chain {
		b.Offer(uint64(i+1), e.Raw)
	}
	out := d.Step(b.Bytes())
	b.Reset()
	recs, _ := abi.Split(out)
	var msgs [][]byte
	for _, r := range recs {
		if r.Kind == abi.KindMessage {
			msgs = append(msgs, r.Payload)
		}
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages for one batch of offers", len(msgs))
	}
	frames, werr := wire.DecodeMessage(msgs[0], wire.DefaultMaxMessage, 0)
	if werr != nil || len(frames) != 11 || frames[0].Type != wire.TypeOrigin {
		t.Fatalf("%d frames, %v", len(frames), werr)
	}
}
