package host_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/handshake"
	"plait/protocol/prototest"
	"plait/protocol/replica"
	"plait/protocol/vector"
	"plait/protocol/wire"
	"plait/shells/wasm/host"
)

var (
	coreWasm []byte
	cacheDir string // one compilation cache for the test binary: compile once, load fast
)

// TestMain builds the guest once with the release command (docs/design.md §8), unless
// PLAIT_CORE_WASM names an already built module (make wasm).
func TestMain(m *testing.M) {
	path := os.Getenv("PLAIT_CORE_WASM")
	if path == "" {
		dir, err := os.MkdirTemp("", "plait-core-")
		if err != nil {
			panic(err)
		}
		path = filepath.Join(dir, "core.wasm")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-buildmode=c-shared", "-o", path, "plait/shells/wasm/guest")
		cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0", "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Stderr.Write(out)
			panic("building the guest: " + err.Error())
		}
	}
	var err error
	if coreWasm, err = os.ReadFile(path); err != nil {
		panic(err)
	}
	if cacheDir, err = os.MkdirTemp("", "plait-wazero-cache-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(cacheDir)
	if os.Getenv("PLAIT_CORE_WASM") == "" {
		os.RemoveAll(filepath.Dir(path))
	}
	os.Exit(code)
}

func load(t testing.TB) (*host.Module, *host.Instance) {
	t.Helper()
	ctx := context.Background()
	mod, err := host.Load(ctx, coreWasm, cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(ctx) })
	if mod.ABIVersion() != abi.Version || abi.Version != 5 {
		t.Fatalf("abi_version %d, want 5 (abi.Version %d)", mod.ABIVersion(), abi.Version)
	}
	in, err := mod.Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return mod, in
}

// twin drives a WASM instance and a native abi.Driver with the same batches and fails the
// test the moment their outputs differ.
type twin struct {
	t      *testing.T
	in     *host.Instance
	native abi.Driver
	msgs   [][]byte
	events []abi.EventMsg
	status abi.StatusMsg
}

