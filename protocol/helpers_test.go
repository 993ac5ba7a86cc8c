package protocol_test

// The helpers here are the ones several test files of this package share; a helper that
// only one file uses stays in that file.

import (
	"bytes"
	"encoding/binary"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// ---- shorthand ----

// hx writes test bytes as hex by hand, spaces allowed.
var hx = prototest.Hex

// cat joins the frames and parts of a hand-built message.
var cat = prototest.Cat

// must stops the test on an error from a step that only sets the scene.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- reading what a session produced ----

// frames decodes every message a session sent, in order.
func frames(t *testing.T, msgs [][]byte) []wire.Decoded {
	t.Helper()
	var out []wire.Decoded
	for _, m := range msgs {
		fs, err := wire.DecodeMessage(m, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil {
			t.Fatalf("the session sent a malformed message %x: %v", m, err)
		}
		out = append(out, fs...)
	}
	return out
}

// kinds names the kinds of events, for failure messages.
func kinds(evs []protocol.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind.String())
	}
	return out
}

// ---- what a test gave a session ----

// fed records the messages a test gives sessions by hand. If the test fails, its output
// holds each one's exact bytes in hex, with the session it went to and the virtual time,
// so that a reader can replay the failure; a table test records in its runner, once for
// every case.
type fed struct {
	sessions []*protocol.Session // in the order they were first fed
	msgs     []fedMessage
}

// fedMessage is one message of a fed record.
type fedMessage struct {
	session int           // index in sessions
	at      time.Duration // since prototest.Epoch
	msg     []byte        // a copy: the caller may reuse its buffer
}

// recordFed returns an empty record that t logs if it fails.
func recordFed(t *testing.T) *fed {
	f := &fed{}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if len(f.msgs) == 0 {
			t.Log("no message was fed to a session by hand")
		}
		for i, m := range f.msgs {
			t.Logf("message %d of %d fed to session %d at Epoch+%v, hex: %x", i+1, len(f.msgs), m.session+1, m.at, m.msg)
		}
	})
	return f
}

// receive records msg and gives it to s at now.
func (f *fed) receive(s *protocol.Session, now time.Time, msg []byte) error {
	i := slices.Index(f.sessions, s)
	if i < 0 {
		i = len(f.sessions)
		f.sessions = append(f.sessions, s)
	}
	f.msgs = append(f.msgs, fedMessage{session: i, at: now.Sub(prototest.Epoch), msg: bytes.Clone(msg)})
	return s.Receive(now, msg)
}

// ---- established pairs ----

// established returns a started pair of sessions of configs dc and lc, pumped until both
// are established (or the test fails).
func established(t *testing.T, dc, lc protocol.Config) *prototest.Pair {
	t.Helper()
	p, err := prototest.NewPair(dc, lc)
	if err != nil {
		t.Fatal(err)
	}
	p.Pump(10)
	for _, s := range []*prototest.Side{p.D, p.L} {
		if s.S.State() != protocol.StateEstablished {
			t.Fatalf("state %v, err %v", s.S.State(), s.S.Err())
		}
	}
	return p
}

// defaultPair is an established version-1 pair with default limits: dialer "a" (node 1),
// listener "b" (node 2).
func defaultPair(t *testing.T) *prototest.Pair {
	return established(t, prototest.ConfigV1(wire.RoleDialer, "a", 1), prototest.ConfigV1(wire.RoleListener, "b", 2))
}

// streaming returns an established pair whose D subscribed from 0, with L limits ll and D
// limits dl.
func streaming(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
	dc.Limits, lc.Limits = dl, ll
	p := established(t, dc, lc)
	must(t, p.D.S.V1().Subscribe(0, nil))
	p.Pump(10)
	return p
}

// sending is streaming with fxOrigin named on L, so that L may offer its entries.
func sending(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	p := streaming(t, dl, ll)
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	return p
}

// fxOrigin and its log fxChain are the entries the version-1 fixture streams.
var (
	fxOrigin = prototest.Origin(9)
	fxChain  = prototest.Chain(fxOrigin, 6, 1, 4)
)

