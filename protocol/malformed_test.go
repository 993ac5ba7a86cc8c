package protocol_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

func runInputCase(t *testing.T, c inputCase) {
	in := recordFed(t)
	var (
		s    *protocol.Session
		msgs [][]byte
		evs  []protocol.Event
		rerr error
		msg  = c.msg
	)
	switch c.on {
	case onD, onL, onV2D, onV2L, onV4D:
		var p *prototest.Pair
		switch c.on {
		case onV2D, onV2L:
			p = fxPairV2(t, c.limits, c.llim)
		case onV4D:
			p = fxPairV4(t, c.limits, c.llim)
		default:
			p = fixture(t, c.limits)
		}
		side := p.D
		if c.on == onL || c.on == onV2L {
			side = p.L
		}
		if c.code == wire.CodeReceiveBufferFull && !side.S.ReadPaused() {
			t.Fatal("reads are not paused")
		}
		if n := side.S.Stats().ProtocolErrors; n != 0 {
			t.Fatalf("fixture has %d protocol errors", n)
		}
		n := len(side.Events)
		rerr = in.receive(side.S, p.Now, msg)
		msgs = side.Drain()
		evs = side.Events[n:]
		s = side.S
	case onHandshake:
		var local []byte
		s, local = handshakeTarget(t, c.cfg)
		if c.msgFn != nil {
			msg = c.msgFn(local)
		}
		rerr = in.receive(s, prototest.Epoch, msg)
		rd := s.Ready()
		msgs, evs = rd.Messages, slices.Clone(rd.Events)
	}
	if rerr != nil {
		t.Fatalf("Receive returned %v; protocol errors close the session instead", rerr)
	}
	fs := checkClosed(t, s, msgs, evs, c.code, c.frame, c.offset)
	wantProto := uint64(0)
	if spec(t).classOf[c.code] == wire.ClassProtocol {
		wantProto = 1
	}
	if n := s.Stats().ProtocolErrors; n != wantProto {
		t.Fatalf("ProtocolErrors %d, want %d", n, wantProto)
	}
	// Frames before the offending one took effect: the leading PING was answered, before
	// the CLOSE. A message rejected as a whole (offset 0) or refused (paused) had no effect.
	pong := slices.IndexFunc(fs, func(d wire.Decoded) bool {
		p, ok := d.Value.(*wire.Pong)
		return ok && p.ID == 7
	})
	if c.on != onHandshake && bytes.HasPrefix(msg, ping7) && c.offset > 0 {
		if pong < 0 {
			t.Fatal("the PING before the offending frame was not answered")
		}
	} else if pong >= 0 {
		t.Fatal("a PING was answered although the message was rejected before it")
	}
	if c.sends != nil {
		var got []wire.Type
		for _, f := range fs {
			got = append(got, f.Type)
		}
		if !slices.Equal(got, c.sends) {
			t.Fatalf("sent %v, want %v", got, c.sends)
		}
	}
	if c.check != nil {
		c.check(t, s, evs)
	}
}

// TestMalformedInput runs every class of SPEC's "Malformed input" table (and the other
// input errors) against a session.
func TestMalformedInput(t *testing.T) {
	for _, c := range inputCases() {
		name := c.name
		if c.class != "" {
			name = c.class + " " + name
		}
		t.Run(name, func(t *testing.T) { runInputCase(t, c) })
	}
}

