package abi_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// The bytes the ABI's encoders give for fixed values, written down as hex. The host reads
// guests of every frozen release, and a frozen release's guest reads the host's commands,
// so none of these bytes may change: a change of an encoder or a parser that moves one byte
// fails here, whatever the code looks like. When a later ABI adds a key, a new case is added
// beside these; an existing one is never edited.

// pinValues are the values the cases share.
var (
	pinO1, pinO2 = prototest.Origin(1), prototest.Origin(2)
	pinH1        = wire.Hash{0xa1, 0xa2, 0xa3, 30: 0xae, 31: 0xaf}
	pinTxn       = prototest.Chain(pinO1, 1, 1, 3)[0].Raw
	pinErr       = &wire.Error{Code: wire.CodeDivergence, Class: wire.ClassProtocol, Frame: wire.TypeData, Offset: 12, Message: "the chain does not extend"}
	pinLocalErr  = &wire.Error{Code: wire.CodeGapDetected, Class: wire.ClassTransient, Offset: wire.NoOffset, Message: "seq 5 after 3"}
)

func pinView(t *testing.T) wire.TxnView {
	t.Helper()
	v, err := wire.ParseTxn(pinTxn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func pinChunk(t *testing.T) *wire.ChunkView {
	t.Helper()
	b, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{
		{Key: []byte("a"), Value: []byte("v"), HLC: 7, Origin: pinO1},
		{Key: []byte("b"), Deleted: true, HLC: 8, Origin: pinO2}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := wire.ParseChunk(b)
	if err != nil {
		t.Fatal(err)
	}
	return &v
}

func pinRange(t *testing.T) *wire.RangeView {
	t.Helper()
	b, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{Table: []byte("t"), Key: []byte("z")},
		[]wire.RangeRecord{{Table: []byte("t"), Key: []byte("a"), Value: []byte("v"), HLC: 7, Origin: pinO1}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := wire.ParseRangeRecords(b)
	if err != nil {
		t.Fatal(err)
	}
	return &v
}

// pinMap is a MAP body of generation 2 whose document is canonical.
func pinMap() *wire.Map {
	return &wire.Map{Generation: 2, Document: []byte(`{"generation":2}`), Publisher: "a", Published: 7}
}

// pinRequest is a REQUEST of kind map with a body.
func pinRequest() *wire.Request {
	return &wire.Request{ID: 5, Target: "c", Path: []string{"a", "b"}, TimeoutMS: 1000, Scope: wire.ScopeRead, Kind: "map", Body: []byte{1}}
}

// pinEvent is one event as a session reports it, and the payloads of its EVENT record.
type pinEvent struct {
	name    string
	ev      func(t *testing.T) protocol.Event
	compact string // hex of AppendEventCompact(EventOf(ev))
	cbor    string // hex of the CBOR EventMsg
}

func ev(e protocol.Event) func(*testing.T) protocol.Event {
	return func(*testing.T) protocol.Event { return e }
}

// pinnedEvents has every event kind, with the fields of its row of protocol.Event's table
// (both versions' rows where they differ, since EventOf maps some fields by kind).
func pinnedEvents() []pinEvent {
	return []pinEvent{
		{"handshake", ev(protocol.Event{Kind: protocol.EventHandshake, Handshake: &protocol.HandshakeInfo{Version: 3,
			Caps: []string{"anti-entropy", "tls-exporter"}, PeerName: "b", PeerOrigin: pinO2, PeerMin: 1, PeerMax: 3,
			Authenticated: true, Bound: true}}),
			"010101083e010103020c616e74692d656e74726f7079020c746c732d6578706f727465720301620410031021364754657a8b98a9becfdced0205010106010307000800",
			"a2010108a8010302826c616e74692d656e74726f70796c746c732d6578706f727465720361620450031021364754657a8b98a9becfdced020501060307f508f5"},
		{"handshake v1 unauthenticated", ev(protocol.Event{Kind: protocol.EventHandshake, Handshake: &protocol.HandshakeInfo{
			Version: 1, PeerName: "a", PeerOrigin: pinO1, PeerMin: 1, PeerMax: 1}}),
			"010101081e01010103016104100013223544576679889baabdccdfee01050101060101",
			"a2010108a5010103616104500013223544576679889baabdccdfee0105010601"},
		{"subscribed v1", ev(protocol.Event{Kind: protocol.EventSubscribed, Position: 7}),
			"010102020107",
			"a201020207"},
		{"subscribed v2", ev(protocol.Event{Kind: protocol.EventSubscribed, Origin: pinO1, Seq: 300, Hash: pinH1}),
			"01010205100013223544576679889baabdccdfee010c02ac020d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a4010205500013223544576679889baabdccdfee010c19012c0d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"origin-named", ev(protocol.Event{Kind: protocol.EventOriginNamed, Origin: pinO2, Name: "node-b"}),
			"0101030510031021364754657a8b98a9becfdced0206066e6f64652d62",
			"a301030550031021364754657a8b98a9becfdced0206666e6f64652d62"},
		{"txn v1", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventTxn, Position: 1 << 40, Txn: pinView(t)}
		},
			"0101040206808080808020034e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e3003010203",
			"a30104021b000001000000000003584e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e3003010203"},
		{"txn v2", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventTxn, Origin: pinO1, Txn: pinView(t)}
		},
			"010104034e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020305100013223544576679889baabdccdfee01",
			"a3010403584e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020305500013223544576679889baabdccdfee01"},
		{"duplicate", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventDuplicate, Origin: pinO1, Txn: pinView(t)}
		},
			"010105034e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020305100013223544576679889baabdccdfee01",
			"a3010503584e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020305500013223544576679889baabdccdfee01"},
		{"gap", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventGap, Origin: pinO1, Txn: pinView(t), Expected: 129}
		},
			"010106034e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e30030102030402810105100013223544576679889baabdccdfee01",
			"a4010603584e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020304188105500013223544576679889baabdccdfee01"},
		{"divergence received", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventDivergence, Origin: pinO1, Txn: pinView(t), DivergedAt: 1,
				Seq: 0, Hash: pinH1, Err: pinErr}
		},
			"010107034e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e300301020304010105100013223544576679889baabdccdfee010937010a646976657267656e6365020870726f746f636f6c031974686520636861696e20646f6573206e6f7420657874656e640401230501180d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a6010703584e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e3003010203040105500013223544576679889baabdccdfee0109a5016a646976657267656e6365026870726f746f636f6c03781974686520636861696e20646f6573206e6f7420657874656e64041823050c0d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"divergence by peer outgoing", ev(protocol.Event{Kind: protocol.EventDivergence, Origin: pinO2, DivergedAt: 9,
			Seq: 9, Hash: pinH1, Err: pinErr, ByPeer: true, Outgoing: true}),
			"0101070510031021364754657a8b98a9becfdced020937010a646976657267656e6365020870726f746f636f6c031974686520636861696e20646f6573206e6f7420657874656e640401230501180a000c01090d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf0f00",
			"a701070550031021364754657a8b98a9becfdced0209a5016a646976657267656e6365026870726f746f636f6c03781974686520636861696e20646f6573206e6f7420657874656e64041823050c0af50c090d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf0ff5"},
		{"acked", ev(protocol.Event{Kind: protocol.EventAcked, Position: 255}),
			"0101080202ff01",
			"a201080218ff"},
		{"ignored-frame", ev(protocol.Event{Kind: protocol.EventIgnoredFrame, Frame: 0x7e, Count: 3}),
			"01010907017e0b0103",
			"a3010907187e0b03"},
		{"closed by peer", ev(protocol.Event{Kind: protocol.EventClosed, Err: pinLocalErr, ByPeer: true}),
			"01010a092b010c6761702d646574656374656402097472616e7369656e74030d736571203520616674657220330501010a00",
			"a3010a09a4016c6761702d646574656374656402697472616e7369656e74036d7365712035206166746572203305200af5"},
		{"unsubscribed", ev(protocol.Event{Kind: protocol.EventUnsubscribed, Origin: pinO2}),
			"01010b0510031021364754657a8b98a9becfdced02",
			"a2010b0550031021364754657a8b98a9becfdced02"},
		{"cursor", ev(protocol.Event{Kind: protocol.EventCursor, Origin: pinO1, Seq: 1 << 20, Hash: pinH1}),
			"01010c05100013223544576679889baabdccdfee010c038080400d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a4010c05500013223544576679889baabdccdfee010c1a001000000d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"resend", ev(protocol.Event{Kind: protocol.EventResend, Origin: pinO1, From: 44}),
			"01010d04012c05100013223544576679889baabdccdfee01",
			"a3010d04182c05500013223544576679889baabdccdfee01"},
		{"credit", ev(protocol.Event{Kind: protocol.EventCredit, Origin: pinO2}),
			"01010e0510031021364754657a8b98a9becfdced02",
			"a2010e0550031021364754657a8b98a9becfdced02"},
		{"credit of the connection", ev(protocol.Event{Kind: protocol.EventCredit}),
			"01010e",
			"a1010e"},
		{"heads", ev(protocol.Event{Kind: protocol.EventHeads, Heads: &wire.Heads{
			Heads: []wire.Head{{Origin: pinO1, Seq: 5, HLC: 1 << 50}}, Withdrawn: []wire.OriginID{pinO2},
			Floors: []wire.Floor{{Origin: pinO1, Seq: 2, Hash: pinH1}}}}),
			"01010f0e69a3018183500013223544576679889baabdccdfee01051b0004000000000000028150031021364754657a8b98a9becfdced02038183500013223544576679889baabdccdfee01025820a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a2010f0ea3018183500013223544576679889baabdccdfee01051b0004000000000000028150031021364754657a8b98a9becfdced02038183500013223544576679889baabdccdfee01025820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"purged", ev(protocol.Event{Kind: protocol.EventPurged, Origin: pinO1, Seq: 17, Hash: pinH1}),
			"01011005100013223544576679889baabdccdfee010c01110d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a4011005500013223544576679889baabdccdfee010c110d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"copy-requested", ev(protocol.Event{Kind: protocol.EventCopyRequested, Copy: &wire.Copy{Channel: 3, Credit: 1 << 16,
			Table: []byte("t"), Key: []byte("k")}}),
			"010111100fa40103021a0001000003417404416b",
			"a2011110a40103021a0001000003417404416b"},
		{"copy-begin", ev(protocol.Event{Kind: protocol.EventCopyBegin, CopyBegin: &wire.CopyBegin{Channel: 3,
			Positions: []wire.CopyPosition{{Origin: pinO1, Seq: 4, Hash: pinH1, HLC: 9}}, Tables: 1, Records: 2, Bytes: 300}}),
			"0101121143a50103028184500013223544576679889baabdccdfee01045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf09030104020519012c",
			"a2011211a50103028184500013223544576679889baabdccdfee01045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf09030104020519012c"},
		{"chunk", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventChunk, Chunk: pinChunk(t)}
		},
			"010113123c0101740201016100000000000000070013223544576679889baabdccdfee0101760201620000000000000008031021364754657a8b98a9becfdced02",
			"a2011312583c0101740201016100000000000000070013223544576679889baabdccdfee0101760201620000000000000008031021364754657a8b98a9becfdced02"},
		{"copy-end", ev(protocol.Event{Kind: protocol.EventCopyEnd, Count: 1000}),
			"0101140b02e807",
			"a201140b1903e8"},
		{"copy-aborted", ev(protocol.Event{Kind: protocol.EventCopyAborted, Err: pinLocalErr, ByPeer: true, Outgoing: true}),
			"010115092b010c6761702d646574656374656402097472616e7369656e74030d736571203520616674657220330501010a000f00",
			"a4011509a4016c6761702d646574656374656402697472616e7369656e74036d7365712035206166746572203305200af50ff5"},
		{"range-asked", ev(protocol.Event{Kind: protocol.EventRangeAsked, RangeDigest: &wire.RangeDigest{
			AfterTable: []byte("t"), AfterKey: []byte("a"), ThroughTable: []byte("t"), ThroughKey: []byte("z"),
			Count: 2, Digest: pinH1}}),
			"0101161332a601417402416103417404417a0502065820a1a2a3000000000000000000000000000000000000000000000000000000aeaf",
			"a20116135832a601417402416103417404417a0502065820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{"range-answered", func(t *testing.T) protocol.Event {
			return protocol.Event{Kind: protocol.EventRangeAnswered, Range: pinRange(t)}
		},
			"010117142601020174017a01010174016100000000000000070013223544576679889baabdccdfee010176",
			"a2011714582601020174017a01010174016100000000000000070013223544576679889baabdccdfee010176"},
		// ABI 5 (protocol version 4).
		{"map", ev(protocol.Event{Kind: protocol.EventMap, Map: pinMap()}),
			"010118151aa4010202507b2267656e65726174696f6e223a327d0361610407",
			"a201181815581aa4010202507b2267656e65726174696f6e223a327d0361610407"},
		{"members", ev(protocol.Event{Kind: protocol.EventMembers, Members: &wire.Members{Entries: []wire.Member{
			{Name: "a", MaxVersion: 4, Stamp: 9}, {Name: "b", MaxVersion: 3, Stamp: 1 << 40}}}}),
			"010119161ba10182a301616102040309a30161620203031b0000010000000000",
			"a201181916581ba10182a301616102040309a30161620203031b0000010000000000"},
		{"request", ev(protocol.Event{Kind: protocol.EventRequest, Request: pinRequest()}),
			"01011a171ea70105026163038261616162041903e805647265616406636d6170074101",
			"a201181a17581ea70105026163038261616162041903e805647265616406636d6170074101"},
		{"response", ev(protocol.Event{Kind: protocol.EventResponse, Response: &wire.Response{ID: 5, Body: []byte{0xa1, 0x01, 0x00}}}),
			"01011b1808a201050443a10100",
			"a201181b181848a201050443a10100"},
		{"response late, with a code", ev(protocol.Event{Kind: protocol.EventResponse, Response: &wire.Response{ID: 6,
			Code: wire.CodeRequestTimeout, Message: "gave up"}, Late: true}),
			"01011b181da30106026f726571756573742d74696d656f75740367676176652075701900",
			"a301181b1818581da30106026f726571756573742d74696d656f75740367676176652075701819f5"},
		{"request-refused", ev(protocol.Event{Kind: protocol.EventRequestRefused, Request: pinRequest()}),
			"01011c171ea70105026163038261616162041903e805647265616406636d6170074101",
			"a201181c17581ea70105026163038261616162041903e805647265616406636d6170074101"},
		{"skip", ev(protocol.Event{Kind: protocol.EventSkip, Origin: pinO1, Skip: &wire.Skip{Channel: 1, From: 2, To: 7,
			Prev: pinH1, Hash: pinH1, HLC: 9, Tables: [][]byte{[]byte("t")}, Generation: 3}}),
			"01011d05100013223544576679889baabdccdfee011a55a8010102020307045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf055820a1a2a3000000000000000000000000000000000000000000000000000000aeaf0609078141740803",
			"a301181d05500013223544576679889baabdccdfee01181a5855a8010102020307045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf055820a1a2a3000000000000000000000000000000000000000000000000000000aeaf0609078141740803"},
		{"divergence about a run", ev(protocol.Event{Kind: protocol.EventDivergence, Origin: pinO1, DivergedAt: 2, Seq: 1, Hash: pinH1,
			Skip: &wire.Skip{Channel: 1, From: 2, To: 7, Prev: pinH1, Hash: pinH1, HLC: 9},
			Err:  wire.NewError(wire.CodeDivergence, "d")}),
			"01010704010205100013223544576679889baabdccdfee01091c010a646976657267656e6365020870726f746f636f6c0301640501010c01010d20a1a2a3000000000000000000000000000000000000000000000000000000aeaf1a51a7010102020307045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf055820a1a2a3000000000000000000000000000000000000000000000000000000aeaf06090800",
			"a70107040205500013223544576679889baabdccdfee0109a4016a646976657267656e6365026870726f746f636f6c03616405200c010d5820a1a2a3000000000000000000000000000000000000000000000000000000aeaf181a5851a7010102020307045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf055820a1a2a3000000000000000000000000000000000000000000000000000000aeaf06090800"},
		{"link", ev(protocol.Event{Kind: protocol.EventLink, Link: &wire.Link{Mode: wire.LinkSend, Tables: [][]byte{[]byte("t")}}}),
			"01011e1b07a2010202814174", "a201181e181b47a2010202814174"},
		{"copy-holds", ev(protocol.Event{Kind: protocol.EventCopyHolds, Holds: &wire.Holds{Channel: 1, Table: []byte("t"),
			Seqs: []wire.OriginSeq{{Origin: pinO1, Seq: 7}}}}),
			"01011f1c1ba30101024174038182500013223544576679889baabdccdfee0107",
			"a201181f181c581ba30101024174038182500013223544576679889baabdccdfee0107"},
		{"copy-holds since", ev(protocol.Event{Kind: protocol.EventCopyHolds, Holds: &wire.Holds{Channel: 1, Table: []byte("t"),
			Seqs: []wire.OriginSeq{{Origin: pinO1, Seq: 7}}, Since: 300}}),
			"01011f1c1fa40101024174038182500013223544576679889baabdccdfee01070419012c",
			"a201181f181c581fa40101024174038182500013223544576679889baabdccdfee01070419012c"},
	}
}