// fixture returns an established pair in which D (limits dl) subscribed from 0 and received
// positions 1..3 (fxChain seq 1..3, announced as origin "nine") from L. Both sides'
// output has been taken.
func fixture(t *testing.T, dl protocol.Limits) *prototest.Pair {
	t.Helper()
	p := sending(t, dl, protocol.Limits{})
	for i := 0; i < 3; i++ {
		must(t, p.L.S.V1().Offer(uint64(i+1), fxChain[i].Raw))
	}
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 3 {
		t.Fatalf("fixture: %d txns received", n)
	}
	p.D.Drain()
	p.L.Drain()
	return p
}

// v2pair is an established version-2 pair of prototest.Config sessions: the dialer (with
// limits) to subscribe and receive, the listener to send. No origin is named yet.
func v2pair(t *testing.T, limits protocol.Limits) *prototest.Pair {
	t.Helper()
	dc := prototest.ConfigV2(wire.RoleDialer, "r", 1)
	dc.Limits = limits
	p := established(t, dc, prototest.ConfigV2(wire.RoleListener, "s", 2))
	if p.D.S.Handshake().Version != 2 {
		t.Fatalf("version %d", p.D.S.Handshake().Version)
	}
	return p
}

// The version-2 fixture: entries whose DATA frames all have the same size, so that credit
// limits can be set in whole frames.
var (
	fxTen       = prototest.Origin(10)
	fx2Chain    = prototest.Chain(fxOrigin, 6, 1, 300)
	fx2TenChain = prototest.Chain(fxTen, 3, 1, 300)
	fx2Size     = protocol.DataFrameSize(len(fx2Chain[0].Raw)) // every fx2 DATA frame, header included
)

// fxPairV2 returns an established version-2 pair (prototest.Config on both sides; D with
// limits dl, L with ll) in which L named fxOrigin "nine" and origin 10 "ten" and advertised
// their heads (6 and 3), D subscribed to both from seq 0 (channel 1: fxOrigin, channel 2:
// origin 10) and received fx2Chain seq 1..3 on channel 1, not acknowledged. Both sides'
// output has been taken.
func fxPairV2(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.ConfigV2(wire.RoleDialer, "a", 1), prototest.ConfigV2(wire.RoleListener, "b", 2)
	dc.Limits, lc.Limits = dl, ll
	p := established(t, dc, lc)
	if v := p.D.S.Handshake().Version; v != 2 {
		t.Fatalf("fixture: version %d", v)
	}
	must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
	must(t, p.L.S.SetOriginName(fxTen, "ten"))
	must(t, p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: fxOrigin, Seq: 6, HLC: 6}, {Origin: fxTen, Seq: 3, HLC: 3}}))
	must(t, p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}, {Origin: fxTen}}))
	p.Pump(10)
	if n := p.L.Count(protocol.EventSubscribed); n != 2 {
		t.Fatalf("fixture: %d channels opened", n)
	}
	for i := 0; i < 3; i++ {
		must(t, p.L.S.V2().Send(fx2Chain[i].Raw))
	}
	p.Pump(10)
	if n := p.D.Count(protocol.EventTxn); n != 3 || p.D.Count(protocol.EventHeads) != 1 {
		t.Fatalf("fixture: %d txns received, %d HEADS", n, p.D.Count(protocol.EventHeads))
	}
	p.D.Drain()
	p.L.Drain()
	return p
}

// ---- a peer played by hand ----

// secret is prototest.Config's secret, for computing the MAC of a hand-played peer's AUTH.
var secret = []byte("test-secret")

// handshakeTarget returns a started listener whose HELLO was taken, and that HELLO's body.
func handshakeTarget(t *testing.T, mod func(c *protocol.Config)) (*protocol.Session, []byte) {
	t.Helper()
	cfg := prototest.ConfigV1(wire.RoleListener, "b", 2)
	if mod != nil {
		mod(&cfg)
	}
	s, err := protocol.New(cfg)
	must(t, err)
	must(t, s.Start(prototest.Epoch, prototest.Nonce(2)))
	rd := s.Ready()
	if len(rd.Messages) != 1 {
		t.Fatalf("%d messages after Start", len(rd.Messages))
	}
	return s, append([]byte(nil), rd.Messages[0][wire.HeaderSize:]...)
}

