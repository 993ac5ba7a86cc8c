package storetest

import (
	"fmt"
	"testing"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Fencing tokens in the store (docs/design.md §25.4): a record keeps the token of the entry
// that wrote it, and RecordToken says how high the stored ones go.

var (
	tokenT = wire.Token{Generation: 2, Incarnation: 1, Counter: 7, Home: Origin(0x40)}
	tokenU = wire.Token{Generation: 2, Incarnation: 1, Counter: 9, Home: Origin(0x40)}
)

func tokenOf(t *testing.T, s store.Store) wire.Token {
	t.Helper()
	tok, err := s.RecordToken()
	must(t, err)
	return tok
}

// testTokens: a tokened record keeps its token through Apply, Get, Scan and a snapshot, its
// untokened neighbours stay untokened; RecordToken rises with Apply, Repair and ApplyCopy
// and never goes down; a tokened tombstone is dropped only when named with its token.
func testTokens(t *testing.T, s store.Store) {
	if tok := tokenOf(t, s); !tok.IsZero() {
		t.Fatalf("RecordToken of an empty store = %v", tok)
	}
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "a", "1"), put("t", "c", "3")), 1)
	if tok := tokenOf(t, s); !tok.IsZero() {
		t.Fatalf("RecordToken after an untokened entry = %v", tok)
	}
	apply(t, s, c.nextTokened(t, tokenU, put("t", "b", "2")), 2)
	r, ok := get(t, s, "t", "b")
	if !ok || r.Token != tokenU || string(r.Value) != "2" || r.HLC != hlcA(2) {
		t.Fatalf("Get of the tokened record = %s, %v", fmtRecord(r), ok)
	}
	recs := scan(t, s, "t", nil)
	if len(recs) != 3 || !recs[0].Token.IsZero() || recs[1].Token != tokenU || !recs[2].Token.IsZero() {
		t.Fatalf("Scan = %s", fmtRecords(recs))
	}
	sn, err := s.Snapshot()
	must(t, err)
	if got := snapshotRecords(t, sn, nil, nil); len(got) != 3 || got[1].Token != tokenU || !got[0].Token.IsZero() {
		t.Errorf("snapshot = %s", fmtRecords(got))
	}
	sn.Release()
	if tok := tokenOf(t, s); tok != tokenU {
		t.Errorf("RecordToken = %v, want %v", tok, tokenU)
	}
	// A lower token does not lower it; a tokened tombstone keeps its token.
	apply(t, s, c.nextTokened(t, tokenT, del("t", "c")), 3)
	if tok := tokenOf(t, s); tok != tokenU {
		t.Errorf("RecordToken after a lower token = %v, want %v", tok, tokenU)
	}
	if r, ok := get(t, s, "t", "c"); !ok || !r.Deleted || r.Token != tokenT {
		t.Errorf("the tokened tombstone = %s, %v", fmtRecord(r), ok)
	}
	// A tokened put of a lower HLC than an untokened one of another origin (applied
	// first) wins it: the replica writes it, and the audit, replaying the logs by the same
	// order, finds the records what the order makes of them.
	other := &chain{origin: originB}
	for i := range 5 {
		apply(t, s, other.next(t, put("t", "z", fmt.Sprint(i))), uint64(4+i))
	}
	late := c.nextTokened(t, tokenT, put("t", "z", "fenced"))
	if late.Records[0].HLC >= hlcOf(t, other.last) {
		t.Fatalf("the tokened put's HLC %d is not below the untokened one's", late.Records[0].HLC)
	}
	apply(t, s, late, 9)
	checkAudit(t, s, "of tokened entries")
	// Repair and ApplyCopy write tokens as they are, and raise RecordToken.
	higher := tokenU
	higher.Incarnation++
	fixed := rec("t", "a", "fixed", hlcA(1), originB)
	fixed.Token = higher
	must(t, s.Repair([]store.Record{fixed}))
	if r, _ := get(t, s, "t", "a"); r.Token != higher || tokenOf(t, s) != higher {
		t.Errorf("after Repair: %s, RecordToken %v", fmtRecord(r), tokenOf(t, s))
	}
	highest := higher
	highest.Generation++
	copied := rec("u", "k", "v", 5, originC)
	copied.Token = highest
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{copied}, State: store.CopyState{Peer: "p"}}))
	if r, _ := get(t, s, "u", "k"); r.Token != highest || tokenOf(t, s) != highest {
		t.Errorf("after ApplyCopy: %s, RecordToken %v", fmtRecord(r), tokenOf(t, s))
	}
	// DropTombstones matches the whole version: without its token the tombstone is another
	// version, and stays.
	stale := tomb("t", "c", hlcA(3), originA)
	must(t, s.DropTombstones([]store.Record{stale}))
	if _, ok := get(t, s, "t", "c"); !ok {
		t.Error("a tokened tombstone was dropped by a version without its token")
	}
	stale.Token = tokenT
	must(t, s.DropTombstones([]store.Record{stale}))
	if r, ok := get(t, s, "t", "c"); ok {
		t.Errorf("the tombstone named with its token stayed: %s", fmtRecord(r))
	}
	if tok := tokenOf(t, s); tok != highest {
		t.Errorf("RecordToken after dropping a tombstone = %v, want %v: it survives what the records survive", tok, highest)
	}
}
