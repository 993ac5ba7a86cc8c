package replica_test

import (
	"slices"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// TestRemovalWaitsForAHolder: a node removed from a table waits for its carriers to hold
// the table's records, not only to have applied its positions: a carrier whose map does
// not list it yet passed the table's entries as runs, and its positions say nothing of
// them. The table moves whole from A to C while MAP frames to C are dropped; A keeps its
// records until C adopts the map and fills the table from A.
func TestRemovalWaitsForAHolder(t *testing.T) {
	h := newHarness(t)
	a, c := h.addNode("A", replica.Config{}), h.addNode("C", replica.Config{})
	lc := h.connect(c, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A"]}`, "A", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k1", "1"))
	a.write(put("u", "k2", "2"))
	h.pump()
	if got := c.applied()[a.origin]; got != 2 {
		t.Fatalf("C's position in A = %d, want 2", got)
	}
	h.drop = func(from, to string, f wire.Decoded) bool { return to == "C" && f.Type == wire.TypeMap }
	if _, err := a.publish(mapDoc(3, `,"placement":{"t":["C"]}`, "A", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Second)
	h.pump()
	if got := c.rep.MapStatus().Generation; got != 2 {
		t.Fatalf("C holds map generation %d, want 2 (its MAP frames dropped)", got)
	}
	if got := a.rep.Removals(); len(got) != 1 || !slices.Equal(got[0].Waiting, []string{"C"}) {
		t.Fatalf("A's removals while C's map is older = %+v, want t waiting for C", got)
	}
	if _, ok := a.get("t", "k1"); !ok {
		t.Fatal("A dropped t/k1 while C, which passed it as a run, held none of t")
	}
	// C learns the map on a new connection, fills t from A, and A removes it then.
	h.drop = nil
	h.disconnect(lc)
	h.connect(c, a)
	h.pump()
	h.advance(5 * time.Second)
	h.pump()
	if _, ok := c.get("t", "k1"); !ok {
		t.Error("C lacks t/k1 once it carries t")
	}
	if _, ok := a.get("t", "k1"); ok {
		t.Error("A still holds t/k1 once C holds it")
	}
	if got := a.rep.Removals(); len(got) != 0 {
		t.Errorf("A's removals once C filled t = %+v, want none", got)
	}
}

// TestFillFromSeveralSources: a table moves whole from two carriers that never reached
// each other (the node between them does not carry it, and relays none of its entries):
// neither holds the other's writes, so no one source can fill the new carrier. Each copy
// brings the table as far as its source holds it, and the fill ends once they have
// brought, of every origin, what the new carrier had applied.
func TestFillFromSeveralSources(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{}), h.addNode("C", replica.Config{})
	h.connect(a, c)
	h.connect(b, c)
	if _, err := c.publish(mapDoc(2, `,"placement":{"t":["A","B"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "ka", "a"))
	b.write(put("t", "kb", "b"))
	h.pump()
	if _, ok := a.get("t", "kb"); ok {
		t.Fatal("A holds B's write: the test needs them apart")
	}
	if _, err := c.publish(mapDoc(3, `,"placement":{"t":["C"]}`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(10 * time.Second)
	h.pump()
	for _, k := range []string{"ka", "kb"} {
		if _, ok := c.get("t", k); !ok {
			t.Errorf("C lacks t/%s once filled", k)
		}
	}
	if c.rep.Filling([]byte("t")) {
		t.Error("C still owes the fill of t")
	}
	if cs := c.rep.Counters(); cs.TablesFilled != 1 {
		t.Errorf("C counted %d tables filled, want 1", cs.TablesFilled)
	}
	for _, n := range []*node{a, b} {
		if got := n.rep.Removals(); len(got) != 0 {
			t.Errorf("%s's removals once C filled t = %+v, want none", n.name, got)
		}
	}
}

// TestAddedBackOwesNothing: a node removed from a table and added back before anything
// was written to it holds the table whole still, and owes no fill; once it passed a
// write of the table, it owes one.
func TestAddedBackOwesNothing(t *testing.T) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	l := h.connect(b, a)
	if _, err := a.publish(mapDoc(2, `,"placement":{"t":["A","B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k1", "1"))
	h.pump()
	h.disconnect(l) // B's removal waits for A: B keeps t
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(3, `,"placement":{"t":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	if got := b.rep.Removals(); len(got) != 1 {
		t.Fatalf("B's removals = %+v, want t", got)
	}
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(4, `,"placement":{"t":["A","B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	if b.rep.Filling([]byte("t")) {
		t.Fatal("B owes a fill of t, which it held whole while removed")
	}
	// Removed again, then A writes t and B passes it; added back, B owes the fill.
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(5, `,"placement":{"t":["A"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k3", "3"))
	l = h.connect(b, a)
	h.pump()
	if _, ok := b.get("t", "k3"); ok {
		t.Fatal("B applied t/k3, not carrying t")
	}
	h.disconnect(l)
	if _, err := b.rep.PublishMap(b.clock(), mapDoc(6, `,"placement":{"t":["A","B"]}`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	if !b.rep.Filling([]byte("t")) {
		t.Error("B owes no fill of t after it passed t/k3")
	}
}
