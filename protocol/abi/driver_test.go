package abi_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/vector"
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
// (class local, about no frame), before and after OpConfigure, and the batch goes on. ABI
// version 3 defines 0x01..0x1c (0x1b and 0x1c with anti-entropy), version 4 adds no
// command, and version 5 adds 0x1d..0x26: one past the last (0x27) and above are unknown.
//
// internal, the other ABI-level code, is a recovered panic inside the core: no command
// produces it without a defect, so no test does.
func TestUnknownCommand(t *testing.T) {
	if abi.Version != 5 || abi.OpEndCopy != 0x1a || abi.OpRequestCopy != abi.OpPurged+1 || abi.OpAdvertiseFloors != abi.OpReady+1 ||
		abi.OpSubscribeOrigins != abi.OpDecode+1 || abi.OpSendMap != abi.OpAnswerRange+1 || abi.OpQuiet != 0x26 {
		t.Fatalf("ABI version %d defines up to 0x%02x", abi.Version, uint8(abi.OpQuiet))
	}
	unknown := []abi.Op{0x00, abi.OpQuiet + 1, 0x28, 0x7f, 0x80, 0xff}
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

// TestDeferReady: a session configured with DeferReady keeps its output across batches, as
// a native session keeps it until Ready: the batches of START and a RECEIVE carry no
// MESSAGE or EVENT, STATUS says output waits, and OpReady then hands over the same records
// a driver without DeferReady gave for the same commands in one batch. OpReady before
// CONFIGURE is refused with invalid-state.
func TestDeferReady(t *testing.T) {
	cfg := abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1)}
	var plain, deferred abi.Driver
	var b abi.Batch
	b.Ready()
	if rs, _ := results(t, deferred.Step(b.Bytes())); len(rs) != 1 || rs[0].Err.Wire().Code != wire.CodeInvalidState {
		t.Fatalf("OpReady before CONFIGURE: %+v", rs)
	}

	b.Reset()
	if err := b.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	b.Start(prototest.Epoch, prototest.Nonce(1))
	b.Receive(prototest.Epoch, prototest.RawFrame(0xfe, 0, 0, nil))
	want := append([]byte(nil), plain.Step(b.Bytes())...)

	cfg.DeferReady = true
	for i, fill := range []func(){
		func() { _ = b.Configure(cfg) },
		func() { b.Start(prototest.Epoch, prototest.Nonce(1)) },
		func() { b.Receive(prototest.Epoch, prototest.RawFrame(0xfe, 0, 0, nil)) },
	} {
		b.Reset()
		fill()
		out := deferred.Step(b.Bytes())
		if ks := kinds(t, out); len(ks) != 2 || ks[0] != abi.KindResult || ks[1] != abi.KindStatus {
			t.Fatalf("batch %d with DeferReady: kinds %v, want RESULT, STATUS", i, ks)
		}
		if _, st := results(t, out); st.HasReady != (i > 0) {
			t.Fatalf("batch %d: HasReady %v", i, st.HasReady)
		}
	}
	b.Reset()
	b.Ready()
	got := deferred.Step(b.Bytes())
	if _, st := results(t, got); st.HasReady {
		t.Fatal("HasReady after OpReady")
	}
	// The same MESSAGE and EVENT records (the RESULTs differ: three commands there, one here).
	outputOf := func(out []byte) [][]byte {
		recs, err := abi.Split(out)
		if err != nil {
			t.Fatal(err)
		}
		var o [][]byte
		for _, r := range recs {
			if r.Kind == abi.KindMessage || r.Kind == abi.KindEvent {
				o = append(o, append([]byte{byte(r.Kind)}, r.Payload...))
			}
		}
		return o
	}
	w, g := outputOf(want), outputOf(got)
	if len(w) != 2 || len(g) != len(w) || !bytes.Equal(w[0], g[0]) || !bytes.Equal(w[1], g[1]) {
		t.Fatalf("output after OpReady differs from the undeferred batch:\n%x\n%x", g, w)
	}
}

// TestStatusBeforeStart: before START the last receive time is 0, the limits in effect are
// the defaults (version 2's and version 4's included), the advertised range is this build's
// 1..4 (1..3, 1..2 and 1..1 with a max version of 3, 2 and 1) and no origin has credit.
func TestStatusBeforeStart(t *testing.T) {
	def := protocol.Limits{}.WithDefaults()
	for _, c := range []struct {
		max    uint64
		lo, hi uint64
	}{{0, 1, 4}, {4, 1, 4}, {5, 1, 4}, {3, 1, 3}, {2, 1, 2}, {1, 1, 1}} {
		var d abi.Driver
		var b abi.Batch
		if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), MaxVersion: c.max}); err != nil {
			t.Fatal(err)
		}
		rs, st := results(t, d.Step(b.Bytes()))
		if len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("max %d: results %+v", c.max, rs)
		}
		want := abi.LimitsMsg{MaxFrameBody: uint64(def.MaxFrameBody), MaxMessage: uint64(def.MaxMessage),
			MaxSendBuffer: uint64(def.MaxSendBuffer), MaxUnackedBytes: uint64(def.MaxUnackedBytes), MaxOrigins: uint64(def.MaxOrigins),
			HandshakeTimeout: uint64(def.HandshakeTimeout), PingInterval: uint64(def.PingInterval), LivenessTimeout: uint64(def.LivenessTimeout),
			MaxChannels: 4096, MaxChannelBuffer: uint64(wire.DefaultMaxMessage), MaxSessionBuffer: 64 << 20, MaxRequestsInFlight: 64}
		if st.LastReceive != 0 || st.Limits == nil || *st.Limits != want || st.Liveness != int64(def.LivenessTimeout) ||
			st.MinVersion != c.lo || st.MaxVersion != c.hi || st.Version != 0 || st.Credits != nil {
			t.Fatalf("max %d: status %+v limits %+v, want %d..%d and %+v", c.max, st, st.Limits, c.lo, c.hi, want)
		}
	}
	// The version-2 limits are configured through keys 9..11 of CONFIGURE's limits, version
	// 4's through key 12.
	var d abi.Driver
	var b abi.Batch
	lim := abi.LimitsMsg{MaxFrameBody: 4096, MaxMessage: 65536, MaxChannels: 7, MaxChannelBuffer: 5000, MaxSessionBuffer: 20000,
		MaxRequestsInFlight: 3}
	if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), Limits: lim}); err != nil {
		t.Fatal(err)
	}
	_, st := results(t, d.Step(b.Bytes()))
	if l := st.Limits; l == nil || l.MaxChannels != 7 || l.MaxChannelBuffer != 5000 || l.MaxSessionBuffer != 20000 || l.MaxFrameBody != 4096 ||
		l.MaxRequestsInFlight != 3 {
		t.Fatalf("limits %+v", st.Limits)
	}
	// Limits the session refuses are a bad-argument result, and nothing is configured.
	d, b = abi.Driver{}, abi.Batch{}
	lim.MaxSessionBuffer = 4999 // below MaxChannelBuffer
	if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), Limits: lim}); err != nil {
		t.Fatal(err)
	}
	rs, st := results(t, d.Step(b.Bytes()))
	if len(rs) != 1 || rs[0].Err == nil || rs[0].Err.Code != string(wire.CodeBadArgument) || st.Configured {
		t.Fatalf("results %+v, configured %v", rs, st.Configured)
	}
}