// peerHello is the HELLO body of a hand-played dialer talking to the handshake target.
func peerHello(mod func(h *wire.Hello)) []byte {
	h := &wire.Hello{Role: wire.RoleDialer, Name: "p", Origin: prototest.Origin(7), MinVersion: 1, MaxVersion: 1,
		Nonce: prototest.Nonce(40)}
	if mod != nil {
		mod(h)
	}
	return prototest.HelloBody(h)
}

// helloFrame frames a HELLO body as it is, valid or not.
func helloFrame(body []byte) []byte { return prototest.RawFrame(wire.TypeHello, 0, 0, body) }

// helloOfSize is a valid peer HELLO body (peerHello, changed by mod) padded with an unknown
// key to exactly size bytes.
func helloOfSize(size int, mod func(h *wire.Hello)) []byte {
	if b := peerHello(mod); len(b) == size {
		return b
	}
	for n := max(0, size-len(peerHello(mod))-8); n <= size; n++ {
		b := peerHello(func(h *wire.Hello) {
			if mod != nil {
				mod(h)
			}
			h.Extra = wire.Extra{20: cborBytes(n)}
		})
		if len(b) == size {
			return b
		}
	}
	panic("no HELLO body of exactly the size")
}

// cborBytes is the CBOR encoding of a byte string of n zero bytes (n < 65536).
func cborBytes(n int) []byte {
	switch {
	case n < 24:
		return append([]byte{0x40 + byte(n)}, make([]byte, n)...)
	case n < 256:
		return append([]byte{0x58, byte(n)}, make([]byte, n)...)
	}
	return append([]byte{0x59, byte(n >> 8), byte(n)}, make([]byte, n)...)
}

// ---- frames built by hand ----

// ping7 is a valid PING frame to lead a hand-built message: its PONG shows that the
// session processed what came before the frame under test.
var ping7 = prototest.Frame(&wire.Ping{ID: 7})

// pingThen is a message of ping7 followed by parts. The frame under test comes after a
// PING, so that its PONG shows the frames before the offending one took effect.
func pingThen(parts ...[]byte) []byte { return cat(append([][]byte{ping7}, parts...)...) }

// txn1 is a TXN1 frame of a transaction's encoding at a position, valid or not.
func txn1(pos uint64, txn []byte) []byte {
	return prototest.RawFrame(wire.TypeTxn1, 0, 0, append(binary.BigEndian.AppendUint64(nil, pos), txn...))
}

// originFrame is an ORIGIN frame naming o.
func originFrame(o wire.OriginID, name string) []byte {
	return prototest.Frame(&wire.Origin{Origin: o, Name: name})
}

// entryOfBody is a seq-1 transaction of origin whose TXN1 body (position and encoding) is
// exactly body bytes.
func entryOfBody(origin wire.OriginID, body int) prototest.Entry {
	for v := max(0, body-100); v <= body; v++ {
		e := prototest.Chain(origin, 1, 1, v)[0]
		if 8+len(e.Raw) == body {
			return e
		}
	}
	panic("no transaction of the size")
}

// ---- SPEC.md's tables ----

// spec holds the tables of SPEC.md the tests check against: each error code's class, and
// each malformed-input class's resulting code ("" for M9, which is not an error).
type specTables struct {
	classOf   map[wire.Code]wire.Class
	malformed map[string]wire.Code
	examples  map[string]string // each malformed-input class's example column
}

var (
	specOnce sync.Once
	specData specTables
	specErr  error
)

