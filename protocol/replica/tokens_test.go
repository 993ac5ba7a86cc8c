package replica_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
)

// Fencing tokens (docs/design.md §25.4): a key's versions order by (carries a token, token,
// HLC, origin) on every node, whatever order the entries arrive in.

var (
	tokHome  = wire.OriginID{0x40, 15: 0x40}
	tokStale = wire.Token{Generation: 2, Incarnation: 1, Counter: 5, Home: tokHome}
	tokNew   = wire.Token{Generation: 2, Incarnation: 1, Counter: 6, Home: tokHome}
)

// writeTokened writes ops under tok at the node's clock; it fails the test on an error.
func (n *node) writeTokened(tok wire.Token, ops ...wire.Op) uint64 {
	n.h.t.Helper()
	seq, err := n.rep.WriteTokened(n.clock(), tok, ops)
	if err != nil {
		n.h.t.Fatalf("%s: tokened write: %v", n.name, err)
	}
	return seq
}

// tokenPair is two connected nodes under a map that lists both (so the version-4 gate
// of a tokened write is open), and their link.
func tokenPair(t *testing.T) (*harness, *node, *node, *link) {
	h := newHarness(t)
	a, b := h.addNode("A", replica.Config{}), h.addNode("B", replica.Config{})
	l := h.connect(b, a)
	if _, err := a.publish(mapDoc(1, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{a, b} {
		if err := n.rep.RequireV4(); err != nil {
			t.Fatalf("%s: the version-4 gate: %v", n.name, err)
		}
	}
	return h, a, b, l
}

// TestTokenOrderOnTwoNodes: two nodes cut apart write one key each, and receive the
// other's write after their own once connected again (so each applies the two in the
// opposite order): the newer token wins on both although the stale one has the higher HLC,
// a tokened version wins over a later untokened one, and untokened writes stay
// last-writer-wins. Both nodes restart before they meet, so that what a node knows of its
// stored tokens comes from its store.
func TestTokenOrderOnTwoNodes(t *testing.T) {
	h, a, b, l := tokenPair(t)
	h.disconnect(l)
	b.writeTokened(tokNew, put("t", "k", "new"))
	b.writeTokened(tokStale, put("t", "fenced", "by B"))
	b.write(put("t", "plain", "B first"))
	h.advance(time.Second) // everything A writes from now on has the higher HLC
	a.writeTokened(tokStale, put("t", "k", "stale"))
	a.write(put("t", "fenced", "untokened, later"))
	a.write(put("t", "plain", "A later"))
	ka, _ := a.get("t", "k")
	kb, _ := b.get("t", "k")
	if ka.HLC <= kb.HLC {
		t.Fatalf("the stale write's HLC %d is not above the newer token's %d: the test proves nothing", ka.HLC, kb.HLC)
	}
	a.restart()
	b.restart()
	h.connect(b, a)
	h.pump()
	for _, n := range []*node{a, b} {
		if r, ok := n.get("t", "k"); !ok || string(r.Value) != "new" || r.Token != tokNew || r.Origin != b.origin {
			t.Errorf("%s: t/k = %q token %v origin %x, want B's \"new\" under %v", n.name, r.Value, r.Token, r.Origin[:1], tokNew)
		}
		if r, ok := n.get("t", "fenced"); !ok || string(r.Value) != "by B" || r.Token != tokStale {
			t.Errorf("%s: t/fenced = %q token %v, want B's tokened \"by B\" over A's later untokened write", n.name, r.Value, r.Token)
		}
		if r, ok := n.get("t", "plain"); !ok || string(r.Value) != "A later" || !r.Token.IsZero() {
			t.Errorf("%s: t/plain = %q token %v, want A's later write, untokened", n.name, r.Value, r.Token)
		}
	}
	if ca, sa := a.digest("t"); true {
		if cb, sb := b.digest("t"); ca != cb || sa != sb {
			t.Errorf("digests differ: A %d %s, B %d %s", ca, sa, cb, sb)
		}
	}
	// Both logs hold both entries, the losing one included, in format 2.
	for _, n := range []*node{a, b} {
		if _, v := n.entry(a, 1); v.Token != tokStale || v.Format() != wire.TxnFormat2 {
			t.Errorf("%s: A's entry 1 = format %d token %v", n.name, v.Format(), v.Token)
		}
	}
}

// TestWriteTokenedRefused: a tokened write of two keys, or with no token, is refused
// (bad-argument), and one is refused (cluster-not-v4) while a member of the map is not
// known to speak version 4: nothing of a refused write is written.
func TestWriteTokenedRefused(t *testing.T) {
	_, a, _, _ := tokenPair(t)
	if _, err := a.rep.WriteTokened(a.clock(), tokNew, []wire.Op{put("t", "k", "1"), put("t", "k2", "2")}); wireCode(err) != wire.CodeBadArgument {
		t.Errorf("a tokened write of two keys: %v, want bad-argument", err)
	}
	if _, err := a.rep.WriteTokened(a.clock(), wire.Token{}, []wire.Op{put("t", "k", "1")}); wireCode(err) != wire.CodeBadArgument {
		t.Errorf("a tokened write without a token: %v, want bad-argument", err)
	}
	if _, err := a.publish(mapDoc(2, "", "A", "B", "D")); err != nil {
		t.Fatal(err)
	}
	_, err := a.rep.WriteTokened(a.clock(), tokNew, []wire.Op{put("t", "k", "1")})
	var ce *clustermap.Error
	if !errors.As(err, &ce) || ce.Code != clustermap.CodeClusterNotV4 {
		t.Errorf("a tokened write while D is not known at version 4: %v, want cluster-not-v4", err)
	}
	if got := a.applied()[a.origin]; got != 0 {
		t.Errorf("A's log holds %d entries after refused writes", got)
	}
}

// TestTokenedEntryToOlderPeers: a node never sends a format-2 entry on a connection below
// version 4 (its peer would close with unsupported-txn): to a version-3 peer the entry is
// purged (PURGED at the entry, and it stays connected), so that it takes a base copy,
// whose records reach it without their tokens (format 1); the connection of a version-2
// peer, which has no PURGED, and of a version-1 peer is closed with purged; the entries
// before it reach them all.
func TestTokenedEntryToOlderPeers(t *testing.T) {
	h, a, _, _ := tokenPair(t)
	c := h.addNode("C", replica.Config{MaxVersion: 3}) // a peer outside the map
	d := h.addNode("D", replica.Config{MaxVersion: 2})
	e := h.addNode("E", replica.Config{MaxVersion: 1})
	h.connect(c, a)
	h.connect(d, a)
	h.connect(e, a)
	a.write(put("t", "before", "1"))
	h.pump()
	purged := a.rep.Counters().PurgedAnswers
	a.writeTokened(tokNew, put("t", "k", "tokened"))
	h.pump()
	if got := a.rep.Counters().PurgedAnswers; got < purged+3 {
		t.Errorf("A's purged answers went from %d to %d, want one for each of C, D and E", purged, got)
	}
	for _, n := range []*node{c, d, e} {
		if got := n.rep.Counters().ProtocolErrors; got != 0 {
			t.Errorf("%s counts %d protocol errors: it was sent what its version does not carry", n.name, got)
		}
		if _, ok := n.get("t", "before"); !ok {
			t.Errorf("%s lacks the entry before the tokened one", n.name)
		}
	}
	for _, n := range []*node{d, e} {
		if got := n.applied()[a.origin]; got != 1 {
			t.Errorf("%s's position in A = %d, want 1: the entry before the tokened one", n.name, got)
		}
		if _, ok := n.get("t", "k"); ok {
			t.Errorf("%s holds the tokened write", n.name)
		}
		if e := n.rep.LastError("A"); e == nil || e.Err.Code != wire.CodePurged {
			t.Errorf("%s's last error from A: %+v, want purged", n.name, e)
		}
	}
	// C took the rest by a base copy: the record without its token, and no entry 2 in its
	// log of A (the copy's floor is above it).
	if r, ok := c.get("t", "k"); !ok || string(r.Value) != "tokened" || !r.Token.IsZero() {
		t.Errorf("C's t/k = %q token %v (held %v), want the value without its token", r.Value, r.Token, ok)
	}
	if got := c.rep.Counters().CopyRecords; got == 0 {
		t.Error("C took no base copy")
	}
	if _, err := c.store.Entry(a.origin, 2); !errors.Is(err, store.ErrPurged) {
		t.Errorf("C's log of A at 2: %v, want purged (below the copy's floor)", err)
	}
	if got := c.peerStatus("A"); got.Version != 3 {
		t.Errorf("C's connection to A is at version %d, want 3 and open", got.Version)
	}
}

// TestTokensInBaseCopy: a base copy over version 4 carries the records' tokens (chunk
// format 2), and the taker merges by the same order: a copied tokened version replaces its
// own untokened one of a higher HLC.
func TestTokensInBaseCopy(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second})
	if _, err := a.publish(mapDoc(1, "", "A")); err != nil {
		t.Fatal(err)
	}
	a.writeTokened(tokNew, put("t", "k", "A tokened"))
	a.write(put("t", "plain", "A"))
	a.writeTokened(tokStale, put("u", "j", "A tokened too"))
	a.write(put("u", "plain", "A"))
	h.advance(2 * time.Second)
	if f := a.logOf(a).Floor.Seq; f < 3 {
		t.Fatalf("A's floor is %d: the test needs its log purged", f)
	}
	b := h.addNode("B", replica.Config{})
	b.write(put("t", "k", "B untokened, later"))
	if r, _ := b.get("t", "k"); r.HLC <= mustGet(t, a, "t", "k").HLC {
		t.Fatal("B's own write is not later than A's tokened one: the test proves nothing")
	}
	h.connect(b, a)
	h.pump()
	if got := b.rep.Counters().CopyRecords; got == 0 {
		t.Fatal("B took no base copy")
	}
	for _, c := range []struct {
		table, key, value string
		tok               wire.Token
	}{{"t", "k", "A tokened", tokNew}, {"u", "j", "A tokened too", tokStale}, {"t", "plain", "A", wire.Token{}}} {
		for _, n := range []*node{a, b} {
			if r, ok := n.get(c.table, c.key); !ok || string(r.Value) != c.value || r.Token != c.tok {
				t.Errorf("%s: %s/%s = %q token %v, want %q token %v", n.name, c.table, c.key, r.Value, r.Token, c.value, c.tok)
			}
		}
	}
}

