package protocol_test

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// The tables of malformed_test.go's tests, and the builders their cases are written with:
// the messages that close a session (inputCases, one or more for each class of SPEC's
// "Malformed input" table), the commands and timers that close it (closingCases) and the
// commands it refuses (refusedCases).

// ctext is a short CBOR text string (under 24 bytes).
func ctext(s string) []byte { return append([]byte{0x60 + byte(len(s))}, s...) }

func ack1(pos uint64) []byte { return prototest.Frame(&wire.Ack1{Position: pos}) }

// fxOther is a fork of fxChain's log: the same origin, different entries.
var fxOther = prototest.Chain(fxOrigin, 6, 1, 5)

// fxData is a DATA frame on channel ch carrying e with its chain hash.
func fxData(ch uint32, e prototest.Entry) []byte {
	return prototest.RawFrame(wire.TypeData, 0, ch, cat(e.Hash[:], e.Raw))
}

// txnHead is the fixed part of an fxOrigin transaction at seq after prev.
func txnHead(seq uint64, prev wire.Hash) []byte {
	b := []byte{wire.TxnFormat1}
	b = append(b, fxOrigin[:]...)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint64(b, uint64(wire.MakeHLC(1_800_000_000_004, 0)))
	return append(b, prev[:]...)
}

// mutate returns a copy of b changed by f.
func mutate(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }

// mapPairs is a PING body with keys 1..n, all 0.
func mapPairs(n int) []byte {
	b := []byte{0xb8, byte(n)}
	if n < 24 {
		b = []byte{0xa0 + byte(n)}
	}
	for k := 1; k <= n; k++ {
		if k < 24 {
			b = append(b, byte(k), 0)
		} else {
			b = append(b, 0x18, byte(k), 0)
		}
	}
	return b
}

type target uint8

const (
	onD         target = iota // the established dialer: subscribed, positions 1..3 received
	onL                       // the established listener: its peer subscribed, positions 1..3 sent
	onHandshake               // a listener that sent its HELLO and waits for the peer's
	onV2D                     // fxPairV2's dialer: subscribed to channels 1 and 2, fx2Chain 1..3 received on 1
	onV2L                     // fxPairV2's listener: its peer opened channels 1 and 2, fx2Chain 1..3 sent on 1
	onV4D                     // fxPairV4's dialer: it sent request 1 and received the listener's request 1
)

// inputCase is one received message that closes the session.
type inputCase struct {
	class  string // M1..M27 of SPEC's "Malformed input" table (M25 closes a copy, not the session; M26 is its own test); "" for other input errors
	name   string
	on     target
	limits protocol.Limits                // D's limits (on D, or on the version-2 and version-4 fixtures)
	llim   protocol.Limits                // L's limits (version-2 and version-4 fixtures)
	cfg    func(c *protocol.Config)       // the handshake target's config
	msg    []byte                         // the message
	msgFn  func(localHello []byte) []byte // or the message, built from the target's own HELLO body
	code   wire.Code                      // expected
	frame  wire.Type                      // expected Err().Frame
	offset int                            // expected Err().Offset (wire.NoOffset, or anyOffset)
	sends  []wire.Type                    // when set: the types of every frame sent in response
	check  inputCheck                     // more assertions
}

// The builders of inputCases: each makes a message, a part of one, or a check, so that a
// case reads as data.

// inputCheck is an input case's assertions beyond checkClosed's: on the session the message
// closed, and the events the message produced.
type inputCheck func(t *testing.T, s *protocol.Session, evs []protocol.Event)

// rawHeader is a frame header announcing length body bytes, without the body.
func rawHeader(typ wire.Type, length uint32) []byte {
	return wire.AppendHeader(nil, wire.Header{Type: typ, Length: length})
}

// closeBody is a CLOSE body (going-away, transient) whose message, key 3, is msg as it is
// encoded, valid or not.
func closeBody(msg []byte) []byte {
	return cat(hx("a3 01"), ctext("going-away"), hx("02"), ctext("transient"), hx("03"), msg)
}

// peerHelloFrame is the HELLO frame of peerHello(mod).
func peerHelloFrame(mod func(h *wire.Hello)) []byte { return helloFrame(peerHello(mod)) }

// selfHello is the HELLO body of a peer that has the handshake target's own origin id
// (node 2).
var selfHello = peerHello(func(h *wire.Hello) { h.Origin = prototest.Origin(2) })

// helloThenAuth builds, from the handshake target's own HELLO body, a hand-played dialer's
// HELLO of body hello and its AUTH under key.
func helloThenAuth(hello []byte, key string) func(local []byte) []byte {
	return func(local []byte) []byte {
		return cat(helloFrame(hello), prototest.AuthFor([]byte(key), wire.RoleDialer, hello, local))
	}
}

// withFormat is a copy of the transaction raw with its format byte set to f.
func withFormat(f byte, raw []byte) []byte {
	return mutate(raw, func(b []byte) []byte { b[0] = f; return b })
}

// noEvent checks that the message produced no event of kind.
func noEvent(kind protocol.EventKind) inputCheck {
	return func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
		if slices.ContainsFunc(evs, func(e protocol.Event) bool { return e.Kind == kind }) {
			t.Fatalf("events %v: want no %s", kinds(evs), kind)
		}
	}
}

// errNames checks that the session's error names the entry of origin at seq n.
func errNames(origin wire.OriginID, n int) inputCheck {
	return func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
		if err := s.Err(); !strings.Contains(err.Message, origin.String()) || !strings.Contains(err.Message, "seq "+strconv.Itoa(n)) {
			t.Fatalf("%v does not name origin %s seq %d", err, origin, n)
		}
	}
}

// countIs checks that the stat get (what, for the message) counted one, and that an event
// of kind names seq expected at position 4.
func countIs(what string, get func(protocol.Stats) uint64, kind protocol.EventKind, expected uint64) inputCheck {
	return func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
		if n := get(s.Stats()); n != 1 {
			t.Fatalf("%s counted %d times", what, n)
		}
		i := slices.IndexFunc(evs, func(e protocol.Event) bool { return e.Kind == kind })
		seq := func(e protocol.Event) uint64 { // the one field of the kind that names the seq
			if e.Kind == protocol.EventDivergence {
				return e.DivergedAt
			}
			return e.Expected
		}
		if i < 0 || seq(evs[i]) != expected || evs[i].Position != 4 {
			t.Fatalf("no %s event with seq %d at position 4: %+v", kind, expected, evs)
		}
	}
}

