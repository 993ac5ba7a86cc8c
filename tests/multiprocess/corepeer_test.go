//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/protocol"
	"plait/protocol/handshake"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// stampBase is where the entries and heads test peers make are stamped (entry seq at
// stampBase+seq milliseconds): an hour before the run, so that no node holds them back as
// stamped ahead of its clock (--max-clock-offset); prototest's Epoch is a virtual time
// weeks ahead of the machine's clock.
var stampBase = uint64(time.Now().Add(-time.Hour).UnixMilli())

// corePeer is the piece the test-only peers share (TestFaultyPeer's and the adversary):
// one WebSocket to a node and a protocol.Session that ran a genuine handshake over it.
// After the handshake a test drives the session's commands, or writes frames past the
// session.
type corePeer struct {
	t       *testing.T
	ws      *websocket.Conn
	s       *protocol.Session
	channel uint32 // the channel the node last opened (its SUBSCRIBE) for this peer's origin
	dataIn  int    // the bytes of DATA frames received, headers included
	events  []protocol.Event
}

// dialCore dials url (ws:// or wss://, with tlsCfg for wss://) and runs the handshake of a
// session made from cfg (its channel binding taken from the TLS connection) until the
// session is established or closed; the caller looks at which.
func dialCore(ctx context.Context, t *testing.T, url string, tlsCfg *tls.Config, cfg protocol.Config) *corePeer {
	t.Helper()
	var opts *websocket.DialOptions
	if tlsCfg != nil {
		opts = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}}
	}
	ws, resp, err := websocket.Dial(ctx, url+"/v1/replicate", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() }) // an error means it was closed already
	if strings.HasPrefix(url, "wss:") {
		b, err := resp.TLS.ExportKeyingMaterial(handshake.ExporterLabel, nil, handshake.ExporterLength)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ChannelBinding = b
	}
	s, err := protocol.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(int64(s.Limits().MaxMessage)) // what the session advertises
	p := &corePeer{t: t, ws: ws, s: s}
	if err := s.Start(time.Now(), prototest.Nonce(7)); err != nil {
		t.Fatal(err)
	}
	p.flush()
	for st := s.State(); st != protocol.StateEstablished && st != protocol.StateClosed; st = s.State() {
		p.receive(ctx)
	}
	return p
}

func (p *corePeer) write(msgs [][]byte) {
	p.t.Helper()
	for _, m := range msgs {
		if err := p.ws.Write(context.Background(), websocket.MessageBinary, m); err != nil {
			p.t.Fatal(err)
		}
	}
}

// flush sends what the session produced and keeps its events.
func (p *corePeer) flush() {
	p.t.Helper()
	rd := p.s.Ready()
	p.write(rd.Messages)
	p.events = append(p.events, rd.Events...)
}

// receive reads one message into the session; a socket that ends fails the test.
func (p *corePeer) receive(ctx context.Context) {
	p.t.Helper()
	if err := p.tryReceive(ctx); err != nil {
		p.t.Fatal(err)
	}
}

// tryReceive reads one message into the session, noting the channel of a SUBSCRIBE, and
// sends what the session answers (nothing once it is closed). It returns the read's error.
func (p *corePeer) tryReceive(ctx context.Context) error {
	p.t.Helper()
	_, msg, err := p.ws.Read(ctx)
	if err != nil {
		return err
	}
	p.take(msg)
	p.flush()
	return nil
}

// take gives a received message to the session, noting the channel of a SUBSCRIBE and
// counting DATA bytes.
func (p *corePeer) take(msg []byte) {
	p.t.Helper()
	r := wire.NewReader(msg, 0)
	for r.More() {
		fr, ferr := r.Next()
		if ferr != nil {
			break
		}
		switch fr.Type {
		case wire.TypeSubscribe:
			if b, derr := wire.DecodeBody(fr); derr == nil {
				p.channel = b.(*wire.Subscribe).Entries[0].Channel
			}
		case wire.TypeData:
			p.dataIn += wire.HeaderSize + len(fr.Body)
		}
	}
	if err := p.s.Receive(time.Now(), msg); err != nil {
		p.t.Fatal(err)
	}
}

// rawData sends a DATA frame for an entry outside the session, claiming hash claimed.
func (p *corePeer) rawData(claimed wire.Hash, txn []byte) {
	p.t.Helper()
	p.write([][]byte{dataFrame(p.channel, claimed, txn)})
}

// dataFrame is a DATA frame on channel claiming hash claimed for txn.
func dataFrame(channel uint32, claimed wire.Hash, txn []byte) []byte {
	return prototest.RawFrame(wire.TypeData, 0, channel, append(claimed[:], txn...))
}
