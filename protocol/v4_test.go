package protocol_test

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"plait/protocol"
	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// Version 4: the cluster map, member entries and requests.

// v4pair is an established version-4 pair of this build: dialer "a" (limits dl), listener
// "b" (limits ll).
func v4pair(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	dc, lc := prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2)
	dc.Limits, lc.Limits = dl, ll
	p := established(t, dc, lc)
	if v := p.D.S.Handshake().Version; v != 4 {
		t.Fatalf("version %d", v)
	}
	return p
}

// fxPairV4 is the version-4 fixture of the malformed-input table: a v4pair in which each
// side sent the other request 1 (kind map), neither answered; both sides' output taken.
func fxPairV4(t *testing.T, dl, ll protocol.Limits) *prototest.Pair {
	t.Helper()
	p := v4pair(t, dl, ll)
	for _, side := range []struct {
		s    *prototest.Side
		self string
	}{{p.D, "a"}, {p.L, "b"}} {
		if id, err := side.s.S.V4().Request(askMap(side.self)); err != nil || id != 1 {
			t.Fatalf("fixture: request %d, %v", id, err)
		}
	}
	p.Pump(10)
	if p.D.Count(protocol.EventRequest) != 1 || p.L.Count(protocol.EventRequest) != 1 {
		t.Fatalf("fixture: events %v / %v", kinds(p.D.Events), kinds(p.L.Events))
	}
	p.D.Drain()
	p.L.Drain()
	return p
}

// askMap is a request of kind map from node self to its peer (the other of "a" and "b").
func askMap(self string) wire.Request {
	peer := map[string]string{"a": "b", "b": "a"}[self]
	return wire.Request{Target: peer, Path: []string{self}, TimeoutMS: 1000, Scope: wire.ScopeRead, Kind: "map"}
}

// eventsAfter returns the events of kind side saw after its first n events.
func eventsAfter(side *prototest.Side, n int, kind protocol.EventKind) []protocol.Event {
	var out []protocol.Event
	for _, e := range side.Events[n:] {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// sentTypes is the frame types of the messages a side sent after its first n.
func sentTypes(t *testing.T, side *prototest.Side, n int) []wire.Type {
	t.Helper()
	var out []wire.Type
	for _, f := range frames(t, side.Sent[n:]) {
		out = append(out, f.Type)
	}
	return out
}

// TestV4MapAndMembers: each side's map and member entries reach the other as sent; a list
// of more than wire.MaxMembers entries is sorted and split into frames of at most that many.
func TestV4MapAndMembers(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.D.S.V4().SendMap(testMap(7, "a")))
	members := make([]wire.Member, wire.MaxMembers+476)
	for i := range members {
		members[i] = wire.Member{Name: "n" + strconv.Itoa(10000+len(members)-i), MaxVersion: uint64(1 + i%4), Stamp: uint64(i + 1)}
	}
	must(t, p.L.S.V4().SendMembers(members))
	p.Pump(10)
	ev := p.L.Last(protocol.EventMap)
	if want := testMap(7, "a"); ev == nil || ev.Map.Generation != 7 || !bytes.Equal(ev.Map.Document, want.Document) ||
		ev.Map.Publisher != "a" || ev.Map.Published != want.Published {
		t.Fatalf("the listener's map event: %+v", ev)
	}
	got := eventsAfter(p.D, 0, protocol.EventMembers)
	if len(got) != 2 || len(got[0].Members.Entries) != wire.MaxMembers || len(got[1].Members.Entries) != 476 {
		t.Fatalf("members in %d events", len(got))
	}
	all := append(slices.Clone(got[0].Members.Entries), got[1].Members.Entries...)
	want := slices.SortedFunc(slices.Values(members), func(a, b wire.Member) int {
		return map[bool]int{true: -1, false: 1}[a.Name < b.Name]
	})
	if !slices.Equal(all, want) {
		t.Fatal("the members received are not the members sent, sorted by name")
	}
	// No entry sends nothing.
	n := len(p.L.Sent)
	must(t, p.L.S.V4().SendMembers(nil))
	p.Pump(10)
	if len(p.L.Sent) != n {
		t.Fatal("SendMembers of no entry sent a frame")
	}
}

// TestV4SendMembersFitsThePeersFrame: at a peer's frame limit of 1 KiB a MEMBERS frame of
// 1024 entries does not fit; the session splits the list further, and every entry arrives.
func TestV4SendMembersFitsThePeersFrame(t *testing.T) {
	p := v4pair(t, protocol.Limits{MaxFrameBody: wire.MinMaxFrame}, protocol.Limits{})
	members := make([]wire.Member, 300)
	for i := range members {
		members[i] = wire.Member{Name: "node-" + strconv.Itoa(1000+i), MaxVersion: 4, Stamp: 1 << 40}
	}
	must(t, p.L.S.V4().SendMembers(members))
	p.Pump(10)
	total := 0
	for _, ev := range eventsAfter(p.D, 0, protocol.EventMembers) {
		total += len(ev.Members.Entries)
	}
	if total != len(members) || p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("%d entries received, state %v (%v)", total, p.D.S.State(), p.D.S.Err())
	}
}

