package fuzz

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// specPath is protocol/SPEC.md, relative to this package (go test runs in the package directory).
const specPath = "../protocol/SPEC.md"

// FuzzDecode feeds one message to the decode loop, twice: to wire.DecodeMessage with the
// protocol's default limits, and to an established version-1 session with small limits.
//
// Wire properties (checkWire):
//
//	a. no panic; a failure is a *wire.Error whose Code is a decode code wire.ClassOf knows,
//	   whose Class is ClassOf(Code), and whose Offset is the header of the failing frame:
//	   the sum of the sizes of the frames decoded before it;
//	b. encode(decode(x)) == x: wire.EncodeMessage of the decoded frames is exactly the
//	   bytes they were decoded from (all of data, or data up to the error);
//	c. re-split: each frame decoded alone is the same frame as in the whole message, the
//	   failing frame alone fails the same way, and the frames' individual encodings
//	   concatenate to the decoded bytes.
//
// Session properties (checkSession): no panic; a closed session has an error of a known
// code and class (or the peer's CLOSE) and emitted exactly one EventClosed, last; HeldBytes
// stays within the session's limits; the counters match the events; everything the session
// sends is well-formed; and the session fails at or before the first frame the wire layer
// rejects, never on a frame it accepts with a decode error. The session is established
// once per fuzz worker (establishOnce); each input gets a Clone of it.
func FuzzDecode(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkWire(t, data)
		checkSession(t, data)
	})
}

// decodeCodes are the codes wire.DecodeMessage may report: message, header and body rules.
var decodeCodes = map[wire.Code]bool{
	wire.CodeMalformedFrame:  true,
	wire.CodeMessageTooLarge: true,
	wire.CodeFrameTooLarge:   true,
	wire.CodeBadFlags:        true,
	wire.CodeBadChannel:      true,
	wire.CodeUnknownFrame:    true,
	wire.CodeBadCBOR:         true,
	wire.CodeBadField:        true,
	wire.CodeBadTxn:          true,
	wire.CodeUnsupportedTxn:  true,
	wire.CodeBadChunk:        true, // a CHUNK body that breaks its own rules (version 3)
	wire.CodeBadRange:        true, // a RANGEDIGEST or RANGERECORDS body that breaks its own rules (version 3)
}

// checkKnown fails unless err has a code this build defines, with that code's class.
func checkKnown(t testing.TB, what string, err *wire.Error) {
	t.Helper()
	cl, ok := wire.ClassOf(err.Code)
	if !ok {
		t.Fatalf("%s: unknown code %q (%v)", what, err.Code, err)
	}
	if err.Class != cl {
		t.Fatalf("%s: code %s has class %s, ClassOf says %s (%v)", what, err.Code, err.Class, cl, err)
	}
}