// TestMalformedTableCoversSpec: every class of SPEC's table has a case, with the code the
// table gives (M9 is TestMalformedM9IgnorableFrame).
func TestMalformedTableCoversSpec(t *testing.T) {
	table := spec(t).malformed
	if len(table) != 27 {
		t.Fatalf("SPEC.md lists %d malformed-input classes, want M1..M27", len(table))
	}
	// M9 is TestMalformedM9IgnorableFrame; M25, which closes a copy and not the session,
	// TestMalformedM25CopyChunks.
	// M26, whose cases need an ask outstanding, TestMalformedM26AntiEntropy.
	have := map[string]bool{"M9": true, "M25": true, "M26": true}
	for _, c := range inputCases() {
		if c.class == "" {
			continue
		}
		want, ok := table[c.class]
		if !ok {
			t.Errorf("%s %s: no such class in SPEC.md", c.class, c.name)
			continue
		}
		if c.code != want {
			t.Errorf("%s %s: case expects %s, SPEC.md says %s", c.class, c.name, c.code, want)
		}
		have[c.class] = true
	}
	if table["M9"] != "" {
		t.Errorf("SPEC.md gives M9 the code %s", table["M9"])
	}
	for class := range table {
		if !have[class] {
			t.Errorf("no test for %s", class)
		}
	}
	// The rows versions 2 and 4 added or changed: every example text of the row has a case
	// of its class (a case's name contains the example).
	for _, class := range []string{"M7", "M20", "M23", "M24", "M27"} {
		ex := spec(t).examples[class]
		parts := strings.FieldsFunc(ex, func(r rune) bool { return r == ',' || r == ';' })
		if len(parts) < 2 {
			t.Errorf("%s: examples %q", class, ex)
		}
		for _, part := range parts {
			part = strings.TrimSpace(part)
			if !slices.ContainsFunc(inputCases(), func(c inputCase) bool { return c.class == class && strings.Contains(c.name, part) }) {
				t.Errorf("%s: no case for SPEC's example %q", class, part)
			}
		}
	}
}

// TestMalformedM9IgnorableFrame: unknown ignorable frames are skipped and counted, whatever
// their flags and channel, and the session stays established. Each Receive reports the
// frames it skipped as one event (Count of them, Frame the type of the first), while
// Stats().IgnoredFrames counts every frame.
func TestMalformedM9IgnorableFrame(t *testing.T) {
	p := fixture(t, protocol.Limits{})
	d := p.D
	before := d.S.Stats()
	n := len(d.Events)
	msg := cat(ping7, prototest.RawFrame(0xfe, 0, 0, []byte("hint")), prototest.RawFrame(0xfe, 0xff, 77, nil),
		prototest.RawFrame(0x80, 0, 0, hx("a0")), prototest.Frame(&wire.Ping{ID: 8}))
	in := recordFed(t)
	must(t, in.receive(d.S, p.Now, msg))
	fs := frames(t, d.Drain())
	evs := d.Events[n:]
	if d.S.State() != protocol.StateEstablished || d.S.Err() != nil {
		t.Fatalf("state %v, err %v", d.S.State(), d.S.Err())
	}
	if got := d.S.Stats().IgnoredFrames - before.IgnoredFrames; got != 3 {
		t.Fatalf("IgnoredFrames +%d, want 3", got)
	}
	if len(evs) != 1 || evs[0].Kind != protocol.EventIgnoredFrame || evs[0].Count != 3 || evs[0].Frame != 0xfe {
		t.Fatalf("events %+v, want one ignored-frame event of 3 frames, the first 0xfe", evs)
	}
	// Both PINGs, before and after the ignored frames, were answered; nothing else was sent.
	if len(fs) != 2 || fs[0].Value.(*wire.Pong).ID != 7 || fs[1].Value.(*wire.Pong).ID != 8 {
		t.Fatalf("sent %+v", fs)
	}
	if d.S.Stats().ProtocolErrors != 0 {
		t.Fatal("counted as a protocol error")
	}

	// One event per message: a message of 200 tiny ignorable frames, then one of a single
	// frame, then one of none.
	var flood []byte
	for i := 0; i < 200; i++ {
		flood = append(flood, prototest.RawFrame(wire.Type(0x90+i%16), 0, 0, nil)...)
	}
	for _, c := range []struct {
		msg   []byte
		count uint64
		first wire.Type
	}{
		{flood, 200, 0x90},
		{cat(ping7, prototest.RawFrame(0x8f, 0, 0, []byte{1})), 1, 0x8f},
		{ping7, 0, 0},
	} {
		n, before := len(d.Events), d.S.Stats().IgnoredFrames
		must(t, in.receive(d.S, p.Now, c.msg))
		d.Drain()
		evs := d.Events[n:]
		if got := d.S.Stats().IgnoredFrames - before; got != c.count {
			t.Fatalf("IgnoredFrames +%d, want %d", got, c.count)
		}
		if c.count == 0 {
			if len(evs) != 0 {
				t.Fatalf("events %v for a message without ignorable frames", kinds(evs))
			}
			continue
		}
		if len(evs) != 1 || evs[0].Kind != protocol.EventIgnoredFrame || evs[0].Count != c.count || evs[0].Frame != c.first {
			t.Fatalf("events %+v, want one ignored-frame event of %d frames, the first 0x%02x", evs, c.count, uint8(c.first))
		}
	}

	// The stream continues.
	must(t, p.L.S.V1().Offer(4, fxChain[3].Raw))
	p.Pump(10)
	if ev := d.Last(protocol.EventTxn); ev == nil || ev.Position != 4 {
		t.Fatal("the stream did not continue")
	}
}

