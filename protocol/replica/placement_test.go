package replica_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// runAt reads origin o's log at seq on n: the run n holds it in, or nil for an entry.
func runAt(t *testing.T, n *node, o wire.OriginID, seq uint64) *store.SkippedError {
	t.Helper()
	_, err := n.store.Entry(o, seq)
	var sk *store.SkippedError
	if errors.As(err, &sk) {
		return sk
	}
	if err != nil {
		t.Fatalf("%s: Entry(%s, %d): %v", n.name, o, seq, err)
	}
	return nil
}

// TestFilteredStream: a node that does not carry a table is sent runs of the entries
// that write only it, each run one SKIP stored as one row, and whole entries for the
// rest; its position in the origin is exact, it stores no record of the table, and the
// chain goes on across the runs.
func TestFilteredStream(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k1", "1")) // 1: left out
	a.write(put("u", "k2", "2")) // 2: sent
	a.write(put("t", "k3", "3")) // 3: left out
	a.write(put("t", "k4", "4")) // 4: left out, with 3 in one run
	a.write(del("t", "k1"))      // 5: left out too
	a.write(put("u", "k6", "6")) // 6: sent
	h.pump()
	if got := b.applied()[a.origin]; got != 6 {
		t.Fatalf("B's position in A = %d, want 6", got)
	}
	for _, k := range []string{"k1", "k3", "k4"} {
		if _, ok := b.get("t", k); ok {
			t.Errorf("B holds t/%s, a table it does not carry", k)
		}
		if _, ok := a.get("t", k); !ok && k != "k1" {
			t.Errorf("A lacks t/%s", k)
		}
	}
	for _, k := range []string{"k2", "k6"} {
		if _, ok := b.get("u", k); !ok {
			t.Errorf("B lacks u/%s, a table every node carries", k)
		}
	}
	if sk := runAt(t, b, a.origin, 1); sk == nil || sk.From != 1 || sk.To != 1 {
		t.Errorf("B's log of A at 1: %+v, want the run 1 to 1", sk)
	}
	if sk := runAt(t, b, a.origin, 4); sk == nil || sk.From != 3 || sk.To != 5 || len(sk.Tables) != 1 || string(sk.Tables[0]) != "t" {
		t.Errorf("B's log of A at 4: %+v, want the run 3 to 5 of table t", sk)
	}
	if sk := runAt(t, b, a.origin, 6); sk != nil {
		t.Errorf("B's log of A at 6 is the run %+v, want the entry", sk)
	}
	if got := a.rep.Counters().SkipsSent; got != 4 {
		t.Errorf("A sent %d runs, want 4 (one per entry left out: B is level with A at each)", got)
	}
	if got := b.rep.Counters().SkipsReceived; got != 4 {
		t.Errorf("B took %d runs, want 4", got)
	}
	// A restart reads the runs back: the position and the stream go on from them.
	b.restart()
	h.connect(b, a)
	a.write(put("t", "k7", "7"))
	a.write(put("u", "k8", "8"))
	h.pump()
	if got := b.applied()[a.origin]; got != 8 {
		t.Fatalf("B's position in A after a restart = %d, want 8", got)
	}
	if _, ok := b.get("u", "k8"); !ok {
		t.Error("B lacks u/k8 after its restart")
	}
}

// TestRunRefusedByACarrier: a relay that does not carry a table sends a carrier runs of
// it; the carrier never moves past such a run, counts it, and takes the origin from a
// source that carries the table once it has one.
func TestRunRefusedByACarrier(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	h.connect(c, b)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A","C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("u", "k1", "1"))
	a.write(put("t", "k2", "2"))
	a.write(put("u", "k3", "3"))
	h.pump()
	if got := c.applied()[a.origin]; got != 1 {
		t.Fatalf("C's position in A = %d, want 1: it must not pass the run of t that B holds", got)
	}
	if got := c.rep.Counters().SkipsRefused; got == 0 {
		t.Error("C counted no refused run")
	}
	if _, ok := c.get("t", "k2"); ok {
		t.Fatal("C holds t/k2 without a carrier's entry")
	}
	// The origin itself: C takes A from A and gets everything.
	h.connect(c, a)
	h.pump()
	if got := c.applied()[a.origin]; got != 3 {
		t.Fatalf("C's position in A once connected to A = %d, want 3", got)
	}
	if _, ok := c.get("t", "k2"); !ok {
		t.Error("C lacks t/k2 from A")
	}
	if _, ok := b.get("t", "k2"); ok {
		t.Error("B holds t/k2")
	}
}

// TestRunToAnOlderPeer: a node that holds a run of an origin cannot send its entries to a
// version-3 peer: the peer is answered purged at the run's end, and holds nothing of the
// run's table; once connected to the origin it takes the rest from there.
func TestRunToAnOlderPeer(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{MaxVersion: 3})
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("u", "k1", "1"))
	a.write(put("t", "k2", "2"))
	a.write(put("u", "k3", "3"))
	h.pump()
	h.connect(c, b)
	h.pump()
	if got := b.rep.Counters().PurgedAnswers; got == 0 {
		t.Fatal("B answered C no purged: it holds A's entry 2 as a run only")
	}
	if got := c.applied()[a.origin]; got != 1 {
		t.Fatalf("C's position in A through B = %d, want 1 (the entry before the run)", got)
	}
	h.connect(c, a)
	h.pump()
	if got := c.applied()[a.origin]; got != 3 {
		t.Fatalf("C's position in A once connected to A = %d, want 3", got)
	}
	if _, ok := c.get("t", "k2"); !ok {
		t.Error("C, at version 3, lacks t/k2: it is sent every table")
	}
}