type pinResult struct {
	name          string
	m             abi.ResultMsg
	compact, cbor string
}

func pinnedResults() []pinResult {
	return []pinResult{
		{"success", abi.ResultMsg{Op: uint8(abi.OpReceive), Index: 2},
			"010103020102",
			"a201030202"},
		{"first command", abi.ResultMsg{Op: uint8(abi.OpConfigure)},
			"010101",
			"a201010200"},
		{"frame error", abi.ResultMsg{Op: uint8(abi.OpReceive), Index: 300, Err: abi.ErrorOf(pinErr)},
			"0101030202ac020337010a646976657267656e6365020870726f746f636f6c031974686520636861696e20646f6573206e6f7420657874656e64040123050118",
			"a301030219012c03a5016a646976657267656e6365026870726f746f636f6c03781974686520636861696e20646f6573206e6f7420657874656e64041823050c"},
		{"local error", abi.ResultMsg{Op: uint8(abi.OpAnswerRange), Index: 1, Err: abi.ErrorOf(pinLocalErr)},
			"01011c020101032b010c6761702d646574656374656402097472616e7369656e74030d73657120352061667465722033050101",
			"a301181c020103a4016c6761702d646574656374656402697472616e7369656e74036d736571203520616674657220330520"},
		{"long message", abi.ResultMsg{Op: 0xff, Index: 1 << 40, Err: &abi.ErrorMsg{Code: "unknown-command", Class: "local",
			Message: strings.Repeat("m", 200), Offset: -1}},
			"0102ff01020680808080802003e601010f756e6b6e6f776e2d636f6d6d616e6402056c6f63616c03c8016d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d050101",
			"a30118ff021b000001000000000003a4016f756e6b6e6f776e2d636f6d6d616e6402656c6f63616c0378c86d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d0520"},
		{"request, with its id (ABI 5)", abi.ResultMsg{Op: uint8(abi.OpRequest), Index: 1, ID: 1 << 20},
			"01011f0201010403808040",
			"a301181f0201041a00100000"},
	}
}

