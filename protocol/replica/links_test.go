package replica_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// linked is a Config whose link to peer has mode m and excludes tables.
func linked(peer string, m wire.LinkMode, tables ...string) replica.Config {
	return replica.Config{Links: map[string]replica.LinkSettings{peer: settings(m, tables...)}}
}

func settings(m wire.LinkMode, tables ...string) replica.LinkSettings {
	ls := replica.LinkSettings{Mode: m}
	for _, t := range tables {
		ls.Exclude = append(ls.Exclude, []byte(t))
	}
	return ls
}

// refusedBy is how many connections n counted refused with code.
func refusedBy(n *node, code wire.Code) uint64 {
	_, refused, _ := n.rep.Refusals()
	for _, c := range refused {
		if c.Code == code {
			return c.Count
		}
	}
	return 0
}

// TestLinkDirection: a link set to receive on A carries B's entries (and those B relays)
// to A and none of A's to B: A never advertises to B nor streams to it, and B takes
// A's origin from nothing over that link; send is the mirror. The side that did not set
// anything learns the direction from LINK.
func TestLinkDirection(t *testing.T) {
	for _, c := range []struct {
		mode           wire.LinkMode
		aToB, bAndCToA bool
	}{
		{wire.LinkReceive, false, true},
		{wire.LinkSend, true, false},
		{wire.LinkBoth, true, true},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			h := newHarness(t)
			a, b := h.addNode("A", linked("B", c.mode)), h.addNode("B", replica.Config{})
			cn := h.addNode("C", replica.Config{})
			h.connect(b, a)
			h.connect(cn, b)
			for i := range 3 {
				a.write(put("u", "a"+strconv.Itoa(i), "1"))
				b.write(put("u", "b"+strconv.Itoa(i), "1"))
				cn.write(put("u", "c"+strconv.Itoa(i), "1"))
			}
			h.pump()
			h.advance(3 * time.Second) // heads, stall and anti-entropy timers run
			want := func(yes bool) uint64 {
				if yes {
					return 3
				}
				return 0
			}
			if got := b.applied()[a.origin]; got != want(c.aToB) {
				t.Errorf("B's position in A = %d, want %d", got, want(c.aToB))
			}
			if got := cn.applied()[a.origin]; got != want(c.aToB) {
				t.Errorf("C's position in A = %d, want %d", got, want(c.aToB))
			}
			if got := a.applied()[b.origin]; got != want(c.bAndCToA) {
				t.Errorf("A's position in B = %d, want %d", got, want(c.bAndCToA))
			}
			if got := a.applied()[cn.origin]; got != want(c.bAndCToA) {
				t.Errorf("A's position in C = %d, want %d", got, want(c.bAndCToA))
			}
			if src := b.originStatus(a).SourcePeer; (src == "A") != c.aToB {
				t.Errorf("B takes A's origin from %q; over the link: %v", src, c.aToB)
			}
			if src := a.originStatus(b).SourcePeer; (src == "B") != c.bAndCToA {
				t.Errorf("A takes B's origin from %q; over the link: %v", src, c.bAndCToA)
			}
			if _, ok := b.get("u", "a0"); ok != c.aToB {
				t.Errorf("B holds u/a0: %v, want %v", ok, c.aToB)
			}
			if _, ok := a.get("u", "b0"); ok != c.bAndCToA {
				t.Errorf("A holds u/b0: %v, want %v", ok, c.bAndCToA)
			}
			if _, ever := h.headsSent("A", "B", a.origin); ever != c.aToB {
				t.Errorf("A advertised its origin to B: %v, want %v", ever, c.aToB)
			}
			if _, ever := h.headsSent("B", "A", a.origin); ever && !c.bAndCToA {
				t.Error("B advertised A's origin to A") // split horizon anyway; the direction too
			}
			if _, ever := h.headsSent("B", "A", cn.origin); ever != c.bAndCToA {
				t.Errorf("B advertised C's origin to A: %v, want %v", ever, c.bAndCToA)
			}
		})
	}
}