func checkWire(t testing.TB, data []byte) {
	frames, werr := wire.DecodeMessage(data, wire.DefaultMaxMessage, wire.MaxFrameBody)

	// Walk the frames: each starts where the previous one ended and holds its own bytes.
	off := 0
	for i, d := range frames {
		if d.Offset != off {
			t.Fatalf("frame %d (%s) at offset %d, the walk says %d", i, d.Type, d.Offset, off)
		}
		size := wire.HeaderSize + len(d.Body)
		if int(d.Length) != len(d.Body) || off+size > len(data) {
			t.Fatalf("frame %d (%s): length %d, body %d bytes, at %d of %d", i, d.Type, d.Length, len(d.Body), off, len(data))
		}
		if h := wire.AppendHeader(nil, d.Header); !bytes.Equal(h, data[off:off+wire.HeaderSize]) {
			t.Fatalf("frame %d: header %x decoded from %x", i, h, data[off:off+wire.HeaderSize])
		}
		if !bytes.Equal(d.Body, data[off+wire.HeaderSize:off+size]) {
			t.Fatalf("frame %d (%s): body is not the message's bytes", i, d.Type)
		}
		if wire.Known(d.Type) {
			if d.Value == nil || d.Value.FrameType() != d.Type {
				t.Fatalf("frame %d: known type %s decoded to %T", i, d.Type, d.Value)
			}
		} else if d.Value != nil || !d.Type.Ignorable() {
			t.Fatalf("frame %d: unknown type %s accepted (value %T)", i, d.Type, d.Value)
		}
		off += size
	}

	// a. The error, if any, is well-formed and points at the frame that failed.
	end := len(data)
	if werr != nil {
		checkKnown(t, "DecodeMessage", werr)
		if !decodeCodes[werr.Code] {
			t.Fatalf("DecodeMessage reported %s, which is not a decode code (%v)", werr.Code, werr)
		}
		if werr.Offset < 0 || werr.Offset > len(data) {
			t.Fatalf("error offset %d outside [0, %d] (%v)", werr.Offset, len(data), werr)
		}
		if werr.Offset != off {
			t.Fatalf("error offset %d, but %d frames end at %d (%v)", werr.Offset, len(frames), off, werr)
		}
		if off < len(data) && werr.Frame != wire.Type(data[off]) {
			t.Fatalf("error names frame type %s, the header at %d has %s (%v)", werr.Frame, off, wire.Type(data[off]), werr)
		}
		end = off
	} else if off != len(data) {
		t.Fatalf("no error, but the frames end at %d of %d", off, len(data))
	}

	// b. encode(decode(x)) == x.
	re, err := wire.EncodeMessage(frames)
	if err != nil {
		t.Fatalf("EncodeMessage of %d decoded frames: %v", len(frames), err)
	}
	if !bytes.Equal(re, data[:end]) {
		t.Fatalf("re-encoding differs:\n got  %x\n want %x", re, data[:end])
	}

	// c. Re-split: every frame alone decodes to itself, and the encodings concatenate.
	var cat []byte
	for i, d := range frames {
		alone := data[d.Offset : d.Offset+wire.HeaderSize+len(d.Body)]
		fs, aerr := wire.DecodeMessage(alone, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if aerr != nil || len(fs) != 1 {
			t.Fatalf("frame %d (%s) alone: %d frames, error %v", i, d.Type, len(fs), aerr)
		}
		if fs[0].Header != d.Header || fs[0].Offset != 0 {
			t.Fatalf("frame %d alone: header %+v at %d, in the message %+v", i, fs[0].Header, fs[0].Offset, d.Header)
		}
		one, err := wire.EncodeMessage([]wire.Decoded{d})
		if err != nil {
			t.Fatalf("frame %d (%s) encoded alone: %v", i, d.Type, err)
		}
		again, err := wire.EncodeMessage(fs)
		if err != nil || !bytes.Equal(one, again) || !bytes.Equal(one, alone) {
			t.Fatalf("frame %d (%s): alone re-encodes to %x (%v), in the message to %x, bytes %x", i, d.Type, again, err, one, alone)
		}
		cat = append(cat, one...)
	}
	if !bytes.Equal(cat, data[:end]) {
		t.Fatalf("frames encoded one by one concatenate to %x, want %x", cat, data[:end])
	}
	if werr != nil && werr.Offset > 0 {
		fs, rerr := wire.DecodeMessage(data[werr.Offset:], wire.DefaultMaxMessage, wire.MaxFrameBody)
		if len(fs) != 0 || rerr == nil || rerr.Code != werr.Code || rerr.Offset != 0 || rerr.Frame != werr.Frame {
			t.Fatalf("the failing frame as its own message: %d frames, error %v; in the message: %v", len(fs), rerr, werr)
		}
	}
}

// Session limits: small, so that the bounds are meaningful for fuzzed input.
var limits = protocol.Limits{
	MaxFrameBody:     1024,
	MaxMessage:       wire.MinMaxMessage,
	MaxSendBuffer:    4096,
	MaxUnackedBytes:  512,
	MaxOrigins:       2,
	HandshakeTimeout: 10 * time.Second,
	PingInterval:     time.Second,
	LivenessTimeout:  5 * time.Second,
}

// Session setup: the listener subscribes from subscribeFrom and the dialer (the side under
// test) offers offered (of an origin it named), so ACK1 up to the last offered position is
// valid; the dialer subscribes from 0 with an empty vector, so TXN1 of an origin named by
// an ORIGIN frame is allowed and every origin starts at seq 0; and the dialer has PING 1
// outstanding, so PONG {1: 1} is valid.
const subscribeFrom = 40

var (
	offered = prototest.Chain(prototest.Origin(9), 3, 1, 4)
	lastOff = uint64(subscribeFrom + len(offered))
)

// maxCloseFrame is the largest CLOSE frame a session sends: longest code, class and message.
var maxCloseFrame = func() int {
	b, err := wire.AppendFrame(nil, 0, 0, &wire.Close{
		Code:    wire.Code(strings.Repeat("a", 64)),
		Class:   wire.Class(strings.Repeat("a", 64)),
		Message: strings.Repeat("a", wire.MaxCloseText),
	})
	if err != nil {
		panic(err)
	}
	return len(b)
}()

// establishOnce is the version-1 session under test, established once per process (each
// fuzz worker is one), and the time to feed it input at; every input gets a Clone of it.
// Establishing a pair per input cost about three quarters of an input's time.
var establishOnce = sync.OnceValues(func() (sessionAt, error) {
	s, now, err := establish()
	return sessionAt{s, now}, err
})

type sessionAt struct {
	s   *protocol.Session
	now time.Time
}

// established returns a copy of the session under test, checked to be as establish left it.
func established(t testing.TB) (*protocol.Session, time.Time) {
	base, err := establishOnce()
	if err != nil {
		t.Fatal(err)
	}
	s := base.s.Clone()
	if s.State() != protocol.StateEstablished || s.HeldBytes() != 0 || s.HasReady() {
		t.Fatalf("setup copy: state %v, %d bytes held, output %v", s.State(), s.HeldBytes(), s.HasReady())
	}
	return s, base.now
}

// establish returns the dialer of a pair, established, subscribed both ways, with nothing
// held, and the time to feed it input at.
func establish() (*protocol.Session, time.Time, error) {
	dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
	lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
	dc.Limits, lc.Limits = limits, limits
	p, err := prototest.NewPair(dc, lc)
	if err != nil {
		return nil, time.Time{}, err
	}
	p.Pump(10)
	if err := p.L.S.V1().Subscribe(subscribeFrom, nil); err != nil {
		return nil, time.Time{}, err
	}
	p.Pump(10)
	if err := p.D.S.V1().Subscribe(0, nil); err != nil {
		return nil, time.Time{}, err
	}
	if err := p.D.S.SetOriginName(prototest.Origin(9), "nine"); err != nil {
		return nil, time.Time{}, err
	}
	for i, e := range offered {
		if err := p.D.S.V1().Offer(uint64(subscribeFrom+1+i), e.Raw); err != nil {
			return nil, time.Time{}, err
		}
	}
	p.Pump(10)
	now := p.Now.Add(limits.PingInterval)
	if err := p.D.S.Tick(now); err != nil {
		return nil, time.Time{}, err
	}
	p.D.Drain() // the PING stays outstanding
	s := p.D.S
	if s.State() != protocol.StateEstablished || p.L.S.State() != protocol.StateEstablished {
		return nil, time.Time{}, fmt.Errorf("setup: states %v/%v, errors %v/%v", s.State(), p.L.S.State(), s.Err(), p.L.S.Err())
	}
	if s.HeldBytes() != 0 || s.HasReady() {
		return nil, time.Time{}, fmt.Errorf("setup: %d bytes held", s.HeldBytes())
	}
	return s, now, nil
}

func checkSession(t testing.TB, data []byte) {
	s, now := established(t)
	before := s.Stats()
	if err := s.Receive(now, data); err != nil {
		t.Fatalf("Receive on an established session refused: %v", err)
	}
	held := s.HeldBytes()
	paused := s.ReadPaused()
	state := s.State()
	serr := s.Err()
	rd := s.Ready()
	st := s.Stats() // after Ready, which closes the message being built and counts it

	// Events: counted by kind; data positions increase; EventClosed only last, once; at
	// most one EventIgnoredFrame, counting the frames skipped.
	count := map[protocol.EventKind]int{}
	var lastPos, ignored uint64
	var closedEv *protocol.Event
	for i, e := range rd.Events {
		count[e.Kind]++
		switch e.Kind {
		case protocol.EventIgnoredFrame:
			if e.Count == 0 || !e.Frame.Ignorable() || wire.Known(e.Frame) {
				t.Fatalf("event %d: %d ignored frames, the first of type %s", i, e.Count, e.Frame)
			}
			ignored += e.Count
		case protocol.EventTxn, protocol.EventDuplicate, protocol.EventGap, protocol.EventDivergence:
			if e.Position <= lastPos {
				t.Fatalf("event %d (%s) at position %d after %d", i, e.Kind, e.Position, lastPos)
			}
			lastPos = e.Position
		case protocol.EventAcked:
			if e.Position <= subscribeFrom || e.Position > lastOff {
				t.Fatalf("acked position %d outside (%d, %d]", e.Position, subscribeFrom, lastOff)
			}
		case protocol.EventClosed:
			// EventClosed is the last event, also after skipped ignorable frames
			// (corpus 77a79351999594f5 once found it emitted before their event).
			if i != len(rd.Events)-1 {
				t.Fatalf("EventClosed is event %d of %d", i, len(rd.Events))
			}
			closedEv = &rd.Events[i]
		}
	}

	// Output: every message the session sends is well-formed for the peer.
	out := 0
	var lastFrame *wire.Decoded
	for _, m := range rd.Messages {
		fs, err := wire.DecodeMessage(m, limits.MaxMessage, limits.MaxFrameBody)
		if err != nil {
			t.Fatalf("the session sent a message the peer rejects: %v (%x)", err, m)
		}
		out += len(m)
		if len(fs) > 0 {
			lastFrame = &fs[len(fs)-1]
		}
	}

	// Bounds: the documented one (Session.HeldBytes), then the tighter one of a single input: data
	// frames held unacknowledged (each its own size), PONGs (each no larger than its PING)
	// and one CLOSE.
	if doc := limits.MaxSendBuffer + limits.MaxUnackedBytes + limits.MaxMessage + maxCloseFrame; held > doc {
		t.Fatalf("HeldBytes %d exceeds the documented bound %d", held, doc)
	}
	if bound := min(len(data), limits.MaxMessage) + maxCloseFrame; held > bound {
		t.Fatalf("HeldBytes %d exceeds %d for an input of %d bytes", held, bound, len(data))
	}

	// Counters.
	d := func(a, b uint64) uint64 { return a - b }
	if d(st.MessagesIn, before.MessagesIn) != 1 || d(st.BytesIn, before.BytesIn) != uint64(len(data)) {
		t.Fatalf("input counters: %d messages, %d bytes for one of %d", d(st.MessagesIn, before.MessagesIn), d(st.BytesIn, before.BytesIn), len(data))
	}
	dataEvents := count[protocol.EventTxn] + count[protocol.EventDuplicate] + count[protocol.EventGap] + count[protocol.EventDivergence]
	if got := d(st.TxnsReceived, before.TxnsReceived); got < uint64(dataEvents) || got > uint64(dataEvents)+1 {
		t.Fatalf("TxnsReceived +%d, but %d data events (%v)", got, dataEvents, count)
	}
	for _, c := range []struct {
		name string
		n    uint64
		kind protocol.EventKind
	}{
		{"Duplicates", d(st.Duplicates, before.Duplicates), protocol.EventDuplicate},
		{"Gaps", d(st.Gaps, before.Gaps), protocol.EventGap},
		{"Divergences", d(st.Divergences, before.Divergences), protocol.EventDivergence},
	} {
		if c.n != uint64(count[c.kind]) {
			t.Fatalf("%s +%d, but %d %s events", c.name, c.n, count[c.kind], c.kind)
		}
	}
	if n := d(st.IgnoredFrames, before.IgnoredFrames); n != ignored || count[protocol.EventIgnoredFrame] > 1 {
		t.Fatalf("IgnoredFrames +%d, but %d events counting %d frames (one per message)", n, count[protocol.EventIgnoredFrame], ignored)
	}
	if d(st.BytesOut, before.BytesOut) != uint64(out) {
		t.Fatalf("BytesOut +%d, but %d bytes sent", d(st.BytesOut, before.BytesOut), out)
	}

	// Closed or established, consistently.
	switch state {
	case protocol.StateClosed:
		if serr == nil || closedEv == nil || closedEv.Err != serr || count[protocol.EventClosed] != 1 {
			t.Fatalf("closed: Err %v, EventClosed %+v (%d)", serr, closedEv, count[protocol.EventClosed])
		}
		if held != out {
			t.Fatalf("closed: HeldBytes %d, but %d bytes queued to send", held, out)
		}
		protocolErrors := uint64(0)
		if closedEv.ByPeer {
			// The peer's CLOSE: its code may be newer than this build; it carries its class.
			if serr.Code == "" || serr.Class == "" || serr.Offset != wire.NoOffset {
				t.Fatalf("closed by the peer with %+v", serr)
			}
			if out != 0 {
				t.Fatalf("closed by the peer, yet sent %d bytes", out)
			}
		} else {
			checkKnown(t, "session", serr)
			if serr.Class == wire.ClassLocal {
				t.Fatalf("Receive closed the session with a local code: %v", serr)
			}
			if serr.Offset < 0 || serr.Offset >= max(len(data), 1) {
				t.Fatalf("session error offset %d outside the input of %d bytes: %v", serr.Offset, len(data), serr)
			}
			if c, ok := lastFrameClose(lastFrame); !ok || c.Code != serr.Code || c.Class != serr.Class {
				t.Fatalf("closed with %v, last frame sent %+v", serr, lastFrame)
			}
			if serr.Class == wire.ClassProtocol {
				protocolErrors = 1
			}
		}
		if got := d(st.ProtocolErrors, before.ProtocolErrors); got != protocolErrors {
			t.Fatalf("ProtocolErrors +%d, want %d (%v)", got, protocolErrors, serr)
		}
	case protocol.StateEstablished:
		if serr != nil || closedEv != nil {
			t.Fatalf("established with Err %v, EventClosed %+v", serr, closedEv)
		}
		if d(st.ProtocolErrors, before.ProtocolErrors) != 0 {
			t.Fatal("established after a protocol error")
		}
	default:
		t.Fatalf("state %v after Receive", state)
	}

	checkAgainstWire(t, data, state, serr, closedEv)

	// Paused: the next message closes the session with receive-buffer-full.
	if state == protocol.StateEstablished && paused {
		if err := s.Receive(now, data); err != nil {
			t.Fatalf("Receive while paused refused: %v", err)
		}
		if e := s.Err(); s.State() != protocol.StateClosed || e == nil || e.Code != wire.CodeReceiveBufferFull {
			t.Fatalf("Receive while paused: state %v, err %v", s.State(), e)
		}
		if s.HeldBytes() > maxCloseFrame {
			t.Fatalf("closed with receive-buffer-full, still holding %d bytes", s.HeldBytes())
		}
	}
}

func lastFrameClose(d *wire.Decoded) (*wire.Close, bool) {
	if d == nil {
		return nil, false
	}
	c, ok := d.Value.(*wire.Close)
	return c, ok
}

// checkAgainstWire compares the session with the wire decoder run at the session's limits:
// the session fails at or before the first frame the decoder rejects (with the same code
// when at the same frame), and never reports a decode error on input the decoder accepts.
func checkAgainstWire(t testing.TB, data []byte, state protocol.State, serr *wire.Error, closedEv *protocol.Event) {
	_, werr := wire.DecodeMessage(data, limits.MaxMessage, limits.MaxFrameBody)
	if serr != nil && serr.Code == wire.CodeUnsupportedTxn && dataFormatV4(data, serr.Offset) && (werr == nil || werr.Offset >= serr.Offset) {
		// Transaction formats 2 and 3 are version 4's: the session, below version 4, refuses
		// them as formats it does not carry; the decoder, which knows no version, reads them.
		return
	}
	if werr == nil {
		if serr != nil && !closedEv.ByPeer && decodeCodes[serr.Code] && serr.Code != wire.CodeBadField {
			t.Fatalf("the session failed with %v on input the wire decoder accepts", serr)
		}
		return
	}
	if werr.Code == wire.CodeBadChunk {
		// A CHUNK's content is the copy's business (protocol/SPEC.md "The base copy"): the
		// session reads it only on the channel of a copy it takes, where a failure aborts
		// that copy and the connection goes on; elsewhere the frame is refused by its
		// channel or dropped as stale before its body is read.
		return
	}
	if state != protocol.StateClosed {
		t.Fatalf("the wire decoder rejects the input (%v), the session stays %v", werr, state)
	}
	if closedEv.ByPeer {
		return
	}
	switch {
	case serr.Offset > werr.Offset:
		t.Fatalf("the session failed at %d (%v), past the frame the wire decoder rejects (%v)", serr.Offset, serr, werr)
	case serr.Offset == werr.Offset && werr.Code == wire.CodeBadRange && serr.Code == wire.CodeUnexpectedFrame:
		// RANGERECORDS is read only on a connection that negotiated anti-entropy, which
		// this version-1 session did not: the session refuses it by its type before the
		// body whose rules the wire decoder reports.
	case serr.Offset == werr.Offset && serr.Code != werr.Code:
		t.Fatalf("at offset %d the session says %v, the wire decoder %v", serr.Offset, serr, werr)
	}
}

// dataFormatV4 reports whether the frame at offset off of data is a DATA frame whose
// transaction is of a format only version 4 carries (2: a token; 3: a leaf block).
func dataFormatV4(data []byte, off int) bool {
	at := off + wire.HeaderSize + wire.DataHeader
	return off >= 0 && at < len(data) && wire.Type(data[off]) == wire.TypeData &&
		data[at] >= wire.TxnFormat2 && data[at] <= wire.TxnFormat3
}

// seed is one named seed input.
type seed struct {
	name string
	data []byte
}

// specExamples returns the frame examples of protocol/SPEC.md as seeds.
func specExamples(tb testing.TB) []seed {
	tb.Helper()
	spec, err := os.ReadFile(specPath)
	if err != nil {
		tb.Fatal(err)
	}
	exs, err := prototest.ParseFrameExamples(string(spec))
	if err != nil {
		tb.Fatal(err)
	}
	if len(exs) == 0 {
		tb.Fatalf("%s has no frame examples", specPath)
	}
	out := make([]seed, len(exs))
	for i, ex := range exs {
		out[i] = seed{name: ex.Name, data: ex.Bytes}
	}
	return out
}

// seeds returns the seed inputs: every protocol/SPEC.md example, all of them as one message, a
// stream the session under test accepts, and malformed input of each header and body class.
func seeds(tb testing.TB) []seed {
	tb.Helper()
	var out []seed
	var all []byte
	exs := specExamples(tb)
	for i, ex := range exs {
		out = append(out, seed{fmt.Sprintf("spec-%02d-%s", i+1, strings.ToLower(ex.name)), ex.data})
		all = append(all, ex.data...)
	}
	out = append(out, seed{"spec-all", all})

	ex := func(name string) []byte {
		for _, e := range exs {
			if e.name == name {
				return e.data
			}
		}
		tb.Fatalf("protocol/SPEC.md has no %s example", name)
		return nil
	}
	raw := prototest.RawFrame
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	ping := ex("PING")
	txn1 := wire.TypeTxn1
	// What the session under test accepts: the origin named, both TXN1 examples (seq 1 and
	// 2 of one chain), the outstanding PING answered, the offered positions acknowledged,
	// a PING, and an ignorable frame.
	var txns []byte
	for _, e := range exs {
		if e.name == "TXN1" {
			txns = append(txns, e.data...)
		}
	}
	stream := cat(ex("ORIGIN"), txns,
		prototest.Frame(&wire.Pong{ID: 1}),
		prototest.Frame(&wire.Ack1{Position: lastOff}),
		ping,
		raw(0x80, 0, 0, []byte("hint")))
	out = append(out, seed{"session-stream", stream})

	header := func(t wire.Type, length uint32) []byte {
		return wire.AppendHeader(nil, wire.Header{Type: t, Length: length})
	}
	pingBody := ping[wire.HeaderSize:]
	badPos := append(make([]byte, 8), ex("TXN1")[wire.HeaderSize+8:]...)
	// The first TXN1 example with another format byte, and with another operation kind.
	first := ex("TXN1")
	format2 := append([]byte(nil), first...)
	format2[wire.HeaderSize+8] = 2
	format3 := append([]byte(nil), first...)
	format3[wire.HeaderSize+8] = 3
	kind3 := append([]byte(nil), first...)
	kind3[len(kind3)-len("\x05users\x02k1\x02v1")-1] = 3 // the kind of its one operation, a put
	own := raw(txn1, 0, 0, append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, prototest.Chain(prototest.Origin(1), 1, 1, 1)[0].Raw...))
	out = append(out,
		seed{"malformed-empty", []byte{}},
		seed{"malformed-truncated-header", []byte{0x04, 0x00, 0x00}},
		seed{"malformed-body-past-end", cat(header(wire.TypePing, 10), []byte{0xa1, 0x01, 0x07})},
		seed{"malformed-oversized-length", cat(header(txn1, wire.MaxFrameBody+1), make([]byte, 16))},
		seed{"malformed-flags", raw(wire.TypePing, 0x01, 0, pingBody)},
		seed{"malformed-channel", raw(wire.TypePing, 0, 5, pingBody)},
		seed{"malformed-unknown-critical-7e", raw(0x7e, 0, 0, []byte{0xa1, 0x01, 0x07})},
		seed{"malformed-unknown-ignorable-fe", cat(raw(0xfe, 0x03, 7, []byte{0xa1, 0x01, 0x07}), ping)},
		seed{"malformed-noncanonical-cbor", raw(wire.TypePing, 0, 0, []byte{0xa1, 0x01, 0x18, 0x07})},
		seed{"malformed-duplicate-key", raw(wire.TypePing, 0, 0, []byte{0xa2, 0x01, 0x07, 0x01, 0x07})},
		seed{"malformed-indefinite", raw(wire.TypePing, 0, 0, []byte{0xbf, 0x01, 0x07, 0xff})},
		seed{"malformed-tag", raw(wire.TypePing, 0, 0, []byte{0xa1, 0x01, 0xc1, 0x07})},
		seed{"malformed-txn-position-0", raw(txn1, 0, 0, badPos)},
		seed{"malformed-after-valid-frames", cat(ping, ex("PONG"), raw(0x7e, 0, 0, nil))},
		seed{"malformed-txn-unnamed-origin", txns},
		seed{"malformed-txn-own-origin", cat(prototest.Frame(&wire.Origin{Origin: prototest.Origin(1), Name: "a"}), own)},
		seed{"malformed-txn-format-2", cat(ex("ORIGIN"), format2)},
		seed{"malformed-txn-format-3", cat(ex("ORIGIN"), format3)},
		seed{"malformed-txn-op-kind-3", cat(ex("ORIGIN"), kind3)},
		seed{"malformed-origin-past-max-origins", cat(ex("ORIGIN"), prototest.Frame(&wire.Origin{Origin: prototest.Origin(10), Name: "ten"}),
			prototest.Frame(&wire.Origin{Origin: prototest.Origin(11), Name: "eleven"}))},
		// One byte past HELLO's own bound (printable, to keep the corpus file small).
		seed{"malformed-hello-over-type-bound", raw(wire.TypeHello, 0, 0, bytes.Repeat([]byte("a"), wire.MaxHelloBody+1))},
		seed{"malformed-float-in-unknown-key", raw(wire.TypePing, 0, 0, []byte{0xa2, 0x01, 0x07, 0x09, 0xf9, 0x3e, 0x00})},
		seed{"ignorable-frames-coalesced", cat(raw(0x90, 0, 0, nil), ping, raw(0x91, 1, 2, []byte("x")), raw(0xff, 0, 0, nil))},
	)
	return out
}