// TestV4RequestAndResponse: the good path: ids strictly increasing from 1, the request
// reaches the peer whole, its answer comes back to the asker with the id it was given, and
// each side's requests in flight end at zero.
func TestV4RequestAndResponse(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	ask := wire.Request{ID: 99, Target: "c", Path: []string{"x", "a"}, TimeoutMS: 250, Scope: wire.ScopeAdmin, Kind: "map", Body: []byte("arg")}
	for want := uint64(1); want <= 3; want++ {
		id, err := p.D.S.V4().Request(ask)
		if err != nil || id != want {
			t.Fatalf("request %d: id %d, %v", want, id, err)
		}
	}
	p.Pump(10)
	reqs := eventsAfter(p.L, 0, protocol.EventRequest)
	if len(reqs) != 3 {
		t.Fatalf("%d requests received", len(reqs))
	}
	for i, ev := range reqs {
		r := ev.Request
		if r.ID != uint64(i+1) || r.Target != "c" || !slices.Equal(r.Path, []string{"x", "a"}) || r.TimeoutMS != 250 ||
			r.Scope != wire.ScopeAdmin || r.Kind != "map" || string(r.Body) != "arg" {
			t.Fatalf("request %d received as %+v", i+1, r)
		}
	}
	// Answered out of order; each answer names its request.
	for _, id := range []uint64{2, 3, 1} {
		must(t, p.L.S.V4().Respond(id, wire.Response{ID: 77, Body: []byte("answer " + strconv.FormatUint(id, 10))}))
	}
	p.Pump(10)
	resps := eventsAfter(p.D, 0, protocol.EventResponse)
	if len(resps) != 3 {
		t.Fatalf("%d responses received", len(resps))
	}
	for i, id := range []uint64{2, 3, 1} {
		r := resps[i]
		if r.Late || r.Response.ID != id || string(r.Response.Body) != "answer "+strconv.FormatUint(id, 10) || r.Response.Code != "" {
			t.Fatalf("response %d: %+v late %v", i, r.Response, r.Late)
		}
	}
	// An answer with a code and a message.
	id, err := p.L.S.V4().Request(askMap("b"))
	if err != nil || id != 1 {
		t.Fatalf("the listener's first request: id %d, %v", id, err)
	}
	p.Pump(10)
	must(t, p.D.S.V4().Respond(1, wire.Response{Code: wire.CodeNoRoute, Message: "no route to b"}))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventResponse); ev == nil || ev.Late || ev.Response.ID != 1 || ev.Response.Code != wire.CodeNoRoute ||
		ev.Response.Message != "no route to b" || ev.Response.Body != nil {
		t.Fatalf("the listener's response: %+v", ev)
	}
	for _, s := range []*protocol.Session{p.D.S, p.L.S} {
		if s.State() != protocol.StateEstablished || s.Stats().ProtocolErrors != 0 {
			t.Fatalf("state %v, %v", s.State(), s.Err())
		}
	}
}