type pinStatus struct {
	name          string
	m             abi.StatusMsg
	compact, cbor string
}

func pinLimits() *abi.LimitsMsg {
	l := protocol.Limits{}.WithDefaults()
	return &abi.LimitsMsg{MaxFrameBody: uint64(l.MaxFrameBody), MaxMessage: uint64(l.MaxMessage),
		MaxSendBuffer: uint64(l.MaxSendBuffer), MaxUnackedBytes: uint64(l.MaxUnackedBytes), MaxOrigins: uint64(l.MaxOrigins),
		HandshakeTimeout: uint64(l.HandshakeTimeout), PingInterval: uint64(l.PingInterval), LivenessTimeout: uint64(l.LivenessTimeout),
		MaxChannels: uint64(l.MaxChannels), MaxChannelBuffer: uint64(l.MaxChannelBuffer), MaxSessionBuffer: uint64(l.MaxSessionBuffer)}
}

// pinnedStatuses has a status of every state, before CONFIGURE and after a recovered panic,
// and one with every field set.
func pinnedStatuses() []pinStatus {
	hs := abi.HandshakeOf(protocol.HandshakeInfo{Version: 3, Caps: []string{"anti-entropy"}, PeerName: "b",
		PeerOrigin: pinO2, PeerMin: 1, PeerMax: 3, Authenticated: true, Bound: true})
	zero, ahead, behind := int64(0), int64(2*time.Millisecond), int64(-1500*time.Microsecond)
	epoch := prototest.Epoch.UnixNano()
	return []pinStatus{
		{"before configure", abi.StatusMsg{}, "",
			"ae01f4020003f4040005f406000700080009000aab0100020003000400050006000700080009000a000b000c000d000e000f00"},
		{"new", abi.StatusMsg{Configured: true, State: uint8(protocol.StateNew), SendBudget: 1 << 20,
			Liveness: int64(30 * time.Second), MinVersion: 1, MaxVersion: 3, Limits: pinLimits()},
			"010006038080400d0680b09dc2df010e01010f0103114101048080800802048080840803048080800204048080800405028020060580c8afa02507058094ebdc03080580e497d012090280200a04808084080b0480808020",
			"af01f5020003f4040005f4061a001000000700080009000aab0100020003000400050006000700080009000a000b000c000d1b00000006fc23ac000e010f0311ab011a01000000021a01010000031a00400000041a0080000005191000061b00000002540be400071a3b9aca00081b000000012a05f200091910000a1a010100000b1a04000000"},
		{"handshaking", abi.StatusMsg{Configured: true, State: uint8(protocol.StateHandshaking), SendBudget: 1<<20 - 40,
			Deadline: epoch + int64(10*time.Second), Stats: abi.StatsMsg{BytesOut: 40, MessagesOut: 1},
			LastReceive: 0, Liveness: int64(30 * time.Second), MinVersion: 1, MaxVersion: 3, Limits: pinLimits()},
			"01000201010603d8ff3f07098090fffb9c9ef1fa310a060201280401010d0680b09dc2df010e01010f0103114101048080800802048080840803048080800204048080800405028020060580c8afa02507058094ebdc03080580e497d012090280200a04808084080b0480808020",
			"af01f5020103f4040005f4061a000fffd8071b18fae278e7bfe400080009000aab010002182803000401050006000700080009000a000b000c000d1b00000006fc23ac000e010f0311ab011a01000000021a01010000031a00400000041a0080000005191000061b00000002540be400071a3b9aca00081b000000012a05f200091910000a1a010100000b1a04000000"},
		{"authenticating", abi.StatusMsg{Configured: true, State: uint8(protocol.StateAuthenticating), SendBudget: 1<<20 - 40,
			Deadline: epoch + int64(10*time.Second), Version: 3, Stats: abi.StatsMsg{BytesIn: 41, BytesOut: 40, MessagesIn: 1, MessagesOut: 1},
			LastReceive: epoch, Liveness: int64(30 * time.Second), MinVersion: 1, MaxVersion: 3, Limits: pinLimits()},
			"01000201020603d8ff3f07098090fffb9c9ef1fa310901030a0c0101290201280301010401010c098080a0bbd29df1fa310d0680b09dc2df010e01010f0103114101048080800802048080840803048080800204048080800405028020060580c8afa02507058094ebdc03080580e497d012090280200a04808084080b0480808020",
			"af01f5020203f4040005f4061a000fffd8071b18fae278e7bfe400080009030aab01182902182803010401050006000700080009000a000b000c1b18fae27693b400000d1b00000006fc23ac000e010f0311ab011a01000000021a01010000031a00400000041a0080000005191000061b00000002540be400071a3b9aca00081b000000012a05f200091910000a1a010100000b1a04000000"},
		{"established", abi.StatusMsg{Configured: true, State: uint8(protocol.StateEstablished), Connected: true, HeldBytes: 4096,
			SendBudget: 1 << 19, Deadline: epoch + int64(5*time.Second), RTT: int64(3 * time.Millisecond), Version: 3,
			Stats: abi.StatsMsg{BytesIn: 1 << 30, BytesOut: 99, MessagesIn: 20, MessagesOut: 4, TxnsReceived: 100,
				Duplicates: 1, Gaps: 2, IgnoredFrames: 3, RangeBytesIn: 7},
			LastReceive: epoch + 1, Liveness: int64(30 * time.Second), MinVersion: 1, MaxVersion: 3, Handshake: hs,
			Limits: pinLimits(), Credits: []abi.CreditMsg{{Origin: pinO1, Credit: 1 << 16}, {Origin: pinO2}},
			HasReady: true, CopyCredit: 2, ClockOffset: &ahead, RangeAsked: true},
			"01000201030300040280200603808020070980c8cfdbf79df1fa310804809bee020901030a1f010580808080040201630301140401040501640701010801020a01031001070c098280a0bbd29df1fa310d0680b09dc2df010e01010f01031030010103020c616e74692d656e74726f70790301620410031021364754657a8b98a9becfdced0205010106010307000800114101048080800802048080840803048080800204048080800405028020060580c8afa02507058094ebdc03080580e497d012090280200a04808084080b0480808020121701100013223544576679889baabdccdfee01020380800412120110031021364754657a8b98a9becfdced02130015010216048092f4011700",
			"b501f5020303f50419100005f4061a00080000071b18fae277bdb9f200081a002dc6c009030aac011a400000000218630314040405186406000701080209000a030b0010070c1b18fae27693b400010d1b00000006fc23ac000e010f0310a8010302816c616e74692d656e74726f70790361620450031021364754657a8b98a9becfdced020501060307f508f511ab011a01000000021a01010000031a00400000041a0080000005191000061b00000002540be400071a3b9aca00081b000000012a05f200091910000a1a010100000b1a04000000128282500013223544576679889baabdccdfee011a000100008250031021364754657a8b98a9becfdced020013f51502161a001e848017f5"},
		{"established, paused and resumed", abi.StatusMsg{Configured: true, State: uint8(protocol.StateEstablished),
			ReadPaused: true, Resumed: true, Version: 1, LastReceive: epoch, Liveness: 1, MinVersion: 1, MaxVersion: 1,
			Handshake: abi.HandshakeOf(protocol.HandshakeInfo{Version: 1, PeerName: "a", PeerOrigin: pinO1, PeerMin: 1, PeerMax: 1}),
			Limits:    &abi.LimitsMsg{}, ClockOffset: &zero},
			"010002010305000901010c098080a0bbd29df1fa310d01020e01010f0101101e01010103016104100013223544576679889baabdccdfee0105010106010111001400160100",
			"b201f5020303f4040005f506000700080009010aab0100020003000400050006000700080009000a000b000c1b18fae27693b400000d010e010f0110a5010103616104500013223544576679889baabdccdfee010501060111a014f51600"},
		{"closed", abi.StatusMsg{Configured: true, State: uint8(protocol.StateClosed), Version: 2,
			Stats: abi.StatsMsg{ProtocolErrors: 1, ResendsRequested: 2, ResendsReceived: 3, Discarded: 4, Stale: 5},
			Err:   abi.ErrorOf(pinErr), LastReceive: epoch, Liveness: int64(30 * time.Second), MinVersion: 2, MaxVersion: 2,
			Limits: pinLimits(), ClockOffset: &behind},
			"01000201040901020a0f0b01010c01020d01030e01040f01050b37010a646976657267656e6365020870726f746f636f6c031974686520636861696e20646f6573206e6f7420657874656e640401230501180c098080a0bbd29df1fa310d0680b09dc2df010e01020f0102114101048080800802048080840803048080800204048080800405028020060580c8afa02507058094ebdc03080580e497d012090280200a04808084080b04808080201604bf8db701",
			"b101f5020403f4040005f406000700080009020aaf0100020003000400050006000700080009000a000b010c020d030e040f050ba5016a646976657267656e6365026870726f746f636f6c03781974686520636861696e20646f6573206e6f7420657874656e64041823050c0c1b18fae27693b400000d1b00000006fc23ac000e020f0211ab011a01000000021a01010000031a00400000041a0080000005191000061b00000002540be400071a3b9aca00081b000000012a05f200091910000a1a010100000b1a04000000163a0016e35f"},
		{"after a panic", abi.StatusMsg{Configured: true, State: uint8(protocol.StateClosed),
			Err: abi.ErrorOf(wire.NewError(wire.CodeInternal, "a panic in the core: boom"))},
			"01000201040b2f0108696e7465726e616c02056c6f63616c0319612070616e696320696e2074686520636f72653a20626f6f6d050101",
			"af01f5020403f4040005f406000700080009000aab0100020003000400050006000700080009000a000b000ba40168696e7465726e616c02656c6f63616c037819612070616e696320696e2074686520636f72653a20626f6f6d05200c000d000e000f00"},
		{"new, with ABI 5's limit", abi.StatusMsg{Configured: true, State: uint8(protocol.StateNew), SendBudget: 1 << 20,
			Liveness: int64(30 * time.Second), MinVersion: 1, MaxVersion: 4, Limits: &abi.LimitsMsg{MaxFrameBody: 1 << 20, MaxRequestsInFlight: 64}},

			"010006038080400d0680b09dc2df010e01010f0104110801038080400c0140",
			"af01f5020003f4040005f4061a001000000700080009000aab0100020003000400050006000700080009000a000b000c000d1b00000006fc23ac000e010f0411a2011a001000000c1840"},
	}
}