// TestIgnorableFramesInHandshake: ignorable frames are skipped in the handshake too, around
// the peer's HELLO, and reported once.
func TestIgnorableFramesInHandshake(t *testing.T) {
	s, _ := handshakeTarget(t, nil)
	must(t, s.Receive(prototest.Epoch, cat(prototest.RawFrame(0x91, 0, 0, []byte("x")), helloFrame(peerHello(nil)), prototest.RawFrame(0xff, 1, 2, nil))))
	rd := s.Ready()
	if s.State() != protocol.StateAuthenticating {
		t.Fatalf("state %v, err %v", s.State(), s.Err())
	}
	if len(rd.Events) != 1 || rd.Events[0].Kind != protocol.EventIgnoredFrame || rd.Events[0].Count != 2 || rd.Events[0].Frame != 0x91 {
		t.Fatalf("events %+v", rd.Events)
	}
	if fs := frames(t, rd.Messages); len(fs) != 1 || fs[0].Type != wire.TypeAuth {
		t.Fatalf("sent %+v", fs)
	}
	if s.Stats().IgnoredFrames != 2 {
		t.Fatalf("IgnoredFrames %d", s.Stats().IgnoredFrames)
	}
}

// TestMessageLimitBoundary: a message of exactly the advertised limit is accepted (M2's
// boundary), and the limit is what the HELLO advertised.
func TestMessageLimitBoundary(t *testing.T) {
	p := fixture(t, protocol.Limits{MaxMessage: 64 << 10, MaxFrameBody: 64<<10 - wire.HeaderSize})
	hello := frames(t, p.D.Sent[:1])[0].Value.(*wire.Hello)
	if hello.MaxMessage != 64<<10 || hello.MaxFrame != 64<<10-wire.HeaderSize {
		t.Fatalf("advertised max message %d, max frame body %d", hello.MaxMessage, hello.MaxFrame)
	}
	msg := cat(ping7, prototest.RawFrame(0x90, 0, 0, make([]byte, 64<<10-len(ping7)-wire.HeaderSize)))
	must(t, p.D.S.Receive(p.Now, msg))
	if p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("closed: %v", p.D.S.Err())
	}
	// The peer packs its output within the advertised limit: 8 frames of ~20 KiB go out in
	// several messages, none over 64 KiB.
	big := prototest.ChainFrom(fxOrigin, 3, fxChain[2].Hash, 8, 1, 20<<10)
	for i, e := range big {
		must(t, p.L.S.V1().Offer(uint64(4+i), e.Raw))
	}
	out := p.L.Drain()
	if len(out) < 3 {
		t.Fatalf("%d messages", len(out))
	}
	for _, m := range out {
		if len(m) > 64<<10 {
			t.Fatalf("message of %d bytes over the peer's limit", len(m))
		}
		must(t, p.D.S.Receive(p.Now, m))
	}
	p.D.Drain()
	if n := p.D.Count(protocol.EventTxn); n != 3+8 {
		t.Fatalf("%d txns", n)
	}
}

// TestUnsupportedVersionNamesHello: unsupported-version is about the received HELLO, like
// the other errors the HELLO checks raise (bad-field for equal roles, self-connect), so
// Err() should name the frame and its offset.
func TestUnsupportedVersionNamesHello(t *testing.T) {
	s, _ := handshakeTarget(t, nil)
	must(t, s.Receive(prototest.Epoch, helloFrame(peerHello(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 4, 5 }))))
	e := s.Err()
	if e == nil || e.Code != wire.CodeUnsupportedVersion {
		t.Fatalf("err %v", e)
	}
	if e.Offset != 0 || e.Frame != wire.TypeHello {
		t.Fatalf("unsupported-version names frame %v at offset %d, want the HELLO at 0", e.Frame, e.Offset)
	}
}

