package wire_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"plait/protocol/prototest"
	"plait/protocol/wire"
)

var hx = prototest.Hex // hand-written hex, spaces allowed

var cat = prototest.Cat

var canon = func() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// cb encodes v in Core Deterministic Encoding, for bodies a typed value cannot express.
func cb(v any) []byte {
	b, err := canon.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// raw builds one frame from its parts, without any check.
func raw(t wire.Type, flags uint8, channel uint32, body []byte) []byte {
	out := wire.AppendHeader(nil, wire.Header{Type: t, Flags: flags, Channel: channel, Length: uint32(len(body))})
	return append(out, body...)
}

func frame(b wire.Body) []byte {
	out, err := wire.AppendFrame(nil, 0, 0, b)
	if err != nil {
		panic(err)
	}
	return out
}

func body(b wire.Body) []byte {
	out, err := b.AppendBody(nil)
	if err != nil {
		panic(err)
	}
	return out
}

func decode(msg []byte) ([]wire.Decoded, *wire.Error) {
	return wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
}

var (
	originA = wire.OriginID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	nonce16 = hx("000102030405060708090a0b0c0d0e0f")
	// pingFrame is a valid 13-byte frame put before an offending one, so that the offending
	// frame's offset is not 0.
	pingFrame = frame(&wire.Ping{ID: 7})
)

func mac(b byte) wire.MAC {
	var m wire.MAC
	for i := range m {
		m[i] = b + byte(i)
	}
	return m
}

func sampleTxn() wire.Txn {
	return wire.Txn{Origin: originA, Seq: 7, HLC: wire.MakeHLC(1_800_000_000_123, 9), Prev: sha256.Sum256([]byte("six")),
		Ops: []wire.Op{
			{Kind: wire.OpPut, Table: []byte("users"), Key: []byte("k1"), Value: []byte("v1")},
			{Kind: wire.OpDelete, Table: []byte("users.archive_2"), Key: []byte("k0")},
			{Kind: wire.OpPut, Table: []byte("T-9"), Key: bytes.Repeat([]byte{0xff}, 200), Value: bytes.Repeat([]byte{1}, 300)},
		}}
}

type sample struct {
	name    string
	body    wire.Body
	channel uint32 // the header's channel: DATA names one (never 0), every other type uses 0
}

// sampleFrame encodes a sample with its channel.
func sampleFrame(s sample) []byte {
	out, err := wire.AppendFrame(nil, 0, s.channel, s.body)
	if err != nil {
		panic(err)
	}
	return out
}

var (
	originB = wire.OriginID{0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff}
	hash9   = sha256.Sum256([]byte("nine"))
)

func hash9String() string { return hex.EncodeToString(hash9[:]) }

// dataSample is a DATA body carrying sampleTxn with its real chain hash.
func dataSample() *wire.Data {
	tx := sampleTxn()
	enc, err := tx.Encode()
	if err != nil {
		panic(err)
	}
	return &wire.Data{Hash: sha256.Sum256(enc), Txn: tx}
}

func chunkSample() *wire.Chunk {
	return &wire.Chunk{Table: []byte("users"), Records: []wire.CopyRecord{
		{Key: []byte("a"), Value: []byte("1"), HLC: wire.MakeHLC(1_800_000_000_000, 1), Origin: originA},
		{Key: []byte("b"), Deleted: true, HLC: 5, Origin: originB},
		{Key: []byte("c"), Value: []byte{}, HLC: 1<<64 - 1, Origin: originA},
	}}
}

// samples holds representative values, at least one for every registered frame type.
func samples() []sample {
	return []sample{
		{name: "HELLO full", body: &wire.Hello{Role: wire.RoleListener, Name: "node-1.a_B", Origin: originA, MinVersion: 1, MaxVersion: 3,
			Caps: []string{"a.b", "x-1", "z"}, Nonce: bytes.Repeat([]byte{0xab}, 64), MaxMessage: 1 << 20, MaxFrame: 1<<20 - wire.HeaderSize}},
		{name: "HELLO with the smallest limits", body: &wire.Hello{Role: wire.RoleDialer, Name: "a", Origin: originA, MinVersion: 1, MaxVersion: 1,
			Nonce: nonce16, MaxMessage: wire.MinMaxMessage, MaxFrame: wire.MinMaxFrame}},
		{name: "HELLO minimal", body: &wire.Hello{Role: wire.RoleDialer, Name: "a", Origin: originA, MinVersion: 1, MaxVersion: 1, Nonce: nonce16}},
		{name: "AUTH", body: &wire.Auth{MAC: mac(0xa0)}},
		{name: "CLOSE", body: &wire.Close{Code: "unsupported-version", Class: "unsupported", Message: "no common protocol version: local 1..1, peer 3..5"}},
		{name: "CLOSE without message", body: &wire.Close{Code: "going-away", Class: "transient"}},
		{name: "PING", body: &wire.Ping{ID: 7}},
		{name: "PING large id", body: &wire.Ping{ID: 1<<64 - 1}},
		{name: "PING id 0", body: &wire.Ping{ID: 0}},
		{name: "PONG", body: &wire.Pong{ID: 1 << 40}},
		{name: "ORIGIN", body: &wire.Origin{Origin: originA, Name: "east-1"}},
		{name: "SUBSCRIBE1 from the beginning", body: &wire.Subscribe1{Position: 0}},
		{name: "SUBSCRIBE1", body: &wire.Subscribe1{Position: 41}},
		{name: "TXN1", body: &wire.Txn1{Position: 42, Txn: sampleTxn()}},
		{name: "ACK1", body: &wire.Ack1{Position: 1 << 33}},

		// Version 2.
		{name: "SUBSCRIBE of two origins", body: &wire.Subscribe{Entries: []wire.SubscribeEntry{
			{Channel: 1, Origin: originA, Seq: 0, Credit: 65536},
			{Channel: 2, Origin: originB, Seq: 9, Hash: hash9, Credit: 1 << 40}}}},
		{name: "SUBSCRIBE at a high channel with credit 0", body: &wire.Subscribe{Entries: []wire.SubscribeEntry{
			{Channel: 1<<32 - 1, Origin: originB, Seq: 1 << 50, Hash: hash9}}}},
		{name: "UNSUBSCRIBE", body: &wire.Unsubscribe{Channels: []uint32{2, 7, 1<<32 - 1}}},
		{name: "CURSOR", body: &wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 1, Hash: hash9}, {Channel: 3, Seq: 1 << 40, Hash: hash9}}}},
		{name: "DATA", body: dataSample(), channel: 1},
		{name: "DATA on the highest channel", body: dataSample(), channel: 1<<32 - 1},
		{name: "HEADS advertised and withdrawn", body: &wire.Heads{
			Heads:     []wire.Head{{Origin: originA, Seq: 1, HLC: wire.MakeHLC(1_800_000_000_000, 0)}},
			Withdrawn: []wire.OriginID{originB}}},
		{name: "HEADS advertised only", body: &wire.Heads{Heads: []wire.Head{{Origin: originA, Seq: 3, HLC: 0}, {Origin: originB, Seq: 1 << 62, HLC: 1<<64 - 1}}}},
		{name: "HEADS withdrawn only", body: &wire.Heads{Withdrawn: []wire.OriginID{originA, originB}}},
		{name: "HEADS with floors (version 3)", body: &wire.Heads{Heads: []wire.Head{{Origin: originA, Seq: 9, HLC: 7}},
			Floors: []wire.Floor{{Origin: originA, Seq: 4, Hash: hash9}, {Origin: originB, Seq: 1, Hash: hash9}}}},
		{name: "PURGED", body: &wire.Purged{Channel: 3, Seq: 4, Hash: hash9}},
		{name: "COPY from the first record", body: &wire.Copy{Channel: 2, Credit: 16 << 20}},
		{name: "COPY after a point", body: &wire.Copy{Channel: 9, Credit: 1, Table: []byte("t"), Key: []byte("k\x00")}},
		{name: "COPYBEGIN", body: &wire.CopyBegin{Channel: 2, Positions: []wire.CopyPosition{
			{Origin: originA, Seq: 7, Hash: hash9, HLC: wire.MakeHLC(1_800_000_000_000, 3)}, {Origin: originB, Seq: 1, Hash: hash9}},
			Tables: 3, Records: 1 << 20, Bytes: 1 << 30}},
		{name: "COPYBEGIN of an empty sender", body: &wire.CopyBegin{Channel: 2}},
		{name: "CHUNK", body: chunkSample(), channel: 2},
		{name: "COPYEND", body: &wire.CopyEnd{Channel: 2, Records: 1 << 20}},
		{name: "COPYEND of nothing", body: &wire.CopyEnd{Channel: 2}},
		{name: "COPYABORT by the sender", body: &wire.CopyAbort{Channel: 2, Side: wire.SideSender, Code: wire.CodeCopyBusy, Class: wire.ClassTransient, Message: "2 copies run"}},
		{name: "COPYABORT by the subscriber", body: &wire.CopyAbort{Channel: 2, Code: wire.CodeBadChunk, Class: wire.ClassProtocol}},
		{name: "RANGEDIGEST from the first record to the end", body: &wire.RangeDigest{Count: 3, Digest: hash9}},
		{name: "RANGEDIGEST between two points", body: &wire.RangeDigest{AfterTable: []byte("a"), AfterKey: []byte("k1"),
			ThroughTable: []byte("b"), ThroughKey: []byte("k\x00"), Count: wire.MaxRangeCount, Digest: hash9}},
		{name: "RANGERECORDS equal", body: &wire.RangeAnswer{Equal: true, Through: wire.RangePoint{Table: []byte("b"), Key: []byte("k")}}},
		{name: "RANGERECORDS of no record, to the end", body: &wire.RangeAnswer{}},
		{name: "RANGERECORDS", body: &wire.RangeAnswer{Through: wire.RangePoint{Table: []byte("users"), Key: []byte("k2")},
			Records: []wire.RangeRecord{
				{Table: []byte("a"), Key: []byte("x"), Value: []byte{}, HLC: 9, Origin: originB},
				{Table: []byte("users"), Key: []byte("k1"), Value: []byte("v"), HLC: wire.MakeHLC(1_800_000_000_000, 3), Origin: originA},
				{Table: []byte("users"), Key: []byte("k2"), Deleted: true, HLC: 1, Origin: originA}}}},
		{name: "CREDIT of the connection and a channel", body: &wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: 64 << 20}, {Channel: 1, Limit: 128 << 10}}}},
		{name: "CREDIT of a channel, limit 0", body: &wire.Credit{Entries: []wire.CreditEntry{{Channel: 5, Limit: 0}}}},
		{name: "RESEND", body: &wire.Resend{Channel: 1, From: 3}},
		{name: "DIVERGENCE reported by the subscriber", body: &wire.Divergence{Channel: 1, Seq: 1, Hash: hash9, Side: wire.SideSubscriber}},
		{name: "DIVERGENCE at seq 0 reported by the sender", body: &wire.Divergence{Channel: 4, Seq: 0, Side: wire.SideSender}},

		// Version 4.
		{name: "MAP", body: sampleMap()},
		{name: "MAP of the highest generation, published at 0", body: &wire.Map{Generation: wire.MaxGeneration,
			Document: []byte(`{"generation":9223372036854775807}`), Publisher: "b"}},
		{name: "MEMBERS", body: &wire.Members{Entries: []wire.Member{{Name: "a", MaxVersion: 4, Stamp: 9},
			{Name: "b", MaxVersion: 3, Stamp: 1 << 50}}}},
		{name: "REQUEST with a body", body: &wire.Request{ID: 1 << 40, Target: "c", Path: []string{"a", "b"}, TimeoutMS: wire.MaxRequestTimeout,
			Scope: wire.ScopeAdmin, Kind: "map-2", Body: []byte{0, 1}}},
		{name: "REQUEST without a body", body: &wire.Request{ID: 1, Target: "b", Path: []string{"a"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "map"}},
		{name: "RESPONSE with a body", body: &wire.Response{ID: 7, Body: []byte(`{"generation":3}`)}},
		{name: "RESPONSE with a code and a message", body: &wire.Response{ID: 1, Code: wire.CodeNoRoute, Message: "no route to c"}},
		{name: "RESPONSE of nothing", body: &wire.Response{ID: 2}},
		{name: "SKIP from seq 1, no table, generation 0", body: &wire.Skip{Channel: 1, From: 1, To: 1, Hash: hash9, HLC: 1}},
		{name: "SKIP of a long run with tables", body: &wire.Skip{Channel: 1<<32 - 1, From: 5, To: 1 << 50, Prev: hash9, Hash: hash9,
			HLC: wire.MakeHLC(1_800_000_000_000, 3), Tables: [][]byte{[]byte("a"), []byte("users")}, Generation: wire.MaxGeneration}},
		{name: "LINK of both ways, no table", body: &wire.Link{}},
		{name: "LINK receive only, two tables", body: &wire.Link{Mode: wire.LinkReceive, Tables: [][]byte{[]byte("a"), []byte("users")}}},
		{name: "HOLDS of a table held not at all", body: &wire.Holds{Channel: 1, Table: []byte("users")}},
		{name: "HOLDS of two origins", body: &wire.Holds{Channel: 1<<32 - 1, Table: []byte("users"),
			Seqs: []wire.OriginSeq{{Origin: originA, Seq: 1}, {Origin: originB, Seq: 1<<64 - 1}}}},
		{name: "HOLDS of one origin, since seq 7", body: &wire.Holds{Channel: 2, Table: []byte("users"),
			Seqs: []wire.OriginSeq{{Origin: originA, Seq: 5}}, Since: 7}},
		{name: "HOLDS of no origin, since the widest seq", body: &wire.Holds{Channel: 1, Table: []byte("t"), Since: 1<<64 - 1}},
		{name: "LEAFSTATE of nothing yet", body: &wire.LeafState{}},
		{name: "LEAFSTATE with a refusal", body: &wire.LeafState{Horizon: wire.MakeHLC(1_800_000_000_000, 0), Reoriginated: 9, HubSeq: 1 << 40,
			Core: 7, Refused: 2, LastRefused: 9, Reason: "too-old"}},
		{name: "QUIET, a connection's first and empty", body: &wire.Quiet{}},
		{name: "QUIET of two origins and one loud, stamped", body: &wire.Quiet{Quiet: []wire.OriginID{originA, originB},
			Loud: []wire.OriginID{{0xa0, 0xa1}}, Stamp: &wire.Stamp{Time: 1_767_225_600_000_000, Echo: 1_767_225_599_999_000, Held: 250}}},
		{name: "PING, stamped", body: &wire.Ping{ID: 3, Stamp: &wire.Stamp{Time: 1}}},
		{name: "CURSOR, stamped", body: &wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 2, Hash: hash9}}, Stamp: &wire.Stamp{Time: 5, Echo: 4, Held: 1}}},
	}
}