// pinCommand is one command as a host appends it to a batch.
type pinCommand struct {
	op   abi.Op
	add  func(b *abi.Batch) error
	want string // hex of the batch holding the one command
}

func ok(f func(b *abi.Batch)) func(b *abi.Batch) error {
	return func(b *abi.Batch) error { f(b); return nil }
}

// pinnedCommands has every command of the ABI.
func pinnedCommands() []pinCommand {
	at := prototest.Epoch.Add(1500 * time.Millisecond)
	return []pinCommand{
		{abi.OpConfigure, func(b *abi.Batch) error {
			return b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleListener), Name: "a", Origin: pinO1, Secret: []byte("s"),
				MinVersion: 1, MaxVersion: 3, Capabilities: []string{"anti-entropy", "tls-exporter"}, ExpectedPeer: "b",
				Limits: abi.LimitsMsg{MaxFrameBody: 1, MaxMessage: 2, MaxSendBuffer: 3, MaxUnackedBytes: 4, MaxOrigins: 5,
					HandshakeTimeout: 6, PingInterval: 7, LivenessTimeout: 8, MaxChannels: 9, MaxChannelBuffer: 10, MaxSessionBuffer: 11},
				DeferReady: true, ChannelBinding: []byte{0xcb}, Compact: true})
		},
			"010000005dac010102616103500013223544576679889baabdccdfee010441730501060307826c616e74692d656e74726f70796c746c732d6578706f7274657208616209ab0101020203030404050506060707080809090a0a0b0b0af50b41cb0cf5"},
		{abi.OpStart, ok(func(b *abi.Batch) { b.Start(at, prototest.Nonce(1)) }),
			"020000001818fae276ed1c2f000102030405060708090a0b0c0d0e0f10"},
		{abi.OpReceive, ok(func(b *abi.Batch) { b.Receive(at, []byte{1, 2, 3}) }),
			"030000000b18fae276ed1c2f00010203"},
		{abi.OpTick, ok(func(b *abi.Batch) { b.Tick(at) }),
			"040000000818fae276ed1c2f00"},
		{abi.OpSubscribe, func(b *abi.Batch) error {
			return b.Subscribe(abi.SubscribeMsg{From: 9, Vector: []abi.CursorMsg{{Origin: pinO1, Seq: 3, Hash: pinH1}}})
		},
			"050000003da201090281a301500013223544576679889baabdccdfee010203035820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{abi.OpOffer, ok(func(b *abi.Batch) { b.Offer(10, pinTxn) }),
			"0600000056000000000000000a010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e3003010203"},
		{abi.OpAck, ok(func(b *abi.Batch) { b.Ack(1 << 33) }),
			"07000000080000000200000000"},
		{abi.OpObserve, ok(func(b *abi.Batch) { b.Observe(pinO2, 5, pinH1) }),
			"0800000038031021364754657a8b98a9becfdced020000000000000005a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{abi.OpName, ok(func(b *abi.Batch) { b.Name(pinO2, "node-b") }),
			"0900000016031021364754657a8b98a9becfdced026e6f64652d62"},
		{abi.OpClose, func(b *abi.Batch) error { return b.Close(wire.CodeGoingAway, "bye") },
			"0a00000012a2016a676f696e672d617761790263627965"},
		{abi.OpDecode, ok(func(b *abi.Batch) { b.Decode([]byte{0, 1}) }),
			"0b000000020001"},
		{abi.OpSubscribeOrigins, func(b *abi.Batch) error {
			return b.SubscribeOrigins([]abi.CursorMsg{{Origin: pinO1, Seq: 3, Hash: pinH1}, {Origin: pinO2}})
		},
			"0c00000075a201000282a301500013223544576679889baabdccdfee010203035820a1a2a3000000000000000000000000000000000000000000000000000000aeafa30150031021364754657a8b98a9becfdced0202000358200000000000000000000000000000000000000000000000000000000000000000"},
		{abi.OpUnsubscribeOrigins, func(b *abi.Batch) error { return b.UnsubscribeOrigins([]wire.OriginID{pinO1, pinO2}) },
			"0d00000025a10182500013223544576679889baabdccdfee0150031021364754657a8b98a9becfdced02"},
		{abi.OpAckOrigin, ok(func(b *abi.Batch) { b.AckOrigin(pinO1, 77) }),
			"0e000000180013223544576679889baabdccdfee01000000000000004d"},
		{abi.OpSend, ok(func(b *abi.Batch) { b.Send(pinTxn) }),
			"0f0000004e010013223544576679889baabdccdfee01000000000000000101a3185c50010000000000000000000000000000000000000000000000000000000000000000000001010174046b312e3003010203"},
		{abi.OpAdvertiseHeads, func(b *abi.Batch) error {
			return b.AdvertiseHeads([]wire.Head{{Origin: pinO1, Seq: 5, HLC: 1 << 50}})
		},
			"100000001fa1018183500013223544576679889baabdccdfee01051b0004000000000000"},
		{abi.OpWithdrawHeads, func(b *abi.Batch) error { return b.WithdrawHeads([]wire.OriginID{pinO2}) },
			"1100000014a1018150031021364754657a8b98a9becfdced02"},
		{abi.OpReady, ok(func(b *abi.Batch) { b.Ready() }),
			"1200000000"},
		{abi.OpAdvertiseFloors, func(b *abi.Batch) error {
			return b.AdvertiseFloors([]wire.Floor{{Origin: pinO1, Seq: 2, Hash: pinH1}})
		},
			"1300000038a1038183500013223544576679889baabdccdfee01025820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{abi.OpPurged, ok(func(b *abi.Batch) { b.Purged(pinO1, 2, pinH1) }),
			"14000000380013223544576679889baabdccdfee010000000000000002a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{abi.OpRequestCopy, func(b *abi.Batch) error { return b.RequestCopy([]byte("t"), []byte("k")) },
			"1500000007a203417404416b"},
		{abi.OpAckChunk, ok(func(b *abi.Batch) { b.AckChunk() }),
			"1600000000"},
		{abi.OpAbortCopy, func(b *abi.Batch) error { return b.AbortCopy(true, wire.CodeCopyBusy, "busy") },
			"1700000014a301f50269636f70792d62757379036462757379"},
		{abi.OpBeginCopy, func(b *abi.Batch) error {
			return b.BeginCopy([]wire.CopyPosition{{Origin: pinO1, Seq: 4, Hash: pinH1, HLC: 9}}, 1, 2, 300)
		},
			"1800000041a4028184500013223544576679889baabdccdfee01045820a1a2a3000000000000000000000000000000000000000000000000000000aeaf09030104020519012c"},
		{abi.OpSendChunk, ok(func(b *abi.Batch) { b.SendChunk([]byte{1, 1, 't'}) }),
			"1900000003010174"},
		{abi.OpEndCopy, ok(func(b *abi.Batch) { b.EndCopy() }),
			"1a00000000"},
		{abi.OpAskRange, func(b *abi.Batch) error {
			return b.AskRange(&wire.RangeDigest{AfterTable: []byte("t"), AfterKey: []byte("a"), Count: 2, Digest: pinH1})
		},
			"1b0000002ca40141740241610502065820a1a2a3000000000000000000000000000000000000000000000000000000aeaf"},
		{abi.OpAnswerRange, ok(func(b *abi.Batch) { b.AnswerRange([]byte{1, 1, 0}) }),
			"1c00000003010100"},
		// ABI 5.
		{abi.OpSendMap, func(b *abi.Batch) error { return b.SendMap(*pinMap()) },
			"1d0000001aa4010202507b2267656e65726174696f6e223a327d0361610407"},
		{abi.OpSendMembers, func(b *abi.Batch) error {
			return b.SendMembers([]wire.Member{{Name: "a", MaxVersion: 4, Stamp: 9}})
		},
			"1e0000000ba10181a301616102040309"},
		{abi.OpRequest, func(b *abi.Batch) error { return b.Request(*pinRequest()) },
			"1f0000001ea70105026163038261616162041903e805647265616406636d6170074101"},
		{abi.OpRespond, func(b *abi.Batch) error { return b.Respond(5, wire.Response{Code: wire.CodeNoRoute, Body: []byte{2}}) },
			"2000000010a3010502686e6f2d726f757465044102"},
		{abi.OpForget, ok(func(b *abi.Batch) { b.Forget(1 << 33) }),
			"21000000080000000200000000"},
		{abi.OpSkip, func(b *abi.Batch) error {
			return b.Skip(pinO1, 7, pinH1, 9, [][]byte{[]byte("t")}, 3)
		},
			"2200000040a601500013223544576679889baabdccdfee010207035820a1a2a3000000000000000000000000000000000000000000000000000000aeaf0409058141740603"},
		{abi.OpLink, func(b *abi.Batch) error { return b.Link(wire.Link{Mode: wire.LinkSend, Tables: [][]byte{[]byte("t")}}) },
			"2300000007a2010202814174"},
		{abi.OpCopyHolds, func(b *abi.Batch) error {
			return b.CopyHolds([]byte("t"), []wire.OriginSeq{{Origin: pinO1, Seq: 7}}, 0)
		},
			"2400000019a2014174028182500013223544576679889baabdccdfee0107"},
		{abi.OpCopyHolds, func(b *abi.Batch) error {
			return b.CopyHolds([]byte("t"), []wire.OriginSeq{{Origin: pinO1, Seq: 7}}, 300)
		},
			"240000001da3014174028182500013223544576679889baabdccdfee01070319012c"},
	}
}

