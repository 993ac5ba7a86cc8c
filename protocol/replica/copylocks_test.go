package replica_test

import (
	"testing"
	"time"

	"plait/protocol/replica"
)

// TestCopyNotFromBelowV4WithLocks: while the map names lock homes and fences a table, a
// version-3 peer is no base copy source (docs/design.md §25.4): it took the tokened
// records by a copy over version 3, without their tokens, and a copy of it would raise the
// taker's log past the tokened entry, leaving it the record ordered by clock alone. B,
// below both peers' floors, passes the version-3 peer C over (counted once), waits, and
// copies from A once it reaches it, the token with the record.
func TestCopyNotFromBelowV4WithLocks(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second, RetainHold: time.Second})
	b := h.addNode("B", replica.Config{})
	lb := h.connect(b, a)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"],"fenced_tables":["t"]`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	if m := b.rep.ClusterMap(); m.Generation != 1 || !m.Fenced([]byte("t")) {
		t.Fatalf("B holds generation %d: the test needs B to hold the map that fences t", m.Generation)
	}
	h.disconnect(lb)
	a.writeTokened(tokNew, put("t", "k", "tokened"))
	a.write(put("u", "plain", "1"))
	h.advance(3 * time.Second)
	if f := a.logOf(a).Floor.Seq; f < 1 {
		t.Fatalf("A's floor is %d: the test needs its log purged past the tokened entry", f)
	}
	c := h.addNode("C", replica.Config{MaxVersion: 3}) // a peer outside the map
	h.connect(c, a)
	if r := mustGet(t, c, "t", "k"); !r.Token.IsZero() || c.rep.Counters().CopiesCompleted == 0 {
		t.Fatalf("C's t/k token %v, copies %d: the test needs C to have copied it without its token", r.Token, c.rep.Counters().CopiesCompleted)
	}
	h.connect(b, c)
	h.advance(time.Second)
	if k := b.rep.Counters(); k.CopiesStarted != 0 || k.CopySourcesBelowV4 != 1 {
		t.Fatalf("B started %d copies with only C to copy from and passed %d sources over, want none and C", k.CopiesStarted, k.CopySourcesBelowV4)
	}
	if _, ok := b.get("t", "k"); ok {
		t.Fatal("B holds t/k before it reached a version-4 source")
	}
	h.connect(b, a)
	h.advance(time.Second)
	if r := mustGet(t, b, "t", "k"); r.Token != tokNew || string(r.Value) != "tokened" {
		t.Fatalf("B's t/k = %q token %v, want A's tokened version with its token", r.Value, r.Token)
	}
	if k := b.rep.Counters(); k.CopiesCompleted != 1 || k.CopySourcesBelowV4 != 1 {
		t.Fatalf("B completed %d copies and passed %d sources over, want 1 and 1", k.CopiesCompleted, k.CopySourcesBelowV4)
	}
}