// sampleMap is a MAP of generation 3 whose document is canonical.
func sampleMap() *wire.Map {
	return &wire.Map{Generation: 3, Document: []byte(`{"generation":3,"nodes":[{"api":"http://10.0.0.1:7401","name":"a"}]}`),
		Publisher: "a", Published: uint64(wire.MakeHLC(1_800_000_000_000, 2))}
}

// TestFrameRoundTrip: every registered type encodes, decodes to an equal value and
// re-encodes to the same bytes.
func TestFrameRoundTrip(t *testing.T) {
	covered := map[wire.Type]bool{}
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			covered[s.body.FrameType()] = true
			enc := sampleFrame(s)
			frames, err := decode(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(frames) != 1 {
				t.Fatalf("%d frames", len(frames))
			}
			f := frames[0]
			want := wire.Header{Type: s.body.FrameType(), Channel: s.channel, Length: uint32(len(enc) - wire.HeaderSize)}
			if f.Header != want || f.Offset != 0 || !bytes.Equal(f.Body, enc[wire.HeaderSize:]) {
				t.Fatalf("frame %+v offset %d, want header %+v", f.Header, f.Offset, want)
			}
			if !reflect.DeepEqual(f.Value, s.body) {
				t.Fatalf("decoded %#v\nwant    %#v", f.Value, s.body)
			}
			re, rerr := wire.EncodeMessage(frames)
			if rerr != nil || !bytes.Equal(re, enc) {
				t.Fatalf("re-encoded %x (%v)\nwant %x", re, rerr, enc)
			}
			// The body alone decodes to the same value.
			v, derr := wire.DecodeBody(f.Frame)
			if derr != nil || !reflect.DeepEqual(v, s.body) {
				t.Fatalf("DecodeBody: %#v %v", v, derr)
			}
		})
	}
	for _, typ := range wire.Registered() {
		if !covered[typ] {
			t.Errorf("registered type %s (0x%02x) has no round-trip sample", typ, uint8(typ))
		}
		if got, ok := wire.TypeByName(typ.String()); !ok || got != typ {
			t.Errorf("TypeByName(%q) = %v, %v", typ.String(), got, ok)
		}
		if typ.Ignorable() {
			t.Errorf("registered type %s is ignorable; versions 1 and 2 define only critical types", typ)
		}
		// The registry's version column (SPEC "Frame registry", "since").
		want := uint64(0)
		switch {
		case typ >= wire.TypeSubscribe1 && typ <= wire.TypeAck1:
			want = 1
		case typ >= wire.TypeSubscribe && typ <= wire.TypeDivergence:
			want = 2
		case typ >= wire.TypePurged && typ <= wire.TypeCopyAbort, typ == wire.TypeRangeDigest, typ == wire.TypeRangeRecords:
			want = 3
		case typ >= wire.TypeMap && typ <= wire.TypeHolds, typ == wire.TypeLeafState, typ == wire.TypeQuiet:
			want = 4
		}
		if got := wire.Version(typ); got != want {
			t.Errorf("type %s belongs to version %d, SPEC's registry says %d", typ, got, want)
		}
	}
	// Exactly the registry of SPEC: 0x01..0x06, 0x10..0x12, 0x20..0x27, 0x30..0x35,
	// 0x40..0x41, 0x50..0x56, 0x5B and 0x5D.
	var want []wire.Type
	for _, r := range [][2]wire.Type{{0x01, 0x06}, {0x10, 0x12}, {0x20, 0x27}, {0x30, 0x35}, {0x40, 0x41}, {0x50, 0x56}, {0x5B, 0x5B}, {0x5D, 0x5D}} {
		for typ := r[0]; typ <= r[1]; typ++ {
			want = append(want, typ)
		}
	}
	if got := wire.Registered(); !reflect.DeepEqual(got, want) {
		t.Errorf("registered %v, want %v", got, want)
	}
}