// pinnedRefusals is a batch of every session command with a payload the driver refuses
// before the session sees it (a wrong length, CBOR that does not decode), given to a
// configured session, and the hex of the RESULT records it answers, in the compact
// encoding and in CBOR: the errors the driver's decoding of each command's payload gives.
func pinnedRefusals(b *abi.Batch) (compact, cbor string) {
	bad := []byte{0xff}
	for _, op := range []abi.Op{abi.OpStart, abi.OpReceive, abi.OpTick, abi.OpSubscribe, abi.OpOffer, abi.OpAck,
		abi.OpObserve, abi.OpName, abi.OpClose, abi.OpSubscribeOrigins, abi.OpUnsubscribeOrigins, abi.OpAckOrigin,
		abi.OpAdvertiseHeads, abi.OpWithdrawHeads, abi.OpAdvertiseFloors, abi.OpPurged, abi.OpRequestCopy,
		abi.OpAckChunk, abi.OpAbortCopy, abi.OpBeginCopy, abi.OpEndCopy, abi.OpAskRange} {
		b.Raw(op, bad)
	}
	b.Raw(abi.OpAck, make([]byte, 9))                            // one byte too many
	b.Raw(abi.OpObserve, make([]byte, 57))                       // one byte too many
	b.Raw(abi.OpAckOrigin, make([]byte, 23))                     // one byte short
	b.Raw(abi.OpPurged, make([]byte, 55))                        // one byte short
	b.Raw(abi.OpSubscribe, []byte{0xa1, 0x01, 0x01, 0x01, 0x02}) // duplicate key
	return "060000004a0101020345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783220686173207468652077726f6e67206c656e677468050101060000004d0101030201010345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783320686173207468652077726f6e67206c656e677468050101060000004d0101040201020345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783420686173207468652077726f6e67206c656e6774680501010600000052010105020103034a010c6261642d617267756d656e7402056c6f63616c0330737562736372696265207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004d0101060201040345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783620686173207468652077726f6e67206c656e677468050101060000004d0101070201050345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783720686173207468652077726f6e67206c656e677468050101060000004d0101080201060345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783820686173207468652077726f6e67206c656e677468050101060000004d0101090201070345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783920686173207468652077726f6e67206c656e677468050101060000004e01010a0201080346010c6261642d617267756d656e7402056c6f63616c032c636c6f7365207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000005201010c020109034a010c6261642d617267756d656e7402056c6f63616c0330737562736372696265207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000005001010d02010a0348010c6261642d617267756d656e7402056c6f63616c032e6f726967696e73207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004d01010e02010b0345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030786520686173207468652077726f6e67206c656e677468050101060000004e01011002010c0346010c6261642d617267756d656e7402056c6f63616c032c6865616473207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000005001011102010d0348010c6261642d617267756d656e7402056c6f63616c032e6f726967696e73207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004e01011302010e0346010c6261642d617267756d656e7402056c6f63616c032c6865616473207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004e01011402010f0346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078313420686173207468652077726f6e67206c656e677468050101060000004d0101150201100345010c6261642d617267756d656e7402056c6f63616c032b636f7079207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004e0101160201110346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078313620686173207468652077726f6e67206c656e677468050101060000004e0101170201120346010c6261642d617267756d656e7402056c6f63616c032c61626f7274207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650501010600000053010118020113034b010c6261642d617267756d656e7402056c6f63616c0331636f70792d626567696e207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004e01011a0201140346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078316120686173207468652077726f6e67206c656e677468050101060000004701011b020115033f010c6261642d617267756d656e7402056c6f63616c032572616e6765207061796c6f61643a20626f6479206973206e6f7420612043424f52206d6170050101060000004d0101070201160345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783720686173207468652077726f6e67206c656e677468050101060000004d0101080201170345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030783820686173207468652077726f6e67206c656e677468050101060000004d01010e0201180345010c6261642d617267756d656e7402056c6f63616c032b7061796c6f6164206f6620636f6d6d616e642030786520686173207468652077726f6e67206c656e677468050101060000004e0101140201190346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078313420686173207468652077726f6e67206c656e677468050101060000006901010502011a0361010c6261642d617267756d656e7402056c6f63616c0347737562736372696265207061796c6f61643a2063626f723a2032206279746573206f662065787472616e656f75732064617461207374617274696e6720617420696e6465782033050101",
		"010000004ca30102020003a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783220686173207468652077726f6e67206c656e6774680520010000004ca30103020103a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783320686173207468652077726f6e67206c656e6774680520010000004ca30104020203a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783420686173207468652077726f6e67206c656e67746805200100000051a30105020303a4016c6261642d617267756d656e7402656c6f63616c037830737562736372696265207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004ca30106020403a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783620686173207468652077726f6e67206c656e6774680520010000004ca30107020503a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783720686173207468652077726f6e67206c656e6774680520010000004ca30108020603a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783820686173207468652077726f6e67206c656e6774680520010000004ca30109020703a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783920686173207468652077726f6e67206c656e6774680520010000004da3010a020803a4016c6261642d617267756d656e7402656c6f63616c03782c636c6f7365207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505200100000051a3010c020903a4016c6261642d617267756d656e7402656c6f63616c037830737562736372696265207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004fa3010d020a03a4016c6261642d617267756d656e7402656c6f63616c03782e6f726967696e73207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004ca3010e020b03a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030786520686173207468652077726f6e67206c656e6774680520010000004da30110020c03a4016c6261642d617267756d656e7402656c6f63616c03782c6865616473207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004fa30111020d03a4016c6261642d617267756d656e7402656c6f63616c03782e6f726967696e73207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004da30113020e03a4016c6261642d617267756d656e7402656c6f63616c03782c6865616473207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004da30114020f03a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078313420686173207468652077726f6e67206c656e6774680520010000004ca30115021003a4016c6261642d617267756d656e7402656c6f63616c03782b636f7079207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004da30116021103a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078313620686173207468652077726f6e67206c656e6774680520010000004da30117021203a4016c6261642d617267756d656e7402656c6f63616c03782c61626f7274207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505200100000053a3011818021303a4016c6261642d617267756d656e7402656c6f63616c037831636f70792d626567696e207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004ea301181a021403a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078316120686173207468652077726f6e67206c656e67746805200100000047a301181b021503a4016c6261642d617267756d656e7402656c6f63616c03782572616e6765207061796c6f61643a20626f6479206973206e6f7420612043424f52206d61700520010000004ca30107021603a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783720686173207468652077726f6e67206c656e6774680520010000004ca30108021703a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030783820686173207468652077726f6e67206c656e6774680520010000004da3010e02181803a4016c6261642d617267756d656e7402656c6f63616c03782b7061796c6f6164206f6620636f6d6d616e642030786520686173207468652077726f6e67206c656e6774680520010000004ea3011402181903a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078313420686173207468652077726f6e67206c656e67746805200100000069a3010502181a03a4016c6261642d617267756d656e7402656c6f63616c037847737562736372696265207061796c6f61643a2063626f723a2032206279746573206f662065787472616e656f75732064617461207374617274696e6720617420696e64657820330520"
}

