package replica_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// TestWriteValidation: every write outside the bounds of docs/contract.md §6.1 is refused with
// bad-argument and writes nothing; valid writes get contiguous seqs chained by hash.
func TestWriteValidation(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	valid64 := strings.Repeat("aZ09_.-x", 8)
	if len(valid64) != 64 {
		t.Fatal("bad fixture")
	}
	mib := 1 << 20
	cases := []struct {
		name string
		ops  []wire.Op
	}{
		{"nil ops", nil},
		{"empty ops", []wire.Op{}},
		{"empty table", []wire.Op{put("", "k", "v")}},
		{"65-char table", []wire.Op{put(valid64+"a", "k", "v")}},
		{"table with slash", []wire.Op{put("a/b", "k", "v")}},
		{"table with space", []wire.Op{put("a b", "k", "v")}},
		{"table with NUL", []wire.Op{put("a\x00", "k", "v")}},
		{"table non-ASCII", []wire.Op{put("tablé", "k", "v")}},
		{"empty key", []wire.Op{put("t", "", "v")}},
		{"1025-byte key", []wire.Op{put("t", strings.Repeat("k", 1025), "v")}},
		{"1025-byte key delete", []wire.Op{del("t", strings.Repeat("k", 1025))}},
		{"value 1 MiB + 1", []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: make([]byte, mib+1)}}},
		{"delete with value", []wire.Op{{Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k"), Value: []byte("x")}}},
		{"unknown kind 0", []wire.Op{{Kind: 0, Table: []byte("t"), Key: []byte("k")}}},
		{"unknown kind 3", []wire.Op{{Kind: 3, Table: []byte("t"), Key: []byte("k")}}},
		{"valid then invalid", []wire.Op{put("t", "ok", "v"), put("t", "", "v")}},
	}
	for _, tc := range cases {
		seq, err := a.rep.Write(a.clock(), tc.ops)
		if seq != 0 || wireCode(err) != wire.CodeBadArgument {
			t.Errorf("%s: Write = %d, %v; want 0 and a *wire.Error bad-argument", tc.name, seq, err)
		}
	}
	// Nothing was written.
	if got := a.applied(); len(got) != 0 {
		t.Errorf("vector after refused writes = %v, want empty", got)
	}
	if last, _ := a.store.LastArrival(); last != 0 {
		t.Errorf("last arrival = %d, want 0", last)
	}
	if tables, _ := a.store.Tables(); len(tables) != 0 {
		t.Errorf("tables = %q, want none", tables)
	}
	if st := a.originStatus(a); st.AppliedSeq != 0 || st.HeadSeq != 0 {
		t.Errorf("status of A = %+v", st)
	}
	wantCounters(t, a, replica.Counters{})

	// Valid writes at the bounds: seq 1, 2, 3, chained, HLC strictly increasing at one
	// wall-clock instant.
	maxKey := strings.Repeat("k", 1024)
	writes := [][]wire.Op{
		{put(valid64, maxKey, string(make([]byte, mib)))},
		{del("t", "missing")},
		{put("t", "x", "1"), put("t", "y", "2"), del("t", "x")},
	}
	ms := uint64(epoch.UnixMilli())
	for i, ops := range writes {
		seq, err := a.rep.Write(a.clock(), ops)
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("write %d: %d, %v; want seq %d", i, seq, err, i+1)
		}
	}
	var prev wire.Hash
	for seq := uint64(1); seq <= 3; seq++ {
		raw, v := a.entry(a, seq)
		if v.Origin != a.origin || v.Seq != seq || v.Prev != prev {
			t.Errorf("entry %d: origin %v seq %d prev %x; want prev %x", seq, v.Origin, v.Seq, v.Prev, prev)
		}
		if want := wire.MakeHLC(ms, uint16(seq-1)); v.HLC != want {
			t.Errorf("entry %d HLC = %d/%d, want %d/%d", seq, v.HLC.WallMillis(), v.HLC.Logical(), ms, seq-1)
		}
		prev = sha256.Sum256(raw)
	}
	// A later operation of one transaction on the same key replaces an earlier one.
	if r, ok := a.get("t", "x"); !ok || !r.Deleted || len(r.Value) != 0 || r.HLC != wire.MakeHLC(ms, 2) || r.Origin != a.origin {
		t.Errorf("t/x = %+v, %v; want a tombstone at %d/2", r, ok, ms)
	}
	if r, ok := a.get("t", "missing"); !ok || !r.Deleted || r.HLC != wire.MakeHLC(ms, 1) {
		t.Errorf("t/missing = %+v, %v; want a tombstone (a delete of a missing key is kept)", r, ok)
	}
	if r, ok := a.get(valid64, maxKey); !ok || r.Deleted || len(r.Value) != mib {
		t.Errorf("1 MiB value under a 1024-byte key: found %v, %d bytes", ok, len(r.Value))
	}

	// The clock goes back one second: the next HLC is still above the last.
	a.skew = -time.Second
	if seq := a.write(put("t", "z", "3")); seq != 4 {
		t.Fatalf("seq %d, want 4", seq)
	}
	if _, v := a.entry(a, 4); v.HLC != wire.MakeHLC(ms, 3) {
		t.Errorf("entry 4 HLC after the clock went back = %d/%d, want %d/3", v.HLC.WallMillis(), v.HLC.Logical(), ms)
	}
	// The clock moves ahead: the wall clock is taken, the logical counter restarts.
	a.skew = 5 * time.Millisecond
	a.write(put("t", "z", "4"))
	if _, v := a.entry(a, 5); v.HLC != wire.MakeHLC(ms+5, 0) {
		t.Errorf("entry 5 HLC = %d/%d, want %d/0", v.HLC.WallMillis(), v.HLC.Logical(), ms+5)
	}
	if st := a.originStatus(a); st.AppliedSeq != 5 || st.HeadSeq != 5 || st.LagSeq != 0 {
		t.Errorf("status of A = %+v", st)
	}
	wantCounters(t, a, replica.Counters{TxnsApplied: 5})
}