// TestV4RequestsInFlightBound: a side sends at most MaxRequestsInFlight requests neither
// answered nor forgotten: one past is refused (too-many-requests, nothing sent, no id used),
// and an answer or a Forget makes room again.
func TestV4RequestsInFlightBound(t *testing.T) {
	p := v4pair(t, protocol.Limits{MaxRequestsInFlight: 3}, protocol.Limits{})
	for i := 1; i <= 3; i++ {
		if _, err := p.D.S.V4().Request(askMap("a")); err != nil {
			t.Fatalf("request %d at the bound: %v", i, err)
		}
	}
	if id, err := p.D.S.V4().Request(askMap("a")); !isCode(err, wire.CodeTooManyRequests) || id != 0 ||
		err.(*wire.Error).Class != wire.ClassResourceLimit {
		t.Fatalf("a request past the bound: id %d, %v", id, err)
	}
	p.Pump(10)
	if types := sentTypes(t, p.D, 0); len(types) != 5 || types[2] != wire.TypeRequest || types[4] != wire.TypeRequest ||
		p.L.Count(protocol.EventRequest) != 3 {
		t.Fatalf("sent %v (%d requests received), want HELLO, AUTH and the three requests only", types, p.L.Count(protocol.EventRequest))
	}
	must(t, p.L.S.V4().Respond(2, wire.Response{}))
	p.Pump(10)
	if id, err := p.D.S.V4().Request(askMap("a")); err != nil || id != 4 {
		t.Fatalf("a request after an answer: id %d, %v; want 4", id, err)
	}
	if _, err := p.D.S.V4().Request(askMap("a")); !isCode(err, wire.CodeTooManyRequests) {
		t.Fatalf("past the bound again: %v", err)
	}
	must(t, p.D.S.V4().Forget(1))
	if id, err := p.D.S.V4().Request(askMap("a")); err != nil || id != 5 {
		t.Fatalf("a request after a Forget: id %d, %v; want 5", id, err)
	}
}

// TestV4RequestsReceivedBound: a side owes at most MaxRequestsInFlight answers; the
// session answers a request past its bound too-many-requests itself (EventRequestRefused
// on its side, an answer that is not late on the asker's), and the caller may not answer
// it again. An answer makes room again.
func TestV4RequestsReceivedBound(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{MaxRequestsInFlight: 2})
	for range 3 {
		_, err := p.D.S.V4().Request(askMap("a"))
		must(t, err)
	}
	p.Pump(10)
	if n := p.L.Count(protocol.EventRequest); n != 2 {
		t.Fatalf("%d requests handed to the caller at a bound of 2", n)
	}
	refused := p.L.Last(protocol.EventRequestRefused)
	if refused == nil || refused.Request.ID != 3 || p.L.Count(protocol.EventRequestRefused) != 1 {
		t.Fatalf("the refusal: %+v", refused)
	}
	ev := p.D.Last(protocol.EventResponse)
	if ev == nil || ev.Late || ev.Response.ID != 3 || ev.Response.Code != wire.CodeTooManyRequests || ev.Response.Message == "" {
		t.Fatalf("the asker's answer: %+v", ev)
	}
	if err := p.L.S.V4().Respond(3, wire.Response{}); !isCode(err, wire.CodeInvalidState) {
		t.Fatalf("answering the refused request: %v", err)
	}
	must(t, p.L.S.V4().Respond(1, wire.Response{}))
	_, err := p.D.S.V4().Request(askMap("a"))
	must(t, err)
	p.Pump(10)
	if ev := p.L.Last(protocol.EventRequest); ev == nil || ev.Request.ID != 4 || p.L.Count(protocol.EventRequestRefused) != 1 {
		t.Fatalf("request 4 after an answer: %+v", ev)
	}
	if p.L.S.State() != protocol.StateEstablished || p.D.S.State() != protocol.StateEstablished {
		t.Fatalf("states %v / %v", p.L.S.State(), p.D.S.State())
	}
}