// TestLinkExclusions: a table excluded from the link A-B (on A's side) crosses it neither
// way. Its entries go as runs (A learns B's side from nothing: its own setting; B's writes
// are judged under A's LINK), and the receiver, which carries the table, refuses them:
// B's position in A stops before A's first entry of x, and A's in B before B's. Nothing
// of x crosses, and none of the other tables' entries after it either (the origin is not
// taken over a link that hides a table it writes): anti-entropy leaves them to the log.
// A third node C, linked to both without exclusions, becomes each one's source of the
// other's origin, and everything comes.
func TestLinkExclusions(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", linked("B", wire.LinkBoth, "x")), h.addNode("B", replica.Config{})
	h.connect(b, a)
	a.write(put("u", "k2", "2"))                      // 1: sent
	a.write(put("x", "k1", "1"))                      // 2: a run, refused
	a.write(put("u", "k3", "3"))                      // 3
	a.write(put("u", "k4", "4"), put("x", "k5", "5")) // 4
	b.write(put("u", "b2", "2"))                      // 1: sent
	b.write(put("x", "b1", "1"))                      // 2: a run, refused
	h.pump()
	h.advance(5 * time.Second) // anti-entropy passes over the pair
	if got := b.applied()[a.origin]; got != 1 {
		t.Fatalf("B's position in A = %d, want 1 (the run of x at 2 refused)", got)
	}
	if got := a.applied()[b.origin]; got != 1 {
		t.Fatalf("A's position in B = %d, want 1 (the run of x at 2 refused)", got)
	}
	for _, k := range []string{"k1", "k5"} {
		if _, ok := b.get("x", k); ok {
			t.Errorf("B holds x/%s, a table excluded from its link to A", k)
		}
	}
	if _, ok := b.get("u", "k2"); !ok {
		t.Error("B lacks u/k2")
	}
	for _, k := range []string{"k3", "k4"} {
		if _, ok := b.get("u", k); ok {
			t.Errorf("B holds u/%s, of an entry after one of x it never applied", k)
		}
	}
	if _, ok := a.get("x", "b1"); ok {
		t.Error("A holds x/b1: B sent a table A excludes (B learned it from LINK)")
	}
	if _, ok := a.get("u", "b2"); !ok {
		t.Error("A lacks u/b2")
	}
	if got := a.rep.Counters().SkipsSent; got == 0 {
		t.Error("A sent no run")
	}
	if got := b.rep.Counters().SkipsSent; got == 0 {
		t.Error("B sent no run of x/b1")
	}
	if got := b.rep.Counters().SkipsRefused; got != 1 {
		t.Errorf("B refused %d runs, want 1", got)
	}
	if got := a.rep.Counters().SkipsRefused; got != 1 {
		t.Errorf("A refused %d runs, want 1", got)
	}
	if st := b.originStatus(a); st.SourcePeer != "" || st.LagSeq != 3 {
		t.Errorf("B's status of A: source %q, lag %d; want none, 3 (behind: the only link hides x)", st.SourcePeer, st.LagSeq)
	}
	// C carries x and is linked to both: each takes the other's origin through C.
	cn := h.addNode("C", replica.Config{})
	h.connect(cn, a)
	h.connect(b, cn)
	h.advance(3 * time.Second)
	a.write(put("x", "k6", "6"))
	h.pump()
	h.advance(3 * time.Second)
	if got := b.originStatus(a).SourcePeer; got != "C" {
		t.Errorf("B takes A from %q, want C: the link to A hides table x, which A writes", got)
	}
	if got := a.originStatus(b).SourcePeer; got != "C" {
		t.Errorf("A takes B from %q, want C: the link to B hides table x, which B writes", got)
	}
	for _, r := range []struct{ table, key string }{{"x", "k1"}, {"u", "k3"}, {"u", "k4"}, {"x", "k5"}, {"x", "k6"}} {
		if _, ok := b.get(r.table, r.key); !ok {
			t.Errorf("B lacks %s/%s, which C could send it", r.table, r.key)
		}
	}
	if _, ok := a.get("x", "b1"); !ok {
		t.Error("A lacks x/b1, which C could send it")
	}
	if got := b.applied()[a.origin]; got != 5 {
		t.Errorf("B's position in A = %d, want 5", got)
	}
	if got := a.applied()[b.origin]; got != 2 {
		t.Errorf("A's position in B = %d, want 2", got)
	}
}