func spec(t *testing.T) specTables {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile("SPEC.md")
		if err != nil {
			specErr = err
			return
		}
		s := string(b)
		specData.classOf = map[wire.Code]wire.Class{}
		for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| ([a-z-]+) \\|").FindAllStringSubmatch(s, -1) {
			specData.classOf[wire.Code(m[1])] = wire.Class(m[2])
		}
		i := strings.Index(s, "## Malformed input")
		j := strings.Index(s, "## Compatibility")
		if i < 0 || j < i {
			specErr = os.ErrNotExist
			return
		}
		specData.malformed = map[string]wire.Code{}
		specData.examples = map[string]string{}
		row := regexp.MustCompile("(?m)^\\| (M[0-9]+) [^|]*\\|([^|]*)\\|([^|]*)\\|$")
		code := regexp.MustCompile("`([a-z-]+)`")
		for _, m := range row.FindAllStringSubmatch(s[i:j], -1) {
			var c wire.Code
			if cm := code.FindStringSubmatch(m[3]); cm != nil {
				c = wire.Code(cm[1])
			}
			specData.malformed[m[1]] = c
			specData.examples[m[1]] = strings.TrimSpace(m[2])
		}
	})
	if specErr != nil {
		t.Fatalf("reading SPEC.md: %v", specErr)
	}
	return specData
}

// ---- a session that closed itself ----

// checkClosed asserts that s closed itself with code: its state, Err (code, the class SPEC
// gives the code, frame and offset unless offset is anyOffset), exactly one EventClosed
// (last, not by the peer), and a CLOSE frame (the last frame it sent) with the same code and
// class. It returns the frames s sent.
func checkClosed(t *testing.T, s *protocol.Session, msgs [][]byte, evs []protocol.Event, code wire.Code, frame wire.Type, offset int) []wire.Decoded {
	t.Helper()
	class := spec(t).classOf[code]
	if class == "" {
		t.Fatalf("code %s is not in SPEC.md", code)
	}
	if s.State() != protocol.StateClosed {
		t.Fatalf("state %v, want closed", s.State())
	}
	e := s.Err()
	if e == nil || e.Code != code || e.Class != class {
		t.Fatalf("Err() = %v, want %s (%s)", e, code, class)
	}
	if offset != anyOffset {
		if e.Offset != offset || (offset != wire.NoOffset && e.Frame != frame) {
			t.Fatalf("Err() names frame %s at offset %d, want %s at %d", e.Frame, e.Offset, frame, offset)
		}
	}
	closed := 0
	for _, ev := range evs {
		if ev.Kind == protocol.EventClosed {
			closed++
		}
	}
	if closed != 1 || len(evs) == 0 || evs[len(evs)-1].Kind != protocol.EventClosed {
		t.Fatalf("events %v: want exactly one EventClosed, last", kinds(evs))
	}
	if last := evs[len(evs)-1]; last.ByPeer || last.Err == nil || *last.Err != *e {
		t.Fatalf("EventClosed %+v, Err() %+v", last, e)
	}
	fs := frames(t, msgs)
	if len(fs) == 0 {
		t.Fatal("no CLOSE sent")
	}
	cl, ok := fs[len(fs)-1].Value.(*wire.Close)
	if !ok {
		t.Fatalf("last frame sent is %s, not CLOSE", fs[len(fs)-1].Type)
	}
	if cl.Code != code || cl.Class != class {
		t.Fatalf("CLOSE carries %s (%s), want %s (%s)", cl.Code, cl.Class, code, class)
	}
	// The message is the detail (frame, offset, reason), not the code and class again; it is
	// valid UTF-8 within the CLOSE bound whatever the detail holds.
	if !utf8.ValidString(cl.Message) || len(cl.Message) > wire.MaxCloseText {
		t.Fatalf("CLOSE message of %d bytes, valid UTF-8 %v", len(cl.Message), utf8.ValidString(cl.Message))
	}
	if d := e.Detail(); utf8.ValidString(d) && len(d) <= wire.MaxCloseText && cl.Message != d {
		t.Fatalf("CLOSE message %q, want the detail %q", cl.Message, d)
	}
	for _, f := range fs[:len(fs)-1] {
		if f.Type == wire.TypeClose {
			t.Fatal("more than one CLOSE sent")
		}
	}
	// Nothing is processed after the close.
	if err := s.Receive(prototest.Epoch.Add(time.Hour), prototest.Frame(&wire.Ping{ID: 1})); err == nil || err.(*wire.Error).Code != wire.CodeClosed {
		t.Fatalf("Receive after close: %v", err)
	}
	if s.HasReady() {
		t.Fatal("a closed session produced output")
	}
	return fs
}

// anyOffset skips the frame and offset check of checkClosed.
const anyOffset = -2