// inputCases is TestMalformedInput's table: one message each that closes the session.
func inputCases() []inputCase {
	P := len(ping7)                         // the offset of the frame after the leading PING
	goodHead := txnHead(4, fxChain[2].Hash) // the next entry's fixed part
	putT := hx("01 01 74 01 6b 01 76")      // put table "t" key "k" value "v"
	authThenClose := []wire.Type{wire.TypeAuth, wire.TypeClose}
	helloLen := len(peerHelloFrame(nil))
	ten := prototest.Chain(prototest.Origin(10), 2, 1, 1) // an origin D has not been told about
	own := prototest.Chain(prototest.Origin(1), 1, 1, 1)  // D's own origin
	return []inputCase{
		{class: "M1", name: "empty message", msg: []byte{}, code: wire.CodeMalformedFrame, frame: 0, offset: 0},
		{class: "M2", name: "64 KiB + 1 against a 64 KiB limit", limits: protocol.Limits{MaxMessage: 64 << 10, MaxFrameBody: 64<<10 - wire.HeaderSize},
			msg: pingThen(prototest.RawFrame(0x90, 0, 0, make([]byte, 64<<10+1-P-wire.HeaderSize))), code: wire.CodeMessageTooLarge, frame: wire.TypePing, offset: 0},
		{class: "M3", name: "truncated header 04 00 00", msg: pingThen(hx("04 00 00")), code: wire.CodeMalformedFrame, frame: wire.TypePing, offset: P},
		{class: "M3", name: "one byte of header", msg: pingThen(hx("11")), code: wire.CodeMalformedFrame, frame: wire.TypeTxn1, offset: P},
		{class: "M4", name: "length 10, 3 bytes follow", msg: pingThen(rawHeader(wire.TypePing, 10), hx("a1 01 07")), code: wire.CodeMalformedFrame, frame: wire.TypePing, offset: P},
		{class: "M5", name: "length 2^24 + 1", msg: pingThen(rawHeader(wire.TypePing, 1<<24+1)), code: wire.CodeFrameTooLarge, frame: wire.TypePing, offset: P},
		{class: "M5", name: "body over a configured limit of 1024", limits: protocol.Limits{MaxFrameBody: 1024},
			msg: pingThen(prototest.RawFrame(0x90, 0, 0, make([]byte, 1025))), code: wire.CodeFrameTooLarge, frame: 0x90, offset: P},
		{class: "M5", name: "TXN1 over a configured limit of 1024", limits: protocol.Limits{MaxFrameBody: 1024},
			msg: pingThen(originFrame(prototest.Origin(10), "ten"), txn1(4, entryOfBody(prototest.Origin(10), 1025).Raw)), code: wire.CodeFrameTooLarge, frame: wire.TypeTxn1, offset: P + len(originFrame(prototest.Origin(10), "ten"))},
		{class: "M5", name: "a PING body of 64 KiB + 1", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, make([]byte, 64<<10+1))), code: wire.CodeFrameTooLarge, frame: wire.TypePing, offset: P},
		{class: "M5", name: "an ORIGIN body of 64 KiB + 1 with flags and a channel", msg: pingThen(prototest.RawFrame(wire.TypeOrigin, 1, 3, make([]byte, 64<<10+1))), code: wire.CodeFrameTooLarge, frame: wire.TypeOrigin, offset: P},
		{class: "M5", name: "a HELLO body of 16 KiB + 1", on: onHandshake, msg: helloFrame(helloOfSize(16<<10+1, nil)), code: wire.CodeFrameTooLarge, frame: wire.TypeHello, offset: 0},
		{class: "M5", name: "a HELLO body of 16 KiB + 1 once established", msg: pingThen(helloFrame(helloOfSize(16<<10+1, nil))), code: wire.CodeFrameTooLarge, frame: wire.TypeHello, offset: P},
		{class: "M6", name: "PING with flags 0x01", msg: pingThen(prototest.RawFrame(wire.TypePing, 1, 0, hx("a1 01 07"))), code: wire.CodeBadFlags, frame: wire.TypePing, offset: P},
		{class: "M6", name: "TXN1 with the reserved compressed bit", msg: pingThen(prototest.RawFrame(wire.TypeTxn1, 1, 0, txn1(4, fxChain[3].Raw)[wire.HeaderSize:])), code: wire.CodeBadFlags, frame: wire.TypeTxn1, offset: P},
		{class: "M7", name: "PING on channel 5", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 5, hx("a1 01 07"))), code: wire.CodeBadChannel, frame: wire.TypePing, offset: P},
		{class: "M7", name: "DATA on channel 0", on: onV2D, msg: pingThen(fxData(0, fx2Chain[3])), code: wire.CodeBadChannel, frame: wire.TypeData, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M7", name: "DATA on a channel never opened", on: onV2D, msg: pingThen(fxData(3, fx2Chain[3])), code: wire.CodeBadChannel, frame: wire.TypeData, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M7", name: "DATA on a channel far above those opened", on: onV2D, msg: pingThen(fxData(1<<32-1, fx2Chain[3])), code: wire.CodeBadChannel, frame: wire.TypeData, offset: P},
		{class: "M7", name: "CREDIT on channel 1 of the header", on: onV2L, msg: pingThen(prototest.RawFrame(wire.TypeCredit, 0, 1, hx("a1 01 81 82 01 19 ffff"))), code: wire.CodeBadChannel, frame: wire.TypeCredit, offset: P},
		{class: "M7", name: "TXN1 on channel 1", msg: pingThen(prototest.RawFrame(wire.TypeTxn1, 0, 1, txn1(4, fxChain[3].Raw)[wire.HeaderSize:])), code: wire.CodeBadChannel, frame: wire.TypeTxn1, offset: P},
		{class: "M8", name: "type 0x7e", msg: pingThen(prototest.RawFrame(0x7e, 0, 0, nil)), code: wire.CodeUnknownFrame, frame: 0x7e, offset: P},
		{class: "M8", name: "type 0x00", msg: pingThen(prototest.RawFrame(0x00, 0, 0, hx("a0"))), code: wire.CodeUnknownFrame, frame: 0x00, offset: P},
		{class: "M8", name: "reserved version-2 type 0x28 on a channel", msg: pingThen(prototest.RawFrame(0x28, 0, 3, hx("a0"))), code: wire.CodeUnknownFrame, frame: 0x28, offset: P},
		{class: "M8", name: "type 0x7e on a version-2 connection", on: onV2D, msg: pingThen(prototest.RawFrame(0x7e, 0, 0, nil)), code: wire.CodeUnknownFrame, frame: 0x7e, offset: P},
		{class: "M8", name: "reserved version-2 type 0x2f on a version-2 connection", on: onV2L, msg: pingThen(prototest.RawFrame(0x2f, 0, 0, hx("a0"))), code: wire.CodeUnknownFrame, frame: 0x2f, offset: P},
		{class: "M10", name: "an array", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("81 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M10", name: "a truncated item", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a1 01 19 00"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M10", name: "trailing bytes", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a1 01 07 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M10", name: "an empty body", msg: pingThen(prototest.RawFrame(wire.TypeAck1, 0, 0, nil)), code: wire.CodeBadCBOR, frame: wire.TypeAck1, offset: P},
		{class: "M11", name: "{1: 7, 1: 7}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 01 07 01 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M12", name: "bf 01 07 ff", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("bf 01 07 ff"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M13", name: "{1: 1(7)}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a1 01 c1 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M13", name: "PING {1: 7, 9: 1.5}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 01 07 09 f9 3e00"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M13", name: "PING {1: 7, 9: undefined}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 01 07 09 f7"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M13", name: "a float deep in an unknown key of ORIGIN", msg: pingThen(prototest.RawFrame(wire.TypeOrigin, 0, 0, cat(hx("a3 01 50"), fxOrigin[:], hx("02 61 61 03 81 a1 01 fa 47c35000")))), code: wire.CodeBadCBOR, frame: wire.TypeOrigin, offset: P},
		{class: "M13", name: "a boolean map key in an unknown key of ACK1", on: onL, msg: pingThen(prototest.RawFrame(wire.TypeAck1, 0, 0, hx("a2 01 01 02 a1 f5 00"))), code: wire.CodeBadCBOR, frame: wire.TypeAck1, offset: P},
		{class: "M13", name: "a float in an unknown key of HELLO", on: onHandshake, msg: helloFrame(peerHello(func(h *wire.Hello) { h.Extra = wire.Extra{20: hx("f9 3c00")} })), code: wire.CodeBadCBOR, frame: wire.TypeHello, offset: 0},
		{class: "M14", name: "nesting 9 deep", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 01 07 02"+strings.Repeat("81", 8)+"00"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M14", name: "65 map pairs", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, mapPairs(65))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M15", name: "{1: 0x1807} non-shortest", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a1 01 18 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M15", name: "unsorted keys", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 02 01 01 07"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M15", name: "CLOSE with an empty optional message", msg: pingThen(prototest.RawFrame(wire.TypeClose, 0, 0, closeBody(ctext("")))), code: wire.CodeBadCBOR, frame: wire.TypeClose, offset: P},
		{class: "M15", name: "HELLO with empty optional capabilities", on: onHandshake,
			msgFn: func([]byte) []byte {
				// Keys 1..5, then 6: [] inserted before 7: nonce (the last 18 bytes).
				pb := peerHello(nil)
				i := len(pb) - 18
				return helloFrame(cat([]byte{pb[0] + 1}, pb[1:i], hx("06 80"), pb[i:]))
			}, code: wire.CodeBadCBOR, frame: wire.TypeHello, offset: 0},
		{class: "M16", name: "PING {}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a0"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M16", name: "PING {1: \"x\"}", msg: pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a1 01 61 78"))), code: wire.CodeBadCBOR, frame: wire.TypePing, offset: P},
		{class: "M16", name: "ORIGIN without a name", msg: pingThen(prototest.RawFrame(wire.TypeOrigin, 0, 0, cat(hx("a1 01 50"), fxOrigin[:]))), code: wire.CodeBadCBOR, frame: wire.TypeOrigin, offset: P},
		{class: "M17", name: "CLOSE message ff", msg: pingThen(prototest.RawFrame(wire.TypeClose, 0, 0, closeBody(hx("61 ff")))), code: wire.CodeBadCBOR, frame: wire.TypeClose, offset: P},
		{class: "M18", name: "HELLO nonce of 8 bytes", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.Nonce = h.Nonce[:8] }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO name \"a b\"", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.Name = "a b" }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO versions 2..1", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 2, 1 }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO unsorted capabilities", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.Caps = []string{"b", "a"} }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO max message 65536 below max frame body 65527 + 10", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MaxMessage, h.MaxFrame = 65536, 65527 }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO max message 65536 with the default max frame body", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MaxMessage = 65536 }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO max frame body 1023", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MaxFrame = 1023 }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO max frame body 16777217", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MaxFrame = 16777217 }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{class: "M18", name: "HELLO with a bad field once established", msg: pingThen(peerHelloFrame(func(h *wire.Hello) { h.Nonce = h.Nonce[:8] })), code: wire.CodeBadField, frame: wire.TypeHello, offset: P},
		{class: "M18", name: "ORIGIN name \"a b\"", msg: pingThen(prototest.Frame(&wire.Origin{Origin: fxOrigin, Name: "a b"})), code: wire.CodeBadField, frame: wire.TypeOrigin, offset: P},
		{class: "M18", name: "ACK1 position 0", on: onL, msg: pingThen(ack1(0)), code: wire.CodeBadField, frame: wire.TypeAck1, offset: P},
		{class: "M19", name: "seq 0", msg: pingThen(txn1(4, cat(txnHead(0, wire.Hash{}), hx("01"), putT))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "format 0", msg: pingThen(txn1(4, withFormat(0, fxChain[3].Raw))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "op kind 0", msg: pingThen(txn1(4, cat(goodHead, hx("01 00 01 74 01 6b")))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "table a/b", msg: pingThen(txn1(4, cat(goodHead, hx("01 01 03 612f62 01 6b 01 76")))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "empty key", msg: pingThen(txn1(4, cat(goodHead, hx("01 02 01 74 00")))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "non-minimal varint", msg: pingThen(txn1(4, cat(goodHead, hx("81 00"), putT))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "trailing bytes", msg: pingThen(txn1(4, cat(fxChain[3].Raw, hx("00")))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "position 0", msg: pingThen(txn1(0, fxChain[3].Raw)), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M19", name: "body shorter than a position", msg: pingThen(prototest.RawFrame(wire.TypeTxn1, 0, 0, hx("0000"))), code: wire.CodeBadTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M20", name: "TXN1 before SUBSCRIBE1", on: onL, msg: pingThen(txn1(1, fxChain[0].Raw)), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P},
		{class: "M20", name: "AUTH before HELLO", on: onHandshake, msg: prototest.AuthFor([]byte("test-secret"), wire.RoleDialer, nil, nil), code: wire.CodeUnexpectedFrame, frame: wire.TypeAuth, offset: 0},
		{class: "M20", name: "a second SUBSCRIBE1", on: onL, msg: pingThen(prototest.Frame(&wire.Subscribe1{Position: 0})), code: wire.CodeUnexpectedFrame, frame: wire.TypeSubscribe1, offset: P},
		{class: "M20", name: "an unsolicited PONG", msg: pingThen(prototest.Frame(&wire.Pong{ID: 1})), code: wire.CodeUnexpectedFrame, frame: wire.TypePong, offset: P},
		{class: "M20", name: "a second HELLO in the handshake", on: onHandshake, msg: cat(peerHelloFrame(nil), peerHelloFrame(nil)), code: wire.CodeUnexpectedFrame, frame: wire.TypeHello, offset: helloLen},
		{class: "M20", name: "PING before the handshake completed", on: onHandshake, msg: ping7, code: wire.CodeUnexpectedFrame, frame: wire.TypePing, offset: 0},
		{class: "M20", name: "PING after HELLO, before AUTH", on: onHandshake, msg: cat(peerHelloFrame(nil), ping7), code: wire.CodeUnexpectedFrame, frame: wire.TypePing, offset: helloLen},
		{class: "M20", name: "TXN1 in the handshake", on: onHandshake, msg: txn1(1, fxChain[0].Raw), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: 0},
		{class: "M20", name: "HELLO once established", msg: pingThen(peerHelloFrame(func(h *wire.Hello) { h.Role = wire.RoleListener })), code: wire.CodeUnexpectedFrame, frame: wire.TypeHello, offset: P},
		{class: "M20", name: "AUTH once established", msg: pingThen(prototest.AuthFor(nil, wire.RoleListener, nil, nil)), code: wire.CodeUnexpectedFrame, frame: wire.TypeAuth, offset: P},
		{class: "M20", name: "ACK1 before SUBSCRIBE1", msg: pingThen(ack1(1)), code: wire.CodeUnexpectedFrame, frame: wire.TypeAck1, offset: P},
		{class: "M20", name: "TXN1 before its origin's ORIGIN", msg: pingThen(txn1(4, ten[0].Raw)), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M20", name: "TXN1 of an origin named only after it", msg: pingThen(txn1(4, ten[0].Raw), originFrame(prototest.Origin(10), "ten")), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P,
			check: noEvent(protocol.EventOriginNamed)},
		{class: "M20", name: "TXN1 of the receiver's own origin", msg: pingThen(originFrame(prototest.Origin(1), "self"), txn1(4, own[0].Raw)), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P + len(originFrame(prototest.Origin(1), "self")),
			check: noEvent(protocol.EventTxn)},
		{class: "M20", name: "TXN1 of the receiver's own origin, unnamed", msg: pingThen(txn1(4, own[0].Raw)), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P},
		{class: "M20", name: "DATA on a version-1 connection", msg: pingThen(fxData(1, fxChain[3])), code: wire.CodeUnexpectedFrame, frame: wire.TypeData, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M20", name: "TXN1 on a version-2 connection", on: onV2D, msg: pingThen(txn1(4, fx2Chain[3].Raw)), code: wire.CodeUnexpectedFrame, frame: wire.TypeTxn1, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M20", name: "SUBSCRIBE1 on a version-2 connection", on: onV2L, msg: pingThen(prototest.Frame(&wire.Subscribe1{Position: 0})), code: wire.CodeUnexpectedFrame, frame: wire.TypeSubscribe1, offset: P,
			check: noEvent(protocol.EventSubscribed)},
		{class: "M20", name: "ACK1 on a version-2 connection", on: onV2L, msg: pingThen(ack1(1)), code: wire.CodeUnexpectedFrame, frame: wire.TypeAck1, offset: P},
		{class: "M20", name: "SUBSCRIBE on a version-1 connection", on: onL,
			msg:  pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 1, Origin: fxOrigin, Credit: 1 << 20}}})),
			code: wire.CodeUnexpectedFrame, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{class: "M20", name: "HEADS on a version-1 connection", msg: pingThen(prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: fxOrigin, Seq: 3, HLC: 1}}})),
			code: wire.CodeUnexpectedFrame, frame: wire.TypeHeads, offset: P, check: noEvent(protocol.EventHeads)},
		{class: "M20", name: "DATA of another origin on a channel", on: onV2D, msg: pingThen(fxData(1, fx2TenChain[0])), code: wire.CodeUnexpectedFrame, frame: wire.TypeData, offset: P,
			check: noEvent(protocol.EventTxn)},
		{class: "M20", name: "a head of an origin never named", on: onV2D, msg: pingThen(prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: prototest.Origin(11), Seq: 1, HLC: 1}}})),
			code: wire.CodeUnexpectedFrame, frame: wire.TypeHeads, offset: P, check: noEvent(protocol.EventHeads)},
		{class: "M21", name: "a TXN1 position equal to the last", msg: pingThen(txn1(3, fxChain[3].Raw)), code: wire.CodeOutOfOrder, frame: wire.TypeTxn1, offset: P},
		{class: "M21", name: "a TXN1 position below the last", msg: pingThen(txn1(2, fxChain[3].Raw)), code: wire.CodeOutOfOrder, frame: wire.TypeTxn1, offset: P},
		{class: "M21", name: "a TXN1 position going back within a message", msg: pingThen(txn1(9, fxChain[3].Raw), txn1(5, fxChain[4].Raw)),
			code: wire.CodeOutOfOrder, frame: wire.TypeTxn1, offset: P + len(txn1(9, fxChain[3].Raw))},
		{class: "M21", name: "an ACK1 going back", on: onL, msg: pingThen(ack1(2), ack1(1)), code: wire.CodeOutOfOrder, frame: wire.TypeAck1, offset: P + len(ack1(2)),
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				if evs[0].Kind != protocol.EventAcked || evs[0].Position != 2 {
					t.Fatalf("the ACK1 before the error did not take effect: %v", kinds(evs))
				}
			}},
		{class: "M21", name: "a CURSOR going back", on: onV2L, msg: pingThen(fxCursor(1, 3, fx2Chain[2].Hash), fxCursor(1, 2, fx2Chain[1].Hash)),
			code: wire.CodeOutOfOrder, frame: wire.TypeCursor, offset: P + len(fxCursor(1, 3, fx2Chain[2].Hash)),
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				if evs[0].Kind != protocol.EventCursor || evs[0].Origin != fxOrigin || evs[0].Seq != 3 || evs[0].Hash != fx2Chain[2].Hash {
					t.Fatalf("the CURSOR before the error did not take effect: %+v", evs[0])
				}
			}},
		{class: "M21", name: "a head going back", on: onV2D, msg: pingThen(prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: fxOrigin, Seq: 5, HLC: 9}}})),
			code: wire.CodeOutOfOrder, frame: wire.TypeHeads, offset: P, check: noEvent(protocol.EventHeads)},
		{class: "M22", name: "format 2", msg: pingThen(txn1(4, withFormat(2, fxChain[3].Raw))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P,
			check: errNames(fxOrigin, 4)},
		{class: "M22", name: "format 3", msg: pingThen(txn1(4, withFormat(3, fxChain[3].Raw))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P,
			check: errNames(fxOrigin, 4)},
		{class: "M22", name: "format 4", msg: pingThen(txn1(4, withFormat(4, fxChain[3].Raw))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P,
			check: errNames(fxOrigin, 4)},
		{class: "M22", name: "format 0xff of an unnamed origin", msg: pingThen(txn1(4, withFormat(0xff, ten[0].Raw))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P,
			check: errNames(prototest.Origin(10), 1)},
		{class: "M22", name: "op kind 3", msg: pingThen(txn1(4, cat(goodHead, hx("01 03 01 74 01 6b")))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M22", name: "op kind 0xff after a put", msg: pingThen(txn1(4, cat(goodHead, hx("02"), putT, hx("ff 01 74 01 6b")))), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: P},
		{class: "M22", name: "format 2 in the handshake", on: onHandshake, msg: txn1(1, withFormat(2, fxChain[0].Raw)), code: wire.CodeUnsupportedTxn, frame: wire.TypeTxn1, offset: 0},

		{class: "M22", name: "DATA of format 2", on: onV2D, msg: pingThen(prototest.RawFrame(wire.TypeData, 0, 1, cat(fx2Chain[3].Hash[:], withFormat(2, fx2Chain[3].Raw)))),
			code: wire.CodeUnsupportedTxn, frame: wire.TypeData, offset: P, check: errNames(fxOrigin, 4)},
		{class: "M22", name: "DATA of format 3", on: onV2D, msg: pingThen(prototest.RawFrame(wire.TypeData, 0, 1, cat(fx2Chain[3].Hash[:], withFormat(3, fx2Chain[3].Raw)))),
			code: wire.CodeUnsupportedTxn, frame: wire.TypeData, offset: P, check: errNames(fxOrigin, 4)},
		{class: "M19", name: "DATA body shorter than its hash", on: onV2D, msg: pingThen(prototest.RawFrame(wire.TypeData, 0, 1, make([]byte, 31))), code: wire.CodeBadTxn, frame: wire.TypeData, offset: P},
		{class: "M19", name: "DATA of seq 0", on: onV2D, msg: pingThen(prototest.RawFrame(wire.TypeData, 0, 1, cat(fx2Chain[3].Hash[:], txnHead(0, wire.Hash{}), hx("01"), putT))),
			code: wire.CodeBadTxn, frame: wire.TypeData, offset: P},
		{class: "M23", name: "DATA past its channel's limit", on: onV2D, limits: fxWindows(3*fx2Size+fx2Size/2, 8*fx2Size),
			msg: pingThen(fxData(1, fx2Chain[3])), code: wire.CodeCreditOverrun, frame: wire.TypeData, offset: P,
			check: fxOverrun("channel 1", 3*fx2Size+fx2Size/2, 4*fx2Size)},
		{class: "M23", name: "DATA past its channel's limit, a frame after one that fits", on: onV2D, limits: fxWindows(4*fx2Size+fx2Size/2, 8*fx2Size),
			msg: pingThen(fxData(1, fx2Chain[3]), fxData(1, fx2Chain[4])), code: wire.CodeCreditOverrun, frame: wire.TypeData, offset: P + fx2Size,
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				fxOverrun("channel 1", 4*fx2Size+fx2Size/2, 5*fx2Size)(t, s, evs)
				if evs[0].Kind != protocol.EventTxn || evs[0].Txn.Seq != 4 {
					t.Fatalf("the DATA within the limit was not applied first: %v", kinds(evs))
				}
			}},
		{class: "M23", name: "DATA past the connection's limit", on: onV2D, limits: fxWindows(3*fx2Size+fx2Size/2, 3*fx2Size+fx2Size/2),
			msg: pingThen(fxData(2, fx2TenChain[0])), code: wire.CodeCreditOverrun, frame: wire.TypeData, offset: P,
			check: fxOverrun("connection", 3*fx2Size+fx2Size/2, 4*fx2Size)},
		{class: "M24", name: "SUBSCRIBE with channels out of order", on: onV2L,
			msg: pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{
				{Channel: 4, Origin: prototest.Origin(11), Credit: 1 << 20}, {Channel: 3, Origin: prototest.Origin(12), Credit: 1 << 20}}})),
			code: wire.CodeBadField, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{class: "M24", name: "a CURSOR at seq 0", on: onV2L, msg: pingThen(fxCursor(1, 0, wire.Hash{})), code: wire.CodeBadField, frame: wire.TypeCursor, offset: P,
			check: noEvent(protocol.EventCursor)},
		{class: "M24", name: "HEADS with an origin both advertised and withdrawn", on: onV2D,
			msg:  pingThen(prototest.Frame(&wire.Heads{Heads: []wire.Head{{Origin: fxOrigin, Seq: 7, HLC: 7}}, Withdrawn: []wire.OriginID{fxOrigin}})),
			code: wire.CodeBadField, frame: wire.TypeHeads, offset: P, check: noEvent(protocol.EventHeads)},
		{class: "M24", name: "DIVERGENCE side 2", on: onV2D, msg: pingThen(prototest.Frame(&wire.Divergence{Channel: 1, Seq: 3, Hash: fx2Chain[2].Hash, Side: 2})),
			code: wire.CodeBadField, frame: wire.TypeDivergence, offset: P, check: noEvent(protocol.EventDivergence)},
		{class: "M24", name: "DIVERGENCE side 2 to the sender", on: onV2L, msg: pingThen(prototest.Frame(&wire.Divergence{Channel: 1, Seq: 3, Hash: fx2Chain[2].Hash, Side: 2})),
			code: wire.CodeBadField, frame: wire.TypeDivergence, offset: P, check: noEvent(protocol.EventDivergence)},
		{class: "M24", name: "RESEND from 0", on: onV2L, msg: pingThen(prototest.RawFrame(wire.TypeResend, 0, 0, hx("a2 01 01 02 00"))), code: wire.CodeBadField, frame: wire.TypeResend, offset: P},
		{class: "M20", name: "REQUEST on a version-2 connection", on: onV2D,
			msg:  pingThen(prototest.Frame(&wire.Request{ID: 1, Target: "a", Path: []string{"b"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "map"})),
			code: wire.CodeUnexpectedFrame, frame: wire.TypeRequest, offset: P, check: noEvent(protocol.EventRequest)},
		{class: "M27", name: "MEMBERS out of order", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Members{Entries: []wire.Member{{Name: "b", MaxVersion: 4, Stamp: 1}, {Name: "a", MaxVersion: 4, Stamp: 1}}})),
			code: wire.CodeBadField, frame: wire.TypeMembers, offset: P, check: noEvent(protocol.EventMembers)},
		{class: "M27", name: "a REQUEST id not above the last", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Request{ID: 1, Target: "a", Path: []string{"b"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "map"})),
			code: wire.CodeBadField, frame: wire.TypeRequest, offset: P, check: noEvent(protocol.EventRequest)},
		{class: "M27", name: "a REQUEST whose path does not end at its sender", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Request{ID: 2, Target: "a", Path: []string{"b", "c"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "map"})),
			code: wire.CodeBadField, frame: wire.TypeRequest, offset: P, check: noEvent(protocol.EventRequest)},
		{class: "M27", name: "a REQUEST of timeout 0", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Request{ID: 2, Target: "a", Path: []string{"b"}, Scope: wire.ScopeRead, Kind: "map"})),
			code: wire.CodeBadField, frame: wire.TypeRequest, offset: P, check: noEvent(protocol.EventRequest)},
		{class: "M27", name: "a RESPONSE to a request never sent", on: onV4D, msg: pingThen(prototest.Frame(&wire.Response{ID: 2})),
			code: wire.CodeBadField, frame: wire.TypeResponse, offset: P, check: noEvent(protocol.EventResponse)},
		{class: "M27", name: "a SKIP from 3 to 2", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Skip{Channel: 1, From: 3, To: 2, Prev: hashOf(1), Hash: hashOf(2), HLC: 1})),
			code: wire.CodeBadField, frame: wire.TypeSkip, offset: P, check: noEvent(protocol.EventSkip)},
		{class: "M27", name: "a SKIP of 65 tables", on: onV4D,
			msg:  pingThen(prototest.Frame(&wire.Skip{Channel: 1, From: 1, To: 2, Hash: hashOf(2), HLC: 1, Tables: skipTables(wire.MaxSkipTables + 1)})),
			code: wire.CodeBadField, frame: wire.TypeSkip, offset: P, check: noEvent(protocol.EventSkip)},
		{class: "M27", name: "a SKIP of tables out of order", on: onV4D,
			msg: pingThen(prototest.Frame(&wire.Skip{Channel: 1, From: 1, To: 2, Hash: hashOf(2), HLC: 1,
				Tables: [][]byte{[]byte("b"), []byte("a")}})),
			code: wire.CodeBadField, frame: wire.TypeSkip, offset: P, check: noEvent(protocol.EventSkip)},
		{class: "M27", name: "a HOLDS of origins out of order", on: onV4D,
			msg: pingThen(prototest.Frame(&wire.Holds{Channel: 1, Table: []byte("t"),
				Seqs: []wire.OriginSeq{{Origin: wire.OriginID{2}, Seq: 1}, {Origin: wire.OriginID{1}, Seq: 1}}})),
			code: wire.CodeBadField, frame: wire.TypeHolds, offset: P, check: noEvent(protocol.EventCopyHolds)},
		{class: "M27", name: "a stamp with no time", on: onV4D,
			msg:  pingThen(prototest.RawFrame(wire.TypePing, 0, 0, hx("a2 01 08 02 83 00 00 00"))),
			code: wire.CodeBadField, frame: wire.TypePing, offset: P},
		{class: "M27", name: "a stamp that holds with no echo", on: onV4D,
			msg:  pingThen(prototest.RawFrame(wire.TypeCredit, 0, 0, hx("a2 01 81 82 00 1b 0000010000000000 02 83 05 00 01"))),
			code: wire.CodeBadField, frame: wire.TypeCredit, offset: P},
		{class: "M16", name: "a PONG stamp that is not an array of three", on: onV4D,
			msg:  pingThen(prototest.RawFrame(wire.TypePong, 0, 0, hx("a2 01 07 03 82 05 00"))),
			code: wire.CodeBadCBOR, frame: wire.TypePong, offset: P},
		{class: "M20", name: "HOLDS on a version-2 connection", on: onV2D,
			msg:  pingThen(prototest.Frame(&wire.Holds{Channel: 1, Table: []byte("t")})),
			code: wire.CodeUnexpectedFrame, frame: wire.TypeHolds, offset: P, check: noEvent(protocol.EventCopyHolds)},

		// Other errors caused by input.
		{name: "a SUBSCRIBE opening more channels than MaxChannels", on: onV2L, llim: protocol.Limits{MaxChannels: 2},
			msg:  pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 3, Origin: prototest.Origin(11), Credit: 1 << 20}}})),
			code: wire.CodeTooManyChannels, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{name: "a SUBSCRIBE after an UNSUBSCRIBE within MaxChannels, then one past it", on: onV2L, llim: protocol.Limits{MaxChannels: 2},
			msg: pingThen(prototest.Frame(&wire.Unsubscribe{Channels: []uint32{2}}),
				prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 3, Origin: prototest.Origin(11), Credit: 1 << 20}}}),
				prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 4, Origin: prototest.Origin(12), Credit: 1 << 20}}})),
			code: wire.CodeTooManyChannels, frame: wire.TypeSubscribe,
			offset: P + len(prototest.Frame(&wire.Unsubscribe{Channels: []uint32{2}})) +
				len(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 3, Origin: prototest.Origin(11), Credit: 1 << 20}}})),
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				if len(evs) != 3 || evs[0].Kind != protocol.EventUnsubscribed || evs[0].Origin != fxTen ||
					evs[1].Kind != protocol.EventSubscribed || evs[1].Origin != prototest.Origin(11) {
					t.Fatalf("events %v: want channel 2 closed and channel 3 opened first", kinds(evs))
				}
			}},
		{name: "a SUBSCRIBE of a channel not above the last opened", on: onV2L,
			msg:  pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 2, Origin: prototest.Origin(11), Credit: 1 << 20}}})),
			code: wire.CodeBadChannel, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{name: "a SUBSCRIBE of an origin subscribed already", on: onV2L,
			msg:  pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 3, Origin: fxOrigin, Credit: 1 << 20}}})),
			code: wire.CodeBadField, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{name: "a SUBSCRIBE of the subscriber's own origin", on: onV2L,
			msg:  pingThen(prototest.Frame(&wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 3, Origin: prototest.Origin(1), Credit: 1 << 20}}})),
			code: wire.CodeBadField, frame: wire.TypeSubscribe, offset: P, check: noEvent(protocol.EventSubscribed)},
		{name: "a CREDIT for a channel never opened", on: onV2L, msg: pingThen(prototest.Frame(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: 1 << 40}, {Channel: 3, Limit: 1 << 40}}})),
			code: wire.CodeBadChannel, frame: wire.TypeCredit, offset: P},
		{name: "an UNSUBSCRIBE of a channel never opened", on: onV2L, msg: pingThen(prototest.Frame(&wire.Unsubscribe{Channels: []uint32{1, 3}})),
			code: wire.CodeBadChannel, frame: wire.TypeUnsubscribe, offset: P},
		{name: "a CURSOR beyond what was sent", on: onV2L, msg: pingThen(fxCursor(1, 4, fx2Chain[3].Hash)), code: wire.CodeBadField, frame: wire.TypeCursor, offset: P,
			check: noEvent(protocol.EventCursor)},
		{name: "a CURSOR on a channel never opened", on: onV2L, msg: pingThen(fxCursor(3, 1, fx2Chain[0].Hash)), code: wire.CodeBadChannel, frame: wire.TypeCursor, offset: P},
		{name: "a RESEND from beyond one past what was sent", on: onV2L, msg: pingThen(prototest.Frame(&wire.Resend{Channel: 1, From: 5})), code: wire.CodeBadField, frame: wire.TypeResend, offset: P,
			check: noEvent(protocol.EventResend)},
		{name: "a DIVERGENCE of the sender about a channel never opened", on: onV2D,
			msg:  pingThen(prototest.Frame(&wire.Divergence{Channel: 3, Side: wire.SideSender})),
			code: wire.CodeBadChannel, frame: wire.TypeDivergence, offset: P, check: noEvent(protocol.EventDivergence)},
		{name: "no common version with this build", on: onHandshake, cfg: func(c *protocol.Config) { c.MaxVersion = 0 },
			msg: peerHelloFrame(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 5, 6 }), code: wire.CodeUnsupportedVersion, frame: wire.TypeHello, offset: 0},
		{name: "ACK1 beyond the last position sent", on: onL, msg: pingThen(ack1(4)), code: wire.CodeBadField, frame: wire.TypeAck1, offset: P},
		{name: "a txn whose prev hash is wrong", msg: pingThen(txn1(4, fxOther[3].Raw)), code: wire.CodeDivergence, frame: wire.TypeTxn1, offset: P,
			check: countIs("divergence", func(s protocol.Stats) uint64 { return s.Divergences }, protocol.EventDivergence, 4)},
		{name: "a different txn at the applied seq", msg: pingThen(txn1(4, fxOther[2].Raw)), code: wire.CodeDivergence, frame: wire.TypeTxn1, offset: P,
			check: countIs("divergence", func(s protocol.Stats) uint64 { return s.Divergences }, protocol.EventDivergence, 3)},
		{name: "a gap", msg: pingThen(txn1(4, fxChain[4].Raw)), code: wire.CodeGapDetected, frame: wire.TypeTxn1, offset: P,
			check: countIs("gap", func(s protocol.Stats) uint64 { return s.Gaps }, protocol.EventGap, 4)},
		{name: "a first entry past seq 1 of a newly named origin", msg: pingThen(originFrame(prototest.Origin(10), "ten"), txn1(4, ten[1].Raw)),
			code: wire.CodeGapDetected, frame: wire.TypeTxn1, offset: P + len(originFrame(prototest.Origin(10), "ten"))},
		{name: "an ORIGIN past MaxOrigins", limits: protocol.Limits{MaxOrigins: 1}, msg: pingThen(originFrame(prototest.Origin(10), "ten")),
			code: wire.CodeTooManyOrigins, frame: wire.TypeOrigin, offset: P, check: noEvent(protocol.EventOriginNamed)},
		{name: "a renaming ORIGIN within MaxOrigins, then a new one past it", limits: protocol.Limits{MaxOrigins: 1},
			msg:  pingThen(originFrame(fxOrigin, "renamed"), originFrame(prototest.Origin(10), "ten")),
			code: wire.CodeTooManyOrigins, frame: wire.TypeOrigin, offset: P + len(originFrame(fxOrigin, "renamed")),
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				if len(evs) != 2 || evs[0].Kind != protocol.EventOriginNamed || evs[0].Origin != fxOrigin || evs[0].Name != "renamed" {
					t.Fatalf("events %+v: want the renaming ORIGIN to take effect", evs)
				}
			}},
		{name: "the third origin's ORIGIN against MaxOrigins 2", limits: protocol.Limits{MaxOrigins: 2},
			msg:  pingThen(originFrame(prototest.Origin(10), "ten"), txn1(4, ten[0].Raw), originFrame(prototest.Origin(11), "eleven")),
			code: wire.CodeTooManyOrigins, frame: wire.TypeOrigin, offset: P + len(originFrame(prototest.Origin(10), "ten")) + len(txn1(4, ten[0].Raw)),
			check: func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
				if len(evs) != 3 || evs[1].Kind != protocol.EventTxn || evs[1].Txn.Origin != prototest.Origin(10) {
					t.Fatalf("events %v: want origin 10 named and its entry applied first", kinds(evs))
				}
			}},
		{name: "input while reads are paused", limits: protocol.Limits{MaxUnackedBytes: 1}, msg: ping7, code: wire.CodeReceiveBufferFull, offset: wire.NoOffset},
		{name: "equal roles", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.Role = wire.RoleListener }), code: wire.CodeBadField, frame: wire.TypeHello, offset: 0},
		{name: "the peer has our origin id", on: onHandshake, msgFn: helloThenAuth(selfHello, "test-secret"), code: wire.CodeSelfConnect, frame: wire.TypeAuth, offset: len(helloFrame(selfHello)),
			sends: authThenClose},
		{name: "the peer has our origin id and a wrong MAC", on: onHandshake, msgFn: helloThenAuth(selfHello, "wrong"), code: wire.CodeAuthFailed, frame: wire.TypeAuth, offset: len(helloFrame(selfHello)),
			sends: authThenClose},
		{name: "the peer has our origin id and an unexpected name", on: onHandshake, cfg: func(c *protocol.Config) { c.ExpectedPeer = "q" }, msgFn: helloThenAuth(selfHello, "test-secret"),
			code: wire.CodeSelfConnect, frame: wire.TypeAuth, offset: len(helloFrame(selfHello)), sends: authThenClose},
		// The frame and offset of unsupported-version are checked by TestUnsupportedVersionNamesHello.
		{name: "no common version", on: onHandshake, msg: peerHelloFrame(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 2, 2 }), code: wire.CodeUnsupportedVersion, offset: anyOffset},
		{name: "a wrong MAC", on: onHandshake, msgFn: helloThenAuth(peerHello(nil), "wrong"), code: wire.CodeAuthFailed, frame: wire.TypeAuth, offset: helloLen, sends: authThenClose},
		{name: "an unexpected peer name", on: onHandshake, cfg: func(c *protocol.Config) { c.ExpectedPeer = "q" }, msgFn: helloThenAuth(peerHello(nil), "test-secret"),
			code: wire.CodePeerNameMismatch, frame: wire.TypeAuth, offset: helloLen, sends: authThenClose},
	}
}