// TestTableRemoved: a node that a new map no longer lists for a table keeps its records
// until every carrier in the map holds what it held, its own writes included, waits for a
// carrier that cannot be reached, then deletes the table in one write and counts it.
func TestTableRemoved(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(b, a)
	lc := h.connect(c, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A","B","C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k1", "1"))
	b.write(put("t", "k2", "2"))
	h.pump()
	h.disconnect(lc)
	b.write(put("t", "k3", "3")) // C cannot have it: B must wait for C
	if _, err := a.publish(mapDoc(3, `,"placement":{"t":["A","C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Second)
	h.pump()
	if got := b.rep.Removals(); len(got) != 1 || got[0].Table != "t" || !slices.Equal(got[0].Waiting, []string{"C"}) {
		t.Fatalf("B's removals while C is away = %+v, want t waiting for C", got)
	}
	// C reachable but behind: its clock an hour late, it holds B's k3 back (ahead of its
	// clock) while it answers B's requests.
	c.skew = -time.Hour
	lc = h.connect(c, a)
	h.pump()
	h.advance(3 * time.Second)
	h.pump()
	if got := b.rep.Removals(); len(got) != 1 || !slices.Equal(got[0].Waiting, []string{"C"}) {
		t.Fatalf("B's removals while C is behind = %+v, want t waiting for C", got)
	}
	if _, ok := c.get("t", "k3"); ok {
		t.Fatal("C applied t/k3 with its clock an hour late: the test does not hold it back")
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, ok := b.get("t", k); !ok {
			t.Errorf("B dropped t/%s before C held it", k)
		}
	}
	c.skew = 0
	h.disconnect(lc)
	h.connect(c, a)
	h.pump()
	h.advance(3 * time.Second)
	h.pump()
	if got := b.rep.Removals(); len(got) != 0 {
		t.Fatalf("B's removals once C caught up = %+v, want none", got)
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, ok := b.get("t", k); ok {
			t.Errorf("B still holds t/%s", k)
		}
		if _, ok := c.get("t", k); !ok {
			t.Errorf("C lacks t/%s", k)
		}
	}
	cs := b.rep.Counters()
	if cs.TablesRemoved != 1 || cs.RecordsFreed != 3 || cs.BytesFreed == 0 {
		t.Errorf("B counted %d tables removed, %d records and %d bytes freed; want 1, 3, more than 0", cs.TablesRemoved, cs.RecordsFreed, cs.BytesFreed)
	}
	// Carried again: nothing to remove, and the table's entries are applied again.
	if _, err := a.publish(mapDoc(4, `,"placement":{"t":["A","B","C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k4", "4"))
	h.pump()
	if _, ok := b.get("t", "k4"); !ok {
		t.Error("B lacks t/k4, written once it carried t again")
	}
	if got := b.rep.Removals(); len(got) != 0 {
		t.Errorf("B's removals once it carries t again = %+v", got)
	}
}

// TestTableAdded: a node a new map adds to a table fills it by a copy of that table from a
// carrier that holds its map, while the entries it was sent as runs stay runs; entries
// after are sent whole, also when the carrier adopted the map after this node did.
func TestTableAdded(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k1", "1"))
	a.write(put("u", "k2", "2"))
	a.write(put("t", "k3", "3"), put("t", "k4", "4"))
	a.write(del("t", "k4"))
	h.pump()
	if _, ok := b.get("t", "k1"); ok {
		t.Fatal("B holds t/k1 before it carries t")
	}
	// B adopts the map that adds it while A, which has not seen it yet, writes t under the
	// map before: the entry's run crosses B's MAP and reaches B, which must not pass it.
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(3, `,"placement":{"t":["A","B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	if !b.rep.Filling([]byte("t")) {
		t.Fatal("B does not owe a fill of t once added to it")
	}
	if got := b.rep.Carrier([]byte("t")); got != "A" {
		t.Errorf("B, filling t, sends its reads of t to %q, want A", got)
	}
	a.write(put("t", "k5", "5"))
	h.pump()
	if got := b.rep.Counters().SkipsRefused; got == 0 {
		t.Error("B refused no run: the test did not make A's run cross B's map")
	}
	h.advance(5 * time.Second)
	h.pump()
	for _, k := range []string{"k1", "k3", "k5"} {
		if r, ok := b.get("t", k); !ok || r.Deleted {
			t.Errorf("B lacks t/%s once filled", k)
		}
	}
	if r, ok := b.get("t", "k4"); ok && !r.Deleted {
		t.Error("B holds t/k4, deleted before it was added")
	}
	if b.rep.Filling([]byte("t")) {
		t.Error("B still owes the fill of t")
	}
	if cs := b.rep.Counters(); cs.TablesFilled != 1 || cs.FillRecords == 0 || cs.FillBytes == 0 {
		t.Errorf("B counted %d tables filled, %d records, %d bytes; want 1 and some", cs.TablesFilled, cs.FillRecords, cs.FillBytes)
	}
	// The fill wrote records of t around the log: a feed of t reading across it rereads.
	if in, cs := b.rep.FeedInputs([]byte("t")), b.rep.Counters(); in.Copied != cs.FillRecords || in.Repaired != 0 || in.CopiesEnded != 0 {
		t.Errorf("B's feed inputs of t after the fill: %d repaired, %d copied, %d copies ended; want %d copied (the fill's), none repaired, no copy ended", in.Repaired, in.Copied, in.CopiesEnded, cs.FillRecords)
	}
	if got := b.applied()[a.origin]; got != 5 {
		t.Errorf("B's position in A = %d, want 5", got)
	}
	// A restart keeps what was filled and owes nothing.
	b.restart()
	if b.rep.Filling([]byte("t")) {
		t.Error("B owes the fill of t again after a restart")
	}
}