// TestKnownBodyBytes pins the exact encoding of small bodies (Core Deterministic Encoding:
// shortest forms, sorted keys, required zero values kept, empty optional values omitted).
func TestKnownBodyBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		body wire.Body
		want string
	}{
		{"PING 7", &wire.Ping{ID: 7}, "a1 01 07"},
		{"PING 24", &wire.Ping{ID: 24}, "a1 01 18 18"},
		{"PONG 256", &wire.Pong{ID: 256}, "a1 01 19 0100"},
		{"SUBSCRIBE1 0 keeps its required zero", &wire.Subscribe1{Position: 0}, "a1 01 00"},
		{"ACK1 43", &wire.Ack1{Position: 43}, "a1 01 18 2b"},
		{"CLOSE omits the empty message", &wire.Close{Code: "a", Class: "b"}, "a2 01 61 61 02 61 62"},
		{"HELLO omits empty caps and max message", &wire.Hello{Role: wire.RoleListener, Name: "a", Origin: originA,
			MinVersion: 1, MaxVersion: 1, Nonce: nonce16},
			"a6 01 01 02 61 61 03 50 00112233445566778899aabbccddeeff 04 01 05 01 07 50 000102030405060708090a0b0c0d0e0f"},
		{"HELLO with max message (8) and max frame body (9)", &wire.Hello{Role: wire.RoleListener, Name: "a", Origin: originA,
			MinVersion: 1, MaxVersion: 1, Nonce: nonce16, MaxMessage: 65536, MaxFrame: 65526},
			"a8 01 01 02 61 61 03 50 00112233445566778899aabbccddeeff 04 01 05 01 07 50 000102030405060708090a0b0c0d0e0f" +
				"08 1a 00010000 09 19 fff6"},
		{"TXN1", &wire.Txn1{Position: 1, Txn: wire.Txn{Origin: originA, Seq: 1, HLC: 5,
			Ops: []wire.Op{{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k")}}}},
			"0000000000000001 01 00112233445566778899aabbccddeeff 0000000000000001 0000000000000005" +
				strings.Repeat("00", 32) + "01 02 01 74 01 6b"},
		// Version 2: list entries are arrays of fixed length; HEADS omits an empty list.
		{"SUBSCRIBE of one origin at seq 0", &wire.Subscribe{Entries: []wire.SubscribeEntry{{Channel: 1, Origin: originA, Credit: 65536}}},
			"a1 01 81 85 01 50 00112233445566778899aabbccddeeff 00 5820" + strings.Repeat("00", 32) + "1a 00010000"},
		{"UNSUBSCRIBE [2]", &wire.Unsubscribe{Channels: []uint32{2}}, "a1 01 81 02"},
		{"CURSOR", &wire.Cursor{Entries: []wire.CursorEntry{{Channel: 1, Seq: 24, Hash: hash9}}},
			"a1 01 81 83 01 18 18 5820" + hash9String()},
		{"HEADS omits the empty heads", &wire.Heads{Withdrawn: []wire.OriginID{originB}}, "a1 02 81 50 f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"},
		{"HEADS omits the empty withdrawn list", &wire.Heads{Heads: []wire.Head{{Origin: originA, Seq: 1, HLC: 5}}},
			"a1 01 81 83 50 00112233445566778899aabbccddeeff 01 05"},
		{"CREDIT keeps channel 0 and limit 0", &wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: 0}}}, "a1 01 81 82 00 00"},
		{"RESEND", &wire.Resend{Channel: 1, From: 3}, "a2 01 01 02 03"},
		{"DIVERGENCE keeps side 0 and the zero hash", &wire.Divergence{Channel: 1}, "a4 01 01 02 00 03 5820" + strings.Repeat("00", 32) + "04 00"},
		{"DATA: the hash, then the encoding", &wire.Data{Hash: hash9, Txn: wire.Txn{Origin: originA, Seq: 1, HLC: 5,
			Ops: []wire.Op{{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k")}}}},
			hash9String() + "01 00112233445566778899aabbccddeeff 0000000000000001 0000000000000005" +
				strings.Repeat("00", 32) + "01 02 01 74 01 6b"},
	} {
		if got := body(c.body); !bytes.Equal(got, hx(c.want)) {
			t.Errorf("%s: %x, want %x", c.name, got, hx(c.want))
		}
	}
}

// TestUnknownKeysPreserved: keys this build does not know survive decode and re-encode
// byte for byte, and are available in Extra.
func TestUnknownKeysPreserved(t *testing.T) {
	for _, c := range []struct {
		name  string
		typ   wire.Type
		body  []byte
		extra wire.Extra
	}{
		{"PING {1: 7, 9: \"x\"}", wire.TypePing, hx("a2 01 07 09 61 78"), wire.Extra{9: hx("61 78")}},
		{"PONG with a nested unknown value", wire.TypePong, cb(map[uint64]any{1: 3, 4: []any{uint64(1), map[uint64]any{2: []byte{0}}}}),
			wire.Extra{4: hx("82 01 a1 02 41 00")}},
		{"ACK1 with key 0 and a large key", wire.TypeAck1, cb(map[uint64]any{0: "z", 1: 5, 1 << 40: true}),
			wire.Extra{0: hx("61 7a"), 1 << 40: hx("f5")}},
		{"CLOSE with key 4", wire.TypeClose, cb(map[uint64]any{1: "going-away", 2: "transient", 3: "bye", 4: []byte("later")}),
			wire.Extra{4: hx("45 6c61746572")}},
		{"HELLO with keys 11 and 20", wire.TypeHello, cb(map[uint64]any{1: 0, 2: "a", 3: originA[:], 4: 1, 5: 1, 7: nonce16,
			11: false, 20: map[uint64]any{1: "future"}}), wire.Extra{11: hx("f4"), 20: hx("a1 01 66 667574757265")}},
		{"HELLO with keys 9 and 10 known and key 11 not", wire.TypeHello, cb(map[uint64]any{1: 0, 2: "a", 3: originA[:], 4: 1, 5: 1, 7: nonce16,
			9: 4096, 10: true, 11: "x"}), wire.Extra{11: hx("61 78")}},
		{"ORIGIN with an unknown empty value", wire.TypeOrigin, cb(map[uint64]any{1: originA[:], 2: "a", 3: ""}),
			wire.Extra{3: hx("60")}},
		{"SUBSCRIBE1 with null", wire.TypeSubscribe1, cb(map[uint64]any{1: 0, 5: nil}), wire.Extra{5: hx("f6")}},
		{"AUTH with text, byte-string and negative map keys", wire.TypeAuth, cat(hx("a2 01 58 20"), bytes.Repeat([]byte{1}, 32), hx("02 a3 20 00 41 00 00 61 61 00")),
			wire.Extra{2: hx("a3 20 00 41 00 00 61 61 00")}},
		{"CREDIT with key 3", wire.TypeCredit, cb(map[uint64]any{1: []any{v2Entry(0, 5)}, 3: "later"}), wire.Extra{3: hx("65 6c61746572")}},
		{"HEADS with key 5 and only withdrawn origins", wire.TypeHeads, cb(map[uint64]any{2: []any{originA[:]}, 5: []any{uint64(1)}}), wire.Extra{5: hx("81 01")}},
		{"PURGED with key 4", wire.TypePurged, cb(map[uint64]any{1: 2, 2: 1, 3: hash9[:], 4: "later"}), wire.Extra{4: hx("65 6c61746572")}},
		{"DIVERGENCE with key 5", wire.TypeDivergence, cb(map[uint64]any{1: 1, 2: 0, 3: make([]byte, 32), 4: 1, 5: map[uint64]any{1: true}}),
			wire.Extra{5: hx("a1 01 f5")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := raw(c.typ, 0, 0, c.body)
			frames, err := decode(msg)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			extra := reflect.ValueOf(frames[0].Value).Elem().FieldByName("Extra").Interface().(wire.Extra)
			if len(extra) != len(c.extra) {
				t.Fatalf("extra %x, want %x", extra, c.extra)
			}
			for k, v := range c.extra {
				if !bytes.Equal(extra[k], v) {
					t.Fatalf("extra[%d] = %x, want %x", k, extra[k], v)
				}
			}
			re, rerr := wire.EncodeMessage(frames)
			if rerr != nil || !bytes.Equal(re, msg) {
				t.Fatalf("re-encoded %x (%v), want %x", re, rerr, msg)
			}
		})
	}

	// A decoded value's known fields are still read.
	frames, err := decode(raw(wire.TypePing, 0, 0, hx("a2 01 07 09 61 78")))
	if err != nil || frames[0].Value.(*wire.Ping).ID != 7 {
		t.Fatalf("PING id lost: %v", err)
	}
	frames, err = decode(raw(wire.TypeHello, 0, 0, cb(map[uint64]any{1: 0, 2: "a", 3: originA[:], 4: 1, 5: 1, 7: nonce16, 9: 4096})))
	if err != nil {
		t.Fatal(err)
	}
	if h := frames[0].Value.(*wire.Hello); h.MaxFrame != 4096 || len(h.Extra) != 0 {
		t.Fatalf("HELLO key 9 decoded to MaxFrame %d, extra %x", h.MaxFrame, h.Extra)
	}

	// An extra key that collides with a known field cannot be encoded.
	p := &wire.Ping{ID: 1}
	p.Extra = wire.Extra{1: hx("02")}
	if _, err := p.AppendBody(nil); err == nil {
		t.Fatal("an Extra key colliding with a known field encoded")
	}
	if out, err := wire.AppendFrame([]byte("keep"), 0, 0, p); err == nil || string(out) != "keep" {
		t.Fatalf("AppendFrame on error: %q, %v", out, err)
	}
}

// TestUnknownKeyCanonicalValues: every well-formed, canonical CBOR value an unknown key may
// hold is kept (SPEC: unknown keys are accepted after the same checks, including canonical
// form). The simple values SPEC excludes (all but false, true and null), floating-point
// numbers, and map keys other than integers, text and byte strings are bad-cbor at any
// depth.
func TestUnknownKeyCanonicalValues(t *testing.T) {
	for _, v := range []string{"00", "20", "3bffffffffffffffff", "40", "60", "80", "a0", "f4", "f5", "f6",
		"82 01 61 61", "a2 00 00 61 61 00",
		"a1 20 00",          // a negative integer key
		"a1 41 00 00",       // a byte-string key
		"a1 61 61 00",       // a text key
		"81 a1 61 61 00",    // a text key inside an array
		"a1 01 a1 41 00 f6", // a byte-string key two maps deep
	} {
		msg := raw(wire.TypePing, 0, 0, hx("a2 01 07 09 "+v))
		frames, err := decode(msg)
		if err != nil {
			t.Errorf("unknown value %s: %v", v, err)
			continue
		}
		if re, _ := wire.EncodeMessage(frames); !bytes.Equal(re, msg) {
			t.Errorf("unknown value %s re-encodes to %x", v, re)
		}
	}
	for _, c := range []struct{ what, v string }{
		{"undefined", "f7"},
		{"simple value 16", "f0"},
		{"simple value 0", "e0"},
		{"simple value 32", "f8 20"},
		{"simple value 255", "f8 ff"},
		{"undefined in an array", "82 01 f7"},
		{"half-precision 1.0", "f9 3c00"},
		{"half-precision 1.5", "f9 3e00"},
		{"half-precision NaN", "f9 7e00"},
		{"single-precision 100000.0", "fa 47c35000"},
		{"double-precision 0.1", "fb 3fb999999999999a"},
		{"a float in an array", "81 f9 3c00"},
		{"a float two arrays deep", "81 81 f9 3c00"},
		{"a float as a nested map's value", "a1 01 f9 3c00"},
		{"a float map key", "a1 f9 3c00 00"},
		{"a boolean map key", "a1 f5 00"},
		{"a null map key", "a1 f6 00"},
		{"an array map key", "a1 80 00"},
		{"a map map key", "a1 a0 00"},
		{"a boolean map key inside an array", "81 a1 f4 00"},
		{"a boolean map key two maps deep", "a1 01 a1 f5 00"},
	} {
		msg := cat(pingFrame, raw(wire.TypePing, 0, 0, hx("a2 01 07 09 "+c.v)))
		if _, err := decode(msg); err == nil || err.Code != wire.CodeBadCBOR || err.Frame != wire.TypePing || err.Offset != len(pingFrame) {
			t.Errorf("%s (%s) in an unknown key: %v, want bad-cbor in PING at %d", c.what, c.v, err, len(pingFrame))
		}
	}
}

// TestBadCBOR: every rule of "Control bodies" rejects with bad-cbor, naming the frame and
// its offset.
func TestBadCBOR(t *testing.T) {
	pairs := func(n int) []byte {
		m := map[uint64]any{1: 0} // PING's id, then keys past its known ones
		for k := 2; k <= n; k++ {
			m[uint64(k+7)] = 0
		}
		return cb(m)
	}
	helloMap := func(extra map[uint64]any) []byte {
		m := map[uint64]any{1: 0, 2: "a", 3: originA[:], 4: 1, 5: 1, 7: nonce16}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return cb(m)
	}
	for _, c := range []struct {
		name string
		typ  wire.Type
		body []byte
	}{
		{"empty body", wire.TypePing, nil},
		{"an array", wire.TypePing, hx("81 07")},
		{"a text string", wire.TypePing, hx("61 78")},
		{"an unsigned integer", wire.TypePing, hx("07")},
		{"a truncated map", wire.TypePing, hx("a1 01")},
		{"a truncated value", wire.TypePing, hx("a1 01 19 01")},
		{"trailing bytes", wire.TypePing, hx("a1 01 07 00")},
		{"two maps", wire.TypePing, hx("a1 01 07 a1 01 07")},
		{"a text key", wire.TypePing, hx("a2 01 07 61 61 07")},
		{"a negative key", wire.TypePing, hx("a2 01 07 20 07")},
		{"a byte-string key", wire.TypePing, hx("a2 01 07 41 00 07")},
		{"a duplicate key", wire.TypePing, hx("a2 01 07 01 07")},
		{"a duplicate unknown key", wire.TypePing, hx("a3 01 07 09 00 09 00")},
		{"a duplicate key in a nested map", wire.TypePing, hx("a2 01 07 09 a2 01 00 01 00")},
		{"an indefinite-length map", wire.TypePing, hx("bf 01 07 ff")},
		{"an indefinite-length text", wire.TypeClose, hx("a2 01 7f 61 61 ff 02 61 62")},
		{"an indefinite-length array", wire.TypePing, hx("a2 01 07 09 9f ff")},
		{"a tag on a known field", wire.TypePing, hx("a1 01 c1 07")},
		{"a tag on an unknown field", wire.TypePing, hx("a2 01 07 09 c1 00")},
		{"a bignum", wire.TypePing, hx("a1 01 c2 41 01")},
		{"invalid UTF-8 in CLOSE message", wire.TypeClose, hx("a3 01 61 61 02 61 62 03 61 ff")},
		{"invalid UTF-8 in a name", wire.TypeOrigin, cat(hx("a2 01 50"), originA[:], hx("02 62 c3 28"))},
		{"invalid UTF-8 in an unknown text", wire.TypePing, hx("a2 01 07 09 61 ff")},
		{"nesting 9 deep (arrays)", wire.TypePing, hx("a2 01 07 09" + strings.Repeat("81", 8) + "00")},
		{"nesting 9 deep (maps)", wire.TypePing, hx("a2 01 07 09" + strings.Repeat("a1 01", 8) + "00")},
		{"65 map pairs", wire.TypePing, pairs(65)},
		{"65 map pairs nested in an unknown key", wire.TypePing, cat(hx("a2 01 07 09"), pairs(65))},
		{"non-shortest integer", wire.TypePing, hx("a1 01 18 07")},
		{"non-shortest 8-byte integer", wire.TypePing, hx("a1 01 1b 0000000000000007")},
		{"non-shortest key", wire.TypePing, hx("a1 18 01 07")},
		{"non-shortest map length", wire.TypePing, hx("b8 01 01 07")},
		{"non-shortest text length", wire.TypeClose, hx("a2 01 78 01 61 02 61 62")},
		{"unsorted keys", wire.TypePing, hx("a2 02 01 01 07")},
		{"unsorted keys in a nested map", wire.TypePing, hx("a2 01 07 09 a2 02 00 01 00")},
		{"non-canonical unknown value", wire.TypePing, hx("a2 01 07 09 18 07")},
		{"a float64 that fits float16", wire.TypePing, hx("a2 01 07 09 fb 3ff0000000000000")},
		{"a two-byte simple value below 32", wire.TypePing, hx("a2 01 07 09 f8 10")},
		{"PING {1: 7, 9: 1.5} (SPEC M13)", wire.TypePing, hx("a2 01 07 09 f9 3e00")},
		{"PING {1: 7, 9: undefined} (SPEC M13)", wire.TypePing, hx("a2 01 07 09 f7")},
		{"a float in an unknown key of AUTH", wire.TypeAuth, cat(hx("a2 01 58 20"), bytes.Repeat([]byte{1}, 32), hx("02 f9 3c00"))},
		{"a float in an unknown key of HELLO", wire.TypeHello, helloMap(map[uint64]any{20: []any{float32(1.5)}})},
		{"a boolean map key in an unknown key of CLOSE", wire.TypeClose, hx("a3 01 61 61 02 61 62 04 a1 f4 00")},
		{"a float on a known field of ACK1", wire.TypeAck1, hx("a1 01 f9 3c00")},
		{"empty optional capabilities", wire.TypeHello, helloMap(map[uint64]any{6: []string{}})},
		{"empty optional max message", wire.TypeHello, helloMap(map[uint64]any{8: 0})},
		{"empty optional max frame body", wire.TypeHello, helloMap(map[uint64]any{9: 0})},
		{"HELLO max frame body as text", wire.TypeHello, helloMap(map[uint64]any{9: "1024"})},
		{"HELLO max frame body negative", wire.TypeHello, helloMap(map[uint64]any{9: -1})},
		{"HELLO max frame body as a float", wire.TypeHello, helloMap(map[uint64]any{9: float32(4096)})},
		{"empty optional CLOSE message", wire.TypeClose, cb(map[uint64]any{1: "a", 2: "b", 3: ""})},
		{"PING {}", wire.TypePing, hx("a0")},
		{"PING {1: \"x\"}", wire.TypePing, hx("a1 01 61 78")},
		{"PING {1: -1}", wire.TypePing, hx("a1 01 20")},
		{"PING {1: 1.0}", wire.TypePing, hx("a1 01 f9 3c00")},
		{"PING {1: null}", wire.TypePing, hx("a1 01 f6")},
		{"PING id over 64 bits", wire.TypePing, hx("a1 01 c2 49 010000000000000000")},
		{"HELLO missing nonce", wire.TypeHello, helloMap(map[uint64]any{7: nil})},
		{"HELLO missing role", wire.TypeHello, helloMap(map[uint64]any{1: nil})},
		{"HELLO name as bytes", wire.TypeHello, helloMap(map[uint64]any{2: []byte("a")})},
		{"HELLO origin as text", wire.TypeHello, helloMap(map[uint64]any{3: "0123456789abcdef"})},
		{"HELLO caps as text", wire.TypeHello, helloMap(map[uint64]any{6: "a"})},
		{"HELLO caps holding a number", wire.TypeHello, helloMap(map[uint64]any{6: []any{uint64(1)}})},
		{"HELLO role negative", wire.TypeHello, helloMap(map[uint64]any{1: -1})},
		{"AUTH mac as text", wire.TypeAuth, cb(map[uint64]any{1: strings.Repeat("m", 32)})},
		{"AUTH missing mac", wire.TypeAuth, hx("a0")},
		{"CLOSE missing class", wire.TypeClose, cb(map[uint64]any{1: "a"})},
		{"CLOSE code as number", wire.TypeClose, cb(map[uint64]any{1: 1, 2: "b"})},
		{"ORIGIN missing name", wire.TypeOrigin, cb(map[uint64]any{1: originA[:]})},
		{"SUBSCRIBE1 missing position", wire.TypeSubscribe1, hx("a0")},
		{"ACK1 position as bytes", wire.TypeAck1, hx("a1 01 41 01")},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, err := decode(cat(pingFrame, raw(c.typ, 0, 0, c.body)))
			if err == nil {
				t.Fatalf("accepted: %#v", frames[len(frames)-1].Value)
			}
			if err.Code != wire.CodeBadCBOR || err.Class != wire.ClassProtocol || err.Frame != c.typ || err.Offset != len(pingFrame) {
				t.Fatalf("got %v (frame %s offset %d), want bad-cbor in %s at %d", err, err.Frame, err.Offset, c.typ, len(pingFrame))
			}
			if len(frames) != 1 || frames[0].Type != wire.TypePing {
				t.Fatalf("frames before the error: %d", len(frames))
			}
		})
	}

	// The bounds themselves are accepted. (The array bound of 65536 elements cannot be
	// reached through a control frame of this document: such an array is longer than the
	// 64 KiB body bound, which TestControlBodyBounds checks.)
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"nesting 8 deep", hx("a2 01 07 09" + strings.Repeat("81", 7) + "00")},
		{"64 map pairs", pairs(64)},
		{"64 map pairs nested in an unknown key", cat(hx("a2 01 07 09"), pairs(64))},
		{"an array of 65000 elements", cat(hx("a2 01 07 09 99 fde8"), make([]byte, 65000))},
	} {
		if _, err := decode(raw(wire.TypePing, 0, 0, c.body)); err != nil {
			t.Errorf("%s rejected: %v", c.name, err)
		}
	}
}

// padded returns the map m, with key pad holding a byte string sized so that the body is
// exactly size bytes.
func padded(m map[uint64]any, pad uint64, size int) []byte {
	for n := max(0, size-len(cb(m))-16); n <= size; n++ {
		m[pad] = make([]byte, n)
		if b := cb(m); len(b) == size {
			return b
		} else if len(b) > size {
			break
		}
	}
	panic("padded: no body of exactly " + strconv.Itoa(size) + " bytes")
}