// TestLinkMismatch: both ends only receive: the connection closes with link-mismatch on
// both sides, each counts a refusal of that code, and nothing crosses.
func TestLinkMismatch(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", linked("B", wire.LinkReceive)), h.addNode("B", linked("A", wire.LinkReceive))
	h.connect(b, a)
	a.write(put("u", "k", "1"))
	b.write(put("u", "k2", "1"))
	h.pump()
	for _, n := range []*node{a, b} {
		if got := refusedBy(n, wire.CodeLinkMismatch); got == 0 {
			t.Errorf("%s counted no link-mismatch refusal", n.name)
		}
		if got := len(n.rep.Conns()); got != 0 {
			t.Errorf("%s has %d connections, want 0", n.name, got)
		}
	}
	if b.applied()[a.origin] != 0 || a.applied()[b.origin] != 0 {
		t.Error("entries crossed a link refused link-mismatch")
	}
}

// TestLinkLiveChange: SetLink on a live connection: from both ways to receive on A (A's
// next entries stay on A, B's still come), then to both ways excluding x (A's entries come
// again, up to its first of x, which comes as a run that B refuses), without a reconnect.
func TestLinkLiveChange(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	a.write(put("u", "k1", "1"))
	h.pump()
	if got := b.applied()[a.origin]; got != 1 {
		t.Fatalf("B's position in A = %d, want 1", got)
	}
	conns := a.rep.Conns()
	h.check(a, a.rep.SetLink(a.clock(), "B", settings(wire.LinkReceive)))
	h.pump()
	a.write(put("u", "k2", "2"))
	b.write(put("u", "b1", "1"))
	h.pump()
	h.advance(3 * time.Second)
	if got := b.applied()[a.origin]; got != 1 {
		t.Errorf("B's position in A after A set receive = %d, want 1", got)
	}
	if got := a.applied()[b.origin]; got != 1 {
		t.Errorf("A's position in B after A set receive = %d, want 1", got)
	}
	h.check(a, a.rep.SetLink(a.clock(), "B", settings(wire.LinkBoth, "x")))
	h.pump()
	a.write(put("u", "k3", "3"))
	a.write(put("x", "k4", "4"))
	h.pump()
	h.advance(3 * time.Second)
	if got := b.applied()[a.origin]; got != 3 {
		t.Errorf("B's position in A after A set both = %d, want 3 (the run of x at 4 refused)", got)
	}
	if _, ok := b.get("u", "k3"); !ok {
		t.Error("B lacks u/k3")
	}
	if _, ok := b.get("x", "k4"); ok {
		t.Error("B holds x/k4, excluded from the link")
	}
	if got := b.rep.Counters().SkipsRefused; got != 1 {
		t.Errorf("B refused %d runs, want 1 (x/k4: B carries x)", got)
	}
	if got := a.rep.Conns(); len(got) != 1 || got[0] != conns[0] {
		t.Errorf("A's connections %v, want the one it had, %v", got, conns)
	}
	if got := a.rep.Link("B"); got.Mode != wire.LinkBoth || len(got.Exclude) != 1 {
		t.Errorf("A's link to B: %+v", got)
	}
}

// TestLinkNeedsV4: a link with tables excluded cannot run below version 4: the connection
// to a version-3 peer is closed with link-needs-v4 on both sides (each counts it); a
// direction alone is kept on a version-3 link by this side (nothing of A reaches B).
func TestLinkNeedsV4(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", linked("B", wire.LinkBoth, "x"))
	b := h.addNode("B", replica.Config{MaxVersion: 3})
	h.connect(b, a)
	a.write(put("u", "k1", "1"))
	h.pump()
	if got := refusedBy(a, wire.CodeLinkNeedsV4); got == 0 {
		t.Error("A counted no link-needs-v4 refusal")
	}
	if got := refusedBy(b, wire.CodeLinkNeedsV4); got == 0 {
		t.Error("B counted no link-needs-v4 refusal")
	}
	if got := b.applied()[a.origin]; got != 0 {
		t.Errorf("B's position in A = %d, want 0", got)
	}
	// A direction alone is kept by A on its own: B, at version 3, sees no LINK.
	h2 := newHarness(t)
	a2 := h2.addNode("A", linked("B", wire.LinkReceive))
	b2 := h2.addNode("B", replica.Config{MaxVersion: 3})
	h2.connect(b2, a2)
	a2.write(put("u", "k1", "1"))
	b2.write(put("u", "b1", "1"))
	h2.pump()
	h2.advance(3 * time.Second)
	if got := b2.applied()[a2.origin]; got != 0 {
		t.Errorf("B (version 3) took A's origin over a link A only receives on: %d", got)
	}
	if got := a2.applied()[b2.origin]; got != 1 {
		t.Errorf("A's position in B = %d, want 1", got)
	}
	if got := len(a2.rep.Conns()); got != 1 {
		t.Errorf("A has %d connections, want 1: a direction needs no version 4", got)
	}
}