func (w *twin) step(b *abi.Batch) {
	w.t.Helper()
	got, err := w.in.Step(context.Background(), b.Bytes())
	if err != nil {
		w.t.Fatal(err)
	}
	want := w.native.Step(b.Bytes())
	if !bytes.Equal(got, want) {
		w.t.Fatalf("wasm and native outputs differ:\nwasm   %x\nnative %x", got, want)
	}
	recs, err := abi.Split(got)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, r := range recs {
		switch r.Kind {
		case abi.KindResult:
			var m abi.ResultMsg
			if err := abi.Unmarshal(r.Payload, &m); err != nil {
				w.t.Fatal(err)
			}
			if m.Err != nil {
				w.t.Fatalf("command 0x%x failed: %v", m.Op, m.Err.Wire())
			}
		case abi.KindMessage:
			w.msgs = append(w.msgs, append([]byte(nil), r.Payload...))
		case abi.KindEvent:
			var m abi.EventMsg
			if err := abi.Unmarshal(r.Payload, &m); err != nil {
				w.t.Fatal(err)
			}
			w.events = append(w.events, m)
		case abi.KindStatus:
			if err := abi.Unmarshal(r.Payload, &w.status); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	b.Reset()
}

func (w *twin) count(k protocol.EventKind) int {
	n := 0
	for _, e := range w.events {
		if protocol.EventKind(e.Kind) == k {
			n++
		}
	}
	return n
}

// TestWasmAgainstNative runs the built guest under wazero through a handshake and a short
// version-1 stream against the native session, in both roles, and checks at every step that
// a native driver fed the same batches answers byte for byte the same.
func TestWasmAgainstNative(t *testing.T) {
	for _, wasmRole := range []wire.Role{wire.RoleDialer, wire.RoleListener} {
		t.Run(wasmRole.String(), func(t *testing.T) {
			_, in := load(t)
			w := &twin{t: t, in: in}
			now := prototest.Epoch
			var b abi.Batch
			if err := b.Configure(abi.ConfigMsg{Role: uint8(wasmRole), Name: "wasm", Origin: prototest.Origin(1), Secret: []byte("s")}); err != nil {
				t.Fatal(err)
			}
			b.Start(now, prototest.Nonce(1))
			w.step(&b)

			cfg := prototest.ConfigV1(1-wasmRole, "native", 2)
			cfg.Secret = []byte("s")
			nat, err := protocol.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := nat.Start(now, prototest.Nonce(2)); err != nil {
				t.Fatal(err)
			}
			var natEvents []protocol.Event
			pump := func() {
				for round := 0; round < 20; round++ {
					moved := false
					rd := nat.Ready()
					natEvents = append(natEvents, rd.Events...)
					for _, m := range rd.Messages {
						b.Receive(now, m)
						moved = true
					}
					if len(b.Bytes()) > 0 {
						w.step(&b)
					}
					for _, m := range w.msgs {
						if err := nat.Receive(now, m); err != nil {
							t.Fatal(err)
						}
						moved = true
					}
					w.msgs = nil
					if !moved {
						return
					}
				}
				t.Fatal("no quiescence")
			}
			pump()
			if w.count(protocol.EventHandshake) != 1 || nat.State() != protocol.StateEstablished {
				t.Fatalf("handshake: wasm %+v native %v %v", w.events, nat.State(), nat.Err())
			}
			if w.status.Version != 1 || !w.status.Connected {
				t.Fatalf("status %+v", w.status)
			}

			// The WASM side subscribes; the native side streams 5 entries; the WASM side acks.
			if err := b.Subscribe(abi.SubscribeMsg{From: 0}); err != nil {
				t.Fatal(err)
			}
			w.step(&b)
			pump()
			chain := prototest.Chain(prototest.Origin(7), 5, 1, 100)
			if err := nat.SetOriginName(prototest.Origin(7), "seven"); err != nil {
				t.Fatal(err)
			}
			for i, e := range chain {
				if err := nat.V1().Offer(uint64(i+1), e.Raw); err != nil {
					t.Fatal(err)
				}
			}
			pump()
			if n := w.count(protocol.EventTxn); n != 5 {
				t.Fatalf("wasm applied %d of 5", n)
			}
			for i, e := range w.events[len(w.events)-5:] {
				if !bytes.Equal(e.Txn, chain[i].Raw) || e.Position != uint64(i+1) {
					t.Fatalf("entry %d differs", i)
				}
			}
			b.Ack(5)
			w.step(&b)
			pump()
			var acked uint64
			for _, e := range natEvents {
				if e.Kind == protocol.EventAcked {
					acked = e.Position
				}
			}
			if acked != 5 || w.status.HeldBytes != 0 {
				t.Fatalf("acked %d, held %d", acked, w.status.HeldBytes)
			}
			// And the other direction: the native side subscribes, the WASM side offers.
			if err := nat.V1().Subscribe(0, nil); err != nil {
				t.Fatal(err)
			}
			pump()
			mine := prototest.Chain(prototest.Origin(1), 3, 2, 10)
			b.Name(prototest.Origin(1), "wasm")
			for i, e := range mine {
				b.Offer(uint64(i+1), e.Raw)
			}
			w.step(&b)
			pump()
			var got int
			for _, e := range natEvents {
				if e.Kind == protocol.EventTxn {
					got++
				}
			}
			if got != 3 {
				t.Fatalf("native received %d of 3", got)
			}
			_ = time.Second
		})
	}
}

// twinLink joins a twin (WASM and native drivers fed the same batches) and a native session
// playing their peer.
type twinLink struct {
	t         *testing.T
	w         *twin
	b         abi.Batch
	nat       *protocol.Session
	natEvents []protocol.Event
	now       time.Time
}

// pump moves messages both ways until both sides are quiet; every batch is checked byte for
// byte between WASM and native.
func (k *twinLink) pump() {
	k.t.Helper()
	for round := 0; round < 20; round++ {
		moved := false
		rd := k.nat.Ready()
		k.natEvents = append(k.natEvents, rd.Events...)
		for _, m := range rd.Messages {
			k.b.Receive(k.now, m)
			moved = true
		}
		if len(k.b.Bytes()) > 0 {
			k.w.step(&k.b)
		}
		for _, m := range k.w.msgs {
			if err := k.nat.Receive(k.now, m); err != nil {
				k.t.Fatal(err)
			}
			moved = true
		}
		k.w.msgs = nil
		if !moved {
			return
		}
	}
	k.t.Fatal("no quiescence")
}

func (k *twinLink) natCount(kind protocol.EventKind) int {
	n := 0
	for _, e := range k.natEvents {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// TestWasmAgainstNativeV2: the built guest (this ABI version) and the native session, both of
// this build, the native one limited to version 2, negotiate protocol version 2 and run a short version-2 stream in both
// directions and both roles, through every version-2 opcode; at every step a native driver
// fed the same batches answers byte for byte the same.
func TestWasmAgainstNativeV2(t *testing.T) {
	for _, wasmRole := range []wire.Role{wire.RoleDialer, wire.RoleListener} {
		t.Run(wasmRole.String(), func(t *testing.T) {
			mod, in := load(t)
			if mod.ABIVersion() != abi.Version || in == nil {
				t.Fatalf("abi_version %d", mod.ABIVersion())
			}
			cfg := prototest.ConfigV2(1-wasmRole, "native", 2)
			nat, err := protocol.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			k := &twinLink{t: t, w: &twin{t: t, in: in}, nat: nat, now: prototest.Epoch}
			if err := k.b.Configure(abi.ConfigMsg{Role: uint8(wasmRole), Name: "wasm", Origin: prototest.Origin(1), Secret: cfg.Secret,
				Limits: abi.LimitsMsg{MaxFrameBody: 65536, MaxMessage: 1 << 20, MaxChannelBuffer: 1 << 20, MaxSessionBuffer: 4 << 20}}); err != nil {
				t.Fatal(err)
			}
			k.b.Start(k.now, prototest.Nonce(1))
			k.w.step(&k.b)
			if err := nat.Start(k.now, prototest.Nonce(2)); err != nil {
				t.Fatal(err)
			}
			k.pump()
			if k.w.count(protocol.EventHandshake) != 1 || nat.Handshake().Version != 2 {
				t.Fatalf("handshake: wasm %+v native %v %v", k.w.events, nat.State(), nat.Err())
			}
			if st := k.w.status; st.Version != 2 || !st.Connected || st.MinVersion != 1 || st.MaxVersion != 4 || st.Limits.MaxChannelBuffer != 1<<20 {
				t.Fatalf("status %+v", st)
			}

			// The native side offers origin 7; the WASM side subscribes, receives 5, acknowledges.
			seven := prototest.Origin(7)
			chain := prototest.Chain(seven, 5, 1, 100)
			if err := nat.SetOriginName(seven, "seven"); err != nil {
				t.Fatal(err)
			}
			if err := nat.V2().AdvertiseHeads([]wire.Head{{Origin: seven, Seq: 5, HLC: 5}}); err != nil {
				t.Fatal(err)
			}
			k.pump()
			if k.w.count(protocol.EventHeads) != 1 {
				t.Fatalf("no HEADS event: %+v", k.w.events)
			}
			if err := k.b.SubscribeOrigins([]abi.CursorMsg{{Origin: seven}}); err != nil {
				t.Fatal(err)
			}
			k.w.step(&k.b)
			k.pump()
			if k.natCount(protocol.EventSubscribed) != 1 || nat.V2().Credit(seven) != 1<<20 {
				t.Fatalf("native: %d subscribed, credit %d", k.natCount(protocol.EventSubscribed), nat.V2().Credit(seven))
			}
			for _, e := range chain {
				if err := nat.V2().Send(e.Raw); err != nil {
					t.Fatal(err)
				}
			}
			k.pump()
			if n := k.w.count(protocol.EventTxn); n != 5 {
				t.Fatalf("wasm applied %d of 5", n)
			}
			for i, e := range k.w.events[len(k.w.events)-5:] {
				if !bytes.Equal(e.Txn, chain[i].Raw) || e.Origin == nil || *e.Origin != seven {
					t.Fatalf("entry %d differs", i)
				}
			}
			if k.w.status.HeldBytes == 0 {
				t.Fatal("nothing held before the acknowledgement")
			}
			k.b.AckOrigin(seven, 5)
			k.w.step(&k.b)
			k.pump()
			var cursor uint64
			for _, e := range k.natEvents {
				if e.Kind == protocol.EventCursor && e.Origin == seven {
					cursor = e.Seq
				}
			}
			if cursor != 5 || k.w.status.HeldBytes != 0 {
				t.Fatalf("cursor %d, held %d", cursor, k.w.status.HeldBytes)
			}

			// The other direction: the native side subscribes to the WASM side's origin.
			one := prototest.Origin(1)
			if err := nat.V2().Subscribe([]vector.Entry{{Origin: one}}); err != nil {
				t.Fatal(err)
			}
			k.pump()
			if cs := k.w.status.Credits; len(cs) != 1 || cs[0].Origin != one || cs[0].Credit != uint64(protocol.Limits{}.WithDefaults().MaxChannelBuffer) {
				t.Fatalf("credits %+v", cs)
			}
			mine := prototest.Chain(one, 3, 2, 10)
			k.b.Name(one, "wasm")
			if err := k.b.AdvertiseHeads([]wire.Head{{Origin: one, Seq: 3, HLC: 3}}); err != nil {
				t.Fatal(err)
			}
			var sent uint64
			for _, e := range mine {
				k.b.Send(e.Raw)
				sent += uint64(protocol.DataFrameSize(len(e.Raw)))
			}
			k.w.step(&k.b)
			if cs := k.w.status.Credits; len(cs) != 1 || cs[0].Credit != uint64(protocol.Limits{}.WithDefaults().MaxChannelBuffer)-sent {
				t.Fatalf("credits %+v after sending %d bytes", cs, sent)
			}
			k.pump()
			if n := k.natCount(protocol.EventTxn); n != 3 {
				t.Fatalf("native received %d of 3", n)
			}
			if err := nat.V2().Ack(one, 3); err != nil {
				t.Fatal(err)
			}
			k.pump()
			if k.w.count(protocol.EventCursor) != 1 {
				t.Fatalf("no cursor event: %+v", k.w.events)
			}

			// Moving single origins: the WASM side unsubscribes and withdraws.
			if err := k.b.UnsubscribeOrigins([]wire.OriginID{seven}); err != nil {
				t.Fatal(err)
			}
			if err := k.b.WithdrawHeads([]wire.OriginID{one}); err != nil {
				t.Fatal(err)
			}
			k.w.step(&k.b)
			k.pump()
			if k.natCount(protocol.EventUnsubscribed) != 1 || k.natCount(protocol.EventHeads) != 2 || nat.V2().Credit(seven) != 0 {
				t.Fatalf("native events %d unsubscribed, %d heads", k.natCount(protocol.EventUnsubscribed), k.natCount(protocol.EventHeads))
			}
			if st := k.w.status; st.State != uint8(protocol.StateEstablished) || st.Stats.TxnsReceived != 5 || st.Stats.TxnsSent != 3 ||
				st.Stats.ProtocolErrors != 0 || nat.State() != protocol.StateEstablished {
				t.Fatalf("status %+v, native %v", st, nat.Err())
			}
		})
	}
}

// TestSessionV4UnderWasm: a Session of the built guest and a native session of this build
// negotiate protocol version 4 and exchange maps, member entries and requests through the
// Session's V4 commands: Request answers the id the guest's session gave (1, then 2), a
// forgotten request's answer comes back late, each side sends the other a SKIP, and a session run by the native driver
// (NewDriverSession), given the same calls, reports the same events.
func TestSessionV4UnderWasm(t *testing.T) {
	mod, _ := load(t)
	type sideEvents struct {
		guest, native []protocol.Event
	}
	run := func(t *testing.T, guest replica.Session) sideEvents {
		nc := prototest.Config(wire.RoleDialer, "a", 1)
		nc.Leaf = true // a leaf of the guest: the guest's LEAF-STATE below
		native, err := protocol.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		now := prototest.Epoch
		var out sideEvents
		sides := []replica.Session{native, guest}
		pump := func() {
			for range 10 {
				for i, s := range sides {
					rd := s.Ready()
					if i == 0 {
						out.native = append(out.native, rd.Events...)
					} else {
						out.guest = append(out.guest, rd.Events...)
					}
					for _, m := range rd.Messages {
						if err := sides[1-i].Receive(now, m); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		for i, s := range sides {
			if err := s.Start(now, bytes.Repeat([]byte{byte(i + 1)}, 16)); err != nil {
				t.Fatal(err)
			}
		}
		pump()
		if v := guest.Handshake().Version; v != 4 || native.Handshake().Version != 4 || !guest.Handshake().PeerLeaf {
			t.Fatalf("versions %d / %d, the guest's peer a leaf %v, err %v", v, native.Handshake().Version, guest.Handshake().PeerLeaf, guest.Err())
		}
		g := guest.(interface{ V4() protocol.V4Commands }).V4()
		if err := g.LeafState(wire.LeafState{Reoriginated: 3, HubSeq: 7, Core: 2}); err != nil {
			t.Fatal(err)
		}
		if err := g.LeafState(wire.LeafState{Core: 1}); err == nil {
			t.Fatal("a LEAFSTATE whose core is above its re-originated seq was sent")
		}
		if err := g.SendMap(wire.Map{Generation: 5, Document: []byte(`{"generation":5}`), Publisher: "b", Published: 3}); err != nil {
			t.Fatal(err)
		}
		if err := g.SendMembers([]wire.Member{{Name: "b", MaxVersion: 4, Stamp: 3}}); err != nil {
			t.Fatal(err)
		}
		for want := uint64(1); want <= 2; want++ {
			id, err := g.Request(wire.Request{Target: "a", Path: []string{"b"}, TimeoutMS: 100, Scope: wire.ScopeRead, Kind: "map"})
			if err != nil || id != want {
				t.Fatalf("request: id %d, %v; want %d", id, err, want)
			}
		}
		if err := g.Forget(2); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Request(wire.Request{Target: "a", Path: []string{"x"}, TimeoutMS: 100, Scope: wire.ScopeRead, Kind: "map"}); err == nil {
			t.Fatal("a request whose path does not end at the guest was sent")
		}
		pump()
		for _, id := range []uint64{1, 2} {
			if err := native.V4().Respond(id, wire.Response{Body: []byte{0xa1, 0x01, 0x00}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := native.V4().Request(wire.Request{Target: "b", Path: []string{"a"}, TimeoutMS: 100, Scope: wire.ScopeWrite, Kind: "map"}); err != nil {
			t.Fatal(err)
		}
		pump()
		if err := g.Respond(1, wire.Response{Code: wire.CodeUnknownKind, Message: "no"}); err != nil {
			t.Fatal(err)
		}
		if err := g.Respond(1, wire.Response{}); err == nil {
			t.Fatal("a second answer was sent")
		}
		pump()
		// Placement: each side leaves a run of an origin out of the other's channel (the
		// guest's SKIP command, and the EventSkip it reports, cross the ABI).
		nine, eight := prototest.Origin(9), prototest.Origin(8)
		nineLog, eightLog := prototest.Chain(nine, 3, 1, 4), prototest.Chain(eight, 2, 1, 4)
		for _, err := range []error{guest.SetOriginName(nine, "nine"), native.SetOriginName(eight, "eight"),
			native.V2().Subscribe([]vector.Entry{{Origin: nine}}), guest.V2().Subscribe([]vector.Entry{{Origin: eight}})} {
			if err != nil {
				t.Fatal(err)
			}
		}
		pump()
		for _, err := range []error{guest.V2().Send(nineLog[0].Raw), g.Skip(nine, 3, nineLog[2].Hash, 3, [][]byte{[]byte("t")}, 5),
			native.V4().Skip(eight, 2, eightLog[1].Hash, 2, nil, 0)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Skip(nine, 2, nineLog[1].Hash, 2, nil, 0); err == nil {
			t.Fatal("a run below the channel's next seq was sent")
		}
		// Links: each side sends its settings (the guest's LINK command, and the EventLink
		// it reports, cross the ABI).
		if err := g.Link(wire.Link{Mode: wire.LinkReceive, Tables: [][]byte{[]byte("t")}}); err != nil {
			t.Fatal(err)
		}
		if err := native.V4().Link(wire.Link{Mode: wire.LinkSend}); err != nil {
			t.Fatal(err)
		}
		if err := g.Link(wire.Link{Mode: 3}); err == nil {
			t.Fatal("a LINK of mode 3 was sent")
		}
		pump()
		// A copy's HOLDS: the native side asks the guest for a copy, the guest says how far
		// its snapshot holds table t, and since when it writes none of it, before it begins
		// (the guest's COPY-HOLDS command, its since included, and the EventCopyHolds it
		// makes at the native side, cross the ABI).
		if err := native.V3().RequestCopy(nil, nil); err != nil {
			t.Fatal(err)
		}
		pump()
		if err := g.CopyHolds([]byte("t"), []wire.OriginSeq{{Origin: nine, Seq: 2}}, 5); err != nil {
			t.Fatal(err)
		}
		if err := g.CopyHolds([]byte("s"), nil, 0); err == nil {
			t.Fatal("a HOLDS of a table below the last one's was sent")
		}
		for _, err := range []error{guest.V3().BeginCopy(nil, 0, 0, 0), guest.V3().EndCopy()} {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := g.CopyHolds([]byte("u"), nil, 0); err == nil {
			t.Fatal("a HOLDS after the copy began was sent")
		}
		pump()
		return out
	}
	wasm, err := mod.NewSession(prototest.Config(wire.RoleListener, "b", 2), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, wasm)
	drv, err := host.NewDriverSession(prototest.Config(wire.RoleListener, "b", 2))
	if err != nil {
		t.Fatal(err)
	}
	want := run(t, drv)
	kindsOf := func(evs []protocol.Event) []protocol.EventKind {
		var out []protocol.EventKind
		for _, e := range evs {
			out = append(out, e.Kind)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("under WASM the events are\n%v / %v\nnatively\n%v / %v", kindsOf(got.guest), kindsOf(got.native), kindsOf(want.guest), kindsOf(want.native))
	}
	var resps []protocol.Event
	for _, e := range got.guest {
		if e.Kind == protocol.EventResponse {
			resps = append(resps, e)
		}
	}
	if len(resps) != 2 || resps[0].Late || !resps[1].Late || resps[1].Response.ID != 2 {
		t.Fatalf("the guest's responses: %+v", resps)
	}
	count := func(evs []protocol.Event, k protocol.EventKind) int {
		n := 0
		for _, e := range evs {
			if e.Kind == k {
				n++
			}
		}
		return n
	}
	if count(got.native, protocol.EventMap) != 1 || count(got.native, protocol.EventMembers) != 1 || count(got.native, protocol.EventRequest) != 2 ||
		count(got.guest, protocol.EventRequest) != 1 || count(got.native, protocol.EventResponse) != 1 ||
		count(got.native, protocol.EventSkip) != 1 || count(got.guest, protocol.EventSkip) != 1 ||
		count(got.native, protocol.EventLink) != 1 || count(got.guest, protocol.EventLink) != 1 ||
		count(got.native, protocol.EventCopyHolds) != 1 || count(got.native, protocol.EventCopyEnd) != 1 ||
		count(got.native, protocol.EventLeafState) != 1 {
		t.Fatalf("native events %v, guest events %v", kindsOf(got.native), kindsOf(got.guest))
	}
	for _, e := range got.native {
		if e.Kind == protocol.EventCopyHolds && (string(e.Holds.Table) != "t" || e.Holds.Channel != 2 || e.Holds.Since != 5 || // 1 is its subscription
			!reflect.DeepEqual(e.Holds.Seqs, []wire.OriginSeq{{Origin: prototest.Origin(9), Seq: 2}})) {
			t.Fatalf("the native side's copy-holds: %+v", e.Holds)
		}
	}
}

// TestUnknownCommandIsAnErrorResult: an unknown opcode, a truncated batch and a command
// before configure come back as error results, never as a trap.
func TestUnknownCommandIsAnErrorResult(t *testing.T) {
	_, in := load(t)
	var b abi.Batch
	b.Raw(abi.OpQuiet+1, []byte{1, 2, 3}) // one past the last opcode of ABI version 5
	b.Tick(prototest.Epoch)
	bad := append(b.Bytes(), 0x03, 0, 0, 0, 9, 1) // claims 9 bytes, has 1
	out, err := in.Step(context.Background(), bad)
	if err != nil {
		t.Fatal(err)
	}
	var native abi.Driver
	if want := native.Step(bad); !bytes.Equal(out, want) {
		t.Fatal("wasm and native differ")
	}
	recs, _ := abi.Split(out)
	var codes []wire.Code
	for _, r := range recs {
		if r.Kind == abi.KindResult {
			var m abi.ResultMsg
			if err := abi.Unmarshal(r.Payload, &m); err != nil {
				t.Fatal(err)
			}
			if m.Err == nil {
				t.Fatal("expected an error result")
			}
			codes = append(codes, wire.Code(m.Err.Code))
		}
	}
	want := []wire.Code{wire.CodeUnknownCommand, wire.CodeInvalidState, wire.CodeBadArgument}
	if len(codes) != len(want) {
		t.Fatalf("codes %v", codes)
	}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes %v, want %v", codes, want)
		}
	}
	// The instance is still usable.
	b.Reset()
	if err := b.Configure(abi.ConfigMsg{Role: 0, Name: "x", Origin: prototest.Origin(3)}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Step(context.Background(), b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// TestSessionAfterAFailedCall: once a call into its instance fails (here: the module was
// closed under it), a Session answers every call with an internal error and reports state
// closed with that error; it never traps the caller.
func TestSessionAfterAFailedCall(t *testing.T) {
	mod, _ := load(t)
	s, err := mod.NewSession(protocol.Config{Role: wire.RoleDialer, Name: "a", Origin: prototest.Origin(1)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(prototest.Epoch, prototest.Nonce(1)); err != nil {
		t.Fatal(err)
	}
	if !s.HasReady() || len(s.Ready().Messages) != 1 || s.State() != protocol.StateHandshaking {
		t.Fatalf("after Start: state %v", s.State())
	}
	mod.Close(context.Background())
	err = s.Tick(prototest.Epoch)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInternal {
		t.Fatalf("Tick on a closed module: %v, want internal", err)
	}
	if s.State() != protocol.StateClosed || s.Err() == nil || s.Err().Code != wire.CodeInternal {
		t.Fatalf("state %v, err %v", s.State(), s.Err())
	}
	if err2 := s.V2().Send([]byte{1}); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("a later call: %v, want the same error", err2)
	}
}

// TestCallDeadline: a call that runs past its context's deadline is stopped inside the
// guest (the runtime closes the module when the context ends) and the instance is
// discarded: every later call fails with ErrDead.
func TestCallDeadline(t *testing.T) {
	_, in := load(t)
	var b abi.Batch
	msg := bytes.Repeat(prototest.Frame(&wire.Ping{ID: 1}), 4000) // 4,000 frames to decode and re-encode
	for range 50 {
		b.Decode(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := in.Step(ctx, b.Bytes())
	if err == nil {
		t.Fatalf("a batch of 200,000 frames to decode finished within 100 ms (%v): the deadline was not tested", time.Since(start))
	}
	if !strings.Contains(err.Error(), "step:") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("the call failed with %v; want the step call stopped by its deadline", err)
	}
	t.Logf("stopped after %v: %v", time.Since(start), err)
	if _, err := in.Step(context.Background(), nil); !errors.Is(err, host.ErrDead) {
		t.Fatalf("after the deadline: %v, want ErrDead", err)
	}
}

// TestChannelBindingUnderWasm: the guest takes a channel binding through CONFIGURE and
// binds its handshake to it exactly as the native core does: with the native side's
// binding equal it establishes, bound, with tls-exporter negotiated; with another binding
// (a handshake relayed between two channels) both sides fail auth-failed.
func TestChannelBindingUnderWasm(t *testing.T) {
	mod, _ := load(t)
	for _, c := range []struct {
		name    string
		native  []byte
		wantsOK bool
	}{{"one channel", bytes.Repeat([]byte{7}, 32), true}, {"two channels", bytes.Repeat([]byte{8}, 32), false}} {
		t.Run(c.name, func(t *testing.T) {
			lc := prototest.Config(wire.RoleListener, "L", 2)
			lc.Secret, lc.ChannelBinding = []byte("s"), bytes.Repeat([]byte{7}, 32)
			guest, err := mod.NewSession(lc, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			dc := prototest.Config(wire.RoleDialer, "D", 1)
			dc.Secret, dc.ChannelBinding = []byte("s"), c.native
			native, err := protocol.New(dc)
			if err != nil {
				t.Fatal(err)
			}
			now := prototest.Epoch
			sides := []replica.Session{native, guest}
			for i, s := range sides {
				if err := s.Start(now, bytes.Repeat([]byte{byte(i + 1)}, 16)); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 {
				for i, s := range sides {
					for _, m := range s.Ready().Messages {
						_ = sides[1-i].Receive(now, m) // a closed side refuses; its state says why
					}
				}
			}
			for _, s := range sides {
				h := s.Handshake()
				if c.wantsOK && (s.State() != protocol.StateEstablished || !h.Bound || !slices.Contains(h.Caps, handshake.CapTLSExporter)) {
					t.Fatalf("state %v, err %v, handshake %+v", s.State(), s.Err(), h)
				}
				if !c.wantsOK && (s.Err() == nil || s.Err().Code != wire.CodeAuthFailed) {
					t.Fatalf("state %v, err %v; want auth-failed", s.State(), s.Err())
				}
			}
		})
	}
}
