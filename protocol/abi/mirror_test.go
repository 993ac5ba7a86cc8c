package abi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"plait/protocol"
	"plait/protocol/abi"
	"plait/protocol/wire"
)

// eventCases set each field of protocol.Event, in an event of a kind that carries it.
func eventCases(t *testing.T) map[string]protocol.Event {
	view := pinView(t)
	o, h := pinO1, pinH1
	return map[string]protocol.Event{
		"Kind":     {Kind: protocol.EventAcked},
		"Position": {Kind: protocol.EventAcked, Position: 9},
		"Txn":      {Kind: protocol.EventTxn, Origin: o, Txn: view},
		"Origin":   {Kind: protocol.EventUnsubscribed, Origin: o},
		"Name":     {Kind: protocol.EventOriginNamed, Origin: o, Name: "n"},
		"Seq":      {Kind: protocol.EventCursor, Origin: o, Seq: 4, Hash: h},
		"Hash":     {Kind: protocol.EventPurged, Origin: o, Seq: 4, Hash: h},
		"Expected": {Kind: protocol.EventGap, Origin: o, Txn: view, Expected: 3},
		"From":     {Kind: protocol.EventResend, Origin: o, From: 3},
		"DivergedAt": {Kind: protocol.EventDivergence, Origin: o, Txn: view, DivergedAt: 1, Hash: h,
			Err: wire.NewError(wire.CodeDivergence, "d")},
		"Frame":       {Kind: protocol.EventIgnoredFrame, Frame: 0x7e, Count: 1},
		"Count":       {Kind: protocol.EventCopyEnd, Count: 12},
		"Heads":       {Kind: protocol.EventHeads, Heads: &wire.Heads{Withdrawn: []wire.OriginID{o}}},
		"Copy":        {Kind: protocol.EventCopyRequested, Copy: &wire.Copy{Channel: 1, Credit: 2}},
		"CopyBegin":   {Kind: protocol.EventCopyBegin, CopyBegin: &wire.CopyBegin{Channel: 1, Tables: 1}},
		"Chunk":       {Kind: protocol.EventChunk, Chunk: pinChunk(t)},
		"RangeDigest": {Kind: protocol.EventRangeAsked, RangeDigest: &wire.RangeDigest{Count: 1, Digest: h}},
		"Range":       {Kind: protocol.EventRangeAnswered, Range: pinRange(t)},
		"Handshake":   {Kind: protocol.EventHandshake, Handshake: &protocol.HandshakeInfo{Version: 2, PeerName: "b"}},
		"Err":         {Kind: protocol.EventClosed, Err: wire.NewError(wire.CodeGoingAway, "bye")},
		"ByPeer":      {Kind: protocol.EventClosed, Err: wire.NewError(wire.CodeGoingAway, "bye"), ByPeer: true},
		"Outgoing":    {Kind: protocol.EventCopyAborted, Err: wire.NewError(wire.CodeCopyBusy, "busy"), Outgoing: true},
		"Map":         {Kind: protocol.EventMap, Map: pinMap()},
		"Members":     {Kind: protocol.EventMembers, Members: &wire.Members{Entries: []wire.Member{{Name: "a", MaxVersion: 4, Stamp: 9}}}},
		"Request":     {Kind: protocol.EventRequest, Request: pinRequest()},
		"Response":    {Kind: protocol.EventResponse, Response: &wire.Response{ID: 3, Code: wire.CodeNoRoute}},
		"Late":        {Kind: protocol.EventResponse, Response: &wire.Response{ID: 2}, Late: true},
		"Skip": {Kind: protocol.EventSkip, Origin: o, Skip: &wire.Skip{Channel: 1, From: 2, To: 5, Prev: h, Hash: h, HLC: 9,
			Tables: [][]byte{[]byte("t")}, Generation: 3}},
		"Link":      {Kind: protocol.EventLink, Link: &wire.Link{Mode: wire.LinkSend, Tables: [][]byte{[]byte("t")}}},
		"Quiet":     {Kind: protocol.EventQuiet, Quiet: &wire.Quiet{Quiet: []wire.OriginID{o}}},
		"LeafState": {Kind: protocol.EventLeafState, LeafState: &wire.LeafState{Reoriginated: 3, HubSeq: 8, Core: 2}},
		"Holds":     {Kind: protocol.EventCopyHolds, Holds: &wire.Holds{Channel: 1, Table: []byte("t"), Seqs: []wire.OriginSeq{{Origin: o, Seq: 4}}, Since: 6}},
	}
}