// TestV4LateAnswers: an answer to a request given up (Forget), or answered already, is
// handed over Late, never an error; Forget of a request answered or forgotten already does
// nothing, and of one never sent is refused.
func TestV4LateAnswers(t *testing.T) {
	p := fxPairV4(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.D.S.V4().Forget(1))
	must(t, p.D.S.V4().Forget(1)) // again: nothing
	must(t, p.L.S.V4().Respond(1, wire.Response{Body: []byte("late")}))
	p.Pump(10)
	ev := p.D.Last(protocol.EventResponse)
	if ev == nil || !ev.Late || ev.Response.ID != 1 || string(ev.Response.Body) != "late" {
		t.Fatalf("the answer after Forget: %+v", ev)
	}
	// A second answer to the same request, played by hand: late too.
	n := len(p.D.Events)
	must(t, p.D.S.Receive(p.Now, prototest.Frame(&wire.Response{ID: 1, Code: "again"})))
	p.D.Drain()
	if got := eventsAfter(p.D, n, protocol.EventResponse); len(got) != 1 || !got[0].Late || got[0].Response.Code != "again" {
		t.Fatalf("a second answer: %+v", got)
	}
	must(t, p.D.S.V4().Forget(1)) // answered: nothing
	for _, id := range []uint64{0, 2} {
		if err := p.D.S.V4().Forget(id); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("Forget(%d), never sent: %v", id, err)
		}
	}
	if p.D.S.State() != protocol.StateEstablished || p.D.S.Stats().ProtocolErrors != 0 {
		t.Fatalf("state %v, %v", p.D.S.State(), p.D.S.Err())
	}
}

// TestV4RespondOnce: a side answers each request it received once: a second answer, an
// answer to a request never received and one to id 0 are refused, and nothing is sent.
func TestV4RespondOnce(t *testing.T) {
	p := fxPairV4(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.L.S.V4().Respond(1, wire.Response{}))
	n := len(p.L.Drain())
	for _, c := range []struct {
		id  uint64
		why string
	}{{1, "answered already"}, {2, "never received"}, {0, "never received"}} {
		err := p.L.S.V4().Respond(c.id, wire.Response{})
		if !isCode(err, wire.CodeInvalidState) || !bytes.Contains([]byte(err.Error()), []byte(c.why)) {
			t.Errorf("Respond(%d): %v, want invalid-state: %s", c.id, err, c.why)
		}
	}
	if got := p.L.Drain(); len(got) != 0 || n != 1 {
		t.Fatalf("sent %d messages after the refusals (%d with the answer)", len(got), n)
	}
}