// bigTxn is 9 puts of 1 MiB each: every op within bounds, the transaction over 8 MiB.
func bigTxn() []wire.Op {
	ops := make([]wire.Op, 9)
	for i := range ops {
		ops[i] = wire.Op{Kind: wire.OpPut, Table: []byte("t"), Key: []byte{byte('a' + i)}, Value: make([]byte, 1<<20)}
	}
	return ops
}

// TestOversizedTxnRefused: a transaction of valid operations over 8 MiB encoded is
// refused with bad-argument and nothing is written.
func TestOversizedTxnRefused(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	seq, err := a.rep.Write(a.clock(), bigTxn())
	if seq != 0 || wireCode(err) != wire.CodeBadArgument || !errors.Is(err, replica.ErrTxnTooLarge) {
		t.Fatalf("Write = %d, %v; want 0 and bad-argument marked ErrTxnTooLarge", seq, err)
	}
	if got := a.applied(); len(got) != 0 {
		t.Errorf("vector = %v, want empty", got)
	}
	if tables, _ := a.store.Tables(); len(tables) != 0 {
		t.Errorf("tables = %q, want none", tables)
	}
	// Seven values of 1 MiB fit.
	if seq := a.write(bigTxn()[:7]...); seq != 1 {
		t.Errorf("7 MiB transaction: seq %d, want 1", seq)
	}
}

// TestRefusedWriteKeepsHLC: "a refused write changes nothing" (Write's doc) — also not the
// HLC clock: the next accepted write at the same instant gets logical 0.
func TestRefusedWriteKeepsHLC(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	if _, err := a.rep.Write(a.clock(), bigTxn()); wireCode(err) != wire.CodeBadArgument {
		t.Fatalf("oversized write: %v", err)
	}
	a.write(put("t", "k", "v"))
	ms := uint64(epoch.UnixMilli())
	if _, v := a.entry(a, 1); v.HLC != wire.MakeHLC(ms, 0) {
		t.Errorf("a write refused for its encoded size advanced the HLC: got %d/%d, want %d/0", v.HLC.WallMillis(), v.HLC.Logical(), ms)
	}
}