func mustGet(t *testing.T, n *node, table, key string) store.Record {
	t.Helper()
	r, ok := n.get(table, key)
	if !ok {
		t.Fatalf("%s lacks %s/%s", n.name, table, key)
	}
	return r
}

// tokenedRecords lists a node's records of a table with their tokens.
func (n *node) tokenedRecords(table string) []string {
	n.h.t.Helper()
	out := n.records(table)
	for i, r := range out {
		key := r[:strings.IndexAny(r, "= ")]
		rec, _ := n.get(table, key)
		out[i] = r + " token " + rec.Token.String()
	}
	return out
}

// TestTokensInAntiEntropy: anti-entropy over version 4 hashes and carries tokens: a lost
// tokened record comes back with its token, a tokened record whose token was lost here is
// given it back from its log entry, and a tokened version replaces an untokened one of a
// higher HLC that took its place.
func TestTokensInAntiEntropy(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{AntiEntropyInterval: 10 * time.Millisecond}
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	if _, err := a.publish(mapDoc(1, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.writeTokened(tokNew, put("t", "lost", "1"))
	a.writeTokened(tokNew, put("t", "untokened", "2"))
	a.writeTokened(tokStale, put("t", "overwritten", "3"))
	a.write(put("t", "plain", "4"))
	h.pump()
	h.advance(time.Second)
	if got, want := fmt.Sprint(b.tokenedRecords("t")), fmt.Sprint(a.tokenedRecords("t")); got != want {
		t.Fatalf("before: B %s, A %s", got, want)
	}
	b.store.Corrupt([]byte("t"), []byte("lost"), nil)
	r := mustGet(t, b, "t", "untokened")
	r.Token = wire.Token{}
	b.store.Corrupt([]byte("t"), []byte("untokened"), &r)
	r = mustGet(t, b, "t", "overwritten")
	r.Token, r.HLC, r.Value = wire.Token{}, r.HLC+1000, []byte("untokened, later")
	b.store.Corrupt([]byte("t"), []byte("overwritten"), &r)
	before := b.rep.Counters().AntiEntropyRecordsRepaired
	h.advance(2 * time.Second)
	if got, want := fmt.Sprint(b.tokenedRecords("t")), fmt.Sprint(a.tokenedRecords("t")); got != want {
		t.Errorf("after anti-entropy:\nB %s\nA %s", got, want)
	}
	if n := b.rep.Counters().AntiEntropyRecordsRepaired - before; n != 3 {
		t.Errorf("B repaired %d records, want 3", n)
	}
	if n := b.rep.Counters().AntiEntropyConflicts; n != 0 {
		t.Errorf("B flagged %d conflicts", n)
	}
}

// TestTokensAntiEntropyWithOlderPeer: a version-3 peer holds a tokened record without its
// token (it took it by a base copy); the digests of a version-3 connection hash no token,
// so the two nodes find their ranges equal and repair nothing, either way.
func TestTokensAntiEntropyWithOlderPeer(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{AntiEntropyInterval: 10 * time.Millisecond, RetainAge: time.Second})
	c := h.addNode("C", replica.Config{AntiEntropyInterval: 10 * time.Millisecond, MaxVersion: 3})
	if _, err := a.publish(mapDoc(1, "", "A")); err != nil {
		t.Fatal(err)
	}
	a.writeTokened(tokNew, put("t", "k", "tokened"))
	a.write(put("t", "plain", "1"))
	h.advance(2 * time.Second)
	h.connect(c, a)
	h.pump()
	if r := mustGet(t, c, "t", "k"); !r.Token.IsZero() || string(r.Value) != "tokened" {
		t.Fatalf("C's t/k = %q token %v, want the value without a token", r.Value, r.Token)
	}
	h.advance(time.Second)
	a0, c0 := a.rep.Counters(), c.rep.Counters()
	h.advance(2 * time.Second)
	a1, c1 := a.rep.Counters(), c.rep.Counters()
	if a1.AntiEntropyRangesCompared == a0.AntiEntropyRangesCompared || c1.AntiEntropyRangesCompared == c0.AntiEntropyRangesCompared {
		t.Fatalf("no ranges compared: A %d to %d, C %d to %d", a0.AntiEntropyRangesCompared, a1.AntiEntropyRangesCompared,
			c0.AntiEntropyRangesCompared, c1.AntiEntropyRangesCompared)
	}
	if a1.AntiEntropyRangesDiffering != a0.AntiEntropyRangesDiffering || c1.AntiEntropyRangesDiffering != c0.AntiEntropyRangesDiffering {
		t.Errorf("ranges differing: A %d to %d, C %d to %d; want none: a version-3 digest hashes no token",
			a0.AntiEntropyRangesDiffering, a1.AntiEntropyRangesDiffering, c0.AntiEntropyRangesDiffering, c1.AntiEntropyRangesDiffering)
	}
	if r := mustGet(t, a, "t", "k"); r.Token != tokNew {
		t.Errorf("A's t/k lost its token: %v", r.Token)
	}
}

// TestTokenedTombstoneKept: retention drops an untokened tombstone past the horizon and
// never a tokened one, the key's token floor: a stale holder's later write of the deleted
// key, and an untokened one, still lose to it on every node.
func TestTokenedTombstoneKept(t *testing.T) {
	h := newHarness(t)
	cfg := replica.Config{RetainAge: time.Second}
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	if _, err := a.publish(mapDoc(1, "", "A", "B")); err != nil {
		t.Fatal(err)
	}
	a.write(put("t", "k", "v"), put("t", "j", "v"))
	h.pump()
	h.advance(time.Millisecond)
	a.writeTokened(tokNew, del("t", "k"))
	a.write(del("t", "j"))
	h.pump()
	b.write(put("t", "b", "1")) // both origins move past the deletes
	a.write(put("t", "a", "1"))
	h.pump()
	h.advance(3 * time.Second)
	for _, n := range []*node{a, b} {
		if r, ok := n.get("t", "k"); !ok || !r.Deleted || r.Token != tokNew {
			t.Fatalf("%s: the tokened tombstone went: %+v, %v", n.name, r, ok)
		}
		if _, ok := n.get("t", "j"); ok || n.rep.Counters().TombstonesDropped != 1 {
			t.Fatalf("%s: the untokened tombstone is there %v, %d dropped: the test needs the horizon passed", n.name, ok, n.rep.Counters().TombstonesDropped)
		}
	}
	b.writeTokened(tokStale, put("t", "k", "stale holder, late"))
	b.write(put("t", "k", "untokened, late"))
	h.pump()
	h.advance(3 * time.Second)
	for _, n := range []*node{a, b} {
		if r, ok := n.get("t", "k"); !ok || !r.Deleted || r.Token != tokNew {
			t.Errorf("%s: t/k = %q deleted %v token %v, want the tombstone of %v", n.name, r.Value, r.Deleted, r.Token, tokNew)
		}
		n.audit()
	}
}

// TestFencedTableRefusesUntokened: once the map fences table c, a write without a token of
// any of its operations' tables c is refused lock-required (a *clustermap.Error), counted,
// and nothing of it is written; the same transaction under a token, and untokened writes of
// other tables, are taken. Such a write would order below every token (docs/design.md
// §25.4): lost in silence where the key was ever written under a lock.
func TestFencedTableRefusesUntokened(t *testing.T) {
	_, a, _, _ := tokenPair(t)
	a.write(put("c", "k", "before")) // not fenced yet: taken
	if _, err := a.publish(mapDoc(2, `,"fenced_tables":["c"]`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	var ce *clustermap.Error
	for _, ops := range [][]wire.Op{{put("c", "k", "1")}, {put("t", "x", "1"), put("c", "k", "1")}} {
		if _, err := a.rep.Write(a.clock(), ops); !errors.As(err, &ce) || ce.Code != clustermap.CodeLockRequired {
			t.Errorf("an untokened write of %d operations, one of fenced c: %v, want lock-required", len(ops), err)
		}
	}
	if got := a.rep.Counters().WritesRefusedLockRequired; got != 2 {
		t.Errorf("writes_refused_lock_required = %d, want 2", got)
	}
	if got := a.applied()[a.origin]; got != 1 {
		t.Errorf("A's log holds %d entries after two refused writes, want 1", got)
	}
	a.write(put("t", "x", "1"))
	a.writeTokened(tokNew, put("c", "k", "2"))
	if rec := mustGet(t, a, "c", "k"); string(rec.Value) != "2" || rec.Token != tokNew {
		t.Errorf("c/k after the tokened write: %q under %v, want 2 under %v", rec.Value, rec.Token, tokNew)
	}
}