// TestLinkBound: a link excludes at most wire.MaxLinkTables (64) tables: 64 are taken, 65
// refused with bad-argument (by New and by SetLink); a name outside the rule or a mode
// beyond send is refused too.
func TestLinkBound(t *testing.T) {
	tables := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "t" + strconv.Itoa(1000+i)
		}
		return out
	}
	h := newHarness(t)
	a := h.addNode("A", linked("B", wire.LinkBoth, tables(wire.MaxLinkTables)...))
	if got := a.rep.Link("B"); len(got.Exclude) != wire.MaxLinkTables {
		t.Fatalf("A's link to B excludes %d tables, want %d", len(got.Exclude), wire.MaxLinkTables)
	}
	for _, ls := range []replica.LinkSettings{settings(wire.LinkBoth, tables(wire.MaxLinkTables+1)...),
		settings(wire.LinkBoth, "a/b"), settings(wire.LinkBoth, "a", "a"), {Mode: 3}} {
		if err := a.rep.SetLink(a.clock(), "B", ls); wireCode(err) != wire.CodeBadArgument {
			t.Errorf("SetLink of %d tables, mode %d: %v, want bad-argument", len(ls.Exclude), ls.Mode, err)
		}
		if _, err := replica.New(replica.Config{Links: map[string]replica.LinkSettings{"B": ls}}, a.store); err == nil {
			t.Errorf("New with a link of %d tables, mode %d: no error", len(ls.Exclude), ls.Mode)
		}
	}
	if got := a.rep.Link("B"); len(got.Exclude) != wire.MaxLinkTables {
		t.Errorf("a refused SetLink changed the link: %d tables", len(got.Exclude))
	}
}

// TestLinkDirectionBaseCopy: a base copy is taking from a peer, so it follows the link's
// direction. B, below A's purged history, only sends to A (its link to A is send): it asks
// A for no copy (A, which does not send to B, would have served it and pumped none of it,
// and B waited on it for ever) and takes its copy from C, which holds A's history. Then,
// while D takes a copy from A, A sets its link to D to receive: the copy stops, D takes
// it from C instead, and A served no chunk after the change.
func TestLinkDirectionBaseCopy(t *testing.T) {
	h, a := purgedCluster(t, replica.Config{})
	c := h.addNode("C", replica.Config{})
	h.connect(c, a)
	if got := c.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("C completed %d copies from A, want 1", got)
	}
	b := h.addNode("B", linked("A", wire.LinkSend))
	h.connect(b, a)
	h.connect(b, c)
	h.advance(3 * time.Second)
	if got := a.rep.Counters().CopiesServed; got != 1 {
		t.Errorf("A served %d copies, want 1 (to C): B only sends to A", got)
	}
	bc := b.rep.Counters()
	if bc.CopiesCompleted != 1 || c.rep.Counters().CopiesServed != 1 {
		t.Fatalf("B completed %d copies, C served %d; want 1 each", bc.CopiesCompleted, c.rep.Counters().CopiesServed)
	}
	sameRecords(t, "t", a, b)
	sameRecords(t, "u", a, b)

	for i := range 40 { // a copy of many chunks: the change comes in its middle
		a.write(put("w", fmt.Sprint("k", i), strings.Repeat("v", 300)))
	}
	h.pump()
	d := h.addNode("D", replica.Config{CopyChunk: 1 << 10, Limits: protocol.Limits{MaxFrameBody: 1 << 10, MaxChannelBuffer: 4 << 10, MaxSessionBuffer: 16 << 10}})
	da := h.open(d, a)
	h.stepUntil(da, func() bool { return d.rep.Counters().CopyRecords > 0 })
	h.check(a, a.rep.SetLink(a.clock(), "D", settings(wire.LinkReceive)))
	copied := d.rep.Counters().CopyRecords
	h.connect(d, c)
	h.advance(3 * time.Second)
	if got := d.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("D completed %d copies, want 1 (from C, after A stopped sending to it)", got)
	}
	for _, tb := range []string{"t", "u", "w"} {
		sameRecords(t, tb, a, d)
	}
	var last replica.CopyEvent
	for _, e := range d.rep.CopyEvents() {
		last = e
	}
	if last.Kind != replica.CopyCompleted || last.Peer != "C" {
		t.Errorf("D's last copy event %+v, want its copy completed with C", last)
	}
	if copied >= 40 {
		t.Fatalf("D had copied %d records when A's link changed: the test needs the change in the copy's middle", copied)
	}
}