// TestV4CommandsRefused: commands whose arguments break the rules a receiver checks, or
// that do not fit, are refused and send nothing.
func TestV4CommandsRefused(t *testing.T) {
	p := fxPairV4(t, protocol.Limits{MaxSendBuffer: 64 << 10}, protocol.Limits{MaxFrameBody: 8 << 10})
	v4 := p.D.S.V4()
	bad := func(mod func(r *wire.Request)) error {
		r := askMap("a")
		mod(&r)
		_, err := v4.Request(r)
		return err
	}
	for _, c := range []struct {
		name string
		err  error
		code wire.Code
	}{
		{"members with a name twice", v4.SendMembers([]wire.Member{{Name: "a", MaxVersion: 4, Stamp: 1}, {Name: "a", MaxVersion: 3, Stamp: 2}}), wire.CodeBadArgument},
		{"members with a name twice across frames", v4.SendMembers(slices.Concat(nMembers(wire.MaxMembers), nMembers(wire.MaxMembers)[wire.MaxMembers-1:])), wire.CodeBadArgument},
		{"a member of stamp 0", v4.SendMembers([]wire.Member{{Name: "a", MaxVersion: 4}}), wire.CodeBadArgument},
		{"a request whose path does not end at this node", bad(func(r *wire.Request) { r.Path = []string{"a", "x"} }), wire.CodeBadArgument},
		{"a request of timeout 0", bad(func(r *wire.Request) { r.TimeoutMS = 0 }), wire.CodeBadArgument},
		{"a request of an unknown scope", bad(func(r *wire.Request) { r.Scope = "root" }), wire.CodeBadArgument},
		{"a request beyond the peer's frame limit", bad(func(r *wire.Request) { r.Body = make([]byte, 8<<10) }), wire.CodeFrameTooLarge},
		{"an answer with a bad code", v4.Respond(1, wire.Response{Code: "No"}), wire.CodeBadArgument},
		{"an answer with a message of 1025 bytes", v4.Respond(1, wire.Response{Message: string(make([]byte, 1025))}), wire.CodeBadArgument},
	} {
		if !isCode(c.err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, c.err, c.code)
		}
	}
	if got := p.D.Drain(); len(got) != 0 {
		t.Fatalf("sent %d messages after refused commands", len(got))
	}
	// An answer beyond the peer's frame limit (the dialer's, 16 MiB) is refused, and the
	// request stays owed.
	if err := p.L.S.V4().Respond(1, wire.Response{Body: make([]byte, wire.MaxFrameBody)}); !isCode(err, wire.CodeFrameTooLarge) {
		t.Fatalf("an answer beyond the peer's frame limit: %v", err)
	}
	// The dialer's send buffer (64 KiB): a request that would pass it while output is
	// queued is refused with send-buffer-full, and goes once the output is taken.
	must(t, p.D.S.V4().SendMap(testMap(3, "a")))
	body := wire.Request{Target: "b", Path: []string{"a"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "put", Body: make([]byte, 7<<10)}
	for i := 0; ; i++ {
		_, err := p.D.S.V4().Request(body)
		if isCode(err, wire.CodeSendBufferFull) {
			break
		}
		must(t, err)
		if i > 10 {
			t.Fatal("the send buffer never filled")
		}
	}
	p.D.Drain()
	if _, err := p.D.S.V4().Request(body); err != nil {
		t.Fatalf("after the output was taken: %v", err)
	}
	must(t, p.L.S.V4().Respond(1, wire.Response{})) // still owed
}

// nMembers is n member entries, m100000, m100001, ..., sorted by name.
func nMembers(n int) []wire.Member {
	out := make([]wire.Member, n)
	for i := range out {
		out[i] = wire.Member{Name: "m" + strconv.Itoa(100000+i), MaxVersion: 4, Stamp: 1}
	}
	return out
}

// TestV4OnOlderConnections: on a connection of version 1, 2 or 3 every version-4 frame is
// unexpected-frame, and every version-4 command invalid-state.
func TestV4OnOlderConnections(t *testing.T) {
	m := testMap(3, "b")
	for _, cfg := range []func(wire.Role, string, byte) protocol.Config{prototest.ConfigV1, prototest.ConfigV2, prototest.ConfigV3} {
		for _, f := range []wire.Body{&m, &wire.Members{Entries: []wire.Member{{Name: "b", MaxVersion: 4, Stamp: 1}}},
			&wire.Request{ID: 1, Target: "a", Path: []string{"b"}, TimeoutMS: 1, Scope: wire.ScopeRead, Kind: "map"},
			&wire.Response{ID: 1}, &wire.Link{Mode: wire.LinkSend}, &wire.LeafState{Reoriginated: 1},
			&wire.Quiet{Quiet: []wire.OriginID{prototest.Origin(5)}}} {
			p := established(t, cfg(wire.RoleDialer, "a", 1), cfg(wire.RoleListener, "b", 2))
			v := p.D.S.Handshake().Version
			v4 := p.D.S.V4()
			_, rerr := v4.Request(askMap("a"))
			for i, err := range []error{v4.SendMap(testMap(3, "a")), v4.SendMembers(nMembers(1)), rerr, v4.Respond(1, wire.Response{}), v4.Forget(1),
				v4.Link(wire.Link{}), v4.LeafState(wire.LeafState{}), v4.Quiet(nil, nil)} {
				if !isCode(err, wire.CodeInvalidState) {
					t.Errorf("version %d: command %d: %v, want invalid-state", v, i, err)
				}
			}
			must(t, p.D.S.Receive(p.Now, cat(ping7, prototest.Frame(f))))
			e := p.D.S.Err()
			if e == nil || e.Code != wire.CodeUnexpectedFrame || e.Frame != f.FrameType() || e.Offset != len(ping7) {
				t.Errorf("version %d: %s: %v, want unexpected-frame at %d", v, f.FrameType(), e, len(ping7))
			}
		}
	}
}