// TestControlBodyBounds: every control type (version 2's included) has its own body bound,
// checked at the header (SPEC framing rule 5, frame-too-large, before flags and channel):
// 16 KiB for HELLO, 68 KiB for MAP, 128 KiB for MEMBERS, 64 KiB for every other control
// body, whatever the configured frame-body limit. A body at the bound is decoded; the data
// types (TXN1, DATA), version 4's requests and answers (whose body is the kind's) and unknown
// ignorable types have no bound of their own.
func TestControlBodyBounds(t *testing.T) {
	if wire.MaxHelloBody != 16384 || wire.MaxControlBody != 65536 || wire.MaxMapBody != 69632 || wire.MaxMembersBody != 131072 {
		t.Fatalf("bounds %d, %d, %d and %d, SPEC says 16384, 65536, 69632 and 131072", wire.MaxHelloBody, wire.MaxControlBody,
			wire.MaxMapBody, wire.MaxMembersBody)
	}
	controls := 0
	for _, typ := range wire.Registered() {
		if typ == wire.TypeTxn1 || typ == wire.TypeData || typ == wire.TypeChunk || typ == wire.TypeRangeRecords ||
			typ == wire.TypeRequest || typ == wire.TypeResponse {
			continue
		}
		controls++
		bound := map[wire.Type]int{wire.TypeHello: wire.MaxHelloBody, wire.TypeMap: wire.MaxMapBody, wire.TypeMembers: wire.MaxMembersBody}[typ]
		if bound == 0 {
			bound = wire.MaxControlBody
		}
		// One past the bound: frame-too-large, even with undefined flags and a channel.
		msg := cat(pingFrame, raw(typ, 0xff, 9, make([]byte, bound+1)), pingFrame)
		frames, err := decode(msg)
		if err == nil || err.Code != wire.CodeFrameTooLarge || err.Class != wire.ClassResourceLimit || err.Frame != typ ||
			err.Offset != len(pingFrame) || len(frames) != 1 {
			t.Errorf("%s body of %d bytes: %v after %d frames, want frame-too-large at %d", typ, bound+1, err, len(frames), len(pingFrame))
		}
		// At the bound the header passes: the flags are checked next, then the body.
		if _, err := decode(cat(pingFrame, raw(typ, 1, 0, make([]byte, bound)))); err == nil || err.Code != wire.CodeBadFlags {
			t.Errorf("%s body of %d bytes with flags 1: %v, want bad-flags", typ, bound, err)
		}
		if _, err := decode(cat(pingFrame, raw(typ, 0, 0, make([]byte, bound)))); err == nil || err.Code != wire.CodeBadCBOR || err.Offset != len(pingFrame) {
			t.Errorf("%s body of %d zero bytes: %v, want bad-cbor (not a map)", typ, bound, err)
		}
		// A configured frame-body limit above the bound does not lift it.
		if _, err := wire.DecodeMessage(raw(typ, 0, 0, make([]byte, bound+1)), wire.DefaultMaxMessage, uint32(bound)+100); err == nil ||
			err.Code != wire.CodeFrameTooLarge {
			t.Errorf("%s body of %d bytes under a frame limit of %d: %v", typ, bound+1, bound+100, err)
		}
	}
	if controls != 6+2+7+6+7 {
		t.Errorf("%d control types checked, want 28 (6 shared, 2 of version 1, 7 of version 2, 6 of version 3, 7 of version 4)", controls)
	}

	// Valid bodies of exactly the bound decode and re-encode; one byte more does not.
	hello := func() map[uint64]any {
		return map[uint64]any{1: 0, 2: "a", 3: originA[:], 4: 1, 5: 1, 7: nonce16}
	}
	for _, c := range []struct {
		name string
		typ  wire.Type
		m    func() map[uint64]any
		size int
	}{
		{"PING", wire.TypePing, func() map[uint64]any { return map[uint64]any{1: 7} }, wire.MaxControlBody},
		{"CLOSE", wire.TypeClose, func() map[uint64]any { return map[uint64]any{1: "going-away", 2: "transient"} }, wire.MaxControlBody},
		{"HELLO", wire.TypeHello, hello, wire.MaxHelloBody},
		{"SUBSCRIBE", wire.TypeSubscribe, func() map[uint64]any {
			return map[uint64]any{1: []any{v2Entry(1, originA[:], 0, make([]byte, 32), 65536)}}
		}, wire.MaxControlBody},
		{"CURSOR", wire.TypeCursor, func() map[uint64]any { return map[uint64]any{1: []any{v2Entry(1, 1, hash9[:])}} }, wire.MaxControlBody},
		{"HEADS", wire.TypeHeads, func() map[uint64]any { return map[uint64]any{2: []any{originA[:]}} }, wire.MaxControlBody},
		{"CREDIT", wire.TypeCredit, func() map[uint64]any { return map[uint64]any{1: []any{v2Entry(0, 1<<20)}} }, wire.MaxControlBody},
		{"DIVERGENCE", wire.TypeDivergence, func() map[uint64]any {
			return map[uint64]any{1: 1, 2: 1, 3: hash9[:], 4: 0}
		}, wire.MaxControlBody},
		{"MAP", wire.TypeMap, func() map[uint64]any {
			return map[uint64]any{1: 3, 2: []byte(`{"generation":3}`), 3: "a", 4: 0}
		}, wire.MaxMapBody},
		{"MEMBERS", wire.TypeMembers, func() map[uint64]any {
			return map[uint64]any{1: []any{map[uint64]any{1: "a", 2: 4, 3: 9}}}
		}, wire.MaxMembersBody},
	} {
		at := padded(c.m(), 20, c.size)
		msg := raw(c.typ, 0, 0, at)
		frames, err := decode(msg)
		if err != nil {
			t.Errorf("%s body of exactly %d bytes: %v", c.name, c.size, err)
			continue
		}
		if re, _ := wire.EncodeMessage(frames); !bytes.Equal(re, msg) {
			t.Errorf("%s body of %d bytes does not re-encode", c.name, c.size)
		}
		over := padded(c.m(), 20, c.size+1)
		if _, err := decode(raw(c.typ, 0, 0, over)); err == nil || err.Code != wire.CodeFrameTooLarge {
			t.Errorf("valid %s body of %d bytes: %v, want frame-too-large", c.name, c.size+1, err)
		}
	}

	// The bound is checked after the body is found within the message (rule 4 before 5).
	short := cat(wire.AppendHeader(nil, wire.Header{Type: wire.TypePing, Length: wire.MaxControlBody + 1}), hx("a1 01 07"))
	if _, err := decode(short); err == nil || err.Code != wire.CodeMalformedFrame {
		t.Errorf("a PING over its bound and past the end of the message: %v, want malformed-frame", err)
	}

	// TXN1 has no bound of its own: a transaction larger than 64 KiB is decoded.
	big := wire.Txn{Origin: originA, Seq: 1, Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: make([]byte, 100<<10)}}}
	f := frame(&wire.Txn1{Position: 1, Txn: big})
	if frames, err := decode(f); err != nil || len(frames[0].Body) <= wire.MaxControlBody {
		t.Errorf("TXN1 of %d bytes: %v", len(f), err)
	}
	// Nor has DATA: 64 KiB + 1 of DATA body decodes (TestDataBody checks larger ones).
	d := wire.Txn{Origin: originA, Seq: 1, Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k")}}}
	for len(mustData(t, d)) != wire.HeaderSize+wire.MaxControlBody+1 {
		d.Ops[0].Value = make([]byte, len(d.Ops[0].Value)+wire.HeaderSize+wire.MaxControlBody+1-len(mustData(t, d)))
	}
	if frames, err := decode(cat(pingFrame, mustData(t, d), pingFrame)); err != nil || len(frames) != 3 || len(frames[1].Body) != wire.MaxControlBody+1 {
		t.Errorf("DATA body of %d bytes: %v", wire.MaxControlBody+1, err)
	}
	// Nor has an unknown ignorable type.
	if frames, err := decode(cat(raw(0x90, 0, 0, make([]byte, wire.MaxControlBody+1)), pingFrame)); err != nil || len(frames) != 2 {
		t.Errorf("ignorable frame over 64 KiB: %v", err)
	}
}

func validHello() *wire.Hello {
	return &wire.Hello{Role: wire.RoleDialer, Name: "a", Origin: originA, MinVersion: 1, MaxVersion: 1, Nonce: nonce16}
}

func caps(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		s := []byte(strings.Repeat("a", size))
		s[size-2], s[size-1] = 'a'+byte(i/26), 'a'+byte(i%26)
		out[i] = string(s)
	}
	return out
}

// TestFieldRules: each field rule of HELLO, CLOSE, ORIGIN, ACK1 (and AUTH's MAC length)
// rejects a well-typed value with bad-field; the rule's bounds are accepted.
func TestFieldRules(t *testing.T) {
	hello := func(mod func(h *wire.Hello)) []byte {
		h := validHello()
		mod(h)
		return body(h)
	}
	closeBody := func(code, class, msg string) []byte {
		return body(&wire.Close{Code: wire.Code(code), Class: wire.Class(class), Message: msg})
	}
	name64 := strings.Repeat("n", 64)
	for _, c := range []struct {
		name string
		typ  wire.Type
		body []byte
		ok   bool
	}{
		{"HELLO valid", wire.TypeHello, hello(func(h *wire.Hello) {}), true},
		{"HELLO role 2", wire.TypeHello, hello(func(h *wire.Hello) { h.Role = 2 }), false},
		{"HELLO empty name", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = "" }), false},
		{"HELLO name \"a b\"", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = "a b" }), false},
		{"HELLO name \"a/b\"", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = "a/b" }), false},
		{"HELLO name of 65 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = name64 + "n" }), false},
		{"HELLO name of 64 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = name64 }), true},
		{"HELLO name with every allowed byte class", wire.TypeHello, hello(func(h *wire.Hello) { h.Name = "aZ09_.-" }), true},
		{"HELLO all-zero origin", wire.TypeHello, hello(func(h *wire.Hello) { h.Origin = wire.OriginID{} }), false},
		{"HELLO origin of 15 bytes", wire.TypeHello, cb(map[uint64]any{1: 0, 2: "a", 3: originA[:15], 4: 1, 5: 1, 7: nonce16}), false},
		{"HELLO min version 0", wire.TypeHello, hello(func(h *wire.Hello) { h.MinVersion = 0 }), false},
		{"HELLO versions 2..1", wire.TypeHello, hello(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 2, 1 }), false},
		{"HELLO versions 3..5", wire.TypeHello, hello(func(h *wire.Hello) { h.MinVersion, h.MaxVersion = 3, 5 }), true},
		{"HELLO unsorted capabilities", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = []string{"b", "a"} }), false},
		{"HELLO duplicate capabilities", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = []string{"a", "a"} }), false},
		{"HELLO capability with upper case", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = []string{"A"} }), false},
		{"HELLO capability with underscore", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = []string{"a_b"} }), false},
		{"HELLO empty capability", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = []string{""} }), false},
		{"HELLO capability of 33 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = caps(1, 33) }), false},
		{"HELLO capability of 32 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = caps(1, 32) }), true},
		{"HELLO 33 capabilities", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = caps(33, 4) }), false},
		{"HELLO 32 capabilities", wire.TypeHello, hello(func(h *wire.Hello) { h.Caps = caps(32, 4) }), true},
		{"HELLO nonce of 8 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Nonce = nonce16[:8] }), false},
		{"HELLO nonce of 15 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Nonce = nonce16[:15] }), false},
		{"HELLO nonce of 65 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Nonce = make([]byte, 65) }), false},
		{"HELLO nonce of 64 bytes", wire.TypeHello, hello(func(h *wire.Hello) { h.Nonce = make([]byte, 64) }), true},
		{"HELLO max message 65535", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 65535; h.MaxFrame = 1024 }), false},
		{"HELLO max message 65536, max frame body 1024", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 65536; h.MaxFrame = 1024 }), true},
		{"HELLO max message 65536, max frame body 65526", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 65536; h.MaxFrame = 65526 }), true},
		{"HELLO max message 65536, max frame body 65527", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 65536; h.MaxFrame = 65527 }), false},
		{"HELLO max message 65536 with the default max frame body", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 65536 }), false},
		{"HELLO max message 16777225 with the default max frame body", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 16777225 }), false},
		{"HELLO max message 16777226 with the default max frame body", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 16777226 }), true},
		{"HELLO max message 1 MiB, max frame body 1 MiB - 10", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 1 << 20; h.MaxFrame = 1<<20 - 10 }), true},
		{"HELLO max message 1 MiB, max frame body 1 MiB", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxMessage = 1 << 20; h.MaxFrame = 1 << 20 }), false},
		{"HELLO max frame body 1023", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 1023 }), false},
		{"HELLO max frame body 1", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 1 }), false},
		{"HELLO max frame body 1024", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 1024 }), true},
		{"HELLO max frame body 16777216", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 16777216 }), true},
		{"HELLO max frame body 16777217", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 16777217 }), false},
		{"HELLO max frame body 2^32 + 1024", wire.TypeHello, hello(func(h *wire.Hello) { h.MaxFrame = 1<<32 + 1024; h.MaxMessage = 1 << 40 }), false},
		{"AUTH mac of 31 bytes", wire.TypeAuth, cb(map[uint64]any{1: make([]byte, 31)}), false},
		{"AUTH mac of 33 bytes", wire.TypeAuth, cb(map[uint64]any{1: make([]byte, 33)}), false},
		{"CLOSE empty code", wire.TypeClose, closeBody("", "protocol", ""), false},
		{"CLOSE code with upper case", wire.TypeClose, closeBody("Going-away", "transient", ""), false},
		{"CLOSE code with underscore", wire.TypeClose, closeBody("going_away", "transient", ""), false},
		{"CLOSE code of 65 bytes", wire.TypeClose, closeBody(strings.Repeat("c", 65), "transient", ""), false},
		{"CLOSE code of 64 bytes, unknown to this build", wire.TypeClose, closeBody(strings.Repeat("c", 64), "some-new-class", ""), true},
		{"CLOSE empty class", wire.TypeClose, closeBody("going-away", "", ""), false},
		{"CLOSE class with a dot", wire.TypeClose, closeBody("going-away", "trans.ient", ""), false},
		{"CLOSE message of 1025 bytes", wire.TypeClose, closeBody("going-away", "transient", strings.Repeat("m", 1025)), false},
		{"CLOSE message of 1024 bytes", wire.TypeClose, closeBody("going-away", "transient", strings.Repeat("m", 1024)), true},
		{"ORIGIN all-zero origin", wire.TypeOrigin, body(&wire.Origin{Name: "a"}), false},
		{"ORIGIN origin of 17 bytes", wire.TypeOrigin, cb(map[uint64]any{1: make([]byte, 17), 2: "a"}), false},
		{"ORIGIN name \"a b\"", wire.TypeOrigin, body(&wire.Origin{Origin: originA, Name: "a b"}), false},
		{"ORIGIN empty name", wire.TypeOrigin, body(&wire.Origin{Origin: originA, Name: ""}), false},
		{"ORIGIN name of 65 bytes", wire.TypeOrigin, body(&wire.Origin{Origin: originA, Name: name64 + "x"}), false},
		{"ACK1 position 0", wire.TypeAck1, body(&wire.Ack1{Position: 0}), false},
		{"ACK1 position 1", wire.TypeAck1, body(&wire.Ack1{Position: 1}), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, err := decode(cat(pingFrame, raw(c.typ, 0, 0, c.body)))
			if c.ok {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %#v", frames[1].Value)
			}
			if err.Code != wire.CodeBadField || err.Class != wire.ClassProtocol || err.Frame != c.typ || err.Offset != len(pingFrame) {
				t.Fatalf("got %v (frame %s offset %d), want bad-field in %s at %d", err, err.Frame, err.Offset, c.typ, len(pingFrame))
			}
		})
	}

	// Validate agrees with the decoder on the typed values.
	h := validHello()
	h.Caps = []string{"b", "a"}
	if h.Validate() == nil {
		t.Fatal("Hello.Validate accepted unsorted capabilities")
	}
	h = validHello()
	h.MaxMessage = 65536
	if h.Validate() == nil {
		t.Fatal("Hello.Validate accepted a max message of 65536 with the default max frame body")
	}
	h.MaxFrame = 65526
	if err := h.Validate(); err != nil {
		t.Fatalf("Hello.Validate: %v", err)
	}
	// Limits applies the defaults of absent keys 8 and 9.
	if f, m := validHello().Limits(); f != wire.MaxFrameBody || m != wire.DefaultMaxMessage {
		t.Fatalf("default limits %d, %d", f, m)
	}
	if f, m := h.Limits(); f != 65526 || m != 65536 {
		t.Fatalf("limits %d, %d", f, m)
	}
	if wire.DefaultMaxMessage != 16<<20+64<<10 || wire.MinMaxFrame != 1024 || wire.MinMaxMessage != 65536 {
		t.Fatalf("constants %d %d %d differ from SPEC", wire.DefaultMaxMessage, wire.MinMaxFrame, wire.MinMaxMessage)
	}
	if (&wire.Close{Code: "x", Class: "protocol", Message: strings.Repeat("m", 1025)}).Validate() == nil {
		t.Fatal("Close.Validate accepted a 1025-byte message")
	}
}

