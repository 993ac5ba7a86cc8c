package abi_test

import (
	"reflect"
	"strings"
	"testing"

	"plait/protocol/abi"
	"plait/protocol/wire"
)

// compactCases are messages with every field set, none set, and the edge values the
// layout treats specially (a present zero clock offset, an empty limits message, a
// nested message longer than one length byte).
func compactCases() (results []abi.ResultMsg, events []abi.EventMsg, statuses []abi.StatusMsg) {
	o, h := wire.OriginID{1, 2, 3}, wire.Hash{4, 5, 6}
	err := &abi.ErrorMsg{Code: "bad-frame", Class: "protocol", Message: strings.Repeat("x", 300), Frame: 7, Offset: -1}
	hs := &abi.HandshakeMsg{Version: 3, Caps: []string{"a", "", "tls-exporter"}, PeerName: "b", PeerOrigin: o,
		PeerMin: 1, PeerMax: 3, Authenticated: true, Bound: true}
	results = []abi.ResultMsg{{}, {Op: 0x1c, Index: 1 << 40, Err: err}, {Err: &abi.ErrorMsg{}}}
	events = []abi.EventMsg{{}, {Kind: 3, Position: 9, Txn: []byte{1, 2}, Expected: 5, Origin: &o, Name: "n", Frame: 0x20,
		Handshake: hs, Err: err, ByPeer: true, Count: 2, Seq: 1 << 63, Hash: &h,
		Heads:    &abi.HeadsMsg{Heads: []wire.Head{{Origin: o, Seq: 2, HLC: 3}}, Withdrawn: []wire.OriginID{o}, Floors: []wire.Floor{{Origin: o, Seq: 1, Hash: h}}},
		Outgoing: true, Copy: &abi.CopyMsg{Channel: 1, Credit: 2, Table: []byte("t"), Key: []byte("k")},
		CopyBegin: &abi.CopyBeginMsg{Channel: 1, Positions: []wire.CopyPosition{{Origin: o, Seq: 1, Hash: h, HLC: 2}}, Tables: 1, Records: 2, Bytes: 3},
		Chunk:     []byte{9}, RangeDigest: []byte{8}, Range: []byte{7}}}
	zero, off := int64(0), int64(-12345)
	full := abi.StatusMsg{Configured: true, State: 2, Connected: true, HeldBytes: 100, ReadPaused: true, SendBudget: 1 << 20,
		Deadline: 1 << 62, RTT: 5, Version: 2, Err: err, LastReceive: -7, Liveness: 8, MinVersion: 1, MaxVersion: 3,
		Handshake: hs, Limits: &abi.LimitsMsg{MaxFrameBody: 1, MaxMessage: 2, MaxSendBuffer: 3, MaxUnackedBytes: 4, MaxOrigins: 5,
			HandshakeTimeout: 6, PingInterval: 7, LivenessTimeout: 8, MaxChannels: 9, MaxChannelBuffer: 10, MaxSessionBuffer: 11},
		Credits: []abi.CreditMsg{{Origin: o, Credit: 1}, {Origin: wire.OriginID{9}}}, HasReady: true, Resumed: true,
		CopyCredit: 3, ClockOffset: &off, RangeAsked: true}
	for i := range 17 { // every counter, each its own key
		reflect.ValueOf(&full.Stats).Elem().Field(i).SetUint(uint64(i + 1))
	}
	statuses = []abi.StatusMsg{{}, full, {ClockOffset: &zero, Limits: &abi.LimitsMsg{}}}
	return results, events, statuses
}

