package replica_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// openWith opens a connection like harness.open, with each side's options given.
func (h *harness) openWith(dialer, listener *node, d, l replica.ConnOptions) *link {
	h.t.Helper()
	lk := &link{}
	lk.dialer = &end{node: dialer, link: lk}
	lk.listener = &end{node: listener, link: lk}
	lk.dialer.peer, lk.listener.peer = lk.listener, lk.dialer
	d.Role, l.Role = wire.RoleDialer, wire.RoleListener
	d.Nonce, l.Nonce = h.nonce(), h.nonce()
	var err error
	lk.dialer.id, err = dialer.rep.OpenConn(dialer.clock(), d)
	h.check(dialer, err)
	lk.listener.id, err = listener.rep.OpenConn(listener.clock(), l)
	h.check(listener, err)
	dialer.ends[lk.dialer.id] = lk.dialer
	listener.ends[lk.listener.id] = lk.listener
	h.links = append(h.links, lk)
	h.pump()
	return lk
}

func refusedCodes(n *node) []replica.CodeCount {
	_, refused, _ := n.rep.Refusals()
	return refused
}

// TestRefusalsRecorded: a connection refused in its handshake is on record on both sides,
// by code, with the remote address and the peer it named or was dialed as, whether or not
// a name was known; an error after the handshake counts as a connection error, an
// orderly close as neither; the shell's own refusals join the same record, which keeps
// the newest MaxRefusals.
func TestRefusalsRecorded(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{Secret: []byte("another secret")})
	c := h.addNode("C", replica.Config{})

	// A wrong secret: auth-failed on both sides.
	h.openWith(a, b, replica.ConnOptions{ExpectPeer: "B", Remote: "10.0.0.2:7400"}, replica.ConnOptions{Remote: "10.0.0.1:5000"})
	for _, n := range []*node{a, b} {
		if got := n.rep.Counters().ConnectionsRefused; got != 1 {
			t.Fatalf("%s: connections_refused %d, want 1", n.name, got)
		}
		if got := refusedCodes(n); !slices.Equal(got, []replica.CodeCount{{Code: wire.CodeAuthFailed, Count: 1}}) {
			t.Fatalf("%s: refused by code %+v", n.name, got)
		}
	}
	recent, _, _ := b.rep.Refusals()
	if len(recent) != 1 || recent[0].Remote != "10.0.0.1:5000" || recent[0].Dialed || recent[0].Code != wire.CodeAuthFailed || !recent[0].At.Equal(b.clock()) {
		t.Fatalf("B's refusal %+v", recent)
	}
	recent, _, _ = a.rep.Refusals()
	if len(recent) != 1 || recent[0].Peer != "B" || !recent[0].Dialed || recent[0].Remote != "10.0.0.2:7400" {
		t.Fatalf("A's refusal %+v", recent)
	}
	if st := b.rep.Status(b.clock()); len(st.Refusals) != 1 || st.Counters.ConnectionsRefused != 1 || len(st.RefusedByCode) != 1 {
		t.Fatalf("B's status: refusals %+v, counters %+v, by code %+v", st.Refusals, st.Counters, st.RefusedByCode)
	}

	// A listener that expects the peer its TLS certificate names: a HELLO of another name
	// is peer-name-mismatch.
	h.openWith(a, c, replica.ConnOptions{ExpectPeer: "C"}, replica.ConnOptions{ExpectPeer: "X"})
	// The dialer completed its side, and counts the peer's refusal as one too.
	if got := refusedCodes(c); !slices.Equal(got, []replica.CodeCount{{Code: wire.CodePeerNameMismatch, Count: 1}}) {
		t.Fatalf("C: refused by code %+v", got)
	}
	if got := refusedCodes(a); !slices.Equal(got, []replica.CodeCount{{Code: wire.CodeAuthFailed, Count: 1}, {Code: wire.CodePeerNameMismatch, Count: 1}}) {
		t.Fatalf("A: refused by code %+v", got)
	}
	refusedOf := map[*node]uint64{a: 2, c: 1}

	// Established, then cut: a connection error on both sides, not a refusal; an orderly
	// close is neither.
	lk := h.openWith(a, c, replica.ConnOptions{ExpectPeer: "C"}, replica.ConnOptions{ExpectPeer: "A"})
	if c.peerStatus("A").State != replica.PeerStreaming {
		t.Fatalf("A-C: %+v", c.peerStatus("A"))
	}
	h.disconnect(lk)
	for _, n := range []*node{a, c} {
		_, _, errs := n.rep.Refusals()
		if ct := n.rep.Counters(); ct.ConnectionErrors != 1 || ct.ConnectionsRefused != refusedOf[n] ||
			!slices.Equal(errs, []replica.CodeCount{{Code: wire.CodeClosed, Count: 1}}) {
			t.Fatalf("%s after the cut: counters %+v, errors by code %+v", n.name, ct, errs)
		}
	}
	lk = h.openWith(a, c, replica.ConnOptions{ExpectPeer: "C"}, replica.ConnOptions{})
	h.check(a, a.rep.CloseConn(a.clock(), lk.dialer.id, "stopping"))
	h.pump()
	for _, n := range []*node{a, c} {
		if ct := n.rep.Counters(); ct.ConnectionErrors != 1 || ct.ConnectionsRefused != refusedOf[n] {
			t.Fatalf("%s after an orderly close: counters %+v", n.name, ct)
		}
	}

	// The shell's refusals: counted by code; the record keeps the newest MaxRefusals (of
	// B's 21, the auth-failed one and the first four of these are gone).
	for i := range replica.MaxRefusals + 4 {
		b.rep.Refused(b.clock(), replica.Refusal{Remote: fmt.Sprintf("10.0.1.%d:1", i), Code: wire.CodeTLSUnknownCA, Message: "x"})
	}
	recent, refused, _ := b.rep.Refusals()
	if len(recent) != replica.MaxRefusals || recent[0].Remote != "10.0.1.4:1" || recent[len(recent)-1].Remote != "10.0.1.19:1" {
		t.Fatalf("the newest refusals: %d, first %+v, last %+v", len(recent), recent[0], recent[len(recent)-1])
	}
	want := []replica.CodeCount{{Code: wire.CodeAuthFailed, Count: 1}, {Code: wire.CodeTLSUnknownCA, Count: replica.MaxRefusals + 4}}
	if !slices.Equal(refused, want) || b.rep.Counters().ConnectionsRefused != replica.MaxRefusals+5 {
		t.Fatalf("B: refused by code %+v, counters %+v", refused, b.rep.Counters())
	}
	// A dialer's refusal is also its peer's last error.
	a.rep.Refused(a.clock(), replica.Refusal{Peer: "B", Dialed: true, Code: wire.CodeTLSBadName, Message: "names node X"})
	if e := a.rep.LastError("B"); e == nil || e.Err.Code != wire.CodeTLSBadName {
		t.Fatalf("A's last error for B: %+v", e)
	}
}