// TestLinkDirectionLapsedExclusion: A refuses B's run of table x of O (B does not carry
// x, A does), which leaves B out of O's candidates for DivergenceRetry; then A stops
// receiving from B. The exclusion lapses and is forgotten: A's timers go on (it was kept,
// since routing asked nothing of a link A does not receive on, and NextDeadline gave its
// lapsed time for ever: a livelock, the simulator's links, seed 248).
func TestLinkDirectionLapsedExclusion(t *testing.T) {
	h := newHarness(t)
	const retry = time.Second
	o := h.addNode("O", replica.Config{})
	b := h.addNode("B", replica.Config{})
	a := h.addNode("A", replica.Config{DivergenceRetry: retry})
	h.connect(b, o)
	if _, err := o.publish(mapDoc(2, `,"placement":{"x":["O","A"]}`, "O", "B", "A")); err != nil {
		t.Fatal(err)
	}
	o.write(put("x", "k1", "1"))
	o.write(put("u", "k2", "2"))
	h.pump()
	h.connect(a, b)
	h.advance(100 * time.Millisecond)
	if got := a.rep.Counters().SkipsRefused; got == 0 {
		t.Fatal("A refused no run of B: the test needs B left out of O's candidates")
	}
	h.check(a, a.rep.SetLink(a.clock(), "B", settings(wire.LinkSend)))
	h.pump()
	h.tickDeadlines(h.now.Add(5 * retry))
	if d := a.rep.NextDeadline(); !d.IsZero() && !h.now.Before(d) {
		t.Errorf("A's next deadline %v is not after now %v", d, h.now)
	}
}

// TestLinkHidesOrigin: the strict rule. B's link to A excludes x. An entry of A that
// writes x and another table, come over that link before B knew A writes x, is refused
// whole (entries_refused_excluded), and A is never taken over the link again: with no
// other link B stays behind on A, every table of it, however long it waits. Once C, linked
// to both without exclusions, appears, B takes A through C, though A itself is connected
// (the origin is no first choice over a link that hides); and once B's link stops
// excluding x, A is taken over it again at once.
func TestLinkHidesOrigin(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", linked("A", wire.LinkBoth, "x"))
	h.connect(b, a)
	a.write(put("u", "k1", "1"))                      // 1: applied
	a.write(put("u", "k2", "2"), put("x", "k3", "3")) // 2: sent whole, refused
	a.write(put("u", "k4", "4"))                      // 3
	h.pump()
	h.advance(30 * time.Second) // past DivergenceRetry, anti-entropy passes
	if got := b.applied()[a.origin]; got != 1 {
		t.Fatalf("B's position in A = %d, want 1 (entry 2 writes x, which the link hides)", got)
	}
	if got := b.rep.Counters().EntriesRefusedExcluded; got != 1 {
		t.Errorf("B refused %d entries over the link, want 1", got)
	}
	for _, r := range []struct{ table, key string }{{"u", "k2"}, {"x", "k3"}, {"u", "k4"}} {
		if _, ok := b.get(r.table, r.key); ok {
			t.Errorf("B holds %s/%s, of A's entries it may not take over the link", r.table, r.key)
		}
	}
	if st := b.originStatus(a); st.SourcePeer != "" || st.LagSeq != 2 {
		t.Errorf("B's status of A: source %q, lag %d; want none, 2 (behind)", st.SourcePeer, st.LagSeq)
	}
	cn := h.addNode("C", replica.Config{})
	h.connect(cn, a)
	h.connect(b, cn)
	h.advance(3 * time.Second)
	a.write(put("x", "k5", "5")) // 4
	h.pump()
	h.advance(3 * time.Second)
	if got := b.originStatus(a).SourcePeer; got != "C" {
		t.Errorf("B takes A from %q, want C", got)
	}
	if got := b.applied()[a.origin]; got != 4 {
		t.Errorf("B's position in A = %d, want 4", got)
	}
	for _, r := range []struct{ table, key string }{{"u", "k2"}, {"x", "k3"}, {"u", "k4"}, {"x", "k5"}} {
		if _, ok := b.get(r.table, r.key); !ok {
			t.Errorf("B lacks %s/%s, which C could send it", r.table, r.key)
		}
	}
	h.check(b, b.rep.SetLink(b.clock(), "A", settings(wire.LinkBoth)))
	h.pump()
	a.write(put("x", "k6", "6")) // 5
	h.pump()
	if got := b.originStatus(a).SourcePeer; got != "A" {
		t.Errorf("B takes A from %q once the link excludes nothing, want A (the origin itself)", got)
	}
	if _, ok := b.get("x", "k6"); !ok {
		t.Error("B lacks x/k6")
	}
}