// fxCursor is a CURSOR frame for one channel.
func fxCursor(ch uint32, seq uint64, h wire.Hash) []byte {
	return prototest.Frame(&wire.Cursor{Entries: []wire.CursorEntry{{Channel: ch, Seq: seq, Hash: h}}})
}

// fxWindows are version-2 receive windows of the given sizes, with the smallest frame
// limits so that windows of a few fx2 frames are allowed.
func fxWindows(channel, session int) protocol.Limits {
	return protocol.Limits{MaxFrameBody: wire.MinMaxFrame, MaxMessage: wire.MinMaxMessage, MaxChannelBuffer: channel, MaxSessionBuffer: session}
}

// fxOverrun checks a credit-overrun: it names the window (channel n or the connection), the
// granted limit and the offset the DATA would have reached, and nothing was applied.
func fxOverrun(window string, limit, offset int) inputCheck {
	return func(t *testing.T, s *protocol.Session, evs []protocol.Event) {
		m := s.Err().Message
		if !strings.HasPrefix(m, window+":") || !strings.Contains(m, "offset "+strconv.Itoa(offset)) || !strings.Contains(m, "granted "+strconv.Itoa(limit)) {
			t.Fatalf("%q: want the %s's overrun of %d at offset %d", m, window, limit, offset)
		}
		if st := s.Stats(); st.TxnsReceived != uint64(3+slices.IndexFunc(evs, func(e protocol.Event) bool { return e.Kind == protocol.EventClosed })) {
			t.Fatalf("%d txns received: the overrunning DATA was counted", st.TxnsReceived)
		}
	}
}