// txnBytes builds a transaction encoding from raw parts, without any check.
type txnBytes struct {
	format byte
	origin wire.OriginID
	seq    uint64
	hlc    uint64
	prev   wire.Hash
	nops   []byte // varint
	ops    []byte
}

func (x txnBytes) enc() []byte {
	b := []byte{x.format}
	b = append(b, x.origin[:]...)
	b = binary.BigEndian.AppendUint64(b, x.seq)
	b = binary.BigEndian.AppendUint64(b, x.hlc)
	b = append(b, x.prev[:]...)
	b = append(b, x.nops...)
	return append(b, x.ops...)
}

func okTxn() txnBytes {
	return txnBytes{format: 1, origin: originA, seq: 1, hlc: 99, nops: []byte{1},
		ops: hx("01 01 74 01 6b 01 76")} // put table "t" key "k" value "v"
}

func txnWith(mod func(x *txnBytes)) []byte {
	x := okTxn()
	mod(&x)
	return x.enc()
}

func posTxn(pos uint64, txn []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, pos), txn...)
}

// TestTxnEncodingRules: each rule of "Transaction encoding" rejects with bad-txn, both from
// ParseTxn and from a TXN1 frame; a format or operation kind this build does not know is
// unsupported-txn instead (SPEC "Later formats"); the rules' bounds are accepted.
func TestTxnEncodingRules(t *testing.T) {
	prev := sha256.Sum256([]byte("prev"))
	table64 := strings.Repeat("t", 64)
	const (
		ok          = wire.Code("")
		bad         = wire.CodeBadTxn
		unsupported = wire.CodeUnsupportedTxn
	)
	for _, c := range []struct {
		name string
		txn  []byte
		code wire.Code
	}{
		{"valid", okTxn().enc(), ok},
		{"seq 2 with a previous hash", txnWith(func(x *txnBytes) { x.seq, x.prev = 2, prev }), ok},
		{"put of an empty value", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 01 6b 00") }), ok},
		{"delete", txnWith(func(x *txnBytes) { x.ops = hx("02 01 74 01 6b") }), ok},
		{"table of 64 bytes", txnWith(func(x *txnBytes) { x.ops = cat(hx("01 40"), []byte(table64), hx("01 6b 00")) }), ok},
		{"key of 200 bytes (2-byte varint)", txnWith(func(x *txnBytes) { x.ops = cat(hx("02 01 74 c8 01"), make([]byte, 200)) }), ok},
		{"two operations", txnWith(func(x *txnBytes) { x.nops, x.ops = []byte{2}, hx("02 01 74 01 6b 01 01 74 01 6c 01 76") }), ok},

		{"empty", nil, bad},
		{"shorter than the fixed part", okTxn().enc()[:40], bad},
		{"fixed part only", okTxn().enc()[:65], bad},
		{"format 0x00", txnWith(func(x *txnBytes) { x.format = 0 }), bad},
		{"all-zero origin", txnWith(func(x *txnBytes) { x.origin = wire.OriginID{} }), bad},
		{"seq 0", txnWith(func(x *txnBytes) { x.seq = 0 }), bad},
		{"seq 1 with a previous hash", txnWith(func(x *txnBytes) { x.prev = prev }), bad},
		{"seq 2 with the zero previous hash", txnWith(func(x *txnBytes) { x.seq = 2 }), bad},
		{"zero operations", txnWith(func(x *txnBytes) { x.nops, x.ops = []byte{0}, nil }), bad},
		{"non-minimal operation count", txnWith(func(x *txnBytes) { x.nops = hx("81 00") }), bad},
		{"truncated operation count", txnWith(func(x *txnBytes) { x.nops, x.ops = hx("81"), nil }), bad},
		{"more operations than present", txnWith(func(x *txnBytes) { x.nops = []byte{2} }), bad},
		{"an absurd operation count", txnWith(func(x *txnBytes) { x.nops = hx("ffffffff0f") }), bad},
		{"op kind 0", txnWith(func(x *txnBytes) { x.ops[0] = 0 }), bad},
		{"op kind 0 after a valid operation", txnWith(func(x *txnBytes) { x.nops, x.ops = []byte{2}, hx("02 01 74 01 6b 00 01 74 01 6c") }), bad},
		{"empty table", txnWith(func(x *txnBytes) { x.ops = hx("01 00 01 6b 01 76 00") }), bad},
		{"table a/b", txnWith(func(x *txnBytes) { x.ops = hx("01 03 612f62 01 6b 01 76") }), bad},
		{"table of 65 bytes", txnWith(func(x *txnBytes) { x.ops = cat(hx("01 41"), []byte(table64+"t"), hx("01 6b 00")) }), bad},
		{"non-minimal table length", txnWith(func(x *txnBytes) { x.ops = hx("01 8100 74 01 6b 01 76") }), bad},
		{"empty key", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 00 01 76 00") }), bad},
		{"non-minimal key length", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 8100 6b 01 76") }), bad},
		{"non-minimal value length", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 01 6b 8100 76") }), bad},
		{"value past the end", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 01 6b 05 76") }), bad},
		{"missing value of a put", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 01 6b") }), bad},
		{"trailing bytes", txnWith(func(x *txnBytes) { x.ops = hx("01 01 74 01 6b 01 76 00") }), bad},
		{"a value after a delete", txnWith(func(x *txnBytes) { x.ops = hx("02 01 74 01 6b 01 76") }), bad},
		{"a bad operation before an unknown kind", txnWith(func(x *txnBytes) { x.nops, x.ops = []byte{2}, hx("01 03 612f62 01 6b 01 76 03") }), bad},

		{"format 0x04", txnWith(func(x *txnBytes) { x.format = 4 }), unsupported},
		{"format 0xff", txnWith(func(x *txnBytes) { x.format = 0xff }), unsupported},
		{"format 0x04 with a body format 1 would reject", txnWith(func(x *txnBytes) { x.format, x.nops, x.ops = 4, []byte{0}, hx("ffff") }), unsupported},
		{"format 0x04, the shared prefix only", txnWith(func(x *txnBytes) { x.format = 4 })[:65], unsupported},
		{"op kind 3", txnWith(func(x *txnBytes) { x.ops[0] = 3 }), unsupported},
		{"op kind 0xff", txnWith(func(x *txnBytes) { x.ops[0] = 0xff }), unsupported},
		{"op kind 3 followed by what format 1 cannot read", txnWith(func(x *txnBytes) { x.ops = hx("03 ffffffff") }), unsupported},
		{"op kind 3 after a valid operation", txnWith(func(x *txnBytes) { x.nops, x.ops = []byte{2}, hx("02 01 74 01 6b 03 ffffffff") }), unsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, perr := wire.ParseTxn(c.txn)
			frames, ferr := decode(cat(pingFrame, raw(wire.TypeTxn1, 0, 0, posTxn(5, c.txn))))
			if c.code == ok {
				if perr != nil || ferr != nil {
					t.Fatalf("rejected: %v / %v", perr, ferr)
				}
				if got := frames[1].Value.(*wire.Txn1); got.Position != 5 {
					t.Fatalf("position %d", got.Position)
				}
				return
			}
			if perr == nil {
				t.Fatal("ParseTxn accepted it")
			}
			if got := wire.TxnErrorCode(perr); got != c.code {
				t.Fatalf("TxnErrorCode(%v) = %s, want %s", perr, got, c.code)
			}
			class, _ := wire.ClassOf(c.code)
			if ferr == nil || ferr.Code != c.code || ferr.Class != class || ferr.Frame != wire.TypeTxn1 || ferr.Offset != len(pingFrame) {
				t.Fatalf("TXN1: %v, want %s in TXN1 at %d", ferr, c.code, len(pingFrame))
			}
			// DecodeBody reports the same.
			_, berr := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: wire.TypeTxn1}, Body: posTxn(5, c.txn), Offset: 3})
			if berr == nil || berr.Code != c.code || berr.Offset != 3 {
				t.Fatalf("DecodeBody: %v", berr)
			}
			// An unknown format names the origin and the seq (SPEC "Later formats").
			if c.code == unsupported && c.txn[0] != wire.TxnFormat1 {
				if !strings.Contains(ferr.Message, originA.String()) || !strings.Contains(ferr.Message, "seq 1") {
					t.Fatalf("unsupported-txn message %q does not name origin %s seq 1", ferr.Message, originA)
				}
			}
		})
	}
	if cl, ok := wire.ClassOf(wire.CodeUnsupportedTxn); !ok || cl != wire.ClassUnsupported {
		t.Fatalf("unsupported-txn has class %s, SPEC says unsupported", cl)
	}

	// The TXN1 body's own rules, checked before the transaction's.
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"empty TXN1 body", nil},
		{"TXN1 body of 7 bytes", make([]byte, 7)},
		{"TXN1 position only", posTxn(1, nil)},
		{"TXN1 position 0", posTxn(0, okTxn().enc())},
		{"TXN1 position 0 of an unknown format", posTxn(0, txnWith(func(x *txnBytes) { x.format = 3 }))},
	} {
		_, err := decode(cat(pingFrame, raw(wire.TypeTxn1, 0, 0, c.body)))
		if err == nil || err.Code != wire.CodeBadTxn || err.Offset != len(pingFrame) {
			t.Errorf("%s: %v, want bad-txn at %d", c.name, err, len(pingFrame))
		}
		_, _, perr := wire.ParseTxn1(c.body)
		if perr == nil {
			t.Errorf("%s: ParseTxn1 accepted it", c.name)
		} else if wire.TxnErrorCode(perr) != wire.CodeBadTxn {
			t.Errorf("%s: TxnErrorCode %s", c.name, wire.TxnErrorCode(perr))
		}
	}
}