// TestLinkExclusionsBaseCopy: a base copy over a link that excludes a table this node
// carries leaves the table out. B carries x (placed on A, B and D) and took A's x/k1
// through D; then, with B away, A wrote x/k2, deleted x/k1 and dropped its logs and the
// tombstone, and C wrote on. B comes back over a link to A that excludes x, below A's floor
// of C, and takes a copy from A: it stores none of x (x/k2 does not come), takes none of
// its own x records for deleted (x/k1 stays: what A lacks of x says nothing over that
// link), and raises C's origin (which writes no x) but not A's (which does, past what the
// copy holds of x: nothing).
func TestLinkExclusionsBaseCopy(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: time.Second})
	b, cn, d := h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{}), h.addNode("D", replica.Config{})
	h.connect(cn, a)
	h.connect(d, a)
	bd := h.connect(b, d)
	if _, err := a.publish(mapDoc(2, `,"placement":{"x":["A","B","D"]}`, "A", "B", "C", "D")); err != nil {
		t.Fatal(err)
	}
	a.write(put("x", "k1", "1"))
	a.write(put("u", "a1", "1"))
	cn.write(put("u", "c1", "1"))
	h.pump()
	if _, ok := b.get("x", "k1"); !ok {
		t.Fatal("B lacks x/k1")
	}
	h.disconnect(bd)
	a.write(put("x", "k2", "2"))
	a.write(del("x", "k1"))
	a.write(put("u", "a2", "2"))
	h.advance(10 * time.Millisecond) // C's and D's writes are newer than the delete: it may be dropped
	for i := range 5 {
		cn.write(put("u", fmt.Sprint("c", i+2), "1"))
	}
	d.write(put("u", "d1", "1"))
	h.pump()
	h.advance(5 * time.Second)
	if f := a.logOf(cn).Floor.Seq; f < 2 {
		t.Fatalf("A's floor of C is %d: the test needs it purged", f)
	}
	if r, ok := a.get("x", "k1"); ok {
		t.Fatalf("A holds x/k1 (%+v): the test needs its tombstone dropped", r)
	}
	h.check(b, b.rep.SetLink(b.clock(), "A", settings(wire.LinkBoth, "x")))
	h.connect(b, a)
	h.advance(3 * time.Second)
	if got := b.rep.Counters().CopiesCompleted; got != 1 {
		t.Fatalf("B completed %d copies, want 1 (from A, for C's origin)", got)
	}
	if r, ok := b.get("x", "k2"); ok {
		t.Errorf("B holds x/k2 (%+v): the copy over a link excluding x stored it", r)
	}
	if r, ok := b.get("x", "k1"); !ok || r.Deleted {
		t.Errorf("B's x/k1: %+v, %v; want it live: the copy over a link excluding x took it for deleted", r, ok)
	}
	for _, k := range []string{"c2", "c6", "a2"} {
		if _, ok := b.get("u", k); !ok {
			t.Errorf("B lacks u/%s, which the copy holds", k)
		}
	}
	if got, want := b.applied()[cn.origin], cn.applied()[cn.origin]; got != want {
		t.Errorf("B's position in C = %d, want %d (raised by the copy)", got, want)
	}
	if got := b.applied()[a.origin]; got != 2 {
		t.Errorf("B's position in A = %d, want 2: the copy holds none of x, which A writes", got)
	}
}