// closingCase is a command or timer that closes the session and tells the peer.
type closingCase struct {
	name string
	code wire.Code
	// run prepares a session and returns it with the action that closes it; it gives the
	// session any message through in.
	run func(t *testing.T, in *fed) (*protocol.Session, func())
}

// closingCases is TestClosingCommands' table.
func closingCases() []closingCase {
	return []closingCase{
		{"handshake timeout while handshaking", wire.CodeHandshakeTimeout, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			s, _ := handshakeTarget(t, nil)
			if dl := s.NextDeadline(); !dl.Equal(prototest.Epoch.Add(protocol.DefaultHandshakeTimeout)) {
				t.Fatalf("deadline %v", dl)
			}
			must(t, s.Tick(prototest.Epoch.Add(protocol.DefaultHandshakeTimeout-time.Nanosecond)))
			if s.State() != protocol.StateHandshaking {
				t.Fatalf("state %v before the timeout", s.State())
			}
			return s, func() { must(t, s.Tick(prototest.Epoch.Add(protocol.DefaultHandshakeTimeout))) }
		}},
		{"handshake timeout while authenticating", wire.CodeHandshakeTimeout, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			s, _ := handshakeTarget(t, func(c *protocol.Config) { c.Limits.HandshakeTimeout = 3 * time.Second })
			must(t, in.receive(s, prototest.Epoch.Add(2*time.Second), helloFrame(peerHello(nil))))
			if s.State() != protocol.StateAuthenticating {
				t.Fatalf("state %v", s.State())
			}
			// Input does not extend the handshake deadline.
			return s, func() { must(t, s.Tick(prototest.Epoch.Add(3*time.Second))) }
		}},
		{"liveness timeout", wire.CodeLivenessTimeout, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			p := defaultPair(t)
			s := p.D.S
			last := p.Now.Add(2 * time.Second)
			must(t, in.receive(s, last, ping7)) // any frame counts as a byte received
			must(t, s.Tick(last.Add(protocol.DefaultLivenessTimeout-time.Nanosecond)))
			if s.State() != protocol.StateEstablished || !s.Connected(last.Add(protocol.DefaultLivenessTimeout-time.Nanosecond)) {
				t.Fatalf("closed before the timeout: %v", s.Err())
			}
			if s.Connected(last.Add(protocol.DefaultLivenessTimeout)) {
				t.Fatal("connected at the timeout")
			}
			return s, func() { must(t, s.Tick(last.Add(protocol.DefaultLivenessTimeout))) }
		}},
		{"orderly close", wire.CodeGoingAway, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			p := defaultPair(t)
			return p.L.S, func() { must(t, p.L.S.Close(wire.CodeGoingAway, "shutting down")) }
		}},
		{"close during the handshake", wire.CodeGoingAway, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			s, _ := handshakeTarget(t, nil)
			return s, func() { must(t, s.Close(wire.CodeGoingAway, "")) }
		}},
		{"close with another wire code", wire.CodeTooManyOrigins, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			p := defaultPair(t)
			return p.D.S, func() { must(t, p.D.S.Close(wire.CodeTooManyOrigins, "store full")) }
		}},
		{"close with invalid UTF-8 in the message", wire.CodeGoingAway, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			p := defaultPair(t)
			return p.D.S, func() { must(t, p.D.S.Close(wire.CodeGoingAway, "bye \xff\xfe")) }
		}},
		{"liveness timeout after reads resumed", wire.CodeLivenessTimeout, func(t *testing.T, in *fed) (*protocol.Session, func()) {
			p := fixture(t, protocol.Limits{MaxUnackedBytes: 1})
			s := p.D.S
			if !s.ReadPaused() {
				t.Fatal("not paused")
			}
			late := p.Now.Add(time.Minute)
			must(t, s.Tick(late)) // paused: silence is this side's own
			if s.State() != protocol.StateEstablished {
				t.Fatalf("closed while paused: %v", s.Err())
			}
			must(t, s.V1().Ack(3))
			if !s.NextDeadline().Before(late.Add(time.Nanosecond)) {
				t.Fatalf("no Tick due at once after resuming: deadline %v", s.NextDeadline())
			}
			must(t, s.Tick(late)) // restarts the liveness clock
			must(t, s.Tick(late.Add(protocol.DefaultLivenessTimeout-time.Nanosecond)))
			if s.State() != protocol.StateEstablished {
				t.Fatalf("closed before the timeout: %v", s.Err())
			}
			return s, func() { must(t, s.Tick(late.Add(protocol.DefaultLivenessTimeout))) }
		}},
	}
}