// TestEventFieldsCrossTheABI: every field of protocol.Event crosses the ABI (EventOf, the
// compact record, EventMsg.Event) and comes back as it was, and every field of EventMsg is
// set by EventOf for some event. A field added to protocol.Event and not to EventMsg and
// its conversions, or to EventMsg and not to EventOf, fails here.
func TestEventFieldsCrossTheABI(t *testing.T) {
	cases := eventCases(t)
	set := map[string]bool{} // EventMsg fields EventOf set
	typ := reflect.TypeFor[protocol.Event]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		e, ok := cases[name]
		if !ok {
			t.Errorf("protocol.Event.%s has no case here: add one, and carry the field in abi.EventMsg (EventOf, EventMsg.Event)", name)
			continue
		}
		if reflect.ValueOf(e).Field(i).IsZero() {
			t.Fatalf("the case of protocol.Event.%s does not set it", name)
		}
		m := abi.EventOf(&e)
		mv := reflect.ValueOf(m).Elem()
		for j := range mv.NumField() {
			if !mv.Field(j).IsZero() {
				set[mv.Type().Field(j).Name] = true
			}
		}
		got, err := abi.ParseEvent(abi.Record{Kind: abi.KindEventCompact, Payload: abi.AppendEventCompact(nil, m)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := got.Event()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Errorf("protocol.Event.%s does not cross the ABI: sent\n%+v\nread back\n%+v", name, e, back)
		}
	}
	for i := range reflect.TypeFor[abi.EventMsg]().NumField() {
		if name := reflect.TypeFor[abi.EventMsg]().Field(i).Name; !set[name] {
			t.Errorf("abi.EventMsg.%s is set by EventOf for none of protocol.Event's fields", name)
		}
	}
}

// mirror checks that a value with every field set survives to and back, and that the
// message in between has every field set.
func mirror[V, M any](t *testing.T, to func(V) M, back func(M) V, skip ...string) {
	t.Helper()
	mirrorPrepared(t, to, back, nil, skip...)
}

// mirrorPrepared is mirror with prep applied to the filled value first (nil: none): for
// a value some of whose states cannot occur, and so need not cross.
func mirrorPrepared[V, M any](t *testing.T, to func(V) M, back func(M) V, prep func(*V), skip ...string) {
	t.Helper()
	var v V
	n := uint64(0)
	fill(reflect.ValueOf(&v).Elem(), &n)
	for _, name := range skip {
		reflect.ValueOf(&v).Elem().FieldByName(name).SetZero()
	}
	if prep != nil {
		prep(&v)
	}
	m := to(v)
	mv := reflect.ValueOf(m)
	for i := range mv.NumField() {
		if mv.Field(i).IsZero() {
			t.Errorf("%T.%s is not set from a %T", m, mv.Type().Field(i).Name, v)
		}
	}
	if got := back(m); !reflect.DeepEqual(got, v) {
		t.Errorf("%T does not cross the ABI: sent\n%+v\nread back\n%+v", v, v, got)
	}
}

// TestStatusMirrors: the session's values a STATUS record carries (the counters, the limits
// and the handshake) cross it field for field. A field added to protocol.Stats,
// protocol.Limits or protocol.HandshakeInfo and not to its message and conversions, or the
// other way round, fails here.
func TestStatusMirrors(t *testing.T) {
	// The frame counts' slots past the registry's types are never counted (no frame type
	// is theirs): they do not cross.
	mirrorPrepared(t, abi.StatsOf, func(m abi.StatsMsg) protocol.Stats { return m.Stats() }, func(s *protocol.Stats) {
		for slot := protocol.UsedFrameSlots(); slot < protocol.FrameSlots; slot++ {
			s.FramesInByType[slot], s.FramesOutByType[slot] = 0, 0
		}
	})
	// MaxOutMessage does not cross: a guest sizes its messages with the default; nor do
	// version 4's ping intervals: a guest pings by the defaults.
	mirror(t, abi.LimitsOf, func(m abi.LimitsMsg) protocol.Limits { return m.Limits() }, "MaxOutMessage",
		"IdlePingInterval", "SampleInterval")
	mirror(t, func(h protocol.HandshakeInfo) abi.HandshakeMsg { return *abi.HandshakeOf(h) },
		func(m abi.HandshakeMsg) protocol.HandshakeInfo { return m.Info() })
}

// TestStatusIsWritten: Driver.status sets every field of StatusMsg, so a field added to the
// status (and its codec generated) is not left zero by a driver that never fills it. The
// check reads driver.go: the fields status assigns (m.Field = ...) or names in a StatusMsg
// literal.
func TestStatusIsWritten(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "driver.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "status" || fn.Recv == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "m" {
							written[sel.Sel.Name] = true
						}
					}
				}
			case *ast.CompositeLit:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "StatusMsg" {
					for _, e := range n.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							written[kv.Key.(*ast.Ident).Name] = true
						}
					}
				}
			}
			return true
		})
	}
	if len(written) == 0 {
		t.Fatal("no Driver.status in driver.go")
	}
	for i := range reflect.TypeFor[abi.StatusMsg]().NumField() {
		if name := reflect.TypeFor[abi.StatusMsg]().Field(i).Name; !written[name] {
			t.Errorf("Driver.status never sets StatusMsg.%s", name)
		}
	}
}