// TestOffersShareMessages: a batch of offers produces one message holding every frame.
func TestOffersShareMessages(t *testing.T) {
	// A native listener session plays the peer; the driver is the dialer that offers.
	lis, err := protocol.New(prototest.ConfigV1(wire.RoleListener, "l", 2))
	if err != nil {
		t.Fatal(err)
	}
	var d abi.Driver
	var b abi.Batch
	cfg := prototest.ConfigV1(wire.RoleDialer, "a", 1)
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
	if err := lis.V1().Subscribe(0, nil); err != nil {
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

// link joins an abi.Driver, fed one batch at a time, and a native session playing its peer.
type link struct {
	t         *testing.T
	d         abi.Driver
	b         abi.Batch
	nat       *protocol.Session
	now       time.Time
	results   []abi.ResultMsg // of the last step
	events    []abi.EventMsg  // every event of the driver
	frames    []wire.Decoded  // every frame the driver sent
	natEvents []protocol.Event
	status    abi.StatusMsg
}

// step runs the pending batch, hands the driver's messages to the native session and
// returns the batch's results.
func (k *link) step() []abi.ResultMsg {
	k.t.Helper()
	recs, err := abi.Split(k.d.Step(k.b.Bytes()))
	if err != nil {
		k.t.Fatal(err)
	}
	k.b.Reset()
	k.results = k.results[:0]
	for _, r := range recs {
		switch r.Kind {
		case abi.KindResult:
			var m abi.ResultMsg
			if err := abi.Unmarshal(r.Payload, &m); err != nil {
				k.t.Fatal(err)
			}
			k.results = append(k.results, m)
		case abi.KindMessage:
			msg := bytes.Clone(r.Payload)
			fs, werr := wire.DecodeMessage(msg, wire.DefaultMaxMessage, 0)
			if werr != nil {
				k.t.Fatalf("the driver sent a malformed message: %v", werr)
			}
			k.frames = append(k.frames, fs...)
			if err := k.nat.Receive(k.now, msg); err != nil {
				k.t.Fatal(err)
			}
		case abi.KindEvent:
			var m abi.EventMsg
			if err := abi.Unmarshal(r.Payload, &m); err != nil {
				k.t.Fatal(err)
			}
			k.events = append(k.events, m)
		case abi.KindStatus:
			k.status = abi.StatusMsg{}
			if err := abi.Unmarshal(r.Payload, &k.status); err != nil {
				k.t.Fatal(err)
			}
		}
	}
	return k.results
}

// ok steps and fails on any error result.
func (k *link) ok() {
	k.t.Helper()
	for _, r := range k.step() {
		if r.Err != nil {
			k.t.Fatalf("command 0x%02x: %v", r.Op, r.Err.Wire())
		}
	}
}

// pump moves messages both ways until both sides are quiet.
func (k *link) pump() {
	k.t.Helper()
	for round := 0; round < 20; round++ {
		rd := k.nat.Ready()
		k.natEvents = append(k.natEvents, rd.Events...)
		for _, m := range rd.Messages {
			k.b.Receive(k.now, m)
		}
		before := len(k.frames)
		k.ok()
		if len(rd.Messages) == 0 && len(k.frames) == before && !k.nat.HasReady() {
			return
		}
	}
	k.t.Fatal("no quiescence")
}

func (k *link) eventsOf(kind protocol.EventKind, from int) []abi.EventMsg {
	var out []abi.EventMsg
	for _, e := range k.events[from:] {
		if protocol.EventKind(e.Kind) == kind {
			out = append(out, e)
		}
	}
	return out
}

func (k *link) natEventsOf(kind protocol.EventKind, from int) []protocol.Event {
	var out []protocol.Event
	for _, e := range k.natEvents[from:] {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (k *link) sentTypes(from int) []wire.Type {
	var out []wire.Type
	for _, f := range k.frames[from:] {
		out = append(out, f.Type)
	}
	return out
}

// TestVersion2Commands: the opcodes of ABI version 2 drive a version-2 session against a
// native one: SUBSCRIBE-ORIGINS opens channels (CREDIT, SUBSCRIBE), the entries arrive as
// events naming their origin, ACK-ORIGIN sends CURSOR; in the other direction ADVERTISE-HEADS
// and SEND stream the driver's own origin within the credit STATUS reports (key 18), SEND
// beyond it is refused with no-credit, and UNSUBSCRIBE-ORIGINS and WITHDRAW-HEADS reach the
// peer.
func TestVersion2Commands(t *testing.T) {
	nc := prototest.Config(wire.RoleListener, "b", 2)
	// The native side subscribes with channel windows of 1034 bytes: two DATA frames of the
	// driver's entries fit, a third does not.
	nc.Limits = protocol.Limits{MaxFrameBody: wire.MinMaxFrame, MaxMessage: wire.MinMaxMessage, MaxChannelBuffer: wire.MinMaxFrame + wire.HeaderSize}
	nat, err := protocol.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	k := &link{t: t, nat: nat, now: prototest.Epoch}
	lim := abi.LimitsMsg{MaxFrameBody: 1024, MaxMessage: 65536, MaxChannelBuffer: 4096, MaxSessionBuffer: 8192, MaxChannels: 4}
	if err := k.b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), Secret: nc.Secret, Limits: lim,
		MaxVersion: 2}); err != nil {
		t.Fatal(err)
	}
	k.b.Start(k.now, prototest.Nonce(1))
	if err := nat.Start(k.now, prototest.Nonce(2)); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	if k.status.Version != 2 || k.status.Handshake == nil || k.status.Handshake.PeerMax != 4 || nat.Handshake().Version != 2 ||
		k.status.MinVersion != 1 || k.status.MaxVersion != 2 {
		t.Fatalf("status %+v, native %+v", k.status, nat.Handshake())
	}
	if l := k.status.Limits; l.MaxChannels != 4 || l.MaxChannelBuffer != 4096 || l.MaxSessionBuffer != 8192 {
		t.Fatalf("limits %+v", l)
	}

	// The native side offers two origins.
	seven, eight := prototest.Origin(7), prototest.Origin(8)
	c7, c8 := prototest.Chain(seven, 5, 1, 20), prototest.Chain(eight, 5, 2, 20)
	for o, name := range map[wire.OriginID]string{seven: "seven", eight: "eight"} {
		if err := nat.SetOriginName(o, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := nat.V2().AdvertiseHeads([]wire.Head{{Origin: seven, Seq: 5, HLC: 50}, {Origin: eight, Seq: 5, HLC: 80}}); err != nil {
		t.Fatal(err)
	}
	k.pump()
	hs := k.eventsOf(protocol.EventHeads, 0)
	if len(hs) != 1 || hs[0].Heads == nil || len(hs[0].Heads.Heads) != 2 || hs[0].Heads.Heads[0].Origin != seven ||
		hs[0].Heads.Heads[1].HLC != 80 || len(k.eventsOf(protocol.EventOriginNamed, 0)) != 2 {
		t.Fatalf("events %+v", k.events)
	}

	// SUBSCRIBE-ORIGINS: seven from the start, eight resumed after seq 2.
	f, e := len(k.frames), len(k.events)
	if err := k.b.SubscribeOrigins([]abi.CursorMsg{{Origin: seven}, {Origin: eight, Seq: 2, Hash: c8[1].Hash}}); err != nil {
		t.Fatal(err)
	}
	k.ok()
	if got := k.sentTypes(f); len(got) != 2 || got[0] != wire.TypeCredit || got[1] != wire.TypeSubscribe {
		t.Fatalf("sent %v, want CREDIT then SUBSCRIBE", got)
	}
	cr := k.frames[f].Value.(*wire.Credit)
	sub := k.frames[f+1].Value.(*wire.Subscribe)
	if len(cr.Entries) != 1 || cr.Entries[0] != (wire.CreditEntry{Channel: 0, Limit: 8192}) || len(sub.Entries) != 2 ||
		sub.Entries[0] != (wire.SubscribeEntry{Channel: 1, Origin: seven, Credit: 4096}) ||
		sub.Entries[1] != (wire.SubscribeEntry{Channel: 2, Origin: eight, Seq: 2, Hash: c8[1].Hash, Credit: 4096}) {
		t.Fatalf("CREDIT %+v, SUBSCRIBE %+v", cr, sub)
	}
	k.pump()
	if n := len(k.natEventsOf(protocol.EventSubscribed, 0)); n != 2 || nat.V2().Credit(seven) != 4096 || nat.V2().Credit(eight) != 4096 {
		t.Fatalf("native: %d subscribed, credit %d / %d", n, nat.V2().Credit(seven), nat.V2().Credit(eight))
	}
	var held uint64
	for _, x := range c7 {
		if err := nat.V2().Send(x.Raw); err != nil {
			t.Fatal(err)
		}
		held += uint64(protocol.DataFrameSize(len(x.Raw)))
	}
	for _, x := range c8[2:] {
		if err := nat.V2().Send(x.Raw); err != nil {
			t.Fatal(err)
		}
		held += uint64(protocol.DataFrameSize(len(x.Raw)))
	}
	k.pump()
	txns := k.eventsOf(protocol.EventTxn, e)
	if len(txns) != 8 || k.status.Stats.TxnsReceived != 8 || k.status.HeldBytes != held {
		t.Fatalf("%d txns, stats %+v, held %d of %d", len(txns), k.status.Stats, k.status.HeldBytes, held)
	}
	for i, ev := range txns {
		want, origin := c7[min(i, 4)], seven
		if i >= 5 {
			want, origin = c8[i-3], eight
		}
		if ev.Origin == nil || *ev.Origin != origin || !bytes.Equal(ev.Txn, want.Raw) {
			t.Fatalf("txn event %d: %+v", i, ev)
		}
	}

	// ACK-ORIGIN: one CURSOR for both channels; the bytes are released.
	f, n := len(k.frames), len(k.natEvents)
	k.b.AckOrigin(seven, 5)
	k.b.AckOrigin(eight, 5)
	k.ok()
	if got := k.sentTypes(f); len(got) == 0 || got[0] != wire.TypeCursor {
		t.Fatalf("sent %v, want CURSOR first", got)
	}
	if cu := k.frames[f].Value.(*wire.Cursor); len(cu.Entries) != 2 ||
		cu.Entries[0] != (wire.CursorEntry{Channel: 1, Seq: 5, Hash: c7[4].Hash}) || cu.Entries[1] != (wire.CursorEntry{Channel: 2, Seq: 5, Hash: c8[4].Hash}) {
		t.Fatalf("CURSOR %+v", k.frames[f].Value)
	}
	if k.status.HeldBytes != 0 {
		t.Fatalf("held %d after acknowledging everything", k.status.HeldBytes)
	}
	k.pump()
	if cs := k.natEventsOf(protocol.EventCursor, n); len(cs) != 2 || cs[0].Origin != seven || cs[0].Seq != 5 || cs[1].Origin != eight || cs[1].Hash != c8[4].Hash {
		t.Fatalf("native cursor events %+v", cs)
	}

	// The other direction: the native side subscribes to the driver's own origin.
	one := prototest.Origin(1)
	mine := prototest.Chain(one, 3, 1, 300)
	size := uint64(protocol.DataFrameSize(len(mine[0].Raw)))
	window := uint64(wire.MinMaxFrame + wire.HeaderSize)
	e = len(k.events)
	if err := nat.V2().Subscribe([]vector.Entry{{Origin: one}}); err != nil {
		t.Fatal(err)
	}
	k.pump()
	if s := k.eventsOf(protocol.EventSubscribed, e); len(s) != 1 || *s[0].Origin != one || s[0].Seq != 0 {
		t.Fatalf("subscribed events %+v", s)
	}
	if len(k.status.Credits) != 1 || k.status.Credits[0].Origin != one || k.status.Credits[0].Credit != window {
		t.Fatalf("credits %+v, want %d for origin 1", k.status.Credits, window)
	}
	f, n = len(k.frames), len(k.natEvents)
	k.b.Name(one, "a")
	if err := k.b.AdvertiseHeads([]wire.Head{{Origin: one, Seq: 3, HLC: 3}}); err != nil {
		t.Fatal(err)
	}
	k.b.Send(mine[0].Raw)
	k.b.Send(mine[1].Raw)
	k.b.Send(mine[2].Raw)            // beyond the channel's credit
	k.b.Raw(abi.OpAckOrigin, one[:]) // 16 bytes: the wrong length
	rs := k.step()
	if len(rs) != 6 || rs[0].Err != nil || rs[1].Err != nil || rs[2].Err != nil || rs[3].Err != nil {
		t.Fatalf("results %+v", rs)
	}
	if e := rs[4].Err.Wire(); e == nil || rs[4].Op != uint8(abi.OpSend) || e.Code != wire.CodeNoCredit || e.Class != wire.ClassLocal || e.Offset != wire.NoOffset {
		t.Fatalf("SEND beyond the credit: %+v", e)
	}
	if e := rs[5].Err.Wire(); e == nil || e.Code != wire.CodeBadArgument {
		t.Fatalf("ACK-ORIGIN of 16 bytes: %+v", e)
	}
	if len(k.status.Credits) != 1 || k.status.Credits[0].Credit != window-2*size || k.status.Stats.TxnsSent != 2 {
		t.Fatalf("credits %+v, want %d; stats %+v", k.status.Credits, window-2*size, k.status.Stats)
	}
	if got := k.sentTypes(f); len(got) != 4 || got[0] != wire.TypeOrigin || got[1] != wire.TypeHeads || got[2] != wire.TypeData || got[3] != wire.TypeData {
		t.Fatalf("sent %v", got)
	}
	if d := k.frames[f+2]; d.Channel != 1 || d.Value.(*wire.Data).Hash != mine[0].Hash {
		t.Fatalf("DATA on channel %d", d.Channel)
	}
	k.pump()
	if got := k.natEventsOf(protocol.EventTxn, n); len(got) != 2 || got[1].Txn.Seq != 2 || got[1].Origin != one {
		t.Fatalf("native received %+v", got)
	}
	// The native side acknowledges; its grant reaches the driver, and the third entry goes.
	e = len(k.events)
	if err := nat.V2().Ack(one, 2); err != nil {
		t.Fatal(err)
	}
	k.pump()
	if c := k.eventsOf(protocol.EventCredit, e); len(c) == 0 || c[len(c)-1].Origin == nil || *c[len(c)-1].Origin != one {
		t.Fatalf("credit events %+v", c)
	}
	if len(k.status.Credits) != 1 || k.status.Credits[0].Credit != window {
		t.Fatalf("credits %+v after the grant, want %d", k.status.Credits, window)
	}
	k.b.Send(mine[2].Raw)
	k.ok()
	k.pump()
	if got := k.natEventsOf(protocol.EventTxn, n); len(got) != 3 || got[2].Txn.Seq != 3 {
		t.Fatalf("native received %d entries", len(got))
	}

	// UNSUBSCRIBE-ORIGINS and WITHDRAW-HEADS reach the peer.
	f, n = len(k.frames), len(k.natEvents)
	if err := k.b.UnsubscribeOrigins([]wire.OriginID{eight}); err != nil {
		t.Fatal(err)
	}
	if err := k.b.WithdrawHeads([]wire.OriginID{one}); err != nil {
		t.Fatal(err)
	}
	k.ok()
	if got := k.sentTypes(f); len(got) != 2 || got[0] != wire.TypeUnsubscribe || got[1] != wire.TypeHeads ||
		k.frames[f].Value.(*wire.Unsubscribe).Channels[0] != 2 || k.frames[f+1].Value.(*wire.Heads).Withdrawn[0] != one {
		t.Fatalf("sent %v", got)
	}
	k.pump()
	if u := k.natEventsOf(protocol.EventUnsubscribed, n); len(u) != 1 || u[0].Origin != eight || nat.V2().Credit(eight) != 0 {
		t.Fatalf("native unsubscribed events %+v", u)
	}
	if h := k.natEventsOf(protocol.EventHeads, n); len(h) != 1 || len(h[0].Heads.Withdrawn) != 1 || h[0].Heads.Withdrawn[0] != one {
		t.Fatalf("native heads events %+v", h)
	}
	if k.status.State != uint8(protocol.StateEstablished) || nat.State() != protocol.StateEstablished || k.status.Stats.ProtocolErrors != 0 {
		t.Fatalf("status %+v, native %v", k.status, nat.Err())
	}
}

// TestVersion2CommandsRefused: the version-2 opcodes answer the session's refusals as error
// results: on a version-1 session (invalid-state), with malformed payloads (bad-argument),
// and before OpConfigure; the payload of SUBSCRIBE-ORIGINS may omit key 1, as shells/wasm/ABI.md gives it.
func TestVersion2CommandsRefused(t *testing.T) {
	var d abi.Driver
	var b abi.Batch
	b.Send(nil)
	rs, _ := results(t, d.Step(b.Bytes()))
	if len(rs) != 1 || rs[0].Err == nil || rs[0].Err.Code != string(wire.CodeInvalidState) {
		t.Fatalf("before OpConfigure: %+v", rs)
	}

	// A version-1 session (max version 1) in the handshake, then established.
	k := establishedLink(t, prototest.ConfigV1(wire.RoleListener, "b", 2))
	if k.status.Version != 1 || k.status.MaxVersion != 4 || k.status.Handshake.PeerMax != 1 {
		t.Fatalf("status %+v", k.status)
	}
	seven := prototest.Origin(7)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k.b.SubscribeOrigins([]abi.CursorMsg{{Origin: seven}}))
	must(k.b.UnsubscribeOrigins([]wire.OriginID{seven}))
	k.b.AckOrigin(seven, 1)
	k.b.Send(prototest.Chain(prototest.Origin(1), 1, 1, 1)[0].Raw)
	must(k.b.AdvertiseHeads([]wire.Head{{Origin: seven, Seq: 1, HLC: 1}}))
	must(k.b.WithdrawHeads([]wire.OriginID{seven}))
	k.b.Raw(abi.OpSubscribeOrigins, []byte{0xff})                // not CBOR
	k.b.Raw(abi.OpAckOrigin, make([]byte, 25))                   // one byte too many
	k.b.Raw(abi.OpAdvertiseHeads, hexBytes("a1 01 81 82 00 00")) // a head of 2 elements
	f := len(k.frames)
	rs = k.step()
	want := []wire.Code{wire.CodeInvalidState, wire.CodeInvalidState, wire.CodeInvalidState, wire.CodeInvalidState,
		wire.CodeInvalidState, wire.CodeInvalidState, wire.CodeBadArgument, wire.CodeBadArgument, wire.CodeBadArgument}
	ops := []abi.Op{abi.OpSubscribeOrigins, abi.OpUnsubscribeOrigins, abi.OpAckOrigin, abi.OpSend, abi.OpAdvertiseHeads,
		abi.OpWithdrawHeads, abi.OpSubscribeOrigins, abi.OpAckOrigin, abi.OpAdvertiseHeads}
	if len(rs) != len(want) {
		t.Fatalf("%d results", len(rs))
	}
	for i, r := range rs {
		if e := r.Err.Wire(); r.Op != uint8(ops[i]) || r.Index != uint64(i) || e == nil || e.Code != want[i] || e.Class != wire.ClassLocal {
			t.Errorf("command %d (0x%02x): %+v, want %s", i, uint8(ops[i]), e, want[i])
		}
	}
	if len(k.frames) != f || k.status.State != uint8(protocol.StateEstablished) {
		t.Fatalf("refused commands sent %v; state %d", k.sentTypes(f), k.status.State)
	}

	// On a version-2 session, SUBSCRIBE-ORIGINS written as shells/wasm/ABI.md gives it: {2: [...]}.
	k2 := establishedLink(t, prototest.Config(wire.RoleListener, "b", 2))
	payload, err := wire.Marshal(map[uint64]any{2: []any{map[uint64]any{1: seven[:], 2: 0, 3: make([]byte, 32)}}})
	if err != nil {
		t.Fatal(err)
	}
	k2.b.Raw(abi.OpSubscribeOrigins, payload)
	k2.ok()
	k2.pump()
	if s := k2.natEventsOf(protocol.EventSubscribed, 0); len(s) != 1 || s[0].Origin != seven || s[0].Seq != 0 {
		t.Fatalf("native subscribed events %+v", s)
	}
}

func hexBytes(s string) []byte { return prototest.Hex(s) }

// TestDecodeVersion2Frames: DECODE reads every frame type this build implements, version
// 2's included, with their channels, outside any session; a DATA frame on channel 0 is
// bad-channel at its offset.
func TestDecodeVersion2Frames(t *testing.T) {
	e := prototest.Chain(prototest.Origin(7), 1, 1, 10)[0]
	sub := prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 1, Origin: prototest.Origin(7), Credit: 4096}}})
	data := prototest.RawFrame(wire.TypeData, 0, 1, append(e.Hash[:], e.Raw...))
	credit := prototest.Frame(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: 1 << 20}}})
	for _, c := range []struct {
		name   string
		msg    []byte
		frames [][]byte
		err    wire.Code
		errAt  int
	}{
		{"SUBSCRIBE, DATA, CREDIT", append(append(append([]byte(nil), sub...), data...), credit...), [][]byte{sub, data, credit}, "", 0},
		{"DATA on channel 0", append(append([]byte(nil), sub...), prototest.RawFrame(wire.TypeData, 0, 0, append(e.Hash[:], e.Raw...))...),
			[][]byte{sub}, wire.CodeBadChannel, len(sub)},
	} {
		var d abi.Driver
		var b abi.Batch
		b.Decode(c.msg)
		recs, err := abi.Split(d.Step(b.Bytes()))
		if err != nil || len(recs) != 3 || recs[1].Kind != abi.KindDecoded {
			t.Fatalf("%s: %d records, %v", c.name, len(recs), err)
		}
		var dec abi.DecodedMsg
		if err := abi.Unmarshal(recs[1].Payload, &dec); err != nil {
			t.Fatal(err)
		}
		if len(dec.Frames) != len(c.frames) {
			t.Fatalf("%s: %d frames decoded, want %d", c.name, len(dec.Frames), len(c.frames))
		}
		off := 0
		for i, f := range dec.Frames {
			if !f.Known || !bytes.Equal(f.Encoded, c.frames[i]) || f.Offset != uint64(off) || f.Type != c.frames[i][0] {
				t.Fatalf("%s: frame %d %+v", c.name, i, f)
			}
			wantCh := uint32(0)
			if f.Type == uint8(wire.TypeData) {
				wantCh = 1
			}
			if f.Channel != wantCh {
				t.Fatalf("%s: frame %d on channel %d, want %d", c.name, i, f.Channel, wantCh)
			}
			off += len(c.frames[i])
		}
		if c.err == "" {
			if dec.Err != nil {
				t.Fatalf("%s: %+v", c.name, dec.Err)
			}
			continue
		}
		if e := dec.Err.Wire(); e == nil || e.Code != c.err || e.Frame != wire.TypeData || e.Offset != c.errAt {
			t.Fatalf("%s: error %+v, want %s in DATA at %d", c.name, e, c.err, c.errAt)
		}
	}
}