// refusedCase is a command the session refuses: an error value, nothing sent, nothing
// changed.
type refusedCase struct {
	name string
	code wire.Code
	run  func(t *testing.T, in *fed) (*protocol.Session, func() error)
}

// closedSession is the dialer of a defaultPair closed by its own Close, its output taken:
// the session of refusedCases' commands on a closed session.
func closedSession(t *testing.T) *protocol.Session {
	p := defaultPair(t)
	must(t, p.D.S.Close(wire.CodeGoingAway, ""))
	p.D.S.Ready()
	return p.D.S
}

// refusedCases is TestRefusedCommands' table.
func refusedCases() []refusedCase {
	o := prototest.Origin(20)
	h := fxChain[0].Hash
	return []refusedCase{
		{"Offer while the send buffer is full", wire.CodeSendBufferFull, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{MaxSendBuffer: 1})
			must(t, p.L.S.V1().Offer(1, fxChain[0].Raw)) // an empty buffer always takes one frame
			if p.L.S.SendBudget() != 0 {
				t.Fatalf("budget %d", p.L.S.SendBudget())
			}
			return p.L.S, func() error { return p.L.S.V1().Offer(2, fxChain[1].Raw) }
		}},
		{"Offer of a frame over the peer's 64 KiB limits", wire.CodeFrameTooLarge, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{MaxMessage: 64 << 10, MaxFrameBody: 64<<10 - wire.HeaderSize}, protocol.Limits{})
			big := prototest.Chain(fxOrigin, 1, 1, 64<<10)[0]
			return p.L.S, func() error { return p.L.S.V1().Offer(1, big.Raw) }
		}},
		{"Offer of a TXN1 body one byte over the peer's max frame body", wire.CodeFrameTooLarge, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := streaming(t, protocol.Limits{MaxFrameBody: 1024}, protocol.Limits{})
			e := entryOfBody(fxOrigin, 1025)
			must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
			return p.L.S, func() error { return p.L.S.V1().Offer(1, e.Raw) }
		}},
		{"Offer of an origin without a name", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := streaming(t, protocol.Limits{}, protocol.Limits{})
			must(t, p.L.S.SetOriginName(prototest.Origin(20), "twenty")) // another origin's name does not do
			return p.L.S, func() error { return p.L.S.V1().Offer(1, fxChain[0].Raw) }
		}},
		{"Subscribe with a vector over MaxOrigins", wire.CodeTooManyOrigins, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
			dc.Limits.MaxOrigins = 1
			p := established(t, dc, prototest.ConfigV1(wire.RoleListener, "b", 2))
			vec := []vector.Entry{{Origin: fxOrigin, Seq: 1, Hash: h}, {Origin: o}}
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, vec) }
		}},
		{"Observe of an origin over MaxOrigins", wire.CodeTooManyOrigins, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			dc := prototest.ConfigV1(wire.RoleDialer, "a", 1)
			dc.Limits.MaxOrigins = 1
			p := established(t, dc, prototest.ConfigV1(wire.RoleListener, "b", 2))
			must(t, p.D.S.V1().Observe(vector.Entry{Origin: fxOrigin, Seq: 1, Hash: h}))
			must(t, p.D.S.V1().Observe(vector.Entry{Origin: fxOrigin, Seq: 2, Hash: fxChain[1].Hash})) // a known origin is fine
			return p.D.S, func() error { return p.D.S.V1().Observe(vector.Entry{Origin: o}) }
		}},
		{"SetOriginName of an origin over MaxOrigins", wire.CodeTooManyOrigins, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			lc := prototest.ConfigV1(wire.RoleListener, "b", 2)
			lc.Limits.MaxOrigins = 1
			p := established(t, prototest.ConfigV1(wire.RoleDialer, "a", 1), lc)
			must(t, p.L.S.SetOriginName(fxOrigin, "nine"))
			must(t, p.L.S.SetOriginName(fxOrigin, "renamed"))
			return p.L.S, func() error { return p.L.S.SetOriginName(o, "twenty") }
		}},
		{"Offer on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V1().Offer(1, fxChain[0].Raw) }
		}},
		{"Ack on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V1().Ack(1) }
		}},
		{"Subscribe on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V1().Subscribe(0, nil) }
		}},
		{"Observe on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V1().Observe(vector.Entry{Origin: o}) }
		}},
		{"Receive on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return in.receive(s, prototest.Epoch, ping7) }
		}},
		{"Close on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.Close(wire.CodeGoingAway, "") }
		}},
		{"SetOriginName on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.SetOriginName(o, "twenty") }
		}},
		{"Start twice", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, _ := handshakeTarget(t, nil)
			return s, func() error { return s.Start(prototest.Epoch, prototest.Nonce(3)) }
		}},
		{"Receive before Start", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, err := protocol.New(prototest.ConfigV1(wire.RoleListener, "b", 2))
			must(t, err)
			return s, func() error { return in.receive(s, prototest.Epoch, helloFrame(peerHello(nil))) }
		}},
		{"Tick before Start", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, err := protocol.New(prototest.ConfigV1(wire.RoleListener, "b", 2))
			must(t, err)
			return s, func() error { return s.Tick(prototest.Epoch) }
		}},
		{"Subscribe during the handshake", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, _ := handshakeTarget(t, nil)
			return s, func() error { return s.V1().Subscribe(0, nil) }
		}},
		{"Offer during the handshake", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, _ := handshakeTarget(t, nil)
			return s, func() error { return s.V1().Offer(1, fxChain[0].Raw) }
		}},
		{"Ack during the handshake", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, _ := handshakeTarget(t, nil)
			return s, func() error { return s.V1().Ack(1) }
		}},
		{"Subscribe twice", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := streaming(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, nil) }
		}},
		{"Offer before the peer subscribed", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.L.S, func() error { return p.L.S.V1().Offer(1, fxChain[0].Raw) }
		}},
		{"Ack before Subscribe", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V1().Ack(1) }
		}},
		{"Close with a local code", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.Close(wire.CodeInvalidState, "") }
		}},
		{"Close with an undefined code", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.Close("no-such-code", "") }
		}},
		{"Offer at a position that does not advance", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{})
			must(t, p.L.S.V1().Offer(5, fxChain[0].Raw))
			return p.L.S, func() error { return p.L.S.V1().Offer(5, fxChain[1].Raw) }
		}},
		{"Offer of a transaction of an unknown format", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error {
				return p.L.S.V1().Offer(1, mutate(fxChain[0].Raw, func(b []byte) []byte { b[0] = 2; return b }))
			}
		}},
		{"Offer of an invalid transaction", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V1().Offer(1, fxChain[0].Raw[:40]) }
		}},
		{"Offer of the peer's own origin", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := streaming(t, protocol.Limits{}, protocol.Limits{})
			must(t, p.L.S.SetOriginName(prototest.Origin(1), "a"))
			own := prototest.Chain(prototest.Origin(1), 1, 1, 1)[0] // D's origin
			return p.L.S, func() error { return p.L.S.V1().Offer(1, own.Raw) }
		}},
		{"Ack beyond the last position received", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fixture(t, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V1().Ack(4) }
		}},
		{"Ack going back", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fixture(t, protocol.Limits{})
			must(t, p.D.S.V1().Ack(2))
			p.D.Drain()
			return p.D.S, func() error { return p.D.S.V1().Ack(1) }
		}},
		{"Subscribe with an all-zero origin", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, []vector.Entry{{Seq: 1, Hash: h}}) }
		}},
		{"Subscribe with a hash at seq 0", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, []vector.Entry{{Origin: o, Hash: h}}) }
		}},
		{"Subscribe without the hash of seq 1", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, []vector.Entry{{Origin: o, Seq: 1}}) }
		}},
		{"Subscribe with an origin twice", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error {
				return p.D.S.V1().Subscribe(0, []vector.Entry{{Origin: o}, {Origin: o, Seq: 1, Hash: h}})
			}
		}},
		{"Observe without a hash", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V1().Observe(vector.Entry{Origin: o, Seq: 3}) }
		}},
		{"SetOriginName with an invalid name", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.L.S, func() error { return p.L.S.SetOriginName(o, "a b") }
		}},
		{"SetOriginName of the all-zero origin", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.L.S, func() error { return p.L.S.SetOriginName(wire.OriginID{}, "zero") }
		}},

		// Version 2.
		{"SubscribeOrigins of one channel more than MaxChannels", wire.CodeTooManyChannels, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{MaxChannels: 2}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V2().Subscribe([]vector.Entry{{Origin: prototest.Origin(11)}}) }
		}},
		{"SubscribeOrigins of more origins than MaxChannels at once", wire.CodeTooManyChannels, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			dc := prototest.Config(wire.RoleDialer, "a", 1)
			dc.Limits.MaxChannels = 2
			p := established(t, dc, prototest.Config(wire.RoleListener, "b", 2))
			vec := []vector.Entry{{Origin: prototest.Origin(10)}, {Origin: prototest.Origin(11)}, {Origin: prototest.Origin(12)}}
			return p.D.S, func() error { return p.D.S.V2().Subscribe(vec) }
		}},
		{"SubscribeOrigins of more origins than MaxOrigins", wire.CodeTooManyOrigins, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			dc := prototest.Config(wire.RoleDialer, "a", 1)
			dc.Limits.MaxOrigins = 1
			p := established(t, dc, prototest.Config(wire.RoleListener, "b", 2))
			vec := []vector.Entry{{Origin: prototest.Origin(10)}, {Origin: prototest.Origin(11)}}
			return p.D.S, func() error { return p.D.S.V2().Subscribe(vec) }
		}},
		{"Send beyond its channel's credit", wire.CodeNoCredit, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			// Channel windows of 3.5 frames, a connection window of 10: three frames were
			// sent on channel 1, the fourth does not fit it.
			p := fxPairV2(t, fxWindows(3*fx2Size+fx2Size/2, 10*fx2Size), protocol.Limits{})
			if got := p.L.S.V2().Credit(fxOrigin); got != fx2Size/2 {
				t.Fatalf("credit %d, want %d", got, fx2Size/2)
			}
			return p.L.S, func() error { return p.L.S.V2().Send(fx2Chain[3].Raw) }
		}},
		{"Send beyond the connection's credit", wire.CodeNoCredit, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			// Channel 2 has all of its own window, but the connection's is used up by channel 1.
			p := fxPairV2(t, fxWindows(3*fx2Size+fx2Size/2, 3*fx2Size+fx2Size/2), protocol.Limits{})
			if got := p.L.S.V2().Credit(fxTen); got != fx2Size/2 {
				t.Fatalf("credit %d, want %d", got, fx2Size/2)
			}
			return p.L.S, func() error { return p.L.S.V2().Send(fx2TenChain[0].Raw) }
		}},
		{"Send of an origin the peer did not subscribe to", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			must(t, p.L.S.SetOriginName(prototest.Origin(11), "eleven"))
			return p.L.S, func() error { return p.L.S.V2().Send(prototest.Chain(prototest.Origin(11), 1, 1, 1)[0].Raw) }
		}},
		{"Send of a seq its channel does not need next", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V2().Send(fx2Chain[4].Raw) }
		}},
		{"Send of an invalid transaction", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V2().Send(fx2Chain[3].Raw[:60]) }
		}},
		{"Send on a version-1 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V2().Send(fxChain[0].Raw) }
		}},
		{"SubscribeOrigins on a version-1 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := defaultPair(t)
			return p.D.S, func() error { return p.D.S.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}) }
		}},
		{"AdvertiseHeads on a version-1 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := sending(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: fxOrigin, Seq: 1, HLC: 1}}) }
		}},
		{"Subscribe on a version-2 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V1().Subscribe(0, nil) }
		}},
		{"Offer on a version-2 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V1().Offer(4, fx2Chain[3].Raw) }
		}},
		{"Ack on a version-2 connection", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V1().Ack(1) }
		}},
		{"SubscribeOrigins of this node's own origin", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V2().Subscribe([]vector.Entry{{Origin: prototest.Origin(1)}}) }
		}},
		{"SubscribeOrigins of an origin subscribed already", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error {
				return p.D.S.V2().Subscribe([]vector.Entry{{Origin: prototest.Origin(11)}, {Origin: fxTen}})
			}
		}},
		{"AckOrigin beyond what was received", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V2().Ack(fxOrigin, 4) }
		}},
		{"AckOrigin of an origin without a channel", wire.CodeInvalidState, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.D.S, func() error { return p.D.S.V2().Ack(prototest.Origin(11), 1) }
		}},
		{"AdvertiseHeads of an origin without a name", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error {
				return p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: prototest.Origin(11), Seq: 1, HLC: 1}})
			}
		}},
		{"AdvertiseHeads going back", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			p := fxPairV2(t, protocol.Limits{}, protocol.Limits{})
			return p.L.S, func() error { return p.L.S.V2().AdvertiseHeads([]wire.Head{{Origin: fxOrigin, Seq: 5, HLC: 1}}) }
		}},
		{"Send on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V2().Send(fxChain[0].Raw) }
		}},
		{"SubscribeOrigins on a closed session", wire.CodeClosed, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s := closedSession(t)
			return s, func() error { return s.V2().Subscribe([]vector.Entry{{Origin: fxOrigin}}) }
		}},
		{"Start with an 8-byte nonce", wire.CodeBadArgument, func(t *testing.T, in *fed) (*protocol.Session, func() error) {
			s, err := protocol.New(prototest.ConfigV1(wire.RoleListener, "b", 2))
			must(t, err)
			return s, func() error { return s.Start(prototest.Epoch, make([]byte, 8)) }
		}},
	}
}