// TestCompactRecords: a compact record reads back as the CBOR record of the same message
// reads (ParseResult, ParseEvent, ParseStatus), so a host sees no difference between the
// encodings.
func TestCompactRecords(t *testing.T) {
	results, events, statuses := compactCases()
	check := func(what string, cborRec, compactRec abi.Record, parse func(abi.Record) (any, error)) {
		t.Helper()
		want, err := parse(cborRec)
		if err != nil {
			t.Fatalf("%s, CBOR: %v", what, err)
		}
		got, err := parse(compactRec)
		if err != nil {
			t.Fatalf("%s, compact: %v", what, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: compact reads\n%+v\nCBOR reads\n%+v", what, got, want)
		}
		for n := range len(compactRec.Payload) { // a truncated record is an error, never a panic
			_, _ = parse(abi.Record{Kind: compactRec.Kind, Payload: compactRec.Payload[:n]})
		}
	}
	for i := range results {
		check("result", abi.Record{Kind: abi.KindResult, Payload: abi.MarshalForTest(&results[i])},
			abi.Record{Kind: abi.KindResultCompact, Payload: abi.AppendResultCompact(nil, &results[i])},
			func(r abi.Record) (any, error) { return abi.ParseResult(r) })
	}
	for i := range events {
		check("event", abi.Record{Kind: abi.KindEvent, Payload: abi.MarshalForTest(&events[i])},
			abi.Record{Kind: abi.KindEventCompact, Payload: abi.AppendEventCompact(nil, &events[i])},
			func(r abi.Record) (any, error) { return abi.ParseEvent(r) })
	}
	for i := range statuses {
		check("status", abi.Record{Kind: abi.KindStatus, Payload: abi.MarshalForTest(&statuses[i])},
			abi.Record{Kind: abi.KindStatusCompact, Payload: abi.AppendStatusCompact(nil, &statuses[i])},
			func(r abi.Record) (any, error) { return abi.ParseStatus(r) })
	}
	if _, err := abi.ParseStatus(abi.Record{Kind: abi.KindStatusCompact, Payload: []byte{2, 1, 0x80}}); err == nil {
		t.Error("a status whose state is not a whole uvarint was read")
	}
	// Keys a later ABI adds are skipped.
	later := append(abi.AppendResultCompact(nil, &results[1]), 99, 2, 0xAA, 0xBB)
	if m, err := abi.ParseResult(abi.Record{Kind: abi.KindResultCompact, Payload: later}); err != nil || m.Index != results[1].Index {
		t.Errorf("a result with an unknown key: %+v, %v", m, err)
	}
}

// fill sets v (settable) to a value whose every field, down through pointers, slices and
// structs, is not zero; n varies the numbers so that two fields never hold the same.
func fill(v reflect.Value, n *uint64) {
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(*n%100 + 1)
	case reflect.Int, reflect.Int64:
		v.SetInt(-int64(*n))
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), n)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && v.Type().Field(i).Name != "Unknown" {
				fill(v.Field(i), n)
			}
		}
	default:
		panic("fill: " + v.Type().String())
	}
}

// TestCompactCoversEveryField: each field of ResultMsg, EventMsg and StatusMsg, set alone
// (with everything it nests set), comes back from its compact record and from its CBOR
// record as it went in. A field the generated codec does not know (compact_gen.go not
// regenerated after the struct changed) comes back zero and fails here.
func TestCompactCoversEveryField(t *testing.T) {
	type codec struct {
		v       any // a pointer to a zero message
		compact func(m any) abi.Record
		cbor    abi.Kind
		parse   func(abi.Record) (any, error)
	}
	for _, c := range []codec{
		{&abi.ResultMsg{}, func(m any) abi.Record {
			return abi.Record{Kind: abi.KindResultCompact, Payload: abi.AppendResultCompact(nil, m.(*abi.ResultMsg))}
		}, abi.KindResult, func(r abi.Record) (any, error) { m, err := abi.ParseResult(r); return &m, err }},
		{&abi.EventMsg{}, func(m any) abi.Record {
			return abi.Record{Kind: abi.KindEventCompact, Payload: abi.AppendEventCompact(nil, m.(*abi.EventMsg))}
		}, abi.KindEvent, func(r abi.Record) (any, error) { m, err := abi.ParseEvent(r); return &m, err }},
		{&abi.StatusMsg{}, func(m any) abi.Record {
			return abi.Record{Kind: abi.KindStatusCompact, Payload: abi.AppendStatusCompact(nil, m.(*abi.StatusMsg))}
		}, abi.KindStatus, func(r abi.Record) (any, error) { m, err := abi.ParseStatus(r); return &m, err }},
	} {
		typ := reflect.TypeOf(c.v).Elem()
		for i := range typ.NumField() {
			f := typ.Field(i)
			m := reflect.New(typ)
			n := uint64(i)
			fill(m.Elem().Field(i), &n)
			for _, rec := range []abi.Record{c.compact(m.Interface()), {Kind: c.cbor, Payload: abi.MarshalForTest(m.Interface())}} {
				got, err := c.parse(rec)
				if err != nil {
					t.Fatalf("%s.%s, kind %d: %v", typ.Name(), f.Name, rec.Kind, err)
				}
				if !reflect.DeepEqual(got, m.Interface()) {
					t.Errorf("%s.%s does not cross a record of kind %d: sent\n%+v\nread\n%+v", typ.Name(), f.Name, rec.Kind,
						m.Elem().Field(i).Interface(), reflect.ValueOf(got).Elem().Field(i).Interface())
				}
			}
		}
	}
}