// TestV4ClosedRefuses: a closed session refuses version 4's commands, and no CLOSE carries a
// request code.
func TestV4ClosedRefuses(t *testing.T) {
	p := fxPairV4(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.D.S.Close(wire.CodeGoingAway, "done"))
	if err := p.D.S.V4().Respond(1, wire.Response{}); !isCode(err, wire.CodeClosed) {
		t.Fatalf("Respond on a closed session: %v", err)
	}
	if err := p.D.S.V4().Forget(1); !isCode(err, wire.CodeClosed) {
		t.Fatalf("Forget on a closed session: %v", err)
	}
	// Request codes never travel in a CLOSE.
	if err := p.L.S.Close(wire.CodeNoRoute, "x"); !isCode(err, wire.CodeBadArgument) {
		t.Fatalf("Close with a request code: %v", err)
	}
}

// TestV4Link: LINK carries a side's settings for the link to the peer as they were sent,
// each time they are sent; settings that break LINK's rules are refused, nothing sent.
func TestV4Link(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	must(t, p.D.S.V4().Link(wire.Link{Mode: wire.LinkReceive, Tables: [][]byte{[]byte("a"), []byte("b")}}))
	p.Pump(10)
	ev := p.L.Last(protocol.EventLink)
	if ev == nil || ev.Link.Mode != wire.LinkReceive || len(ev.Link.Tables) != 2 || string(ev.Link.Tables[1]) != "b" {
		t.Fatalf("the listener's link event: %+v", ev)
	}
	must(t, p.D.S.V4().Link(wire.Link{}))
	p.Pump(10)
	if got := eventsAfter(p.L, 0, protocol.EventLink); len(got) != 2 || got[1].Link.Mode != wire.LinkBoth || got[1].Link.Tables != nil {
		t.Fatalf("the link events: %+v", got)
	}
	for _, l := range []wire.Link{{Mode: 3}, {Tables: [][]byte{[]byte("b"), []byte("a")}}} {
		if err := p.D.S.V4().Link(l); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("Link(%+v): %v, want bad-argument", l, err)
		}
	}
	if got := p.D.Drain(); len(got) != 0 {
		t.Fatalf("sent %d messages after refused links", len(got))
	}
}