// TestWriteLimitsConfigured: Config.Write changes the bounds.
func TestWriteLimitsConfigured(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{Write: replica.WriteLimits{MaxKey: 8, MaxValue: 16, MaxTxn: 200}})
	for _, tc := range []struct {
		name string
		ops  []wire.Op
		ok   bool
	}{
		{"key 8", []wire.Op{put("t", "12345678", "v")}, true},
		{"key 9", []wire.Op{put("t", "123456789", "v")}, false},
		{"value 16", []wire.Op{put("t", "k", strings.Repeat("v", 16))}, true},
		{"value 17", []wire.Op{put("t", "k", strings.Repeat("v", 17))}, false},
		{"txn over 200", []wire.Op{put("t", "a", "0123456789abcdef"), put("t", "b", "0123456789abcdef"),
			put("t", "c", "0123456789abcdef"), put("t", "d", "0123456789abcdef"), put("t", "e", "0123456789abcdef"),
			put("t", "f", "0123456789abcdef"), put("t", "g", "0123456789abcdef")}, false},
	} {
		before := a.originStatus(a).AppliedSeq
		seq, err := a.rep.Write(a.clock(), tc.ops)
		if tc.ok && (err != nil || seq != before+1) {
			t.Errorf("%s: %d, %v; want seq %d", tc.name, seq, err, before+1)
		}
		if !tc.ok && (seq != 0 || wireCode(err) != wire.CodeBadArgument || a.originStatus(a).AppliedSeq != before) {
			t.Errorf("%s: %d, %v; want refused with bad-argument", tc.name, seq, err)
		}
	}
}

// TestWriteMaxTxnBoundary: MaxTxn bounds the transaction's encoding, inclusive.
func TestWriteMaxTxnBoundary(t *testing.T) {
	ops := []wire.Op{put("t", "a", "0123456789"), del("t", "b")}
	enc, err := (&wire.Txn{Origin: wire.OriginID{1}, Seq: 1, Ops: ops}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	fits := h.addNode("A", replica.Config{Write: replica.WriteLimits{MaxTxn: len(enc)}})
	over := h.addNode("B", replica.Config{Write: replica.WriteLimits{MaxTxn: len(enc) - 1}})
	if seq, err := fits.rep.Write(fits.clock(), ops); seq != 1 || err != nil {
		t.Errorf("MaxTxn %d, encoding %d bytes: %d, %v; want seq 1", len(enc), len(enc), seq, err)
	}
	if seq, err := over.rep.Write(over.clock(), ops); seq != 0 || wireCode(err) != wire.CodeBadArgument {
		t.Errorf("MaxTxn %d, encoding %d bytes: %d, %v; want bad-argument", len(enc)-1, len(enc), seq, err)
	}
}

// TestHLCLogicalOverflow: after 65536 writes in one millisecond the HLC's wall part moves
// one millisecond ahead of the clock and the logical counter restarts.
func TestHLCLogicalOverflow(t *testing.T) {
	if testing.Short() {
		t.Skip("65537 writes")
	}
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	ms := uint64(epoch.UnixMilli())
	for i := range 0x10001 {
		a.write(put("t", "k", fmt.Sprint(i)))
	}
	if _, v := a.entry(a, 0x10000); v.HLC != wire.MakeHLC(ms, 0xffff) {
		t.Errorf("write 65536: %d/%d, want %d/65535", v.HLC.WallMillis(), v.HLC.Logical(), ms)
	}
	if _, v := a.entry(a, 0x10001); v.HLC != wire.MakeHLC(ms+1, 0) {
		t.Errorf("write 65537: %d/%d, want %d/0", v.HLC.WallMillis(), v.HLC.Logical(), ms+1)
	}
}

// sameVersion asserts that every node holds the same version of a record.
func sameVersion(t *testing.T, table, key string, want store.Record, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		r, ok := n.get(table, key)
		if !ok {
			t.Errorf("%s: %s/%s missing", n.name, table, key)
			continue
		}
		if !bytes.Equal(r.Value, want.Value) || r.Deleted != want.Deleted || r.HLC != want.HLC || r.Origin != want.Origin {
			t.Errorf("%s: %s/%s = value %q deleted %v HLC %d/%d origin %x;\nwant value %q deleted %v HLC %d/%d origin %x",
				n.name, table, key, r.Value, r.Deleted, r.HLC.WallMillis(), r.HLC.Logical(), r.Origin[:1],
				want.Value, want.Deleted, want.HLC.WallMillis(), want.HLC.Logical(), want.Origin[:1])
		}
	}
}

