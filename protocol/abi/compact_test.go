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
