//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"crypto/tls"
	bin "encoding/binary"
	"strconv"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// adversary is a test-only peer with valid credentials that misbehaves on purpose. Like
// TestFaultyPeer's peer it is built on the protocol core (corePeer): it completes a
// genuine handshake with the cluster secret and, over wss://, a certificate of the
// cluster's CA with the handshake bound to the TLS channel. Then it writes what no
// conforming peer sends, as frames past its own session's checks: DATA past the node's
// credit, bodies and vectors past their bounds, seqs and heads going back, an origin
// renamed, a forked chain, a flood of PINGs, or channels it stops reading. The tests in
// adversarial_test.go hold the node to its answer for each: the typed error it closes or
// refuses with, where it counts it, and that it goes on serving its other peers.
type adversary struct {
	*corePeer
	name   string        // the name its HELLO gives
	origin wire.OriginID // its own origin id
}

// advConfig is what an adversary's session is made from.
type advConfig struct {
	name       string          // the HELLO's name
	origin     wire.OriginID   // zero: one derived from the name
	tls        *tls.Config     // nil: ws://; else the client certificate's configuration for wss://
	expect     string          // the node it dials (empty: N)
	maxVersion uint64          // 0: every version this build speaks
	limits     protocol.Limits // the windows it grants the node, and its frame limits
}

// dialAdversary dials url and completes the handshake; the session may be closed already
// if the node refused it (the caller looks).
func dialAdversary(ctx context.Context, t *testing.T, url string, c advConfig) *adversary {
	t.Helper()
	if c.origin.IsZero() {
		c.origin = wire.OriginID{0xad}
		copy(c.origin[1:], c.name)
	}
	if c.expect == "" {
		c.expect = "N"
	}
	p := dialCore(ctx, t, url, c.tls, protocol.Config{Role: wire.RoleDialer, Name: c.name, Origin: c.origin,
		Secret: []byte(secret), ExpectedPeer: c.expect, MaxVersion: c.maxVersion, Limits: c.limits})
	return &adversary{corePeer: p, name: c.name, origin: c.origin}
}

// established fails the test unless the handshake completed.
func (a *adversary) established() {
	a.t.Helper()
	if a.s.State() != protocol.StateEstablished {
		a.t.Fatalf("%s: the handshake did not complete: %v", a.name, a.s.Err())
	}
}

// offer names the adversary's origin and advertises its head at seq; it returns once the
// node subscribed to it (the node takes an origin from the peer that is that origin).
func (a *adversary) offer(ctx context.Context, seq uint64) {
	a.t.Helper()
	a.offerOrigin(ctx, a.origin, a.name, seq)
}

// offerOrigin is offer of another origin the adversary claims. The node answers in order:
// everything sent before its SUBSCRIBE was processed by then.
func (a *adversary) offerOrigin(ctx context.Context, o wire.OriginID, name string, seq uint64) {
	a.t.Helper()
	if err := a.s.SetOriginName(o, name); err != nil {
		a.t.Fatal(err)
	}
	if err := a.s.V2().AdvertiseHeads([]wire.Head{{Origin: o, Seq: seq, HLC: wire.MakeHLC(stampBase+seq, 0)}}); err != nil {
		a.t.Fatal(err)
	}
	a.channel = 0
	a.flush()
	for a.channel == 0 {
		a.receive(ctx)
	}
}

// heard reports whether the node advertised a head of origin o.
func (a *adversary) heard(o wire.OriginID) bool {
	for _, e := range a.events {
		if e.Kind == protocol.EventHeads {
			for _, h := range e.Heads.Heads {
				if h.Origin == o {
					return true
				}
			}
		}
	}
	return false
}

// send sends entries through the session, as a conforming peer would.
func (a *adversary) send(entries []prototest.Entry) {
	a.t.Helper()
	for _, e := range entries {
		if err := a.s.V2().Send(e.Raw); err != nil {
			a.t.Fatal(err)
		}
	}
	a.flush()
}

// awaitCursor reads until the node acknowledged the adversary's origin up to seq: it
// applied those entries and made them durable.
func (a *adversary) awaitCursor(ctx context.Context, seq uint64) {
	a.t.Helper()
	for {
		for _, e := range a.events {
			if e.Kind == protocol.EventCursor && e.Origin == a.origin && e.Seq >= seq {
				return
			}
		}
		a.receive(ctx)
	}
}

// message sends frames as one WebSocket message, past the session.
func (a *adversary) message(frames ...[]byte) {
	a.t.Helper()
	var m []byte
	for _, f := range frames {
		m = append(m, f...)
	}
	a.write([][]byte{m})
}

// awaitClose reads until the node closed the session, and returns the error the node's
// CLOSE named. A socket that ends without a CLOSE fails the test.
func (a *adversary) awaitClose(ctx context.Context) *wire.Error {
	a.t.Helper()
	for a.s.State() != protocol.StateClosed {
		if err := a.tryReceive(ctx); err != nil {
			a.t.Fatalf("%s: no CLOSE from the node: %v", a.name, err)
		}
	}
	for _, e := range a.events {
		if e.Kind == protocol.EventClosed && !e.ByPeer {
			a.t.Fatalf("%s: its own session closed, not the node: %v", a.name, e.Err)
		}
	}
	return a.s.Err()
}

// drain reads what the node sent, into the session and answering nothing, until the
// session closes or the socket ends: what a peer that stopped reading finds once it reads
// again. It returns whether the node closed the session (else the session found the
// node's input at fault, or the socket ended first).
func (a *adversary) drain(ctx context.Context) (byNode bool) {
	a.t.Helper()
	for a.s.State() != protocol.StateClosed {
		_, msg, err := a.ws.Read(ctx)
		if err != nil {
			return false
		}
		a.take(msg)
	}
	rd := a.s.Ready() // its messages are not sent
	a.events = append(a.events, rd.Events...)
	for _, e := range rd.Events {
		if e.Kind == protocol.EventClosed {
			return e.ByPeer
		}
	}
	return false
}

// leave closes the session in order (going-away, which the node does not count as an
// error) and drops the socket.
func (a *adversary) leave() {
	a.t.Helper()
	if a.s.State() == protocol.StateEstablished {
		if err := a.s.Close(wire.CodeGoingAway, "done"); err != nil {
			a.t.Fatal(err)
		}
		a.flush()
	}
	_ = a.ws.CloseNow() // an error means the node dropped it first
}

// txnChain builds n valid transactions of origin after (seq, prev), each one put of a
// valueLen-byte value into table.
func txnChain(origin wire.OriginID, table string, seq uint64, prev wire.Hash, n, valueLen int) []prototest.Entry {
	out := make([]prototest.Entry, 0, n)
	for range n {
		seq++
		t := wire.Txn{Origin: origin, Seq: seq, HLC: wire.MakeHLC(stampBase+seq, 0), Prev: prev,
			Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte(table), Key: []byte("adv" + strconv.FormatUint(seq, 10)),
				Value: make([]byte, valueLen)}}}
		raw, err := t.Encode()
		if err != nil {
			panic(err)
		}
		v, _ := wire.ParseTxn(raw)
		prev = v.Hash()
		out = append(out, prototest.Entry{Seq: seq, Raw: raw, Hash: prev})
	}
	return out
}

// txn1Frame is a version-1 TXN1 frame: the arrival position, then the transaction.
func txn1Frame(pos uint64, txn []byte) []byte {
	return prototest.RawFrame(wire.TypeTxn1, 0, 0, append(bin.BigEndian.AppendUint64(nil, pos), txn...))
}

// deadline is a context for one scenario's reads: bounded, and cancelled at the test's end.
func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