func sameDigest(t *testing.T, table string, nodes ...*node) {
	t.Helper()
	c0, h0 := nodes[0].digest(table)
	for _, n := range nodes[1:] {
		if c, s := n.digest(table); c != c0 || s != h0 {
			t.Errorf("digest of %s: %s %d %s, %s %d %s", table, nodes[0].name, c0, h0, n.name, c, s)
		}
	}
}

// TestLWW: concurrent writes of one key resolve to the same version everywhere: the
// higher HLC wins, an exact HLC tie goes to the higher origin id, deletes compete as
// tombstones, and a tombstone beats an older put that arrives after it.
func TestLWW(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{}) // origin 0x01...
	b := h.addNode("B", replica.Config{}) // origin 0x02...: wins HLC ties against A
	ms := uint64(epoch.UnixMilli())

	// Exact ties: both nodes' first writes at the same instant get HLC ms/0.
	a.write(put("t", "tie", "from-a"), put("t", "tie-del", "from-a"), del("t", "tie-put"))
	b.write(put("t", "tie", "from-b"), del("t", "tie-del"), put("t", "tie-put", "from-b"))
	// Different wall clocks: A's clock is 10 ms ahead.
	a.skew, b.skew = 10*time.Millisecond, 0
	a.write(put("t", "clock", "from-a"), del("t", "del-newer"), put("t", "put-newer", "from-a"))
	b.write(put("t", "clock", "from-b"), put("t", "del-newer", "from-b"), del("t", "put-newer"))
	// B's clock is now 20 ms ahead of A's: B's later writes win.
	a.skew, b.skew = 0, 20*time.Millisecond
	a.write(put("t", "b-ahead", "from-a"))
	b.write(put("t", "b-ahead", "from-b"))

	h.connect(a, b)
	h.advance(time.Second)

	sameVersion(t, "t", "tie", store.Record{Value: []byte("from-b"), HLC: wire.MakeHLC(ms, 0), Origin: b.origin}, a, b)
	sameVersion(t, "t", "tie-del", store.Record{Deleted: true, HLC: wire.MakeHLC(ms, 0), Origin: b.origin}, a, b)
	sameVersion(t, "t", "tie-put", store.Record{Value: []byte("from-b"), HLC: wire.MakeHLC(ms, 0), Origin: b.origin}, a, b)
	sameVersion(t, "t", "clock", store.Record{Value: []byte("from-a"), HLC: wire.MakeHLC(ms+10, 0), Origin: a.origin}, a, b)
	sameVersion(t, "t", "del-newer", store.Record{Deleted: true, HLC: wire.MakeHLC(ms+10, 0), Origin: a.origin}, a, b)
	sameVersion(t, "t", "put-newer", store.Record{Value: []byte("from-a"), HLC: wire.MakeHLC(ms+10, 0), Origin: a.origin}, a, b)
	// A's third write: its clock (ms) is behind its HLC (ms+10/0): ms+10/1. B's: ms+20/0.
	sameVersion(t, "t", "b-ahead", store.Record{Value: []byte("from-b"), HLC: wire.MakeHLC(ms+20, 0), Origin: b.origin}, a, b)
	sameDigest(t, "t", a, b)
	if c, _ := a.digest("t"); c != 5 { // tie, tie-put, clock, put-newer, b-ahead
		t.Errorf("live records = %d, want 5", c)
	}
	wantCounters(t, a, replica.Counters{TxnsApplied: 6})
	wantCounters(t, b, replica.Counters{TxnsApplied: 6})

	// A tombstone beats an older put arriving later: C gets B's newer delete first, then
	// A's older put. A and B are apart meanwhile.
	for _, l := range h.links {
		h.disconnect(l)
	}
	c := h.addNode("C", replica.Config{})
	a.skew, b.skew = 0, 0
	h.now = h.now.Add(time.Second)
	ms2 := uint64(h.now.UnixMilli())
	a.write(put("u", "k", "old-put")) // A's HLC: ms2/0
	b.skew = 30 * time.Millisecond
	b.write(del("u", "k")) // ms2+30/0
	b.skew = 0
	h.connect(b, c)
	sameVersion(t, "u", "k", store.Record{Deleted: true, HLC: wire.MakeHLC(ms2+30, 0), Origin: b.origin}, b, c)
	if got := c.applied(); got[a.origin] != 3 || got[b.origin] != 4 {
		t.Fatalf("C's vector before A connects = %v, want A 3 (through B), B 4", got)
	}
	h.connect(a, c)
	h.advance(time.Second)
	if got := c.applied()[a.origin]; got != 4 {
		t.Fatalf("C applied A up to %d, want 4", got)
	}
	sameVersion(t, "u", "k", store.Record{Deleted: true, HLC: wire.MakeHLC(ms2+30, 0), Origin: b.origin}, a, c)
	if r, _ := a.get("u", "k"); r.Deleted != true {
		t.Errorf("A kept its own older put over B's delete")
	}
	h.connect(a, b)
	h.advance(time.Second)
	sameVersion(t, "u", "k", store.Record{Deleted: true, HLC: wire.MakeHLC(ms2+30, 0), Origin: b.origin}, a, b, c)
	sameDigest(t, "t", a, b, c)
	sameDigest(t, "u", a, b, c)
	if n, s := c.digest("u"); n != 0 || s != hex.EncodeToString(sha256.New().Sum(nil)) {
		t.Errorf("digest of u = %d %s, want the empty digest", n, s)
	}
}