// TestTxnView: a parsed transaction reads back its header and operations in place, its
// hash is SHA-256 of the encoding, and reading allocates nothing.
func TestTxnView(t *testing.T) {
	tx := sampleTxn()
	enc, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	v, err := wire.ParseTxn(enc)
	if err != nil {
		t.Fatal(err)
	}
	if v.Origin != tx.Origin || v.Seq != tx.Seq || v.HLC != tx.HLC || v.Prev != tx.Prev || v.NumOps != len(tx.Ops) {
		t.Fatalf("view %+v", v)
	}
	if v.HLC.WallMillis() != 1_800_000_000_123 || v.HLC.Logical() != 9 {
		t.Fatalf("hlc %d %d", v.HLC.WallMillis(), v.HLC.Logical())
	}
	if !bytes.Equal(v.Raw(), enc) || v.Hash() != sha256.Sum256(enc) {
		t.Fatal("raw or hash")
	}
	it := v.Ops()
	var got []wire.Op
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		got = append(got, op)
	}
	if _, ok := it.Next(); ok {
		t.Fatal("iterator restarted")
	}
	if len(got) != len(tx.Ops) {
		t.Fatalf("%d ops", len(got))
	}
	for i, op := range got {
		want := tx.Ops[i]
		if op.Kind != want.Kind || !bytes.Equal(op.Table, want.Table) || !bytes.Equal(op.Key, want.Key) || !bytes.Equal(op.Value, want.Value) {
			t.Fatalf("op %d: %+v, want %+v", i, op, want)
		}
		if op.Kind == wire.OpDelete && op.Value != nil {
			t.Fatalf("op %d: a delete with a value", i)
		}
	}
	// The view aliases the encoding: the ops' bytes are inside it.
	if k := got[0].Key; &k[0] != &enc[bytes.Index(enc, []byte("k1"))] {
		t.Fatal("op key does not alias the encoding")
	}
	// Txn() is an owned copy equal to the original.
	owned := v.Txn()
	if !reflect.DeepEqual(owned, tx) {
		t.Fatalf("Txn() = %+v\nwant %+v", owned, tx)
	}
	re, _ := owned.Encode()
	if !bytes.Equal(re, enc) {
		t.Fatal("owned copy re-encodes differently")
	}
	// Parsing and reading allocate nothing.
	txn1 := posTxn(1, enc)
	allocs := testing.AllocsPerRun(100, func() {
		_, v, _ := wire.ParseTxn1(txn1)
		it := v.Ops()
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		_ = v.Hash()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// TestTxnAppendEncodingRefuses: the encoder refuses what a receiver would reject.
func TestTxnAppendEncodingRefuses(t *testing.T) {
	prev := sha256.Sum256([]byte("p"))
	put := wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}
	base := func(mod func(x *wire.Txn)) wire.Txn {
		x := wire.Txn{Origin: originA, Seq: 1, Ops: []wire.Op{put}}
		mod(&x)
		return x
	}
	op := func(o wire.Op) func(x *wire.Txn) { return func(x *wire.Txn) { x.Ops = []wire.Op{put, o} } }
	cases := []struct {
		name string
		txn  wire.Txn
	}{
		{"seq 0", base(func(x *wire.Txn) { x.Seq = 0 })},
		{"seq 1 with a previous hash", base(func(x *wire.Txn) { x.Prev = prev })},
		{"seq 3 with the zero previous hash", base(func(x *wire.Txn) { x.Seq = 3 })},
		{"no operations", base(func(x *wire.Txn) { x.Ops = nil })},
		{"op kind 0", base(op(wire.Op{Kind: 0, Table: []byte("t"), Key: []byte("k")}))},
		{"op kind 3", base(op(wire.Op{Kind: 3, Table: []byte("t"), Key: []byte("k")}))},
		{"empty table", base(op(wire.Op{Kind: wire.OpPut, Key: []byte("k")}))},
		{"table a/b", base(op(wire.Op{Kind: wire.OpPut, Table: []byte("a/b"), Key: []byte("k")}))},
		{"table of 65 bytes", base(op(wire.Op{Kind: wire.OpPut, Table: bytes.Repeat([]byte("t"), 65), Key: []byte("k")}))},
		{"empty key", base(op(wire.Op{Kind: wire.OpDelete, Table: []byte("t")}))},
		{"a delete with a value", base(op(wire.Op{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.txn.Encode(); err == nil {
				t.Fatal("encoded")
			}
			// The same value in a TXN1 body is refused by AppendFrame too.
			if out, err := wire.AppendFrame([]byte("keep"), 0, 0, &wire.Txn1{Position: 1, Txn: c.txn}); err == nil || string(out) != "keep" {
				t.Fatalf("AppendFrame: %q, %v", out, err)
			}
		})
	}
	t.Run("all-zero origin", func(t *testing.T) {
		x := base(func(x *wire.Txn) { x.Origin = wire.OriginID{} })
		if _, err := x.Encode(); err == nil {
			t.Fatal("a transaction with an all-zero origin id encoded; every receiver rejects it")
		}
	})
	t.Run("error leaves dst unchanged", func(t *testing.T) {
		for _, c := range cases {
			dst := []byte("keep")
			out, err := c.txn.AppendEncoding(dst)
			if err == nil {
				t.Fatalf("%s: encoded", c.name)
			}
			if string(out) != "keep" {
				t.Fatalf("%s: AppendEncoding extended dst by %d bytes on error", c.name, len(out)-4)
			}
		}
	})
}

// TestMessageWholeEqualsParts: a message of many frames decodes to what each frame decodes
// to alone, at its offset; re-encoding the whole gives the message back.
func TestMessageWholeEqualsParts(t *testing.T) {
	var parts [][]byte
	for _, s := range samples() {
		parts = append(parts, sampleFrame(s))
	}
	parts = append(parts, raw(0x90, 0x03, 9, []byte("hint")), raw(0xfe, 0, 0, nil), frame(&wire.Ping{ID: 99}))
	msg := cat(parts...)
	whole, err := decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != len(parts) {
		t.Fatalf("%d frames, want %d", len(whole), len(parts))
	}
	off := 0
	for i, p := range parts {
		alone, err := decode(p)
		if err != nil || len(alone) != 1 {
			t.Fatalf("frame %d alone: %v", i, err)
		}
		w, a := whole[i], alone[0]
		if w.Offset != off || a.Offset != 0 {
			t.Fatalf("frame %d: offset %d (alone %d), want %d", i, w.Offset, a.Offset, off)
		}
		if w.Header != a.Header || !bytes.Equal(w.Body, a.Body) || !reflect.DeepEqual(w.Value, a.Value) {
			t.Fatalf("frame %d differs: %+v vs %+v", i, w, a)
		}
		if a.Value == nil && (a.Type != 0x90 && a.Type != 0xfe) {
			t.Fatalf("frame %d has no value", i)
		}
		off += len(p)
	}
	re, rerr := wire.EncodeMessage(whole)
	if rerr != nil || !bytes.Equal(re, msg) {
		t.Fatalf("re-encoded whole message differs (%v)", rerr)
	}
}

// TestDecodeMessageErrors: the error names the offending frame's type and header offset,
// and the frames before it are returned; header rules apply in SPEC's order.
func TestDecodeMessageErrors(t *testing.T) {
	hello := frame(validHello())
	prefixes := [][][]byte{nil, {pingFrame}, {pingFrame, hello}, {hello, raw(0x91, 0, 0, []byte("x")), pingFrame}}
	hdr := func(typ wire.Type, flags uint8, ch, length uint32) []byte {
		return wire.AppendHeader(nil, wire.Header{Type: typ, Flags: flags, Channel: ch, Length: length})
	}
	bad := []struct {
		name  string
		frame []byte
		code  wire.Code
		typ   wire.Type
		last  bool // the frame runs to the end of the message
	}{
		{"truncated header", hx("04 00 00"), wire.CodeMalformedFrame, wire.TypePing, true},
		{"one byte", hx("12"), wire.CodeMalformedFrame, wire.TypeAck1, true},
		{"body past the end", cat(hdr(wire.TypePing, 0, 0, 10), hx("a1 01 07")), wire.CodeMalformedFrame, wire.TypePing, true},
		{"body past the end by one byte", cat(hdr(wire.TypePing, 0, 0, 4), hx("a1 01 07")), wire.CodeMalformedFrame, wire.TypePing, true},
		{"body over the frame limit", hdr(wire.TypePing, 0, 0, wire.MaxFrameBody+1), wire.CodeFrameTooLarge, wire.TypePing, false},
		{"over the limit and past the end: the limit is checked first", cat(hdr(wire.TypeAck1, 0, 0, 1<<31), hx("a1")), wire.CodeFrameTooLarge, wire.TypeAck1, true},
		{"PING body over its type's bound", raw(wire.TypePing, 0, 0, make([]byte, wire.MaxControlBody+1)), wire.CodeFrameTooLarge, wire.TypePing, false},
		{"the type's bound is checked before the flags and channel", raw(wire.TypeAck1, 0x80, 3, make([]byte, wire.MaxControlBody+1)), wire.CodeFrameTooLarge, wire.TypeAck1, false},
		{"HELLO body over its type's bound", raw(wire.TypeHello, 0, 0, make([]byte, wire.MaxHelloBody+1)), wire.CodeFrameTooLarge, wire.TypeHello, false},
		{"over the type's bound and past the end: the end is checked first", cat(hdr(wire.TypePing, 0, 0, wire.MaxControlBody+1), hx("a1 01 07")), wire.CodeMalformedFrame, wire.TypePing, true},
		{"undefined flags", raw(wire.TypePing, 1, 0, hx("a1 01 07")), wire.CodeBadFlags, wire.TypePing, false},
		{"TXN1 compressed bit", raw(wire.TypeTxn1, 1, 0, posTxn(1, okTxn().enc())), wire.CodeBadFlags, wire.TypeTxn1, false},
		{"flags are checked before the channel", raw(wire.TypePing, 0x80, 3, hx("a1 01 07")), wire.CodeBadFlags, wire.TypePing, false},
		{"flags are checked before the body", raw(wire.TypePing, 2, 0, hx("ff")), wire.CodeBadFlags, wire.TypePing, false},
		{"channel 5", raw(wire.TypePing, 0, 5, hx("a1 01 07")), wire.CodeBadChannel, wire.TypePing, false},
		{"ORIGIN on a channel (version 1)", raw(wire.TypeOrigin, 0, 1, body(&wire.Origin{Origin: originA, Name: "a"})), wire.CodeBadChannel, wire.TypeOrigin, false},
		{"the channel is checked before the body", raw(wire.TypeAck1, 0, 1, nil), wire.CodeBadChannel, wire.TypeAck1, false},
		{"unknown critical type 0x7e", raw(0x7e, 0, 0, nil), wire.CodeUnknownFrame, 0x7e, false},
		{"type 0x00", raw(0x00, 0, 0, nil), wire.CodeUnknownFrame, 0x00, false},
		{"reserved control type 0x07", raw(0x07, 0, 0, hx("a0")), wire.CodeUnknownFrame, 0x07, false},
		{"reserved version-2 type 0x28", raw(0x28, 0, 0, hx("a0")), wire.CodeUnknownFrame, 0x28, false},
		{"reserved version-2 type 0x2f on a channel", raw(0x2f, 0, 3, hx("a0")), wire.CodeUnknownFrame, 0x2f, false},
		{"SUBSCRIBE on a channel", raw(wire.TypeSubscribe, 0, 1, hx("a0")), wire.CodeBadChannel, wire.TypeSubscribe, false},
		{"CREDIT on a channel", raw(wire.TypeCredit, 0, 1, body(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 1, Limit: 9}}})), wire.CodeBadChannel, wire.TypeCredit, false},
		{"DATA on channel 0", raw(wire.TypeData, 0, 0, cat(hash9[:], okTxn().enc())), wire.CodeBadChannel, wire.TypeData, false},
		{"DATA flags are checked before the channel", raw(wire.TypeData, 1, 0, cat(hash9[:], okTxn().enc())), wire.CodeBadFlags, wire.TypeData, false},
		{"DATA body too short for its hash", raw(wire.TypeData, 0, 1, make([]byte, 31)), wire.CodeBadTxn, wire.TypeData, false},
		{"version 2 type 0x20 with an empty body", raw(0x20, 0, 0, hx("a0")), wire.CodeBadCBOR, wire.TypeSubscribe, false},
		{"a bad version-2 field", raw(wire.TypeResend, 0, 0, hx("a2 01 00 02 01")), wire.CodeBadField, wire.TypeResend, false},
		{"unknown critical type with flags and a channel", raw(0x60, 0xff, 9, nil), wire.CodeUnknownFrame, 0x60, false},
		{"bad body", raw(wire.TypeAck1, 0, 0, hx("a1 01 00")), wire.CodeBadField, wire.TypeAck1, false},
		{"bad CBOR", raw(wire.TypePong, 0, 0, hx("a0")), wire.CodeBadCBOR, wire.TypePong, false},
		{"bad txn", raw(wire.TypeTxn1, 0, 0, posTxn(0, okTxn().enc())), wire.CodeBadTxn, wire.TypeTxn1, false},
		{"unsupported txn", raw(wire.TypeTxn1, 0, 0, posTxn(1, txnWith(func(x *txnBytes) { x.format = 3 }))), wire.CodeUnsupportedTxn, wire.TypeTxn1, false},
		{"a float in an unknown key", raw(wire.TypePong, 0, 0, hx("a2 01 07 09 f9 3c00")), wire.CodeBadCBOR, wire.TypePong, false},
	}
	for _, pre := range prefixes {
		prefix := cat(pre...)
		for _, b := range bad {
			msg := cat(prefix, b.frame)
			if !b.last {
				msg = append(msg, pingFrame...) // a valid frame after the bad one is not decoded
			}
			frames, err := decode(msg)
			if err == nil {
				t.Fatalf("%s after %d frames: accepted", b.name, len(pre))
			}
			if err.Code != b.code || err.Frame != b.typ || err.Offset != len(prefix) {
				t.Fatalf("%s after %d frames: %v (frame 0x%02x offset %d), want %s in 0x%02x at %d",
					b.name, len(pre), err, uint8(err.Frame), err.Offset, b.code, uint8(b.typ), len(prefix))
			}
			if cl, _ := wire.ClassOf(b.code); err.Class != cl {
				t.Fatalf("%s: class %s", b.name, err.Class)
			}
			if len(frames) != len(pre) {
				t.Fatalf("%s after %d frames: %d frames returned", b.name, len(pre), len(frames))
			}
		}
	}

	// Message-level rules: not empty, not over the limit (offset 0).
	if _, err := decode(nil); err == nil || err.Code != wire.CodeMalformedFrame || err.Offset != 0 {
		t.Fatalf("empty message: %v", err)
	}
	big := cat(pingFrame, raw(0x90, 0, 0, make([]byte, 65536-len(pingFrame)-wire.HeaderSize)))
	if _, err := wire.DecodeMessage(big, 65536, wire.MaxFrameBody); err != nil {
		t.Fatalf("message at the limit: %v", err)
	}
	big = append(big, 0)
	if _, err := wire.DecodeMessage(big, 65536, wire.MaxFrameBody); err == nil || err.Code != wire.CodeMessageTooLarge ||
		err.Class != wire.ClassResourceLimit || err.Offset != 0 || err.Frame != wire.TypePing {
		t.Fatalf("message over the limit: %v", err)
	}
	// A configured frame-body limit below the protocol's.
	f := raw(wire.TypePing, 0, 0, cat(hx("a2 01 07 09 58 64"), make([]byte, 100)))
	if _, err := wire.DecodeMessage(f, wire.DefaultMaxMessage, uint32(len(f)-wire.HeaderSize)); err != nil {
		t.Fatalf("body at the configured limit: %v", err)
	}
	if _, err := wire.DecodeMessage(cat(pingFrame, f), wire.DefaultMaxMessage, uint32(len(f)-wire.HeaderSize-1)); err == nil ||
		err.Code != wire.CodeFrameTooLarge || err.Offset != len(pingFrame) {
		t.Fatalf("body over the configured limit: %v", err)
	}
}

