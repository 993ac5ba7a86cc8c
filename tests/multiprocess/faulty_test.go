//go:build multiprocess

package multiprocess

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// faultyPeer is a test-only peer built on the protocol core: a real handshake, then
// entries it may skip or corrupt, without closing the connection.
type faultyPeer struct {
	t       *testing.T
	ws      *websocket.Conn
	s       *protocol.Session
	channel uint32 // the channel the node opened for this peer's origin
	events  []protocol.Event
}

func (f *faultyPeer) write(msgs [][]byte) {
	f.t.Helper()
	for _, m := range msgs {
		if err := f.ws.Write(context.Background(), websocket.MessageBinary, m); err != nil {
			f.t.Fatal(err)
		}
	}
}

// flush sends what the session produced and keeps its events.
func (f *faultyPeer) flush() {
	rd := f.s.Ready()
	f.write(rd.Messages)
	f.events = append(f.events, rd.Events...)
}

// receive reads one message into the session, noting the channel of a SUBSCRIBE.
func (f *faultyPeer) receive(ctx context.Context) {
	f.t.Helper()
	_, msg, err := f.ws.Read(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	r := wire.NewReader(msg, 0)
	for r.More() {
		fr, ferr := r.Next()
		if ferr != nil {
			break
		}
		if fr.Type == wire.TypeSubscribe {
			if b, derr := wire.DecodeBody(fr); derr == nil {
				f.channel = b.(*wire.Subscribe).Entries[0].Channel
			}
		}
	}
	if err := f.s.Receive(time.Now(), msg); err != nil {
		f.t.Fatal(err)
	}
	f.flush()
}

// rawData sends a DATA frame for an entry outside the session, claiming hash claimed.
func (f *faultyPeer) rawData(claimed wire.Hash, txn []byte) {
	f.t.Helper()
	f.write([][]byte{prototest.RawFrame(wire.TypeData, 0, f.channel, append(claimed[:], txn...))})
}

// TestFaultyPeer: a peer completes the handshake, skips one entry, then corrupts one. The
// node counts the gap and the resend it asks for, reports the divergence, never applies
// the corrupt entry, and stays up.
func TestFaultyPeer(t *testing.T) {
	n := serve(t, "N")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, n.URL+"/v1/replicate", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	origin := wire.OriginID{0xfa, 0x01}
	s, err := protocol.New(protocol.Config{Role: wire.RoleDialer, Name: "F", Origin: origin,
		Secret: []byte(secret), ExpectedPeer: "N"})
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyPeer{t: t, ws: ws, s: s}
	if err := s.Start(time.Now(), prototest.Nonce(7)); err != nil {
		t.Fatal(err)
	}
	f.flush()
	for s.State() != protocol.StateEstablished {
		f.receive(ctx)
	}
	chain := prototest.Chain(origin, 5, 1, 8)
	if err := s.SetOriginName(origin, "F"); err != nil {
		t.Fatal(err)
	}
	if err := s.V2().AdvertiseHeads([]wire.Head{{Origin: origin, Seq: 5, HLC: wire.MakeHLC(1_800_000_000_005, 0)}}); err != nil {
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