// TestDigest checks Digest against the documented algorithm computed by hand: SHA-256
// over uvarint(len(key)) key uvarint(len(value)) value of each live record in key order.
func TestDigest(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	long := strings.Repeat("L", 200) // length 200: uvarint 0xc8 0x01
	a.write(put("t", "k2", "value-two"), put("t", "k1", "v1"), put("t", "gone", "x"), put("other", "k1", "zz"))
	a.write(del("t", "gone"), put("t", long, ""))

	var msg []byte
	msg = append(msg, 2, 'k', '1', 2, 'v', '1')
	msg = append(msg, 2, 'k', '2', 9)
	msg = append(msg, "value-two"...)
	msg = append(msg, 0xc8, 0x01)
	msg = append(msg, long...)
	msg = append(msg, 0) // empty value
	// Key order: "L..." < "k1" < "k2" (byte order).
	var want []byte
	want = append(want, 0xc8, 0x01)
	want = append(want, long...)
	want = append(want, 0)
	want = append(want, msg[:len(msg)-len(long)-3]...)
	sum := sha256.Sum256(want)
	if n, s := a.digest("t"); n != 3 || s != hex.EncodeToString(sum[:]) {
		t.Errorf("digest of t = %d %s, want 3 %x", n, s, sum)
	}
	// Two records, by hand, in another table.
	sum2 := sha256.Sum256([]byte{2, 'k', '1', 2, 'z', 'z'})
	if n, s := a.digest("other"); n != 1 || s != hex.EncodeToString(sum2[:]) {
		t.Errorf("digest of other = %d %s, want 1 %x", n, s, sum2)
	}
	empty := sha256.Sum256(nil)
	if n, s := a.digest("none"); n != 0 || s != hex.EncodeToString(empty[:]) {
		t.Errorf("digest of an empty table = %d %s", n, s)
	}

	// Versions and tombstones take no part: B writes the same live records at other times,
	// by another origin, with tombstones of its own.
	h.now = h.now.Add(time.Hour)
	b.write(put("t", "k1", "v1"), del("t", "never-there"), put("t", "k2", "old"))
	b.write(put("t", "k2", "value-two"), put("t", long, ""))
	sameDigest(t, "t", a, b)
	b.write(put("t", "k2", "value-2"))
	if _, s := b.digest("t"); s == hex.EncodeToString(sum[:]) {
		t.Error("a changed value left the digest unchanged")
	}
}