// TestIgnorableFrames: an unknown type with the ignorable bit is skipped whatever its flags
// and channel (rule 5 applies to implemented types only); its bytes are kept.
func TestIgnorableFrames(t *testing.T) {
	for _, typ := range []wire.Type{0x80, 0x8f, 0x90, 0xfe, 0xff} {
		f := raw(typ, 0xff, 0xffffffff, []byte{0xde, 0xad})
		frames, err := decode(cat(pingFrame, f, pingFrame))
		if err != nil {
			t.Fatalf("0x%02x: %v", uint8(typ), err)
		}
		if len(frames) != 3 || frames[1].Value != nil || frames[1].Offset != len(pingFrame) || !bytes.Equal(frames[1].Body, []byte{0xde, 0xad}) {
			t.Fatalf("0x%02x: %+v", uint8(typ), frames[1])
		}
		if !typ.Ignorable() || wire.Known(typ) {
			t.Fatalf("0x%02x: ignorable %v known %v", uint8(typ), typ.Ignorable(), wire.Known(typ))
		}
		if _, derr := wire.DecodeBody(frames[1].Frame); derr == nil || derr.Code != wire.CodeUnknownFrame {
			t.Fatalf("DecodeBody of an unknown type: %v", derr)
		}
	}
}

// TestErrorValues: codes, classes and the Error helpers.
func TestErrorValues(t *testing.T) {
	for _, c := range wire.Codes() {
		cl, ok := wire.ClassOf(c)
		if !ok || cl == "" {
			t.Fatalf("code %s has no class", c)
		}
		e := wire.NewError(c, "m")
		if e.Class != cl || e.Offset != wire.NoOffset || e.Code != c {
			t.Fatalf("NewError(%s) = %+v", c, e)
		}
		// A code of class local never travels on the wire; every other one is a valid CLOSE.
		cl2 := &wire.Close{Code: c, Class: cl}
		if err := cl2.Validate(); err != nil {
			t.Fatalf("CLOSE of %s: %v", c, err)
		}
	}
	fe := wire.FrameError(wire.CodeBadFlags, wire.TypePing, 13, "x")
	if fe.Frame != wire.TypePing || fe.Offset != 13 || fe.Class != wire.ClassProtocol {
		t.Fatalf("FrameError %+v", fe)
	}
	if !errors.Is(fe, wire.NewError(wire.CodeBadFlags, "other")) || errors.Is(fe, wire.NewError(wire.CodeBadField, "")) {
		t.Fatal("errors.Is does not match on the code")
	}
	if _, ok := wire.ClassOf("no-such-code"); ok {
		t.Fatal("unknown code has a class")
	}

	// Detail is the error without its code and class: what a CLOSE message carries.
	for _, c := range []struct {
		e             *wire.Error
		detail, error string
	}{
		{fe, "PING frame at offset 13: x", "bad-flags (protocol) in PING frame at offset 13: x"},
		{wire.FrameError(wire.CodeFrameTooLarge, wire.TypeHello, 0, ""), "HELLO frame at offset 0", "frame-too-large (resource-limit) in HELLO frame at offset 0"},
		{wire.NewError(wire.CodeGoingAway, "bye"), "bye", "going-away (transient): bye"},
		{wire.NewError(wire.CodeGoingAway, ""), "", "going-away (transient)"},
	} {
		if got := c.e.Detail(); got != c.detail {
			t.Errorf("Detail() = %q, want %q", got, c.detail)
		}
		if got := c.e.Error(); got != c.error {
			t.Errorf("Error() = %q, want %q", got, c.error)
		}
	}
}

// v2Entry builds one list entry as a raw CBOR array, for bodies a typed value cannot
// express.
func v2Entry(parts ...any) []any { return parts }

// TestV2FieldRules: each field rule of the version-2 bodies (their Validate) rejects a
// well-typed value with bad-field, from the decoder and from Validate alike; the rules'
// bounds are accepted.
func TestV2FieldRules(t *testing.T) {
	zero := wire.Hash{}
	sub := func(es ...wire.SubscribeEntry) *wire.Subscribe { return &wire.Subscribe{Entries: es} }
	se := func(ch uint32, o wire.OriginID, seq uint64, h wire.Hash) wire.SubscribeEntry {
		return wire.SubscribeEntry{Channel: ch, Origin: o, Seq: seq, Hash: h, Credit: 1024}
	}
	cur := func(es ...wire.CursorEntry) *wire.Cursor { return &wire.Cursor{Entries: es} }
	head := func(o wire.OriginID, seq uint64) wire.Head { return wire.Head{Origin: o, Seq: seq, HLC: 7} }
	cred := func(es ...wire.CreditEntry) *wire.Credit { return &wire.Credit{Entries: es} }
	type validator interface {
		wire.Body
		Validate() error
	}
	for _, c := range []struct {
		name string
		v    validator
		ok   bool
	}{
		{"SUBSCRIBE valid", sub(se(1, originA, 0, zero), se(2, originB, 9, hash9)), true},
		{"SUBSCRIBE channels with gaps", sub(se(3, originA, 0, zero), se(70000, originB, 0, zero)), true},
		{"SUBSCRIBE with no entry", sub(), false},
		{"SUBSCRIBE on channel 0", sub(se(0, originA, 0, zero)), false},
		{"SUBSCRIBE with channels out of order (SPEC M24)", sub(se(2, originA, 0, zero), se(1, originB, 0, zero)), false},
		{"SUBSCRIBE with a channel twice", sub(se(1, originA, 0, zero), se(1, originB, 0, zero)), false},
		{"SUBSCRIBE of the all-zero origin", sub(se(1, wire.OriginID{}, 0, zero)), false},
		{"SUBSCRIBE at seq 0 with a hash", sub(se(1, originA, 0, hash9)), false},
		{"SUBSCRIBE at seq 9 without its hash", sub(se(1, originA, 9, zero)), false},
		{"SUBSCRIBE of an origin twice", sub(se(1, originA, 0, zero), se(2, originA, 3, hash9)), false},
		{"UNSUBSCRIBE valid", &wire.Unsubscribe{Channels: []uint32{1, 2, 9}}, true},
		{"UNSUBSCRIBE of no channel", &wire.Unsubscribe{Channels: []uint32{}}, false},
		{"UNSUBSCRIBE of channel 0", &wire.Unsubscribe{Channels: []uint32{0, 1}}, false},
		{"UNSUBSCRIBE out of order", &wire.Unsubscribe{Channels: []uint32{2, 1}}, false},
		{"UNSUBSCRIBE of a channel twice", &wire.Unsubscribe{Channels: []uint32{2, 2}}, false},
		{"CURSOR valid", cur(wire.CursorEntry{Channel: 1, Seq: 1, Hash: hash9}, wire.CursorEntry{Channel: 2, Seq: 5, Hash: hash9}), true},
		{"CURSOR with no entry", cur(), false},
		{"CURSOR at seq 0 (SPEC M24)", cur(wire.CursorEntry{Channel: 1, Seq: 0}), false},
		{"CURSOR at seq 0 with a hash", cur(wire.CursorEntry{Channel: 1, Seq: 0, Hash: hash9}), false},
		{"CURSOR at seq 1 without its hash", cur(wire.CursorEntry{Channel: 1, Seq: 1}), false},
		{"CURSOR on channel 0", cur(wire.CursorEntry{Channel: 0, Seq: 1, Hash: hash9}), false},
		{"CURSOR channels out of order", cur(wire.CursorEntry{Channel: 2, Seq: 1, Hash: hash9}, wire.CursorEntry{Channel: 1, Seq: 1, Hash: hash9}), false},
		{"HEADS valid", &wire.Heads{Heads: []wire.Head{head(originA, 1)}, Withdrawn: []wire.OriginID{originB}}, true},
		{"HEADS with nothing to say", &wire.Heads{}, false},
		{"HEADS with floors only", &wire.Heads{Floors: []wire.Floor{{Origin: originA, Seq: 1, Hash: hash9}}}, true},
		{"HEADS with a floor at seq 0", &wire.Heads{Floors: []wire.Floor{{Origin: originA, Hash: hash9}}}, false},
		{"HEADS with a floor without its hash", &wire.Heads{Floors: []wire.Floor{{Origin: originA, Seq: 1}}}, false},
		{"HEADS with a floor of the all-zero origin", &wire.Heads{Floors: []wire.Floor{{Seq: 1, Hash: hash9}}}, false},
		{"HEADS with floors out of order", &wire.Heads{Floors: []wire.Floor{{Origin: originB, Seq: 1, Hash: hash9}, {Origin: originA, Seq: 1, Hash: hash9}}}, false},
		{"HEADS with a floor of a withdrawn origin", &wire.Heads{Withdrawn: []wire.OriginID{originA}, Floors: []wire.Floor{{Origin: originA, Seq: 1, Hash: hash9}}}, false},
		{"PURGED valid", &wire.Purged{Channel: 1, Seq: 1, Hash: hash9}, true},
		{"PURGED on channel 0", &wire.Purged{Seq: 1, Hash: hash9}, false},
		{"PURGED at seq 0", &wire.Purged{Channel: 1}, false},
		{"PURGED without its hash", &wire.Purged{Channel: 1, Seq: 3}, false},
		{"HEADS with an origin both advertised and withdrawn (SPEC M24)", &wire.Heads{Heads: []wire.Head{head(originA, 1)}, Withdrawn: []wire.OriginID{originA}}, false},
		{"HEADS with an origin both advertised and withdrawn, among others", &wire.Heads{Heads: []wire.Head{head(originA, 1), head(originB, 2)},
			Withdrawn: []wire.OriginID{{0x01}, originB}}, false},
		{"HEADS at seq 0", &wire.Heads{Heads: []wire.Head{head(originA, 0)}}, false},
		{"HEADS of the all-zero origin", &wire.Heads{Heads: []wire.Head{head(wire.OriginID{}, 1)}}, false},
		{"HEADS out of order", &wire.Heads{Heads: []wire.Head{head(originB, 1), head(originA, 1)}}, false},
		{"HEADS with an origin twice", &wire.Heads{Heads: []wire.Head{head(originA, 1), head(originA, 2)}}, false},
		{"HEADS withdrawing the all-zero origin", &wire.Heads{Withdrawn: []wire.OriginID{{}}}, false},
		{"HEADS withdrawn out of order", &wire.Heads{Withdrawn: []wire.OriginID{originB, originA}}, false},
		{"HEADS withdrawing an origin twice", &wire.Heads{Withdrawn: []wire.OriginID{originA, originA}}, false},
		{"CREDIT valid", cred(wire.CreditEntry{Channel: 0, Limit: 1}, wire.CreditEntry{Channel: 3, Limit: 0}), true},
		{"CREDIT with no entry", cred(), false},
		{"CREDIT of the connection twice", cred(wire.CreditEntry{Channel: 0, Limit: 1}, wire.CreditEntry{Channel: 0, Limit: 2}), false},
		{"CREDIT channels out of order", cred(wire.CreditEntry{Channel: 2, Limit: 1}, wire.CreditEntry{Channel: 1, Limit: 2}), false},
		{"RESEND valid", &wire.Resend{Channel: 1, From: 1}, true},
		{"RESEND on channel 0", &wire.Resend{Channel: 0, From: 1}, false},
		{"RESEND from 0", &wire.Resend{Channel: 1, From: 0}, false},
		{"DIVERGENCE valid, side 1", &wire.Divergence{Channel: 1, Seq: 2, Hash: hash9, Side: wire.SideSender}, true},
		{"DIVERGENCE at seq 0", &wire.Divergence{Channel: 1}, true},
		{"DIVERGENCE side 2 (SPEC M24)", &wire.Divergence{Channel: 1, Seq: 1, Hash: hash9, Side: 2}, false},
		{"DIVERGENCE side 255", &wire.Divergence{Channel: 1, Seq: 1, Hash: hash9, Side: 255}, false},
		{"DIVERGENCE on channel 0", &wire.Divergence{Channel: 0, Seq: 1, Hash: hash9}, false},
		{"DIVERGENCE at seq 0 with a hash", &wire.Divergence{Channel: 1, Hash: hash9}, false},
		{"DIVERGENCE at seq 1 without its hash", &wire.Divergence{Channel: 1, Seq: 1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			verr := c.v.Validate()
			frames, err := decode(cat(pingFrame, raw(c.v.FrameType(), 0, 0, body(c.v))))
			if c.ok {
				if verr != nil || err != nil {
					t.Fatalf("rejected: %v / %v", verr, err)
				}
				if !reflect.DeepEqual(frames[1].Value, c.v) {
					t.Fatalf("decoded %#v, want %#v", frames[1].Value, c.v)
				}
				return
			}
			if verr == nil {
				t.Fatal("Validate accepted it")
			}
			if err == nil {
				t.Fatalf("decoded: %#v", frames[1].Value)
			}
			if err.Code != wire.CodeBadField || err.Class != wire.ClassProtocol || err.Frame != c.v.FrameType() || err.Offset != len(pingFrame) {
				t.Fatalf("got %v (frame %s offset %d), want bad-field in %s at %d", err, err.Frame, err.Offset, c.v.FrameType(), len(pingFrame))
			}
			if len(frames) != 1 {
				t.Fatalf("%d frames before the error", len(frames))
			}
		})
	}

	// A fixed-size field of the wrong size inside an entry is a field error too.
	for _, c := range []struct {
		name string
		typ  wire.Type
		body []byte
	}{
		{"SUBSCRIBE origin of 15 bytes", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, originA[:15], 0, make([]byte, 32), 1)}})},
		{"SUBSCRIBE hash of 31 bytes", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, originA[:], 0, make([]byte, 31), 1)}})},
		{"CURSOR hash of 33 bytes", wire.TypeCursor, cb(map[uint64]any{1: []any{v2Entry(1, 1, make([]byte, 33))}})},
		{"HEADS origin of 17 bytes", wire.TypeHeads, cb(map[uint64]any{1: []any{v2Entry(make([]byte, 17), 1, 1)}})},
		{"HEADS withdrawn origin of 0 bytes", wire.TypeHeads, cb(map[uint64]any{2: []any{[]byte{}}})},
		{"DIVERGENCE hash of 1 byte", wire.TypeDivergence, cb(map[uint64]any{1: 1, 2: 1, 3: []byte{1}, 4: 0})},
	} {
		if _, err := decode(cat(pingFrame, raw(c.typ, 0, 0, c.body))); err == nil || err.Code != wire.CodeBadField || err.Frame != c.typ || err.Offset != len(pingFrame) {
			t.Errorf("%s: %v, want bad-field in %s at %d", c.name, err, c.typ, len(pingFrame))
		}
	}
}