// TestSeedOutcomes: the seeds of the rules added before the first release do what their
// names say against the session under test (code "" means it stays established) and, when
// wireCode is set, against wire.DecodeMessage at the protocol's default limits.
func TestSeedOutcomes(t *testing.T) {
	want := map[string]struct {
		code     wire.Code
		ignored  uint64
		wireCode wire.Code
	}{
		"session-stream":                    {"", 1, ""},
		"ignorable-frames-coalesced":        {"", 3, ""},
		"malformed-txn-unnamed-origin":      {wire.CodeUnexpectedFrame, 0, ""},
		"malformed-txn-own-origin":          {wire.CodeUnexpectedFrame, 0, ""},
		"malformed-txn-format-2":            {wire.CodeUnsupportedTxn, 0, wire.CodeUnsupportedTxn},
		"malformed-txn-format-3":            {wire.CodeUnsupportedTxn, 0, wire.CodeUnsupportedTxn},
		"malformed-txn-op-kind-3":           {wire.CodeUnsupportedTxn, 0, wire.CodeUnsupportedTxn},
		"malformed-origin-past-max-origins": {wire.CodeTooManyOrigins, 0, ""},
		// The session under test has a frame-body limit of 1024; at the default limits the
		// wire decoder is stopped by HELLO's own bound.
		"malformed-hello-over-type-bound": {wire.CodeFrameTooLarge, 0, wire.CodeFrameTooLarge},
		"malformed-float-in-unknown-key":  {wire.CodeBadCBOR, 0, wire.CodeBadCBOR},
	}
	seen := 0
	for _, sd := range seeds(t) {
		w, ok := want[sd.name]
		if !ok {
			continue
		}
		seen++
		s, now := established(t)
		if err := s.Receive(now, sd.data); err != nil {
			t.Fatalf("%s: %v", sd.name, err)
		}
		rd := s.Ready()
		var evIgnored []uint64
		for _, e := range rd.Events {
			if e.Kind == protocol.EventIgnoredFrame {
				evIgnored = append(evIgnored, e.Count)
			}
		}
		switch {
		case w.code == "" && (s.State() != protocol.StateEstablished || s.Err() != nil):
			t.Errorf("%s: state %v, err %v", sd.name, s.State(), s.Err())
		case w.code != "" && (s.Err() == nil || s.Err().Code != w.code):
			t.Errorf("%s: err %v, want %s", sd.name, s.Err(), w.code)
		case w.ignored > 0 && (len(evIgnored) != 1 || evIgnored[0] != w.ignored || s.Stats().IgnoredFrames != w.ignored):
			t.Errorf("%s: ignored-frame events %v, IgnoredFrames %d; want one event of %d", sd.name, evIgnored, s.Stats().IgnoredFrames, w.ignored)
		}
		if w.wireCode != "" {
			if _, err := wire.DecodeMessage(sd.data, wire.DefaultMaxMessage, wire.MaxFrameBody); err == nil || err.Code != w.wireCode {
				t.Errorf("%s: DecodeMessage %v, want %s", sd.name, err, w.wireCode)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("%d of the %d seeds found", seen, len(want))
	}
}

var writeSeeds = flag.Bool("write-seeds", false, "TestWriteSeedCorpus: write FuzzDecode's seeds to testdata/fuzz/FuzzDecode")

// TestWriteSeedCorpus writes the seeds of FuzzDecode as corpus files (Go's "go test fuzz
// v1" format), so that the committed corpus holds them too. Run it after protocol/SPEC.md's
// examples change:
//
//	go test ./fuzz -run=TestWriteSeedCorpus -write-seeds
func TestWriteSeedCorpus(t *testing.T) {
	if !*writeSeeds {
		t.Skip("writes the seed corpus only with -write-seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range seeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