// countingStore counts the record reads of last-writer-wins.
type countingStore struct {
	store.Store
	gets int
}

func (s *countingStore) Get(table, key []byte) (store.Record, bool, error) {
	s.gets++
	return s.Store.Get(table, key)
}

// TestLWWReadsOnlyWhatMayWin: a local write is newer than every stored version, so it
// reads no record, across a restart too (Store.RecordHLC); the versions are still right.
func TestLWWReadsOnlyWhatMayWin(t *testing.T) {
	ms := memstore.New(store.Identity{Origin: wire.OriginID{1, 15: 1}, Name: "A"})
	s := &countingStore{Store: ms}
	now := epoch
	for round := range 2 { // the second round is a restart on the same store
		rep, err := replica.New(replica.Config{Secret: testSecret}, s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			value := fmt.Sprintf("v%d.%d", round, i)
			if _, err := rep.Write(now, []wire.Op{put("t", "k", value), put("t", fmt.Sprintf("k%d.%d", round, i), value)}); err != nil {
				t.Fatal(err)
			}
			if r, _, _ := ms.Get([]byte("t"), []byte("k")); string(r.Value) != value {
				t.Fatalf("round %d write %d: k = %q, want %q", round, i, r.Value, value)
			}
		}
		now = now.Add(-time.Second) // a clock stepped back: the HLC stays ahead
	}
	if s.gets != 0 {
		t.Errorf("local writes read %d records, want none", s.gets)
	}
}

// TestLWWAfterRestartReadsStoredVersions: an older put arriving after a restart still
// loses to the newer tombstone stored before it.
func TestLWWAfterRestartReadsStoredVersions(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{})
	a.write(put("u", "k", "old-put")) // HLC epoch/0
	b.skew = 30 * time.Millisecond
	b.write(del("u", "k")) // epoch+30ms
	h.connect(b, c)
	h.advance(time.Second)
	c.restart()
	h.connect(a, c)
	h.advance(time.Second)
	if got := c.applied()[a.origin]; got != 1 {
		t.Fatalf("C applied A up to %d, want 1", got)
	}
	ms := uint64(epoch.UnixMilli())
	sameVersion(t, "u", "k", store.Record{Deleted: true, HLC: wire.MakeHLC(ms+30, 0), Origin: b.origin}, b, c)
}

// olderChannel makes a replica's sessions (Config.NewSession) native ones whose next
// Subscribe naming the armed position's origin opens that channel at the armed position
// instead of the one the replica asked for, once: a core whose channel lags the store's
// cursor, which is what the replica's own check of every entry against the store is for.
type olderChannel struct {
	at *vector.Entry // armed; nil once used
}

func (o *olderChannel) newSession(cfg protocol.Config) (replica.Session, error) {
	s, err := protocol.New(cfg)
	if err != nil {
		return nil, err
	}
	return olderSession{Session: s, o: o}, nil
}

type olderSession struct {
	*protocol.Session
	o *olderChannel
}

func (s olderSession) V2() protocol.V2Commands { return olderV2{V2Commands: s.Session.V2(), o: s.o} }

type olderV2 struct {
	protocol.V2Commands
	o *olderChannel
}

func (v olderV2) Subscribe(cursors []vector.Entry) error {
	if at := v.o.at; at != nil {
		if i := slices.IndexFunc(cursors, func(e vector.Entry) bool { return e.Origin == at.Origin }); i >= 0 {
			cursors = slices.Clone(cursors)
			cursors[i], v.o.at = *at, nil
		}
	}
	return v.V2Commands.Subscribe(cursors)
}