// TestV2BadCBOR: the version-2 bodies follow the rules of "Control bodies": list entries
// are arrays of exactly their length, fields have their types, required keys are present,
// and an optional list present but empty is not canonical.
func TestV2BadCBOR(t *testing.T) {
	h := make([]byte, 32)
	h[0] = 1
	for _, c := range []struct {
		name string
		typ  wire.Type
		body []byte
	}{
		{"SUBSCRIBE entry of 4 elements", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, originA[:], 0, make([]byte, 32))}})},
		{"SUBSCRIBE entry of 6 elements", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, originA[:], 0, make([]byte, 32), 1, 0)}})},
		{"SUBSCRIBE entry as an empty array", wire.TypeSubscribe, cb(map[uint64]any{1: []any{[]any{}}})},
		{"SUBSCRIBE entry as a map", wire.TypeSubscribe, cb(map[uint64]any{1: []any{map[uint64]any{1: 1}}})},
		{"SUBSCRIBE entries as a map", wire.TypeSubscribe, cb(map[uint64]any{1: map[uint64]any{1: 1}})},
		{"SUBSCRIBE channel as text", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry("1", originA[:], 0, make([]byte, 32), 1)}})},
		{"SUBSCRIBE channel over 32 bits", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(uint64(1)<<32, originA[:], 0, make([]byte, 32), 1)}})},
		{"SUBSCRIBE credit negative", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, originA[:], 0, make([]byte, 32), -1)}})},
		{"SUBSCRIBE origin as text", wire.TypeSubscribe, cb(map[uint64]any{1: []any{v2Entry(1, "0123456789abcdef", 0, make([]byte, 32), 1)}})},
		{"SUBSCRIBE without key 1", wire.TypeSubscribe, hx("a0")},
		{"UNSUBSCRIBE channels as a number", wire.TypeUnsubscribe, hx("a1 01 02")},
		{"UNSUBSCRIBE channel as an array", wire.TypeUnsubscribe, hx("a1 01 81 81 02")},
		{"UNSUBSCRIBE without key 1", wire.TypeUnsubscribe, hx("a1 02 81 02")},
		{"CURSOR entry of 2 elements", wire.TypeCursor, cb(map[uint64]any{1: []any{v2Entry(1, 1)}})},
		{"CURSOR entry of 4 elements", wire.TypeCursor, cb(map[uint64]any{1: []any{v2Entry(1, 1, h, 0)}})},
		{"CURSOR hash as text", wire.TypeCursor, cb(map[uint64]any{1: []any{v2Entry(1, 1, strings.Repeat("h", 32))}})},
		{"HEADS entry of 2 elements", wire.TypeHeads, cb(map[uint64]any{1: []any{v2Entry(originA[:], 1)}})},
		{"HEADS entry of 4 elements", wire.TypeHeads, cb(map[uint64]any{1: []any{v2Entry(originA[:], 1, 1, 1)}})},
		{"HEADS with an empty optional heads list", wire.TypeHeads, cb(map[uint64]any{1: []any{}, 2: []any{originA[:]}})},
		{"HEADS with an empty optional withdrawn list", wire.TypeHeads, cb(map[uint64]any{1: []any{v2Entry(originA[:], 1, 1)}, 2: []any{}})},
		{"HEADS hlc negative", wire.TypeHeads, cb(map[uint64]any{1: []any{v2Entry(originA[:], 1, -5)}})},
		{"CREDIT entry of 1 element", wire.TypeCredit, cb(map[uint64]any{1: []any{v2Entry(0)}})},
		{"CREDIT entry of 3 elements", wire.TypeCredit, cb(map[uint64]any{1: []any{v2Entry(0, 1, 2)}})},
		{"CREDIT limit as bytes", wire.TypeCredit, cb(map[uint64]any{1: []any{v2Entry(0, []byte{1})}})},
		{"CREDIT limit as a float", wire.TypeCredit, hx("a1 01 81 82 00 f9 3c00")},
		{"RESEND without from", wire.TypeResend, hx("a1 01 01")},
		{"RESEND channel non-shortest", wire.TypeResend, hx("a2 01 18 01 02 03")},
		{"DIVERGENCE without side", wire.TypeDivergence, cb(map[uint64]any{1: 1, 2: 1, 3: h})},
		{"DIVERGENCE side over 8 bits", wire.TypeDivergence, cb(map[uint64]any{1: 1, 2: 1, 3: h, 4: 256})},
		{"DIVERGENCE with a tag", wire.TypeDivergence, cat(hx("a4 01 01 02 01 03 5820"), h, hx("04 c1 00"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, err := decode(cat(pingFrame, raw(c.typ, 0, 0, c.body)))
			if err == nil {
				t.Fatalf("accepted: %#v", frames[len(frames)-1].Value)
			}
			if err.Code != wire.CodeBadCBOR || err.Class != wire.ClassProtocol || err.Frame != c.typ || err.Offset != len(pingFrame) {
				t.Fatalf("got %v (frame %s offset %d), want bad-cbor in %s at %d", err, err.Frame, err.Offset, c.typ, len(pingFrame))
			}
		})
	}
}

// TestDataBody: DATA's binary body is the chain hash then a transaction encoding, decoded
// by the transaction rules (bad-txn, unsupported-txn); a body too short for the hash is
// bad-txn; DATA names a channel, never 0; bit 0 of its flags is reserved, so undefined in
// this build; it has no body bound of its own.
func TestDataBody(t *testing.T) {
	enc := okTxn().enc()
	good := cat(hash9[:], enc)
	for _, c := range []struct {
		name string
		body []byte
		code wire.Code
	}{
		{"empty", nil, wire.CodeBadTxn},
		{"31 bytes", make([]byte, 31), wire.CodeBadTxn},
		{"the hash only", hash9[:], wire.CodeBadTxn},
		{"the hash and the fixed part only", cat(hash9[:], enc[:65]), wire.CodeBadTxn},
		{"seq 0", cat(hash9[:], txnWith(func(x *txnBytes) { x.seq = 0 })), wire.CodeBadTxn},
		{"trailing bytes", cat(good, hx("00")), wire.CodeBadTxn},
		{"format 3 with no room for its leaf block", cat(hash9[:], txnWith(func(x *txnBytes) { x.format = 3 })), wire.CodeBadTxn},
		{"format 4", cat(hash9[:], txnWith(func(x *txnBytes) { x.format = 4 })), wire.CodeUnsupportedTxn},
		{"op kind 3", cat(hash9[:], txnWith(func(x *txnBytes) { x.ops[0] = 3 })), wire.CodeUnsupportedTxn},
	} {
		_, _, perr := wire.ParseData(c.body)
		if perr == nil || wire.TxnErrorCode(perr) != c.code {
			t.Errorf("ParseData of %s: %v, want %s", c.name, perr, c.code)
		}
		_, err := decode(cat(pingFrame, raw(wire.TypeData, 0, 1, c.body), pingFrame))
		if err == nil || err.Code != c.code || err.Frame != wire.TypeData || err.Offset != len(pingFrame) {
			t.Errorf("DATA of %s: %v, want %s at %d", c.name, err, c.code, len(pingFrame))
		}
	}

	// ParseData aliases the body and returns the claimed hash, whatever it is: whether it is
	// the encoding's is the receiver's check.
	claimed, v, err := wire.ParseData(good)
	if err != nil || claimed != hash9 || !bytes.Equal(v.Raw(), enc) || v.Hash() == hash9 || &v.Raw()[0] != &good[32] {
		t.Fatalf("ParseData: %v, claimed %x", err, claimed)
	}
	if wire.DataHeader != 32 {
		t.Fatalf("DATA's fixed part is %d bytes, SPEC says 32", wire.DataHeader)
	}

	// The header rules: channel 0 is bad-channel, flags are bad-flags (checked first).
	for _, c := range []struct {
		name    string
		flags   uint8
		channel uint32
		code    wire.Code
	}{
		{"DATA on channel 0", 0, 0, wire.CodeBadChannel},
		{"DATA on channel 0 with a bad body", 0, 0, wire.CodeBadChannel},
		{"DATA with the reserved compressed bit", 1, 1, wire.CodeBadFlags},
		{"DATA with flags 0x80 on channel 0", 0x80, 0, wire.CodeBadFlags},
	} {
		b := good
		if strings.Contains(c.name, "bad body") {
			b = hx("00")
		}
		frames, err := decode(cat(pingFrame, raw(wire.TypeData, c.flags, c.channel, b), pingFrame))
		if err == nil || err.Code != c.code || err.Frame != wire.TypeData || err.Offset != len(pingFrame) || len(frames) != 1 {
			t.Errorf("%s: %v after %d frames, want %s at %d", c.name, err, len(frames), c.code, len(pingFrame))
		}
	}
	// Any channel above 0 decodes; the channel is the header's.
	for _, ch := range []uint32{1, 2, 1<<31 + 5, 1<<32 - 1} {
		frames, err := decode(raw(wire.TypeData, 0, ch, good))
		if err != nil || frames[0].Channel != ch || frames[0].Value.(*wire.Data).Hash != hash9 {
			t.Errorf("DATA on channel %d: %v", ch, err)
		}
	}
	// No bound of its own: a DATA body over 64 KiB decodes, up to the frame limit.
	big := wire.Txn{Origin: originA, Seq: 1, Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: make([]byte, 100<<10)}}}
	f, ferr := wire.AppendFrame(nil, 0, 3, &wire.Data{Hash: hash9, Txn: big})
	if ferr != nil {
		t.Fatal(ferr)
	}
	if frames, err := decode(f); err != nil || len(frames[0].Body) <= wire.MaxControlBody {
		t.Errorf("DATA of %d bytes: %v", len(f), err)
	}
	if _, err := wire.DecodeMessage(f, wire.DefaultMaxMessage, uint32(len(f)-wire.HeaderSize-1)); err == nil || err.Code != wire.CodeFrameTooLarge {
		t.Errorf("DATA one byte over a configured frame limit: %v", err)
	}
}

// mustData encodes a DATA frame on channel 1 carrying txn.
func mustData(t *testing.T, txn wire.Txn) []byte {
	t.Helper()
	f, err := wire.AppendFrame(nil, 0, 1, &wire.Data{Hash: hash9, Txn: txn})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