// TestImpostorOriginRefused: a peer that claims the origin id of a node that named itself
// to this one, under another name, is refused peer-name-mismatch (a refusal), and the real
// node's connection stays up.
func TestImpostorOriginRefused(t *testing.T) {
	h := newHarness(t)
	n := h.addNode("N", replica.Config{})
	g := h.addNode("G", replica.Config{})
	h.connect(g, n)
	if n.peerStatus("G").State != replica.PeerStreaming {
		t.Fatalf("G: %+v", n.peerStatus("G"))
	}
	imp := h.addNode("I", replica.Config{})
	imp.origin = g.origin
	imp.store = memstore.New(store.Identity{Origin: g.origin, Name: "I"})
	imp.start()
	h.connect(imp, n)
	if got := refusedCodes(n); !slices.Equal(got, []replica.CodeCount{{Code: wire.CodePeerNameMismatch, Count: 1}}) {
		t.Fatalf("N: refused by code %+v", got)
	}
	if p := n.peerStatus("G"); p.State != replica.PeerStreaming {
		t.Fatalf("G after the impostor: %+v", p)
	}
	g.write(put("t", "k", "v"))
	h.pump()
	if got := n.originStatus(g).AppliedSeq; got != 1 {
		t.Fatalf("N applied G up to %d after the impostor", got)
	}
}

// TestNamedOriginsStayOnTheirConnection: a peer that names origins it never sends (within
// its own connection's bound) does not push the node's other connections past theirs: a
// session is given the names of the origins it carries only.
func TestNamedOriginsStayOnTheirConnection(t *testing.T) {
	h := newHarness(t)
	limits := protocol.Limits{MaxOrigins: 4}
	hub := h.addNode("H", replica.Config{Limits: limits})
	l1 := h.addNode("L1", replica.Config{Limits: limits})
	l2 := h.addNode("L2", replica.Config{Limits: limits})
	h.connect(l2, hub)
	fake := 0
	h.alter = func(from, to string, msg []byte) []byte {
		if from != "L1" || to != "H" || fake > 0 || l1.peerStatus("H").State != replica.PeerStreaming {
			return msg // after L1's AUTH: L1 is established once it sent it
		}
		for i := range 3 { // L1's own origin and three more: its connection's bound
			var o wire.OriginID
			o[0], o[1] = 0xee, byte(i+1)
			msg = append(msg, prototest.Frame(&wire.Origin{Origin: o, Name: fmt.Sprintf("ghost%d", i)})...)
			fake++
		}
		return msg
	}
	h.connect(l1, hub)
	l1.write(put("t", "a", "v"))
	l2.write(put("t", "b", "v"))
	h.advance(time.Second)
	if fake != 3 {
		t.Fatalf("%d ghost names sent", fake)
	}
	for _, l := range []*node{l1, l2} {
		if e := l.rep.LastError("H"); e != nil {
			t.Errorf("%s's connection to H: %+v", l.name, e.Err)
		}
	}
	if got := l2.originStatus(l1).AppliedSeq; got != 1 {
		t.Errorf("L2 applied L1 up to %d through H", got)
	}
}