// TestDuplicateFromAnotherConnection: C applies A's entries 1 and 2 through the relay B;
// then A connects directly and C's channel on A opens at entry 1, below what C applied, so
// A sends entry 2 again. C's check against its cursor counts one duplicate and applies
// nothing: the store's log, arrival order and records stay as they were. The duplicate is
// acknowledged (C holds none of it, A is told with a CURSOR) and the channel goes on.
func TestDuplicateFromAnotherConnection(t *testing.T) {
	h := newHarness(t)
	older := &olderChannel{}
	a := h.addNode("A", replica.Config{})
	b := h.addNode("B", replica.Config{})
	c := h.addNode("C", replica.Config{NewSession: older.newSession})
	h.connect(b, a)
	h.connect(c, b)
	a.write(put("t", "k1", "v1"))
	a.write(put("t", "k2", "v2"))
	h.pump()
	if got := c.originStatus(a); got.SourcePeer != "B" || got.AppliedSeq != 2 {
		t.Fatalf("C's status of A = %+v, want applied 2 through B", got)
	}
	before := c.rep.Counters()
	lastBefore, err := c.store.LastArrival()
	if err != nil {
		t.Fatal(err)
	}
	raw1, _ := c.entry(a, 1)
	raw2, _ := c.entry(a, 2)
	rec2, _ := c.get("t", "k2")

	older.at = &vector.Entry{Origin: a.origin, Seq: 1, Hash: sha256.Sum256(raw1)}
	ac := h.connect(a, c)
	if older.at != nil {
		t.Fatal("C did not subscribe to A on the direct connection")
	}
	if got := c.originStatus(a); got.SourcePeer != "A" || got.AppliedSeq != 2 {
		t.Fatalf("C's status of A with A connected = %+v, want applied 2 from A", got)
	}
	// The entry extends the channel, so the session hands it on: the replica's own check
	// against its cursor is what finds it applied.
	if st := c.rep.Session(ac.listener.id).Stats(); st.TxnsReceived != 1 || st.Duplicates != 0 {
		t.Fatalf("C's session on A's connection: %d entries received, %d duplicates; want 1 and 0", st.TxnsReceived, st.Duplicates)
	}
	want := before
	want.DuplicatesReceived++
	wantCounters(t, c, want)
	if last, _ := c.store.LastArrival(); last != lastBefore {
		t.Errorf("C's last arrival = %d after the duplicate, want %d: it was applied again", last, lastBefore)
	}
	if again, _ := c.entry(a, 2); !bytes.Equal(again, raw2) {
		t.Errorf("C's log entry A/2 changed after the duplicate")
	}
	if got := c.applied()[a.origin]; got != 2 {
		t.Errorf("C's cursor of A = %d, want 2", got)
	}
	if r, _ := c.get("t", "k2"); !bytes.Equal(r.Value, rec2.Value) || r.HLC != rec2.HLC || r.Origin != rec2.Origin {
		t.Errorf("C: t/k2 = %+v after the duplicate, want %+v", r, rec2)
	}
	if held := c.rep.Session(ac.listener.id).HeldBytes(); held != 0 {
		t.Errorf("C holds %d bytes on A's connection: the duplicate was not acknowledged", held)
	}
	if got := h.acked("C", "A", a.origin); got != 2 { // in the same step (TestAckLeavesInTheSameStep)
		t.Errorf("C acknowledged A's channel up to %d, want 2", got)
	}

	a.write(put("t", "k3", "v3"))
	h.pump()
	if got := c.originStatus(a); got.AppliedSeq != 3 || got.SourcePeer != "A" {
		t.Errorf("C's status of A after A's next write = %+v, want applied 3 from A", got)
	}
	want.TxnsApplied++
	wantCounters(t, c, want)
	if got := h.acked("C", "A", a.origin); got != 3 {
		t.Errorf("C acknowledged A's channel up to %d, want 3", got)
	}
}
