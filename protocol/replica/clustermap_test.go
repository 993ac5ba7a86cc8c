package replica_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// mapDoc is a map document of generation g listing members, extra appended inside.
func mapDoc(g uint64, extra string, members ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"generation":%d,"nodes":[`, g)
	for i, m := range members {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":%q}`, m)
	}
	b.WriteString("]" + extra + "}")
	return []byte(b.String())
}

func (n *node) publish(doc []byte) (replica.MapStatus, error) {
	n.h.t.Helper()
	st, err := n.rep.PublishMap(n.clock(), doc)
	n.h.pump()
	return st, err
}

// TestMapSpreads: a map published on one end of a chain reaches the other, survives a
// restart, and decides by generation alone: the same document again is accepted, a lower
// or equal generation refused stale-generation, and a node that was away gets it when it
// connects again.
func TestMapSpreads(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	bc := h.connect(c, b)
	if st := c.rep.MapStatus(); st.Generation != 0 || string(st.Document) != `{"generation":0}` {
		t.Fatalf("before any map: %+v", st)
	}
	doc := mapDoc(2, "", "A", "B", "C")
	if _, err := a.publish(doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b, c} {
		if st := n.rep.MapStatus(); st.Generation != 2 || st.Publisher != "A" || !slices.Equal(st.Members, []string{"A", "B", "C"}) {
			t.Fatalf("%s after the publication: %+v", n.name, st)
		}
	}
	// The same document, spaced and ordered otherwise, is the same map.
	if _, err := c.publish([]byte(` {"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}], "generation":2} `)); err != nil {
		t.Fatalf("the same map again: %v", err)
	}
	for _, d := range [][]byte{mapDoc(2, "", "A"), mapDoc(1, "", "A")} {
		var we *wire.Error
		if _, err := c.publish(d); !errors.As(err, &we) || we.Code != replica.CodeStaleGeneration {
			t.Fatalf("publishing %s over generation 2: %v, want stale-generation", d, err)
		}
	}
	// C away: a higher generation published meanwhile reaches it when it connects again.
	h.disconnect(bc)
	if _, err := a.publish(mapDoc(3, "", "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	if g := c.rep.MapGeneration(); g != 2 {
		t.Fatalf("C, cut off, holds generation %d", g)
	}
	c.restart()
	if g := c.rep.MapGeneration(); g != 2 {
		t.Fatalf("C after a restart holds generation %d, want the 2 it stored", g)
	}
	h.connect(c, b)
	if st := c.rep.MapStatus(); st.Generation != 3 || st.AppliedAt.IsZero() {
		t.Fatalf("C after it connected again: %+v", st)
	}
	// Every node's own entry says which generation it holds, so every node knows them all.
	want := []replica.MemberVersion{{Name: "A", MaxVersion: 4, Generation: 3}, {Name: "B", MaxVersion: 4, Generation: 3}, {Name: "C", MaxVersion: 4, Generation: 3}}
	if got := a.rep.MapStatus().Versions; !slices.Equal(got, want) {
		t.Fatalf("A knows the nodes as %+v, want %+v", got, want)
	}
	if got := a.rep.Counters().ClusterMapAdopted; got != 2 {
		t.Errorf("A adopted %d maps, want 2", got)
	}
}

// TestMapConflict: two different maps of one generation published apart: each node keeps
// its own, counts the conflict once and shows the other's publisher; generation N+1 ends it.
func TestMapConflict(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	if _, err := a.publish(mapDoc(5, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.publish(mapDoc(5, "", "B", "A")); err != nil {
		t.Fatal(err)
	}
	l := h.connect(b, a)
	for _, c := range []struct {
		n     *node
		other string
		doc   []byte
	}{{a, "B", mapDoc(5, "", "A", "B")}, {b, "A", mapDoc(5, "", "B", "A")}} {
		st := c.n.rep.MapStatus()
		if string(st.Document) != string(c.doc) || st.Conflict == nil || st.Conflict.Publisher != c.other || st.Conflict.Generation != 5 {
			t.Fatalf("%s after meeting the other map: %+v", c.n.name, st)
		}
	}
	// Meeting it again (a reconnection) counts nothing more.
	h.disconnect(l)
	h.connect(b, a)
	if a.rep.Counters().ClusterMapConflicts != 1 || b.rep.Counters().ClusterMapConflicts != 1 {
		t.Fatalf("conflicts counted: A %d, B %d; want 1 each", a.rep.Counters().ClusterMapConflicts, b.rep.Counters().ClusterMapConflicts)
	}
	if _, err := b.publish(mapDoc(6, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b} {
		if st := n.rep.MapStatus(); st.Generation != 6 || st.Conflict != nil {
			t.Fatalf("%s after generation 6: %+v", n.name, st)
		}
	}
}

// TestMapDocumentRules: a MAP whose document breaks the map's rules (not canonical JSON,
// another generation than the frame's) closes the connection with bad-field, and nothing
// of it is adopted; fields this build does not know are kept and relayed.
func TestMapDocumentRules(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		ok        bool
	}{
		{"not JSON", `{"generation":3`, false},
		{"an array", `[3]`, false},
		{"two values", `{"generation":3}{}`, false},
		{"keys unsorted", `{"nodes":[{"name":"A"}],"generation":3}`, false},
		{"space", `{"generation": 3}`, false},
		{"a key twice", `{"generation":3,"generation":3}`, false},
		{"another generation", `{"generation":4}`, false},
		{"the generation written otherwise", `{"generation":3.0}`, false},
		{"no generation", `{"nodes":[{"name":"A"}]}`, false},
		{"a placement on a node not a member", `{"generation":3,"nodes":[{"name":"A"}],"placement":{"t":["B"]}}`, false},
		{"an unknown field, kept", `{"generation":3,"zone":"x"}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
			h.alter = func(from, to string, msg []byte) []byte {
				frames, err := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
				if err != nil || from != "A" {
					return msg
				}
				for i, f := range frames {
					if m, ok := f.Value.(*wire.Map); ok {
						m.Document = []byte(c.doc)
						frames[i].Value = m
					}
				}
				out, eerr := wire.EncodeMessage(frames)
				if eerr != nil {
					t.Fatal(eerr)
				}
				return out
			}
			if _, err := a.publish(mapDoc(3, "", "A")); err != nil {
				t.Fatal(err)
			}
			h.connect(b, a)
			st := b.rep.MapStatus()
			if !c.ok {
				if st.Generation != 0 || b.rep.Counters().ProtocolErrors == 0 && a.rep.Counters().ProtocolErrors == 0 {
					t.Fatalf("B took a MAP whose document is %s: %+v", c.name, st)
				}
				if e := a.rep.LastError("B"); e == nil || e.Err.Code != wire.CodeBadField {
					t.Fatalf("A's last error from B: %+v, want bad-field", e)
				}
				return
			}
			if string(st.Document) != c.doc {
				t.Fatalf("B holds %s, want %s kept as it came", st.Document, c.doc)
			}
		})
	}
}

// TestMembersBelowV4: the members not known to speak version 4: a peer whose handshake
// offers less is reported by its version-4 neighbour, a member no node knows stays below,
// and a node upgraded says so itself; the gate opens only when the list is empty.
func TestMembersBelowV4(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	h.connect(b, a)
	h.connect(c, b)
	if err := a.rep.RequireV4(); err == nil || err.Code != clustermap.CodeClusterNotV4 {
		t.Fatalf("the gate with no map: %v, want cluster-not-v4", err)
	}
	if _, err := a.publish(mapDoc(1, "", "A", "B", "C", "D")); err != nil {
		t.Fatal(err)
	}
	if got := a.rep.MapStatus().MembersBelowV4; !slices.Equal(got, []string{"C", "D"}) {
		t.Fatalf("A's members below version 4: %v, want [C D]", got)
	}
	if c.rep.MapGeneration() != 0 {
		t.Fatalf("C at version 3 holds generation %d", c.rep.MapGeneration())
	}
	c.cfg.MaxVersion = 0
	c.restart()
	h.connect(c, b)
	if got := a.rep.MapStatus().MembersBelowV4; !slices.Equal(got, []string{"D"}) {
		t.Fatalf("A after C's upgrade: %v, want [D]", got)
	}
	if c.rep.MapGeneration() != 1 {
		t.Fatalf("C after its upgrade holds generation %d", c.rep.MapGeneration())
	}
	if _, err := b.publish(mapDoc(2, "", "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	if err := a.rep.RequireV4(); err != nil {
		t.Fatalf("the gate with every member at version 4: %v", err)
	}
	// C downgraded again: B sees its handshake, and A learns it is below once more.
	c.cfg.MaxVersion = 3
	c.restart()
	h.connect(c, b)
	if got := a.rep.MapStatus().MembersBelowV4; !slices.Equal(got, []string{"C"}) {
		t.Fatalf("A after C's downgrade: %v, want [C]", got)
	}
}

// answers runs the harness until n has answers for every id, or d passes.
func (n *node) answers(d time.Duration, ids ...replica.RequestID) map[replica.RequestID]replica.Answer {
	n.h.t.Helper()
	got := map[replica.RequestID]replica.Answer{}
	for end := n.h.now.Add(d); ; {
		for _, a := range n.rep.Answers() {
			if _, dup := got[a.ID]; dup {
				n.h.t.Fatalf("%s: request %d answered twice", n.name, a.ID)
			}
			got[a.ID] = a
		}
		if len(got) >= len(ids) || !n.h.now.Before(end) {
			return got
		}
		n.h.advance(10 * time.Millisecond)
	}
}

// TestRequests: a request crosses a chain to its target and back; one for a node no
// route reaches, or beyond the hop limit, is refused no-route; a connection that closes
// under a request answers it unreachable; one nobody answers times out; none is answered
// twice.
func TestRequests(t *testing.T) {
	h := newHarness(t)
	// A timeout below the liveness timeout (5 s), so a held connection times a request
	// out before it is closed as dead.
	cfg := replica.Config{RequestTimeout: time.Second}
	a, b, c := h.addNode("A", cfg), h.addNode("B", cfg), h.addNode("C", cfg)
	h.connect(b, a)
	bc := h.connect(c, b)
	c.write(put("t", "k", "v")) // C's origin, routed through B at A
	h.advance(100 * time.Millisecond)
	if _, err := c.publish(mapDoc(7, "", "C")); err != nil {
		t.Fatal(err)
	}
	ask := func(n *node, target, scope string) replica.RequestID {
		id, err := n.rep.Ask(n.clock(), target, "map", scope, nil)
		if err != nil {
			t.Fatal(err)
		}
		h.pump()
		return id
	}
	id := ask(a, "C", "read")
	ans := a.answers(time.Second, id)[id]
	m, err := wire.DecodeMapAnswer(ans.Body)
	if ans.Code != "" || err != nil || m == nil || m.Generation != 7 {
		t.Fatalf("A asked C for its map: %+v (%v)", ans, err)
	}
	if b.rep.Counters().RequestsForwarded != 1 || c.rep.Counters().RequestsServed != 1 || a.rep.Counters().RequestsSent != 1 {
		t.Fatalf("counters: A sent %d, B forwarded %d, C served %d", a.rep.Counters().RequestsSent, b.rep.Counters().RequestsForwarded, c.rep.Counters().RequestsServed)
	}
	if id := ask(a, "Z", "read"); a.answers(time.Second, id)[id].Code != replica.CodeNoRoute {
		t.Fatalf("a request for a node nobody knows: %+v", a.answers(0, id))
	}
	if id := ask(a, "A", "read"); a.answers(time.Second, id)[id].Code != "" {
		t.Fatalf("a request for A itself")
	}
	// Held on B -> C, then the connection closes: unreachable.
	bc.hold = true
	id = ask(a, "C", "read")
	h.advance(50 * time.Millisecond)
	h.disconnect(bc)
	if got := a.answers(time.Second, id)[id]; got.Code != replica.CodeUnreachable {
		t.Fatalf("a request whose connection closed on the way: %+v, want unreachable", got)
	}
	// Held for good: request-timeout at the caller after RequestTimeout.
	bc = h.connect(c, b)
	h.advance(100 * time.Millisecond)
	bc.hold = true
	id = ask(a, "C", "read")
	if got := a.answers(2*time.Second, id)[id]; got.Code != replica.CodeRequestTimeout {
		t.Fatalf("a request nobody answers: %+v, want request-timeout", got)
	}
	bc.hold = false
	h.advance(2 * time.Second)
	if got := a.rep.Answers(); len(got) != 0 {
		t.Fatalf("answers after the timeout: %+v", got)
	}
}

// TestRequestToNodeThatNeverWrote: a node that never wrote is no origin anyone routes; a
// request still reaches it, toward the connection its member entry came on.
func TestRequestToNodeThatNeverWrote(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	h.connect(c, b)
	id, err := a.rep.Ask(a.clock(), "C", "map", "read", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.pump()
	if got := a.answers(time.Second, id)[id]; got.Code != "" {
		t.Fatalf("A asked C, which never wrote: %+v", got)
	}
}

// TestRequestHopLimit: a request passes at most MaxRequestHops nodes.
func TestRequestHopLimit(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{MaxRequestHops: 2}
	a, b, c := h.addNode("A", cfg), h.addNode("B", cfg), h.addNode("C", cfg)
	d := h.addNode("D", cfg)
	h.connect(b, a)
	h.connect(c, b)
	h.connect(d, c)
	for _, n := range []*node{c, d} {
		n.write(put("t", "k", n.name))
	}
	h.advance(200 * time.Millisecond)
	for _, c := range []struct {
		target string
		code   wire.Code
	}{{"C", ""}, {"D", replica.CodeNoRoute}} {
		id, err := a.rep.Ask(a.clock(), c.target, "map", "read", nil)
		if err != nil {
			t.Fatal(err)
		}
		h.pump()
		if got := a.answers(time.Second, id)[id]; got.Code != c.code {
			t.Errorf("A asked %s at a hop limit of 2: %+v, want %q", c.target, got, c.code)
		}
	}
}

// TestMemberEntriesBound: a node keeps at most MaxMembers entries: at the bound every one
// is kept, one more is refused and counted, and the configuration's bounds are checked.
func TestMemberEntriesBound(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{MaxMembers: 3})
	b, c := h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	h.connect(c, b)
	if got := a.rep.MapStatus().Versions; len(got) != 3 || a.rep.Counters().MembersRefused != 0 {
		t.Fatalf("A at its bound of 3: %+v, %d refused", got, a.rep.Counters().MembersRefused)
	}
	d := h.addNode("D", replica.Config{})
	h.connect(d, c)
	if got := a.rep.MapStatus().Versions; len(got) != 3 || a.rep.Counters().MembersRefused == 0 {
		t.Fatalf("A past its bound of 3: %+v, %d refused", got, a.rep.Counters().MembersRefused)
	}
	for _, c := range []struct {
		cfg replica.Config
		ok  bool
	}{
		{replica.Config{MaxMembers: replica.MaxMemberEntries}, true},
		{replica.Config{MaxMembers: replica.MaxMemberEntries + 1}, false},
		{replica.Config{MaxRequestHops: 2}, true},
		{replica.Config{MaxRequestHops: 1}, false},
		{replica.Config{MaxRequestHops: wire.MaxRequestPath}, true},
		{replica.Config{MaxRequestHops: wire.MaxRequestPath + 1}, false},
		{replica.Config{RequestTimeout: wire.MaxRequestTimeout * time.Millisecond}, true},
		{replica.Config{RequestTimeout: wire.MaxRequestTimeout*time.Millisecond + time.Millisecond}, false},
		{replica.Config{RequestTimeout: time.Millisecond}, true},
		{replica.Config{RequestTimeout: time.Microsecond}, false},
	} {
		c.cfg.Secret = testSecret
		_, err := replica.New(c.cfg, memstore.New(store.Identity{Origin: wire.OriginID{1}, Name: "X"}))
		if (err == nil) != c.ok {
			t.Errorf("replica.New with MaxMembers %d, MaxRequestHops %d, RequestTimeout %s: %v, want ok=%v",
				c.cfg.MaxMembers, c.cfg.MaxRequestHops, c.cfg.RequestTimeout, err, c.ok)
		}
	}
}

// TestMapPastThePeersFrameLimit: a map whose MAP body does not fit a peer's frame limit
// closes that connection with frame-too-large (the peer cannot hold it); the node goes on.
func TestMapPastThePeersFrameLimit(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{Limits: protocol.Limits{MaxFrameBody: 1024}})
	var names []string
	for i := range 60 {
		names = append(names, fmt.Sprintf("node-%02d", i))
	}
	if _, err := a.publish(mapDoc(1, "", names...)); err != nil {
		t.Fatal(err)
	}
	h.connect(b, a)
	if e := b.rep.LastError("A"); e == nil || e.Err.Code != wire.CodeFrameTooLarge {
		t.Fatalf("B's last error from A: %+v, want frame-too-large", e)
	}
	if b.rep.MapGeneration() != 0 {
		t.Fatalf("B holds generation %d", b.rep.MapGeneration())
	}
	a.write(put("t", "k", "v")) // A still runs
}

// TestWriteMixedPlacement: a local write whose tables are not placed alike under the
// node's map is refused with mixed-placement, counted, and writes nothing; tables placed
// alike, or all unplaced, are written; the status shows the placement and what each node
// carries.
func TestWriteMixedPlacement(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	// Before any placement, any tables go together.
	if seq := b.write(put("orders", "o1", "x"), put("lines", "l1", "y")); seq != 1 {
		t.Fatalf("B's first write is seq %d", seq)
	}
	if _, err := a.publish(mapDoc(2, `,"placement":{"lines":["B"],"orders":["A"],"stock":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	refused := func(n *node, ops ...wire.Op) {
		t.Helper()
		var ce *clustermap.Error
		if seq, err := n.rep.Write(n.clock(), ops); !errors.As(err, &ce) || ce.Code != clustermap.CodeMixedPlacement {
			t.Fatalf("%s: a write of %d operations: seq %d, %v; want mixed-placement", n.name, len(ops), seq, err)
		}
	}
	refused(b, put("orders", "o2", "x"), put("lines", "l2", "y"))
	refused(b, put("x", "k", "v"), del("orders", "o1"))
	refused(a, put("stock", "s", "1"), put("lines", "l", "1"), put("stock", "s2", "1"))
	if got := b.rep.Counters().WritesRefusedMixedPlacement; got != 2 {
		t.Errorf("B counted %d refusals, want 2", got)
	}
	if got := a.rep.Counters().WritesRefusedMixedPlacement; got != 1 {
		t.Errorf("A counted %d refusals, want 1", got)
	}
	// A write of tables this node does not carry is refused too (not-carried), and counted.
	var ce *clustermap.Error
	if seq, err := b.rep.Write(b.clock(), []wire.Op{put("orders", "o3", "x"), put("stock", "s3", "y")}); !errors.As(err, &ce) || ce.Code != clustermap.CodeNotCarried {
		t.Fatalf("B: a write of tables placed on A: seq %d, %v; want not-carried", seq, err)
	}
	if got := b.rep.Counters().WritesRefusedNotCarried; got != 1 {
		t.Errorf("B counted %d not-carried refusals, want 1", got)
	}
	// Nothing of a refused write was stored: the next is B's seq 2, and o2 is nowhere.
	if seq := b.write(put("lines", "l3", "x")); seq != 2 {
		t.Fatalf("B's write after the refusals is seq %d, want 2", seq)
	}
	if seq := b.write(put("x", "k", "v"), put("y", "k", "v")); seq != 3 {
		t.Fatalf("B's write of unplaced tables is seq %d, want 3", seq)
	}
	if seq := a.write(put("orders", "o3", "x"), put("stock", "s3", "y")); seq != 1 {
		t.Fatalf("A's write of its tables is seq %d, want 1", seq)
	}
	h.pump()
	for _, n := range []*node{a, b} {
		if _, ok := n.get("orders", "o2"); ok {
			t.Errorf("%s holds orders/o2 of a refused write", n.name)
		}
		if _, ok := n.get("x", "k"); !ok {
			t.Errorf("%s lacks x/k, of a table every node carries", n.name)
		}
	}
	// Each node stores the records of the tables it carries only: the entries reach both.
	for _, c := range []struct {
		n     *node
		table string
		key   string
		want  bool
	}{{a, "stock", "s3", true}, {b, "stock", "s3", false}, {b, "lines", "l3", true}, {a, "lines", "l3", false}} {
		if _, ok := c.n.get(c.table, c.key); ok != c.want {
			t.Errorf("%s holds %s/%s: %v, want %v", c.n.name, c.table, c.key, ok, c.want)
		}
	}
	wantPlacement := map[string][]string{"lines": {"B"}, "orders": {"A"}, "stock": {"A"}}
	for _, c := range []struct {
		n       *node
		carried []string
	}{{a, []string{"orders", "stock"}}, {b, []string{"lines"}}} {
		st := c.n.rep.MapStatus()
		if !maps.EqualFunc(st.Placement, wantPlacement, slices.Equal) || !slices.Equal(st.Carried, c.carried) {
			t.Errorf("%s: placement %v, carried %v; want %v, %v", c.n.name, st.Placement, st.Carried, wantPlacement, c.carried)
		}
	}
	// A map without placement lifts the rule.
	if _, err := a.publish(mapDoc(3, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	if seq := b.write(put("orders", "o4", "x"), put("lines", "l4", "y")); seq != 4 {
		t.Fatalf("B's write after the placement went: seq %d, want 4", seq)
	}
	if st := b.rep.MapStatus(); st.Placement != nil || st.Carried != nil {
		t.Errorf("B's status without placement: %v, %v", st.Placement, st.Carried)
	}
}

// TestMapUnfenced: a table once fenced stays fenced. Published here, a higher generation
// that does not fence it is refused unfenced and nothing changes; sent by a peer (one that
// never held the fencing map), it is refused and counted, the connection stays and
// replicates, and a later map that fences the table again is adopted by both.
func TestMapUnfenced(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	// Fencing is whole-cluster and cannot be undone: refused while a member (C, never met)
	// is not known to speak version 4, and nothing of it is on.
	var ce *clustermap.Error
	if _, err := a.publish(mapDoc(2, `,"fenced_tables":["t","u"]`, "A", "B", "C")); !errors.As(err, &ce) || ce.Code != clustermap.CodeClusterNotV4 {
		t.Fatalf("fencing with C unknown: %v, want cluster-not-v4", err)
	}
	if g := a.rep.MapGeneration(); g != 0 {
		t.Fatalf("A holds generation %d after the refusal, want none", g)
	}
	lc := h.connect(c, a) // A learns C's member entry, and keeps it
	h.disconnect(lc)
	connErrs := map[string]uint64{}
	for _, n := range []*node{a, b, c} {
		connErrs[n.name] = n.rep.Counters().ConnectionErrors
	}
	if _, err := a.publish(mapDoc(2, `,"fenced_tables":["t","u"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	if g := b.rep.MapGeneration(); g != 2 {
		t.Fatalf("B holds generation %d, want 2", g)
	}
	for doc, names := range map[string]string{
		string(mapDoc(3, "", "A", "B", "C")):                       `the table "t" (and 1 more)`,
		string(mapDoc(3, `,"fenced_tables":["t"]`, "A", "B", "C")): `the table "u" and`,
	} {
		_, err := a.publish([]byte(doc))
		if !errors.As(err, &ce) || ce.Code != clustermap.CodeUnfenced || !strings.Contains(ce.Message, names) {
			t.Fatalf("publishing %s over a map fencing t and u: %v, want unfenced naming %s", doc, err, names)
		}
	}
	// Refused as stale first: the generation is Decide's, before the fence is looked at.
	if _, err := a.publish(mapDoc(1, "", "A")); wireCode(err) != replica.CodeStaleGeneration {
		t.Fatalf("a lower generation that unfences: %v, want stale-generation", err)
	}
	if g := a.rep.MapGeneration(); g != 2 {
		t.Fatalf("A holds generation %d after the refusals, want 2", g)
	}

	// C never held a map: it takes generation 3 without fences, and meets B.
	if _, err := c.publish(mapDoc(3, "", "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.connect(c, b)
	if g := b.rep.MapGeneration(); g != 2 {
		t.Fatalf("B took C's map that unfences t and u: generation %d", g)
	}
	if g := a.rep.MapGeneration(); g != 2 {
		t.Fatalf("A holds generation %d, want 2: B relays no map it refused", g)
	}
	if g := c.rep.MapGeneration(); g != 3 {
		t.Fatalf("C holds generation %d, want its 3 (B's 2 is stale to it)", g)
	}
	if n := b.rep.Counters().ClusterMapRefused; n != 1 {
		t.Fatalf("B counted %d maps refused, want 1", n)
	}
	c.write(put("v", "k", "x"))
	h.pump()
	if _, ok := b.get("v", "k"); !ok {
		t.Fatal("B does not have C's write: the connection did not stay")
	}
	for _, n := range []*node{a, b, c} {
		if k := n.rep.Counters(); k.ProtocolErrors != 0 || k.ConnectionErrors != connErrs[n.name] {
			t.Fatalf("%s: %d protocol errors, %d connection errors; a refused map closes nothing", n.name, k.ProtocolErrors, k.ConnectionErrors)
		}
	}
	// A map that fences them again follows both.
	if _, err := c.publish(mapDoc(4, `,"fenced_tables":["u","t","w"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b, c} {
		if g := n.rep.MapGeneration(); g != 4 {
			t.Fatalf("%s holds generation %d after a map that fences t and u again, want 4", n.name, g)
		}
	}
	if n := b.rep.Counters().ClusterMapRefused; n != 1 {
		t.Fatalf("B counted %d maps refused, want still 1", n)
	}
}