// pinnedRefusalsV5 is pinnedRefusals for ABI 5's commands: CBOR that does not decode, and an
// OpForget of the wrong length.
func pinnedRefusalsV5(b *abi.Batch) (compact, cbor string) {
	for _, op := range []abi.Op{abi.OpSendMap, abi.OpSendMembers, abi.OpRequest, abi.OpRespond, abi.OpForget} {
		b.Raw(op, []byte{0xff})
	}
	b.Raw(abi.OpForget, make([]byte, 9)) // one byte too many
	return "060000004901011d0344010c6261642d617267756d656e7402056c6f63616c032a6d6170207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000005001011e0201010348010c6261642d617267756d656e7402056c6f63616c032e6d656d62657273207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000005001011f0201020348010c6261642d617267756d656e7402056c6f63616c032e72657175657374207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505010106000000510101200201030349010c6261642d617267756d656e7402056c6f63616c032f726573706f6e7365207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f6465050101060000004e0101210201040346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078323120686173207468652077726f6e67206c656e677468050101060000004e0101210201050346010c6261642d617267756d656e7402056c6f63616c032c7061796c6f6164206f6620636f6d6d616e64203078323120686173207468652077726f6e67206c656e677468050101",
		"010000004ca301181d020003a4016c6261642d617267756d656e7402656c6f63616c03782a6d6170207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505200100000050a301181e020103a4016c6261642d617267756d656e7402656c6f63616c03782e6d656d62657273207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505200100000050a301181f020203a4016c6261642d617267756d656e7402656c6f63616c03782e72657175657374207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f646505200100000051a3011820020303a4016c6261642d617267756d656e7402656c6f63616c03782f726573706f6e7365207061796c6f61643a2063626f723a20756e65787065637465642022627265616b2220636f64650520010000004ea3011821020403a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078323120686173207468652077726f6e67206c656e6774680520010000004ea3011821020503a4016c6261642d617267756d656e7402656c6f63616c03782c7061796c6f6164206f6620636f6d6d616e64203078323120686173207468652077726f6e67206c656e6774680520"
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func samePayload(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !bytes.Equal(got, mustHex(t, want)) {
		t.Errorf("%s: the bytes changed\ngot  %x\nwant %s", what, got, want)
	}
}

// TestPinnedRecords: every kind of event, a status of every state, and results, encoded
// compact and in CBOR, give the pinned bytes; each pinned payload parses back to the value
// it was made from, in both encodings, and an event back to the session's event.
func TestPinnedRecords(t *testing.T) {
	for _, c := range pinnedEvents() {
		e := c.ev(t)
		m := abi.EventOf(&e)
		samePayload(t, c.name+", compact", abi.AppendEventCompact(nil, m), c.compact)
		samePayload(t, c.name+", CBOR", abi.MarshalForTest(m), c.cbor)
		for _, rec := range []abi.Record{{Kind: abi.KindEventCompact, Payload: mustHex(t, c.compact)},
			{Kind: abi.KindEvent, Payload: mustHex(t, c.cbor)}} {
			got, err := abi.ParseEvent(rec)
			if err != nil {
				t.Fatalf("%s, kind %d: %v", c.name, rec.Kind, err)
			}
			if !reflect.DeepEqual(&got, m) {
				t.Errorf("%s, kind %d: parsed\n%+v\nmade\n%+v", c.name, rec.Kind, got, *m)
			}
			back, err := got.Event()
			if err != nil {
				t.Fatalf("%s, kind %d: %v", c.name, rec.Kind, err)
			}
			if !reflect.DeepEqual(back, e) {
				t.Errorf("%s, kind %d: the event came back as\n%+v\nnot\n%+v", c.name, rec.Kind, back, e)
			}
		}
	}
	for _, c := range pinnedResults() {
		samePayload(t, "result "+c.name+", compact", abi.AppendResultCompact(nil, &c.m), c.compact)
		samePayload(t, "result "+c.name+", CBOR", abi.MarshalForTest(&c.m), c.cbor)
		for _, rec := range []abi.Record{{Kind: abi.KindResultCompact, Payload: mustHex(t, c.compact)},
			{Kind: abi.KindResult, Payload: mustHex(t, c.cbor)}} {
			got, err := abi.ParseResult(rec)
			if err != nil || !reflect.DeepEqual(got, c.m) {
				t.Errorf("result %s, kind %d: parsed %+v, %v; made %+v", c.name, rec.Kind, got, err, c.m)
			}
		}
	}
	for _, c := range pinnedStatuses() {
		samePayload(t, "status "+c.name+", compact", abi.AppendStatusCompact(nil, &c.m), c.compact)
		samePayload(t, "status "+c.name+", CBOR", abi.MarshalForTest(&c.m), c.cbor)
		for _, rec := range []abi.Record{{Kind: abi.KindStatusCompact, Payload: mustHex(t, c.compact)},
			{Kind: abi.KindStatus, Payload: mustHex(t, c.cbor)}} {
			got, err := abi.ParseStatus(rec)
			if err != nil || !reflect.DeepEqual(got, c.m) {
				t.Errorf("status %s, kind %d: parsed\n%+v, %v\nmade\n%+v", c.name, rec.Kind, got, err, c.m)
			}
		}
	}
}

// TestPinnedCommands: every command a host appends gives the pinned batch.
func TestPinnedCommands(t *testing.T) {
	seen := map[abi.Op]bool{}
	for _, c := range pinnedCommands() {
		var b abi.Batch
		if err := c.add(&b); err != nil {
			t.Fatalf("op 0x%02x: %v", uint8(c.op), err)
		}
		if got := b.Bytes(); len(got) == 0 || abi.Op(got[0]) != c.op {
			t.Fatalf("op 0x%02x: the batch is %x", uint8(c.op), got)
		}
		samePayload(t, "command 0x"+hex.EncodeToString([]byte{byte(c.op)}), b.Bytes(), c.want)
		seen[c.op] = true
	}
	for op := abi.OpConfigure; op <= abi.OpCopyHolds; op++ {
		if !seen[op] {
			t.Errorf("op 0x%02x has no pinned command", uint8(op))
		}
	}
}

// TestPinnedRefusals: the driver refuses malformed payloads of every command with the
// pinned RESULTs, in both encodings.
func TestPinnedRefusals(t *testing.T) {
	for _, refusals := range []func(*abi.Batch) (string, string){pinnedRefusals, pinnedRefusalsV5} {
		pinRefusals(t, refusals)
	}
}

func pinRefusals(t *testing.T, pinnedRefusals func(*abi.Batch) (string, string)) {
	t.Helper()
	for _, compact := range []bool{true, false} {
		var d abi.Driver
		var b abi.Batch
		if err := b.Configure(abi.ConfigMsg{Role: uint8(wire.RoleDialer), Name: "a", Origin: pinO1, Compact: compact}); err != nil {
			t.Fatal(err)
		}
		d.Step(b.Bytes())
		b.Reset()
		wantCompact, wantCBOR := pinnedRefusals(&b)
		recs, err := abi.Split(d.Step(b.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, r := range recs {
			if r.Kind.Base() == abi.KindResult {
				got = binary.BigEndian.AppendUint32(append(got, byte(r.Kind)), uint32(len(r.Payload)))
				got = append(got, r.Payload...)
			}
		}
		want := wantCBOR
		if compact {
			want = wantCompact
		}
		samePayload(t, "refusals, compact "+map[bool]string{true: "yes", false: "no"}[compact], got, want)
	}
}