// TestV4LeafState: a leaf's HELLO says it is one (key 10) and its hub's session knows it;
// LEAFSTATE goes from the hub to its leaf only: the leaf cannot send one, nor can either
// side of a version-4 connection that is not a leaf's, and one received there closes the
// session with unexpected-frame; a state that breaks LEAFSTATE's rules is refused unsent.
func TestV4LeafState(t *testing.T) {
	dc, lc := prototest.Config(wire.RoleDialer, "a", 1), prototest.Config(wire.RoleListener, "b", 2)
	dc.Leaf = true
	p := established(t, dc, lc)
	if !p.L.S.Handshake().PeerLeaf || p.D.S.Handshake().PeerLeaf || !slices.Contains(p.D.S.Handshake().Caps, wire.CapLeaf) {
		t.Fatalf("handshakes: leaf side %+v, hub side %+v", p.D.S.Handshake(), p.L.S.Handshake())
	}
	st := wire.LeafState{Horizon: 5, Reoriginated: 4, HubSeq: 9, Core: 3, Refused: 1, LastRefused: 4, Reason: "too-old"}
	must(t, p.L.S.V4().LeafState(st))
	p.Pump(10)
	if ev := p.D.Last(protocol.EventLeafState); ev == nil || ev.LeafState.Core != 3 || ev.LeafState.Reason != "too-old" {
		t.Fatalf("the leaf's leaf-state event: %+v", ev)
	}
	if err := p.D.S.V4().LeafState(st); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("a leaf's LeafState: %v, want invalid-state", err)
	}
	for _, bad := range []wire.LeafState{{Core: 2, Reoriginated: 1}, {Reoriginated: 3, LastRefused: 2}, {Reoriginated: 3, Reason: "x"}} {
		if err := p.L.S.V4().LeafState(bad); !isCode(err, wire.CodeBadArgument) {
			t.Errorf("LeafState(%+v): %v, want bad-argument", bad, err)
		}
	}
	if got := p.L.Drain(); len(got) != 0 {
		t.Fatalf("sent %d messages after refused states", len(got))
	}
	// Between two peers, neither a leaf.
	q := v4pair(t, protocol.Limits{}, protocol.Limits{})
	if err := q.L.S.V4().LeafState(wire.LeafState{}); !isCode(err, wire.CodeInvalidState) {
		t.Errorf("a peer's LeafState: %v, want invalid-state", err)
	}
	must(t, q.D.S.Receive(q.Now, cat(ping7, prototest.Frame(&st))))
	if e := q.D.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame || e.Frame != wire.TypeLeafState {
		t.Errorf("LEAFSTATE to a peer that is no leaf: %v, want unexpected-frame", e)
	}
	// A hub does not take one either.
	must(t, p.L.S.Receive(p.Now, cat(ping7, prototest.Frame(&st))))
	if e := p.L.S.Err(); e == nil || e.Code != wire.CodeUnexpectedFrame {
		t.Errorf("LEAFSTATE to the hub: %v, want unexpected-frame", e)
	}
}

