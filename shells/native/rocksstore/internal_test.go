package rocksstore

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/store/storetest"
	"plait/protocol/wire"
)

// TestRecordHLCOfAnOlderDirectory opens a directory written before the record HLC was
// kept (its 'h' key deleted): the store finds the highest record HLC and keeps it.
func TestRecordHLCOfAnOlderDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	chain := storetest.Chain(t, storetest.Origin(0xa1), 3)
	for _, b := range chain {
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	want := chain[2].Records[0].HLC
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Delete(wo, []byte{pHLC}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 { // found, then read back
		s, err = Open(dir, store.Identity{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.RecordHLC(); got != want {
			t.Errorf("RecordHLC = %d, want %d", got, want)
		}
		v, err := s.db.GetBytes(s.ro, []byte{pHLC})
		if err != nil || len(v) != 8 {
			t.Errorf("the 'h' key after open = %x, %v; want it written", v, err)
		}
		s.Close()
	}
}

// TestDamagedRecord: a record whose stored value does not decode is reported as
// store.ErrRecordDamaged, naming its table and key: an error of the entries that touch
// it (the replica's retry budget), not of the store.
func TestDamagedRecord(t *testing.T) {
	s, err := Open(t.TempDir(), storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chain := storetest.Chain(t, storetest.Origin(0xa1), 1)
	if _, err := s.Apply(chain[0]); err != nil {
		t.Fatal(err)
	}
	rec := chain[0].Records[0]
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Put(wo, append(tablePrefix(rec.Table), rec.Key...), []byte{7, 1, 2}); err != nil {
		t.Fatal(err)
	}
	_, found, err := s.Get(rec.Table, rec.Key)
	if found || !errors.Is(err, store.ErrRecordDamaged) || !strings.Contains(err.Error(), string(rec.Key)) {
		t.Errorf("Get of a damaged record: found %v, %v; want ErrRecordDamaged naming key %q", found, err, rec.Key)
	}
	if s.Failed() != nil {
		t.Errorf("a damaged record latched the store: %v", s.Failed())
	}
}

// logKeys lists the seqs of origin o's 'l' keys: what a purge, a copy's end or a reseed
// left of its log rows, entries and runs alike.
func logKeys(t *testing.T, s *Store, o wire.OriginID) []uint64 {
	t.Helper()
	var out []uint64
	err := s.each(key(pLog, o[:]), nil, func(k, _ []byte) (bool, error) {
		out = append(out, binary.BigEndian.Uint64(k[17:]))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSkipRowsDropped: a run's row is kept at its last seq, and a purge and a copy's end
// delete it with the entries around it, leaving no key at or below the new floor.
func TestSkipRowsDropped(t *testing.T) {
	s, err := Open(t.TempDir(), storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := storetest.Origin(0xa1), storetest.Origin(0xb2)
	ca, cb := storetest.Chain(t, a, 6), storetest.Chain(t, b, 4)
	for _, batch := range []*store.Batch{ca[0], storetest.SkipBatch(t, ca, 2, 3), ca[3], storetest.SkipBatch(t, ca, 5, 6),
		storetest.SkipBatch(t, cb, 1, 2), cb[2]} {
		if _, err := s.Apply(batch); err != nil {
			t.Fatal(err)
		}
	}
	if got := logKeys(t, s, a); !slices.Equal(got, []uint64{1, 3, 4, 6}) {
		t.Fatalf("A's log rows at %v, want 1, 3 (the run 2-3), 4, 6 (the run 5-6)", got)
	}
	if err := s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: a, To: 5}}, ArrivalFloor: 2}); err != nil {
		t.Fatal(err)
	}
	if got := logKeys(t, s, a); !slices.Equal(got, []uint64{6}) {
		t.Errorf("A's log rows after a purge to 5 (lowered to 4) at %v, want 6 alone", got)
	}
	err = s.EndCopy(&store.CopyEnd{Logs: []store.CopiedLog{{Origin: b,
		Position: wire.CopyPosition{Origin: b, Seq: 4, Hash: cb[3].Hash, HLC: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := logKeys(t, s, b); len(got) != 0 {
		t.Errorf("B's log rows after a copy's end at 4: %v, want none", got)
	}
}

// TestDamagedSkipRow: a run row on disk whose previous hash is not its log's is what the
// audit (plait check) reports, and one that does not decode is an error of Entry.
func TestDamagedSkipRow(t *testing.T) {
	s, err := Open(t.TempDir(), storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := storetest.Origin(0xa1)
	c := storetest.Chain(t, a, 4)
	run := storetest.SkipBatch(t, c, 2, 3)
	for _, batch := range []*store.Batch{c[0], run, c[3]} {
		if _, err := s.Apply(batch); err != nil {
			t.Fatal(err)
		}
	}
	if problems, err := store.Audit(s, 0); err != nil || len(problems) != 0 {
		t.Fatalf("the audit of a clean log with a run: %v, %v", problems, err)
	}
	row := store.AppendSkipRow(nil, &store.SkippedError{Origin: a, From: 2, To: 3, Prev: c[2].Hash, Hash: run.Hash, HLC: run.Skip.HLC})
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Put(wo, key(pLog, a[:], u64(3)), row); err != nil {
		t.Fatal(err)
	}
	problems, err := store.Audit(s, 0)
	if want := "the run 2 to 3 does not extend the chain of entry 1"; err != nil || !strings.Contains(strings.Join(problems, "\n"), want) {
		t.Errorf("the audit of a run on another hash: %q, %v; want a problem saying %q", problems, err, want)
	}
	if err := s.db.Put(wo, key(pLog, a[:], u64(3)), row[:40]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entry(a, 2); err == nil || errors.Is(err, store.ErrSkipped) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Entry inside a run row that does not decode: %v; want an error saying it is damaged", err)
	}
}

// TestDialPeerLinks: a peer's link settings are kept with it and read back after a reopen;
// a peer kept as a directory from before the settings holds it (its URL alone, under 'd')
// reads as the default link; default settings and a forgotten peer leave no 'e' key.
func TestDialPeerLinks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recv := wire.Link{Mode: wire.LinkReceive, Tables: [][]byte{[]byte("a"), []byte("b")}}
	for _, p := range []DialPeer{{Name: "B", URL: "ws://127.0.0.1:1", Link: recv}, {Name: "C", URL: "ws://127.0.0.1:2"}} {
		if err := s.PutDialPeer(p); err != nil {
			t.Fatal(err)
		}
	}
	// An older directory's peer: its URL alone.
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Put(wo, key(pDial, []byte("D")), []byte("ws://127.0.0.1:3")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, store.Identity{}, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.DialPeers()
	if err != nil {
		t.Fatal(err)
	}
	want := []DialPeer{{Name: "B", URL: "ws://127.0.0.1:1", Link: recv}, {Name: "C", URL: "ws://127.0.0.1:2"}, {Name: "D", URL: "ws://127.0.0.1:3"}}
	if !slices.EqualFunc(got, want, func(a, b DialPeer) bool {
		return a.Name == b.Name && a.URL == b.URL && a.Link.Mode == b.Link.Mode && slices.EqualFunc(a.Link.Tables, b.Link.Tables, slices.Equal)
	}) {
		t.Fatalf("DialPeers after a reopen = %+v; want %+v", got, want)
	}
	// Back to the default, then forgotten: no 'e' key left either way.
	if err := s.PutDialPeer(DialPeer{Name: "B", URL: "ws://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.db.GetBytes(s.ro, key(pLink, []byte("B"))); err != nil || v != nil {
		t.Errorf("B's 'e' key after default settings = %x, %v; want none", v, err)
	}
	if err := s.PutDialPeer(DialPeer{Name: "B", URL: "ws://127.0.0.1:1", Link: recv}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDialPeer("B"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.db.GetBytes(s.ro, key(pLink, []byte("B"))); err != nil || v != nil {
		t.Errorf("B's 'e' key after DeleteDialPeer = %x, %v; want none", v, err)
	}
	// Settings LINK's rules refuse are not written.
	bad := DialPeer{Name: "E", URL: "ws://127.0.0.1:4", Link: wire.Link{Tables: [][]byte{[]byte("b"), []byte("a")}}}
	if err := s.PutDialPeer(bad); err == nil {
		t.Error("PutDialPeer of unsorted tables: no error")
	}
}

// TestRecordEncodingWithTokens: an untokened record is stored exactly as before tokens
// (flags 0 or 1, HLC, origin, value), so a data directory written before decodes as it is,
// untokened; a tokened one adds flag 2 and its 40 bytes after the origin; a value whose
// flags are unknown, or that is too short for its token, is damaged.
func TestRecordEncodingWithTokens(t *testing.T) {
	o := storetest.Origin(0xa1)
	old := func(flags byte, value string) []byte { // the layout written before tokens
		v := append([]byte{flags}, binary.BigEndian.AppendUint64(nil, 77)...)
		return append(append(v, o[:]...), value...)
	}
	untokened := store.Record{Table: []byte("t"), Key: []byte("k"), Value: []byte("val"), HLC: 77, Origin: o}
	if got := appendRecord(nil, &untokened); !slices.Equal(got, old(0, "val")) {
		t.Errorf("an untokened put is stored as %x, before tokens %x", got, old(0, "val"))
	}
	tomb := store.Record{Table: []byte("t"), Key: []byte("k"), Deleted: true, HLC: 77, Origin: o}
	if got := appendRecord(nil, &tomb); !slices.Equal(got, old(1, "")) {
		t.Errorf("an untokened tombstone is stored as %x, before tokens %x", got, old(1, ""))
	}
	for _, c := range []struct {
		v       []byte
		deleted bool
	}{{old(0, "val"), false}, {old(1, ""), true}} {
		r, err := decodeRecord([]byte("t"), []byte("k"), c.v)
		if err != nil || !r.Token.IsZero() || r.Deleted != c.deleted || r.HLC != 77 || r.Origin != o || (!c.deleted && string(r.Value) != "val") {
			t.Errorf("a record of the layout before tokens %x decodes as %+v, %v", c.v, r, err)
		}
	}
	tok := wire.Token{Generation: 4, Incarnation: 3, Counter: 2, Home: storetest.Origin(0x40)}
	for _, deleted := range []bool{false, true} {
		r := untokened
		r.Deleted, r.Token = deleted, tok
		if deleted {
			r.Value = nil
		}
		v := appendRecord(nil, &r)
		if v[0] != 2 && !deleted || v[0] != 3 && deleted || len(v) != 25+wire.TokenSize+len(r.Value) {
			t.Errorf("a tokened record (deleted %v) is stored as %x", deleted, v)
		}
		back, err := decodeRecord([]byte("t"), []byte("k"), v)
		if err != nil || back.Token != tok || back.Deleted != deleted || string(back.Value) != string(r.Value) || back.HLC != 77 {
			t.Errorf("a tokened record (deleted %v) decodes as %+v, %v", deleted, back, err)
		}
		for _, bad := range [][]byte{v[:25+wire.TokenSize-1], append([]byte{v[0] | 8}, v[1:]...)} {
			if _, err := decodeRecord([]byte("t"), []byte("k"), bad); !errors.Is(err, store.ErrRecordDamaged) {
				t.Errorf("%x decodes: %v, want damaged", bad, err)
			}
		}
	}
}

// TestRecordEncodingWithVia: a record with a via (a leaf write a hub re-originated) adds
// flag 4 and its via origin and via HLC after the token (or the origin); every such record
// has flags above 3, which a build from before hubs reports damaged (its check: flags above
// deleted|tokened) rather than reading the via block as the value; a record without a via
// is stored exactly as before; a via block that is short or names the all-zero origin is
// damaged.
func TestRecordEncodingWithVia(t *testing.T) {
	o, via := storetest.Origin(0xa1), storetest.Origin(0xd4)
	tok := wire.Token{Generation: 4, Incarnation: 3, Counter: 2, Home: storetest.Origin(0x40)}
	plain := store.Record{Table: []byte("t"), Key: []byte("k"), Value: []byte("val"), HLC: 77, Origin: o}
	plainV := appendRecord(nil, &plain)
	for _, c := range []struct {
		deleted bool
		token   wire.Token
	}{{false, wire.Token{}}, {true, wire.Token{}}, {false, tok}, {true, tok}} {
		r := plain
		r.Deleted, r.Token, r.Via, r.ViaHLC = c.deleted, c.token, via, 99
		if c.deleted {
			r.Value = nil
		}
		v := appendRecord(nil, &r)
		head := 25
		if !c.token.IsZero() {
			head += wire.TokenSize
		}
		if v[0]&flagVia == 0 || len(v) != head+16+8+len(r.Value) || !slices.Equal(v[head:head+16], via[:]) ||
			binary.BigEndian.Uint64(v[head+16:]) != 99 {
			t.Errorf("a via record (deleted %v, token %v) is stored as %x", c.deleted, c.token, v)
		}
		if preHub := v[0] > flagDeleted|flagToken; !preHub {
			t.Errorf("a via record's flags %#x pass a build from before hubs", v[0])
		}
		back, err := decodeRecord([]byte("t"), []byte("k"), v)
		if err != nil || back.Via != via || back.ViaHLC != 99 || back.Token != c.token || back.Deleted != c.deleted ||
			string(back.Value) != string(r.Value) || back.HLC != 77 || back.Origin != o {
			t.Errorf("a via record (deleted %v, token %v) decodes as %+v, %v", c.deleted, c.token, back, err)
		}
		zero := slices.Clone(v)
		clear(zero[head : head+16])
		for _, bad := range [][]byte{v[:head+16+7], zero} {
			if _, err := decodeRecord([]byte("t"), []byte("k"), bad); !errors.Is(err, store.ErrRecordDamaged) {
				t.Errorf("%x decodes: %v, want damaged", bad, err)
			}
		}
	}
	if back, err := decodeRecord([]byte("t"), []byte("k"), plainV); err != nil || plainV[0] != 0 || !back.Via.IsZero() || back.ViaHLC != 0 {
		t.Errorf("a record without a via is stored as %x and decodes as %+v, %v", plainV, back, err)
	}
}