// TestVersion3Commands: over ABI 3 a session at protocol version 3 takes OpAdvertiseFloors
// and OpPurged, and reports the native peer's floors (HEADS key 3) and PURGED answer as
// EVENT records: heads with floors, and kind purged with the origin and the floor.
func TestVersion3Commands(t *testing.T) {
	k := establishedLink(t, prototest.ConfigV3(wire.RoleListener, "b", 2))
	nat := k.nat
	if k.status.Version != 3 {
		t.Fatalf("status %+v", k.status)
	}
	seven, one := prototest.Origin(7), prototest.Origin(1)
	c7, c1 := prototest.Chain(seven, 4, 1, 8), prototest.Chain(one, 3, 1, 8)

	// The native side names seven and advertises its head and floor; the driver's event
	// carries both.
	if err := nat.SetOriginName(seven, "seven"); err != nil {
		t.Fatal(err)
	}
	if err := nat.V2().AdvertiseHeads([]wire.Head{{Origin: seven, Seq: 4, HLC: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := nat.V3().AdvertiseFloors([]wire.Floor{{Origin: seven, Seq: 2, Hash: c7[1].Hash}}); err != nil {
		t.Fatal(err)
	}
	k.pump()
	hs := k.eventsOf(protocol.EventHeads, 0)
	if len(hs) != 2 || hs[1].Heads == nil || len(hs[1].Heads.Floors) != 1 || hs[1].Heads.Floors[0] != (wire.Floor{Origin: seven, Seq: 2, Hash: c7[1].Hash}) {
		t.Fatalf("heads events %+v", hs)
	}

	// The driver subscribes below the floor; the native side answers PURGED.
	if err := k.b.SubscribeOrigins([]abi.CursorMsg{{Origin: seven}}); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	if err := nat.V3().Purged(seven, 2, c7[1].Hash); err != nil {
		t.Fatal(err)
	}
	k.pump()
	ps := k.eventsOf(protocol.EventPurged, 0)
	if len(ps) != 1 || ps[0].Origin == nil || *ps[0].Origin != seven || ps[0].Seq != 2 || ps[0].Hash == nil || *ps[0].Hash != c7[1].Hash {
		t.Fatalf("purged events %+v", ps)
	}
	if ev, err := ps[0].Event(); err != nil || ev.Kind != protocol.EventPurged || ev.Origin != seven || ev.Seq != 2 || ev.Hash != c7[1].Hash {
		t.Fatalf("the purged event converted back: %+v, %v", ev, err)
	}

	// The driver, sending its own origin: OpAdvertiseFloors and OpPurged reach the native
	// side as a floor and a PURGED.
	k.b.Name(one, "a")
	if err := k.b.AdvertiseHeads([]wire.Head{{Origin: one, Seq: 3, HLC: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := k.b.AdvertiseFloors([]wire.Floor{{Origin: one, Seq: 1, Hash: c1[0].Hash}}); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	if h := k.natEventsOf(protocol.EventHeads, 0); len(h) != 2 || len(h[1].Heads.Floors) != 1 || h[1].Heads.Floors[0].Seq != 1 {
		t.Fatalf("native heads events %+v", h)
	}
	if err := nat.V2().Subscribe([]vector.Entry{{Origin: one}}); err != nil {
		t.Fatal(err)
	}
	k.pump()
	k.b.Purged(one, 1, c1[0].Hash)
	k.ok()
	k.pump()
	if p := k.natEventsOf(protocol.EventPurged, 0); len(p) != 1 || p[0].Origin != one || p[0].Seq != 1 {
		t.Fatalf("native purged events %+v", p)
	}
	// OpPurged with a payload of the wrong length is refused.
	k.b.Raw(abi.OpPurged, make([]byte, 10))
	if rs := k.step(); len(rs) != 1 || rs[0].Err == nil || rs[0].Err.Code != string(wire.CodeBadArgument) {
		t.Fatalf("a short OpPurged: %+v", rs)
	}
}

// TestVersion4Commands: over ABI 5 a session at protocol version 4 takes OpSendMap,
// OpSendMembers, OpRequest (whose RESULT carries the id the session gave), OpRespond and
// OpForget, and reports the native peer's map, members, requests, answers (late ones
// marked) and a request it refused itself as EVENT records that convert back to the
// session's events.
func TestVersion4Commands(t *testing.T) {
	nc := prototest.Config(wire.RoleListener, "b", 2)
	nc.Limits.MaxRequestsInFlight = 100 // so that it may send one request past the driver's bound
	k := establishedLink(t, nc)
	nat := k.nat
	if k.status.Version != 4 || k.status.Limits.MaxRequestsInFlight != 64 {
		t.Fatalf("status %+v, limits %+v", k.status, k.status.Limits)
	}
	m := wire.Map{Generation: 2, Document: []byte(`{"generation":2}`), Publisher: "a", Published: 9}
	if err := k.b.SendMap(m); err != nil {
		t.Fatal(err)
	}
	if err := k.b.SendMembers([]wire.Member{{Name: "b", MaxVersion: 4, Stamp: 2}, {Name: "a", MaxVersion: 4, Stamp: 1}}); err != nil {
		t.Fatal(err)
	}
	ask := wire.Request{Target: "b", Path: []string{"a"}, TimeoutMS: 100, Scope: wire.ScopeRead, Kind: "map"}
	for range 2 {
		if err := k.b.Request(ask); err != nil {
			t.Fatal(err)
		}
	}
	k.b.Forget(2)
	rs := k.step()
	if len(rs) != 5 || rs[2].ID != 1 || rs[3].ID != 2 || rs[0].ID != 0 || rs[4].ID != 0 {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("results %+v", rs)
		}
	}
	k.pump()
	if e := k.natEventsOf(protocol.EventMap, 0); len(e) != 1 || e[0].Map.Generation != 2 || e[0].Map.Publisher != "a" {
		t.Fatalf("native map events %+v", e)
	}
	if e := k.natEventsOf(protocol.EventMembers, 0); len(e) != 1 || len(e[0].Members.Entries) != 2 || e[0].Members.Entries[0].Name != "a" {
		t.Fatalf("native members events %+v", e)
	}
	if e := k.natEventsOf(protocol.EventRequest, 0); len(e) != 2 || e[1].Request.ID != 2 || e[1].Request.Kind != "map" {
		t.Fatalf("native request events %+v", e)
	}
	// The native side answers both: the first is awaited, the second was forgotten (late).
	for _, id := range []uint64{1, 2} {
		if err := nat.V4().Respond(id, wire.Response{Body: []byte{0xa1, 0x01, 0x00}}); err != nil {
			t.Fatal(err)
		}
	}
	// It sends its map and one request more than the driver's session owes answers to.
	if err := nat.V4().SendMap(wire.Map{Generation: 3, Document: []byte(`{"generation":3}`), Publisher: "b"}); err != nil {
		t.Fatal(err)
	}
	for range 65 {
		if _, err := nat.V4().Request(wire.Request{Target: "a", Path: []string{"b"}, TimeoutMS: 100, Scope: wire.ScopeRead, Kind: "map"}); err != nil {
			t.Fatal(err)
		}
	}
	k.pump()
	resps := k.eventsOf(protocol.EventResponse, 0)
	if len(resps) != 2 || resps[0].Late || !resps[1].Late {
		t.Fatalf("response events %+v", resps)
	}
	for i, r := range resps {
		ev, err := r.Event()
		if err != nil || ev.Response == nil || ev.Response.ID != uint64(i+1) || ev.Late != (i == 1) || len(ev.Response.Body) != 3 {
			t.Fatalf("response %d converted back: %+v, %v", i, ev, err)
		}
	}
	if e := k.eventsOf(protocol.EventMap, 0); len(e) != 1 {
		t.Fatalf("map events %+v", e)
	} else if ev, err := e[0].Event(); err != nil || ev.Map == nil || ev.Map.Generation != 3 {
		t.Fatalf("the map event converted back: %+v, %v", ev, err)
	}
	if n := len(k.eventsOf(protocol.EventRequest, 0)); n != 64 {
		t.Fatalf("%d request events at the bound of 64", n)
	}
	refused := k.eventsOf(protocol.EventRequestRefused, 0)
	if len(refused) != 1 {
		t.Fatalf("request-refused events %+v", refused)
	}
	if ev, err := refused[0].Event(); err != nil || ev.Request == nil || ev.Request.ID != 65 {
		t.Fatalf("the refusal converted back: %+v, %v", ev, err)
	}
	if e := k.natEventsOf(protocol.EventResponse, 0); len(e) != 1 || e[0].Response.ID != 65 || e[0].Response.Code != wire.CodeTooManyRequests {
		t.Fatalf("native response events %+v", e)
	}
	// The driver answers request 1; a second answer, and OpForget of an id never sent, are
	// refused.
	if err := k.b.Respond(1, wire.Response{Code: wire.CodeNoRoute}); err != nil {
		t.Fatal(err)
	}
	if err := k.b.Respond(1, wire.Response{}); err != nil {
		t.Fatal(err)
	}
	k.b.Forget(9)
	rs = k.step()
	if len(rs) != 3 || rs[0].Err != nil || rs[1].Err == nil || rs[1].Err.Code != string(wire.CodeInvalidState) ||
		rs[2].Err == nil || rs[2].Err.Code != string(wire.CodeBadArgument) {
		t.Fatalf("results %+v", rs)
	}
	k.pump()
	if e := k.natEventsOf(protocol.EventResponse, 0); len(e) != 2 || e[1].Response.ID != 1 || e[1].Response.Code != wire.CodeNoRoute {
		t.Fatalf("native response events %+v", e)
	}
}

// TestCopyCommands: over ABI 3 the base copy runs both ways between the driver and a
// native session: the driver asks (OpRequestCopy), receives COPYBEGIN and a chunk as EVENT
// records (copy-begin, chunk with its body, copy-end with the count), acknowledges the chunk
// (OpAckChunk); then serves one (OpBeginCopy, OpSendChunk with the credit its STATUS
// reports, OpEndCopy) and aborts another (OpAbortCopy).
func TestCopyCommands(t *testing.T) {
	k := establishedLink(t, prototest.Config(wire.RoleListener, "b", 2))
	nat := k.nat
	seven := prototest.Origin(7)
	c7 := prototest.Chain(seven, 2, 1, 8)
	pos := []wire.CopyPosition{{Origin: seven, Seq: 2, Hash: c7[1].Hash, HLC: 5}}
	body, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{{Key: []byte("k"), Value: []byte("v"), HLC: 5, Origin: seven}})
	if err != nil {
		t.Fatal(err)
	}

	// The driver receives a copy.
	if err := k.b.RequestCopy([]byte("t"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	if err := nat.SetOriginName(seven, "seven"); err != nil {
		t.Fatal(err)
	}
	if err := nat.V3().BeginCopy(pos, 1, 1, 10); err != nil {
		t.Fatal(err)
	}
	if err := nat.V3().SendChunk(body); err != nil {
		t.Fatal(err)
	}
	if err := nat.V3().EndCopy(); err != nil {
		t.Fatal(err)
	}
	k.pump()
	bs, cs, es := k.eventsOf(protocol.EventCopyBegin, 0), k.eventsOf(protocol.EventChunk, 0), k.eventsOf(protocol.EventCopyEnd, 0)
	if len(bs) != 1 || bs[0].CopyBegin == nil || len(bs[0].CopyBegin.Positions) != 1 || bs[0].CopyBegin.Positions[0] != pos[0] || bs[0].CopyBegin.Bytes != 10 ||
		len(cs) != 1 || !bytes.Equal(cs[0].Chunk, body) || len(es) != 1 || es[0].Count != 1 {
		t.Fatalf("copy events: %+v %+v %+v", bs, cs, es)
	}
	if ev, err := cs[0].Event(); err != nil || ev.Chunk == nil || string(ev.Chunk.Table) != "t" || ev.Chunk.Count != 1 {
		t.Fatalf("the chunk event converted back: %+v, %v", ev, err)
	}
	k.b.AckChunk()
	if rs := k.step(); len(rs) != 1 || rs[0].Err == nil || rs[0].Err.Code != string(wire.CodeInvalidState) {
		t.Fatalf("OpAckChunk after the copy ended: %+v", rs)
	}

	// The driver serves a copy.
	if err := nat.V3().RequestCopy(nil, nil); err != nil {
		t.Fatal(err)
	}
	k.pump()
	rq := k.eventsOf(protocol.EventCopyRequested, 0)
	if len(rq) != 1 || rq[0].Copy == nil || rq[0].Copy.Channel == 0 || rq[0].Copy.Credit == 0 {
		t.Fatalf("copy-requested events %+v", rq)
	}
	k.b.Name(seven, "seven")
	if err := k.b.BeginCopy(pos, 1, 1, 10); err != nil {
		t.Fatal(err)
	}
	k.ok()
	if k.status.CopyCredit == 0 {
		t.Fatalf("status %+v: no copy credit", k.status)
	}
	k.b.SendChunk(body)
	k.b.EndCopy()
	k.ok()
	k.pump()
	if n := k.natEventsOf(protocol.EventChunk, 0); len(n) != 1 {
		t.Fatalf("native chunk events %+v", n)
	}
	if e := k.natEventsOf(protocol.EventCopyEnd, 0); len(e) != 1 || e[0].Count != 1 {
		t.Fatalf("native copy-end events %+v", e)
	}
	if err := nat.V3().RequestCopy(nil, nil); err != nil {
		t.Fatal(err)
	}
	k.pump()
	if err := k.b.AbortCopy(true, wire.CodeCopyBusy, "busy"); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	if a := k.natEventsOf(protocol.EventCopyAborted, 0); len(a) != 1 || a[0].Err.Code != wire.CodeCopyBusy || !a[0].ByPeer {
		t.Fatalf("native copy-aborted events %+v", a)
	}
	k.b.Raw(abi.OpEndCopy, []byte{1})
	if rs := k.step(); len(rs) != 1 || rs[0].Err == nil || rs[0].Err.Code != string(wire.CodeBadArgument) {
		t.Fatalf("OpEndCopy with a payload: %+v", rs)
	}
}

// establishedLink is a driver session "a" (origin 1, the dialer) and a native session of
// cfg (the listener), through their handshake at the highest version both speak.
func establishedLink(t *testing.T, cfg protocol.Config) *link {
	t.Helper()
	nat, err := protocol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &link{t: t, nat: nat, now: prototest.Epoch}
	if err := k.b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: prototest.Origin(1), Secret: []byte("test-secret")}); err != nil {
		t.Fatal(err)
	}
	k.b.Start(k.now, prototest.Nonce(1))
	if err := nat.Start(k.now, prototest.Nonce(2)); err != nil {
		t.Fatal(err)
	}
	k.ok()
	k.pump()
	return k
}

// TestDriverClone: a clone of an established driver answers the same batch with the same
// bytes as its original, and what runs on one is not seen by the other. Its field list fails
// when Driver gains a field, so that Clone is looked at again.
func TestDriverClone(t *testing.T) {
	k := establishedLink(t, prototest.Config(wire.RoleListener, "b", 2))
	nat := k.nat
	if k.status.Handshake == nil {
		t.Fatalf("not established: %+v", k.status)
	}
	c := k.d.Clone()

	// The native side advertises an origin; the same message goes to both.
	seven := prototest.Origin(7)
	if err := nat.SetOriginName(seven, "seven"); err != nil {
		t.Fatal(err)
	}
	if err := nat.V2().AdvertiseHeads([]wire.Head{{Origin: seven, Seq: 5, HLC: 50}}); err != nil {
		t.Fatal(err)
	}
	rd := nat.Ready()
	if len(rd.Messages) == 0 {
		t.Fatal("the native side sent nothing")
	}
	var b abi.Batch
	for _, m := range rd.Messages {
		b.Receive(k.now, m)
	}
	if err := b.SubscribeOrigins([]abi.CursorMsg{{Origin: seven}}); err != nil {
		t.Fatal(err)
	}
	one := bytes.Clone(k.d.Step(b.Bytes()))
	two := bytes.Clone(c.Step(b.Bytes()))
	if !bytes.Equal(one, two) {
		t.Fatalf("the clone answers differently:\noriginal %x\nclone    %x", one, two)
	}

	// More on the clone only: the original's next answer is what a second clone, made
	// before it, gives.
	witness := k.d.Clone()
	var more abi.Batch
	if err := more.UnsubscribeOrigins([]wire.OriginID{seven}); err != nil {
		t.Fatal(err)
	}
	c.Step(more.Bytes())
	var st abi.Batch // a tick: every step ends with the session's STATUS
	st.Tick(k.now.Add(time.Second))
	if a, w := bytes.Clone(k.d.Step(st.Bytes())), witness.Step(st.Bytes()); !bytes.Equal(a, w) {
		t.Fatalf("a step on the clone changed the original:\noriginal %x\nwitness  %x", a, w)
	}

	fields := reflect.TypeOf(abi.Driver{})
	var names []string
	for i := 0; i < fields.NumField(); i++ {
		names = append(names, fields.Field(i).Name)
	}
	if got, want := strings.Join(names, " "), "s deferReady compact ready now broken out index id"; got != want {
		t.Fatalf("Driver's fields are %q, Clone knows %q: update Clone, then this list", got, want)
	}
}