// quietIDs is the origins prototest.Origin(from) .. prototest.Origin(from+n-1), sorted
// (as a QUIET lists them).
func quietIDs(from, n int) []wire.OriginID {
	out := make([]wire.OriginID, n)
	for i := range out {
		out[i] = prototest.Origin(byte(from + i))
	}
	slices.SortFunc(out, func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// TestV4Quiet: QUIET carries a side's quiet set to the peer: the first even empty, later
// ones only when they say something, the lists sorted by the session; lists that break
// QUIET's rules are refused unsent; the set told is bounded by MaxOrigins (at the limit it
// goes, one past is too-many-origins); a long one is split into frames that fit the peer's
// frame limit.
func TestV4Quiet(t *testing.T) {
	p := v4pair(t, protocol.Limits{MaxOrigins: 4}, protocol.Limits{MaxFrameBody: 1024})
	q := p.D.S.V4()
	must(t, q.Quiet(nil, nil))
	must(t, q.Quiet(nil, nil)) // nothing to say: nothing sent
	p.Pump(10)
	if got := eventsAfter(p.L, 0, protocol.EventQuiet); len(got) != 1 || len(got[0].Quiet.Quiet)+len(got[0].Quiet.Loud) != 0 {
		t.Fatalf("the first QUIET: %+v", got)
	}
	must(t, q.Quiet([]wire.OriginID{prototest.Origin(3), prototest.Origin(1)}, nil))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventQuiet); ev.Quiet.Quiet[0] != prototest.Origin(1) || ev.Quiet.Quiet[1] != prototest.Origin(3) {
		t.Fatalf("not sorted: %+v", ev.Quiet)
	}
	for _, c := range []struct {
		name        string
		quiet, loud []wire.OriginID
		code        wire.Code
	}{
		{"a zero origin", []wire.OriginID{{}}, nil, wire.CodeBadArgument},
		{"an origin twice", []wire.OriginID{prototest.Origin(5), prototest.Origin(5)}, nil, wire.CodeBadArgument},
		{"an origin quiet and loud", []wire.OriginID{prototest.Origin(5)}, []wire.OriginID{prototest.Origin(5)}, wire.CodeBadArgument},
		{"one past MaxOrigins", quietIDs(4, 3), nil, wire.CodeTooManyOrigins}, // 1, 3 and three more: 5
	} {
		if err := q.Quiet(c.quiet, c.loud); !isCode(err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if got := p.D.Drain(); len(got) != 0 {
		t.Fatalf("sent %d messages after refused QUIETs", len(got))
	}
	// At the limit: 1 and 3 loud, then four quiet.
	must(t, q.Quiet(quietIDs(4, 4), []wire.OriginID{prototest.Origin(1), prototest.Origin(3)}))
	p.Pump(10)
	if ev := p.L.Last(protocol.EventQuiet); len(ev.Quiet.Quiet) != 4 || len(ev.Quiet.Loud) != 2 {
		t.Fatalf("at the limit: %+v", ev.Quiet)
	}
	// Split: the listener takes frames of 1 KiB, and 200 origins are 3.4 KiB.
	r := v4pair(t, protocol.Limits{}, protocol.Limits{MaxFrameBody: 1024})
	must(t, r.D.S.V4().Quiet(quietIDs(1, 200), nil))
	n := len(r.D.Sent)
	r.Pump(10)
	got := 0
	for _, ev := range eventsAfter(r.L, 0, protocol.EventQuiet) {
		got += len(ev.Quiet.Quiet)
	}
	if fs := frames(t, r.D.Sent[n-1:]); got != 200 || len(fs) < 4 || r.L.S.Err() != nil {
		t.Fatalf("a long QUIET: %d origins in %d frames, %v", got, len(fs), r.L.S.Err())
	}
}

// TestV4QuietReceivedBound: the peer's quiet set is bounded by this side's MaxOrigins: a
// QUIET that fills it goes, one that passes it closes the session with too-many-origins;
// loud origins leave the set first, so a QUIET that swaps one for another at the limit goes.
func TestV4QuietReceivedBound(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{MaxOrigins: 3})
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Quiet{Quiet: quietIDs(1, 3)})))
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Quiet{Quiet: quietIDs(4, 1), Loud: quietIDs(1, 1)})))
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Quiet{Quiet: quietIDs(2, 1)}))) // already in: no growth
	quiets := 0
	for _, ev := range p.L.S.Ready().Events {
		if ev.Kind == protocol.EventQuiet {
			quiets++
		}
	}
	if e := p.L.S.Err(); e != nil || quiets != 3 {
		t.Fatalf("at the limit: %v, %d quiet events", e, quiets)
	}
	must(t, p.L.S.Receive(p.Now, prototest.Frame(&wire.Quiet{Quiet: quietIDs(9, 1)})))
	if e := p.L.S.Err(); e == nil || e.Code != wire.CodeTooManyOrigins || e.Frame != wire.TypeQuiet {
		t.Fatalf("one past the limit: %v, want too-many-origins", e)
	}
}

// TestV4QuietForgetsAdvertised: a peer that said an origin is quiet forgot its head, so
// the session sends that head again even unchanged; an origin not quiet is sent only when
// it moved.
func TestV4QuietForgetsAdvertised(t *testing.T) {
	p := v4pair(t, protocol.Limits{}, protocol.Limits{})
	o, k := prototest.Origin(7), prototest.Origin(8)
	must(t, p.L.S.SetOriginName(o, "seven"))
	must(t, p.L.S.SetOriginName(k, "eight"))
	heads := []wire.Head{{Origin: o, Seq: 5, HLC: 5}, {Origin: k, Seq: 5, HLC: 5}}
	must(t, p.L.S.V2().AdvertiseHeads(heads))
	p.Pump(10)
	must(t, p.D.S.V4().Quiet([]wire.OriginID{o}, nil))
	p.Pump(10)
	if p.L.Count(protocol.EventQuiet) != 1 {
		t.Fatal("no quiet event")
	}
	n := p.D.Count(protocol.EventHeads)
	must(t, p.L.S.V2().AdvertiseHeads(heads))
	p.Pump(10)
	got := eventsAfter(p.D, 0, protocol.EventHeads)
	if len(got) != n+1 || len(got[n].Heads.Heads) != 1 || got[n].Heads.Heads[0].Origin != o {
		t.Fatalf("heads after QUIET: %+v", got[n:])
	}
}