// TestTxnBeforeSubscribeWithBadBody: SPEC's framing rules check that a body decodes (rule
// 7) before the frame is processed; a TXN1 with a malformed body is bad-txn wherever it
// arrives, as a malformed control body is bad-cbor even in the handshake.
func TestTxnBeforeSubscribeWithBadBody(t *testing.T) {
	// The control-frame side of the comparison: a malformed PING in the handshake is bad-cbor.
	s, _ := handshakeTarget(t, nil)
	must(t, s.Receive(prototest.Epoch, prototest.RawFrame(wire.TypePing, 0, 0, hx("a0"))))
	if s.Err().Code != wire.CodeBadCBOR {
		t.Fatalf("malformed PING in the handshake: %v", s.Err())
	}
	p := fixture(t, protocol.Limits{})
	must(t, p.L.S.Receive(p.Now, txn1(0, fxChain[0].Raw))) // L has not subscribed
	if e := p.L.S.Err(); e.Code != wire.CodeBadTxn {
		t.Fatalf("a TXN1 with position 0 before SUBSCRIBE1 closes with %s, want bad-txn (SPEC framing rule 7 before rule 8)", e.Code)
	}
}

// TestReadPausedBounds: with a small receive window, HeldBytes never exceeds the window plus
// the message just received, ReadPaused turns true at the window and false after Ack, and
// HeldBytes is exactly the unacknowledged TXN1 frames.
func TestReadPausedBounds(t *testing.T) {
	const window = 1000
	dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
	dc.Limits.MaxUnackedBytes = window
	p := established(t, dc, prototest.ConfigV1(wire.RoleListener, "b", 2))
	must(t, p.D.S.V1().Subscribe(0, nil))
	p.Pump(10)
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	chain := prototest.Chain(fxOrigin, 60, 1, 100)
	// The sender's messages: single frames, and some of several frames.
	groups := []int{1, 1, 1, 1, 5, 1, 3, 1, 1, 7, 2, 1, 1, 1, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	var msgs [][]byte
	type sent struct {
		pos  uint64
		size int
	}
	var all []sent
	pos := uint64(0)
	for _, g := range groups {
		for i := 0; i < g; i++ {
			pos++
			must(t, p.L.S.V1().Offer(pos, chain[pos-1].Raw))
			all = append(all, sent{pos, wire.HeaderSize + 8 + len(chain[pos-1].Raw)})
		}
		out := p.L.Drain()
		if len(out) != 1 {
			t.Fatalf("%d messages for a group", len(out))
		}
		msgs = append(msgs, out[0])
	}
	d := p.D.S
	unacked := func(acked uint64) int {
		n := 0
		for _, s := range all {
			if s.pos > acked && s.pos <= d.Stats().TxnsReceived {
				n += s.size
			}
		}
		return n
	}
	var acked uint64
	var toL [][]byte // what D sent: its acknowledgements
	pauses, maxHeld := 0, 0
	for i, m := range msgs {
		if d.ReadPaused() {
			pauses++
			// Acknowledge half first: still within bounds, exact accounting.
			last := d.Stats().TxnsReceived
			half := acked + (last-acked)/2
			if half > acked {
				must(t, d.V1().Ack(half))
				acked = half
				toL = append(toL, p.D.Drain()...)
				if d.HeldBytes() != unacked(acked) {
					t.Fatalf("after Ack(%d): held %d, want %d", half, d.HeldBytes(), unacked(acked))
				}
			}
			must(t, d.V1().Ack(last))
			acked = last
			if d.ReadPaused() {
				t.Fatalf("still paused after acknowledging everything (held %d)", d.HeldBytes())
			}
			toL = append(toL, p.D.Drain()...)
			if d.HeldBytes() != 0 {
				t.Fatalf("held %d after acknowledging everything", d.HeldBytes())
			}
		}
		must(t, d.Receive(p.Now, m))
		if h := d.HeldBytes(); h > window+len(m) {
			t.Fatalf("message %d: held %d > window %d + message %d", i, h, window, len(m))
		} else if h > maxHeld {
			maxHeld = h
		}
		toL = append(toL, p.D.Drain()...)
		if d.State() != protocol.StateEstablished {
			t.Fatalf("closed: %v", d.Err())
		}
		if got, want := d.HeldBytes(), unacked(acked); got != want {
			t.Fatalf("message %d: held %d, want the %d unacknowledged bytes", i, got, want)
		}
		if got, want := d.ReadPaused(), unacked(acked) >= window; got != want {
			t.Fatalf("message %d: paused %v with %d unacknowledged bytes", i, got, unacked(acked))
		}
	}
	if pauses < 3 {
		t.Fatalf("paused %d times", pauses)
	}
	if maxHeld <= window {
		t.Fatalf("the window was never overshot by a multi-frame message (max held %d)", maxHeld)
	}
	if n := p.D.Count(protocol.EventTxn); uint64(n) != pos {
		t.Fatalf("%d txns received of %d", n, pos)
	}
	// The acknowledgements reach the sender, in order.
	var seen []uint64
	for _, m := range toL {
		must(t, p.L.S.Receive(p.Now, m))
		for _, ev := range p.L.S.Ready().Events {
			if ev.Kind == protocol.EventAcked {
				seen = append(seen, ev.Position)
			}
		}
	}
	if len(seen) < 2*pauses-1 || seen[len(seen)-1] != acked || !slices.IsSorted(seen) || p.L.S.State() != protocol.StateEstablished {
		t.Fatalf("sender saw acks %v, want up to %d", seen, acked)
	}
}

// TestReadPausedAtWindow: reads pause exactly when the unacknowledged bytes reach the
// window.
func TestReadPausedAtWindow(t *testing.T) {
	size := wire.HeaderSize + 8 + len(fxChain[0].Raw)
	for _, c := range []struct {
		window int
		paused bool
	}{{size - 1, true}, {size, true}, {size + 1, false}} {
		p := streaming(t, protocol.Limits{MaxUnackedBytes: c.window}, protocol.Limits{})
		must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
		must(t, p.L.S.V1().Offer(1, fxChain[0].Raw))
		p.Pump(10)
		if got := p.D.S.ReadPaused(); got != c.paused || p.D.S.HeldBytes() != size {
			t.Fatalf("window %d, %d bytes held: paused %v", c.window, p.D.S.HeldBytes(), got)
		}
		must(t, p.D.S.V1().Ack(1))
		if p.D.S.ReadPaused() {
			t.Fatalf("window %d: paused after Ack", c.window)
		}
	}
}

func TestClosingCommands(t *testing.T) {
	for _, c := range closingCases() {
		t.Run(c.name, func(t *testing.T) {
			s, act := c.run(t, recordFed(t))
			s.Ready()
			act()
			rd := s.Ready()
			checkClosed(t, s, rd.Messages, slices.Clone(rd.Events), c.code, 0, wire.NoOffset)
		})
	}
}

// TestPeerClose: a received CLOSE closes the session, which reports the peer's code, class
// and message, sends nothing, and counts no protocol error; a code newer than this build
// travels with its class.
func TestPeerClose(t *testing.T) {
	p := defaultPair(t)
	must(t, p.D.S.Close(wire.CodeGoingAway, "bye"))
	p.Pump(10)
	sent := frames(t, p.D.Sent)
	cl := sent[len(sent)-1].Value.(*wire.Close)
	ev := p.L.Last(protocol.EventClosed)
	e := p.L.S.Err()
	if ev == nil || !ev.ByPeer || e == nil || e.Code != wire.CodeGoingAway || e.Class != wire.ClassTransient || e.Message != cl.Message || e.Offset != wire.NoOffset {
		t.Fatalf("peer close: %+v / %+v", ev, e)
	}
	if !strings.Contains(cl.Message, "bye") {
		t.Fatalf("CLOSE message %q lost the reason", cl.Message)
	}
	if p.L.S.Stats().ProtocolErrors != 0 || p.L.S.HasReady() {
		t.Fatal("a peer close counted as an error or produced output")
	}
	if last := frames(t, p.L.Sent); last[len(last)-1].Type == wire.TypeClose {
		t.Fatal("answered a CLOSE with a CLOSE")
	}

	// The class the receiver acts on (SPEC "Errors"): its own for a code it defines, the
	// peer's for a newer code, protocol for local or unknown classes.
	in := recordFed(t)
	for _, c := range []struct {
		code  wire.Code
		class wire.Class
		want  wire.Class
	}{
		{"brand-new-code", "transient", wire.ClassTransient},
		{"brand-new-code", "refused", wire.ClassRefused},
		{"brand-new-code", "new-class", wire.ClassProtocol},
		{"brand-new-code", "local", wire.ClassProtocol},
		{wire.CodeGoingAway, "protocol", wire.ClassTransient},
		{wire.CodeDivergence, "transient", wire.ClassProtocol},
		{wire.CodeClosed, "local", wire.ClassProtocol},
	} {
		for _, established := range []bool{false, true} {
			var s *protocol.Session
			if established {
				s = defaultPair(t).L.S
			} else {
				s, _ = handshakeTarget(t, nil)
			}
			s.Ready()
			must(t, in.receive(s, prototest.Epoch, cat(prototest.Frame(&wire.Close{Code: c.code, Class: c.class, Message: "m"}), ping7)))
			rd := s.Ready()
			e := s.Err()
			if s.State() != protocol.StateClosed || e.Code != c.code || e.Class != c.want || e.Message != "m" || len(rd.Messages) != 0 {
				t.Fatalf("CLOSE %s/%s (established %v): %+v, %d messages; want class %s", c.code, c.class, established, e, len(rd.Messages), c.want)
			}
			if n := len(rd.Events); n != 1 || rd.Events[0].Kind != protocol.EventClosed || !rd.Events[0].ByPeer || *rd.Events[0].Err != *e {
				t.Fatalf("events %v", kinds(rd.Events))
			}
			if s.Stats().ProtocolErrors != 0 {
				t.Fatal("a peer's CLOSE counted as this side's protocol error")
			}
		}
	}
}

func TestRefusedCommands(t *testing.T) {
	for _, c := range refusedCases() {
		t.Run(c.name, func(t *testing.T) {
			s, cmd := c.run(t, recordFed(t))
			state, held, stats := s.State(), s.HeldBytes(), s.Stats()
			budget, deadline := s.SendBudget(), s.NextDeadline()
			err := cmd()
			we, ok := err.(*wire.Error)
			if !ok || we.Code != c.code {
				t.Fatalf("err %v, want %s", err, c.code)
			}
			if cl := spec(t).classOf[c.code]; we.Class != cl || we.Offset != wire.NoOffset {
				t.Fatalf("err %+v, want class %s and no frame", we, cl)
			}
			if s.State() != state || s.HeldBytes() != held || s.Stats() != stats || s.SendBudget() != budget || !s.NextDeadline().Equal(deadline) {
				t.Fatalf("a refused command changed the session: state %v→%v held %d→%d", state, s.State(), held, s.HeldBytes())
			}
			for _, ev := range s.Ready().Events {
				if ev.Kind == protocol.EventClosed {
					t.Fatal("a refused command closed the session")
				}
			}
		})
	}
}

// TestSendBufferRecovers: after send-buffer-full, taking the output frees the budget.
func TestSendBufferRecovers(t *testing.T) {
	size := wire.HeaderSize + 8 + len(fxChain[0].Raw) // every fxChain frame has this size
	origin := len(originFrame(fxOrigin, "nine"))      // sent before the first, and counted
	p := sending(t, protocol.Limits{}, protocol.Limits{MaxSendBuffer: origin + 2*size + 10})
	l := p.L.S
	must(t, l.V1().Offer(1, fxChain[0].Raw))
	if got := l.SendBudget(); got != size+10 {
		t.Fatalf("budget %d, want %d", got, size+10)
	}
	must(t, l.V1().Offer(2, fxChain[1].Raw))
	if err := l.V1().Offer(3, fxChain[2].Raw); err == nil || err.(*wire.Error).Code != wire.CodeSendBufferFull {
		t.Fatalf("third offer: %v", err)
	}
	p.Pump(10)
	must(t, l.V1().Offer(3, fxChain[2].Raw))
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 3 {
		t.Fatalf("%d txns", n)
	}
	if l.Stats().TxnsSent != 3 {
		t.Fatalf("TxnsSent %d", l.Stats().TxnsSent)
	}
}

// TestNewRejects: invalid configurations are refused with bad-argument.
func TestNewRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(c *protocol.Config)
	}{
		{"role 2", func(c *protocol.Config) { c.Role = 2 }},
		{"name a b", func(c *protocol.Config) { c.Name = "a b" }},
		{"empty name", func(c *protocol.Config) { c.Name = "" }},
		{"all-zero origin", func(c *protocol.Config) { c.Origin = wire.OriginID{} }},
		{"expected peer a/b", func(c *protocol.Config) { c.ExpectedPeer = "a/b" }},
		{"unsorted capabilities", func(c *protocol.Config) { c.Capabilities = []string{"b", "a"} }},
		{"MinVersion 2", func(c *protocol.Config) { c.MinVersion = 2 }},
		{"MaxFrameBody over 16 MiB", func(c *protocol.Config) { c.Limits.MaxFrameBody = wire.MaxFrameBody + 1 }},
		{"MaxMessage under 64 KiB", func(c *protocol.Config) { c.Limits.MaxMessage = 1000 }},
		{"MaxMessage 64 KiB with the default MaxFrameBody", func(c *protocol.Config) { c.Limits.MaxMessage = 64 << 10 }},
		{"MaxMessage 64 KiB with MaxFrameBody 64 KiB - 9", func(c *protocol.Config) { c.Limits.MaxMessage, c.Limits.MaxFrameBody = 64<<10, 64<<10-9 }},
		{"MaxFrameBody 1023", func(c *protocol.Config) { c.Limits.MaxFrameBody = 1023 }},
		{"negative MaxOrigins", func(c *protocol.Config) { c.Limits.MaxOrigins = -1 }},
		{"liveness timeout not above the ping interval", func(c *protocol.Config) { c.Limits.LivenessTimeout = time.Second }},
	} {
		cfg := prototest.ConfigV1(wire.RoleDialer, "a", 1)
		c.mod(&cfg)
		s, err := protocol.New(cfg)
		we, ok := err.(*wire.Error)
		if s != nil || !ok || we.Code != wire.CodeBadArgument || we.Class != wire.ClassLocal {
			t.Errorf("%s: %v, %v", c.name, s, err)
		}
	}
	// The bounds themselves are accepted.
	for _, l := range []protocol.Limits{
		{MaxMessage: 64 << 10, MaxFrameBody: 64<<10 - wire.HeaderSize},
		{MaxFrameBody: 1024},
		{MaxMessage: wire.MaxFrameBody + wire.HeaderSize},
	} {
		cfg := prototest.ConfigV1(wire.RoleDialer, "a", 1)
		cfg.Limits = l
		if _, err := protocol.New(cfg); err != nil {
			t.Errorf("limits %+v: %v", l, err)
		}
	}
}

// TestEveryCodeProduced: every code of wire.Codes() is produced by at least one case of the
// tables of malformed_cases_test.go, whose tests assert it was (or is listed in
// codesElsewhere).
func TestEveryCodeProduced(t *testing.T) {
	produced := map[wire.Code][]string{}
	for _, c := range inputCases() {
		produced[c.code] = append(produced[c.code], "input: "+c.name)
	}
	for _, c := range closingCases() {
		produced[c.code] = append(produced[c.code], "closing: "+c.name)
	}
	for _, c := range refusedCases() {
		produced[c.code] = append(produced[c.code], "refused: "+c.name)
	}
	for _, code := range wire.Codes() {
		_, elsewhere := codesElsewhere[code]
		if len(produced[code]) == 0 && !elsewhere {
			t.Errorf("no test produces %s", code)
		}
	}
	for code := range produced {
		if _, ok := wire.ClassOf(code); !ok {
			t.Errorf("tests expect %s, which wire does not define", code)
		}
		if _, ok := spec(t).classOf[code]; !ok {
			t.Errorf("tests expect %s, which SPEC.md does not list", code)
		}
	}
}