// codesElsewhere are codes produced outside this file's tables.
var codesElsewhere = map[wire.Code]string{
	wire.CodeUnknownCommand: "protocol/abi/driver_test.go TestUnknownCommand (a WASM ABI code)",
	// internal is a recovered panic in the core: no input or command produces it without a
	// defect, so no test can (abi.Driver turns a panic into it).
	wire.CodeInternal: "not producible without a core defect",
	// purged is the replica's answer to a peer below a log's floor, not a session's.
	wire.CodePurged: "protocol/replica/retention_test.go",
	// The copy's codes close a copy, not the session.
	wire.CodeBadChunk: "protocol/basecopy_test.go TestMalformedM25CopyChunks, TestCopyBadChunk",
	wire.CodeCopyBusy: "protocol/basecopy_test.go TestCopyAbort (a sender's answer)",
	// bad-range closes the session; its cases need an ask outstanding first.
	wire.CodeBadRange: "protocol/antientropy_test.go TestMalformedM26AntiEntropy",
	// clock-offset refuses a local write, which is the replica's, not a session's.
	wire.CodeClockOffset: "protocol/replica/clock_test.go TestClockRefusesWrites",
	// The storage codes refuse a local write on a degraded node: the replica's, not a session's.
	wire.CodeStorageFull:   "protocol/replica/storage_test.go TestStorageDegradedWrites",
	wire.CodeStorageFailed: "protocol/replica/storage_test.go TestStorageSyncFailure",
	// origin-rewound is the replica's: a peer's position shows an origin's log went back.
	wire.CodeOriginRewound: "protocol/replica/rewind_test.go",
	// The link codes are the replica's: it compares the two ends' LINKs, and its own
	// exclusions with the connection's version.
	wire.CodeLinkMismatch: "protocol/replica/links_test.go TestLinkMismatch",
	wire.CodeLinkNeedsV4:  "protocol/replica/links_test.go TestLinkNeedsV4",
	// The hub codes are the replica's: a hub decides whether it takes a leaf, a leaf whether
	// its link to the hub knows the role, and the hub whether a leaf entry fits its mark.
	wire.CodeNotAHub:          "protocol/replica/hub_test.go TestHubGateRefusals",
	wire.CodeTooManyLeaves:    "protocol/replica/hub_test.go TestHubGateRefusals",
	wire.CodeLeafIsMember:     "protocol/replica/hub_test.go TestHubGateRefusals",
	wire.CodeNoLeafWindow:     "protocol/replica/hub_test.go TestHubGateRefusals",
	wire.CodeNoLeafCapability: "protocol/replica/hub_test.go TestLeafNeedsLeafCapability",
	wire.CodeLeafRewound:      "protocol/replica/hub_test.go TestHubLeafDuplicatesAndRewind",
}

// hashOf is a chain hash for hand-made frames: n in every byte.
func hashOf(n byte) wire.Hash {
	var h wire.Hash
	for i := range h {
		h[i] = n
	}
	return h
}

// skipTables is n table names, ascending.
func skipTables(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte("t" + strconv.Itoa(1000+i))
	}
	return out
}
