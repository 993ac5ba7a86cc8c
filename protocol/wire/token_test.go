package wire_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"plait/protocol/wire"
)

var testToken = wire.Token{Generation: 3, Incarnation: 2, Counter: 41, Home: wire.OriginID{0xf0, 0xf1, 15: 0xff}}

// TestTokenCompare: tokens compare by generation, then incarnation, then counter, then
// home; the zero token is below every other.
func TestTokenCompare(t *testing.T) {
	h1, h2 := wire.OriginID{1}, wire.OriginID{2}
	order := []wire.Token{
		{},
		{Generation: 1, Incarnation: 0, Counter: 9, Home: h2},
		{Generation: 1, Incarnation: 1, Counter: 0, Home: h1},
		{Generation: 1, Incarnation: 1, Counter: 1, Home: h1},
		{Generation: 1, Incarnation: 1, Counter: 1, Home: h2},
		{Generation: 2, Incarnation: 0, Counter: 0, Home: h1},
	}
	for i, a := range order {
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", a, b, got, want)
			}
		}
	}
	if !(wire.Token{}).IsZero() || order[1].IsZero() {
		t.Error("IsZero")
	}
}

// TestTxnFormat2: a transaction with a token encodes in format 2, the token's 40 bytes
// after prev (generation, incarnation, counter big-endian, then the home), inside the
// hashed encoding; it parses back whole; one without a token is format 1 as before.
func TestTxnFormat2(t *testing.T) {
	prev := sha256.Sum256([]byte("prev"))
	txn := wire.Txn{Origin: originA, Seq: 2, HLC: 99, Prev: prev, Token: testToken,
		Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}, {Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k")}}}
	enc, err := txn.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if enc[0] != wire.TxnFormat2 {
		t.Fatalf("format %#x, want 2", enc[0])
	}
	tok := enc[65 : 65+wire.TokenSize]
	if binary.BigEndian.Uint64(tok) != 3 || binary.BigEndian.Uint64(tok[8:]) != 2 || binary.BigEndian.Uint64(tok[16:]) != 41 || !bytes.Equal(tok[24:], testToken.Home[:]) {
		t.Fatalf("token bytes %x", tok)
	}
	untokened := txn
	untokened.Token = wire.Token{}
	enc1, err := untokened.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Format 2 is format 1 with the token inserted after prev.
	if !bytes.Equal(enc1[1:65], enc[1:65]) || !bytes.Equal(enc1[65:], enc[65+wire.TokenSize:]) || enc1[0] != wire.TxnFormat1 {
		t.Fatalf("format 2 %x is not format 1 %x with a token", enc, enc1)
	}
	v, err := wire.ParseTxn(enc)
	if err != nil {
		t.Fatal(err)
	}
	if v.Token != testToken || v.Format() != wire.TxnFormat2 || v.Seq != 2 || v.HLC != 99 || v.Prev != prev || v.NumOps != 2 {
		t.Fatalf("view %+v", v)
	}
	if back := v.Txn(); back.Token != testToken || len(back.Ops) != 2 {
		t.Fatalf("Txn() %+v", back)
	}
	if v.Hash() != sha256.Sum256(enc) {
		t.Fatal("the chain hash is not SHA-256 of the whole encoding")
	}
	v1, err := wire.ParseTxn(enc1)
	if err != nil || !v1.Token.IsZero() || v1.Format() != wire.TxnFormat1 {
		t.Fatalf("format 1: %+v, %v", v1, err)
	}
	// The hash covers the token: another token is another entry.
	other := txn
	other.Token.Counter++
	enc2, _ := other.Encode()
	if sha256.Sum256(enc2) == sha256.Sum256(enc) {
		t.Fatal("the token is outside the hash")
	}
}

// TestTxnFormat2Rules: a format-2 encoding whose token is cut short, of generation 0 or of
// an all-zero home, or that writes more than one (table, key), is bad-txn, parsed and
// encoded alike.
func TestTxnFormat2Rules(t *testing.T) {
	put := func(table, key string) wire.Op {
		return wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key), Value: []byte("v")}
	}
	good := wire.Txn{Origin: originA, Seq: 1, HLC: 5, Token: testToken, Ops: []wire.Op{put("t", "k")}}
	for _, c := range []struct {
		name string
		mod  func(x *wire.Txn)
	}{
		{"generation 0", func(x *wire.Txn) { x.Token.Generation = 0 }},
		{"zero home", func(x *wire.Txn) { x.Token.Home = wire.OriginID{} }},
		{"two keys", func(x *wire.Txn) { x.Ops = append(x.Ops, put("t", "k2")) }},
		{"two tables", func(x *wire.Txn) { x.Ops = append(x.Ops, put("u", "k")) }},
		{"a key again after another", func(x *wire.Txn) { x.Ops = append(x.Ops, put("t", "j"), put("t", "k")) }},
	} {
		x := good
		x.Ops = append([]wire.Op(nil), good.Ops...)
		c.mod(&x)
		if _, err := x.Encode(); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("%s: Encode: %v, want bad-txn", c.name, err)
		}
		// The same bytes, written by hand: ParseTxn refuses them.
		x1 := x
		x1.Token = wire.Token{}
		enc1, err := x1.Encode()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		enc := append([]byte{wire.TxnFormat2}, enc1[1:65]...)
		enc = wire.AppendToken(enc, x.Token)
		enc = append(enc, enc1[65:]...)
		if _, err := wire.ParseTxn(enc); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("%s: ParseTxn: %v, want bad-txn", c.name, err)
		}
	}
	// One key written twice is one key.
	twice := good
	twice.Ops = []wire.Op{put("t", "k"), {Kind: wire.OpDelete, Table: []byte("t"), Key: []byte("k")}}
	enc, err := twice.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ParseTxn(enc); err != nil {
		t.Fatalf("one key twice: %v", err)
	}
	// A token cut short, and a token with no operation count after it.
	for n := 65; n < 65+wire.TokenSize+1; n += 13 {
		if _, err := wire.ParseTxn(enc[:n]); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("cut at %d: %v, want bad-txn", n, err)
		}
	}
}

// TestChunkFormat2: a chunk with a tokened record is of format 2, the record's kind with
// the tokened bit and its token after the origin; its other records and a chunk without
// tokens are encoded as in format 1; it parses back whole; a tokened bit in format 1, a
// token cut short, of generation 0 or of a zero home is bad-chunk.
func TestChunkFormat2(t *testing.T) {
	o := wire.OriginID{7}
	plain := []wire.CopyRecord{{Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: o}, {Key: []byte("b"), Deleted: true, HLC: 9, Origin: o}}
	body1, err := wire.AppendChunk(nil, []byte("t"), plain)
	if err != nil || body1[0] != wire.ChunkFormat1 {
		t.Fatalf("a chunk without tokens: %x, %v", body1, err)
	}
	tokened := append([]wire.CopyRecord(nil), plain...)
	tokened[1].Token = testToken
	body2, err := wire.AppendChunk(nil, []byte("t"), tokened)
	if err != nil {
		t.Fatal(err)
	}
	// Format 2 is format 1 with the format byte, the kind's bit and the token.
	want := append([]byte{wire.ChunkFormat2}, body1[1:len(body1)-16-8-1-1-1]...)
	want = append(want, wire.ChunkTombstone|wire.ChunkTokened, 1, 'b')
	want = binary.BigEndian.AppendUint64(want, 9)
	want = append(want, o[:]...)
	want = wire.AppendToken(want, testToken)
	if !bytes.Equal(body2, want) {
		t.Fatalf("format 2:\n%x\nwant\n%x", body2, want)
	}
	if n := wire.ChunkHeaderSize([]byte("t"), 2) + wire.ChunkSize(&tokened[0]) + wire.ChunkSize(&tokened[1]); n != len(body2) {
		t.Fatalf("sizes add up to %d, the chunk is %d bytes", n, len(body2))
	}
	v, err := wire.ParseChunk(body2)
	if err != nil || v.Format != wire.ChunkFormat2 {
		t.Fatalf("ParseChunk: %+v, %v", v, err)
	}
	it := v.Records()
	r1, _, _ := it.Next()
	r2, _, err := it.Next()
	if err != nil || !r1.Token.IsZero() || r2.Token != testToken || !r2.Deleted || string(r2.Key) != "b" {
		t.Fatalf("records %+v %+v, %v", r1, r2, err)
	}
	tokAt := len(body2) - wire.TokenSize
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"a tokened bit in format 1", append([]byte{wire.ChunkFormat1}, body2[1:]...)},
		{"format 2 with no tokened record", append([]byte{wire.ChunkFormat2}, body1[1:]...)},
		{"a token cut short", body2[:len(body2)-1]},
		{"generation 0", func() []byte { b := bytes.Clone(body2); clear(b[tokAt : tokAt+8]); return b }()},
		{"a zero home", func() []byte { b := bytes.Clone(body2); clear(b[tokAt+24:]); return b }()},
	} {
		if _, err := wire.ParseChunk(c.body); err == nil || rangeCode(err) != wire.CodeBadChunk {
			t.Errorf("%s: %v, want bad-chunk", c.name, err)
		}
	}
	bad := append([]wire.CopyRecord(nil), tokened...)
	bad[1].Token.Generation = 0
	if _, err := wire.AppendChunk(nil, []byte("t"), bad); err == nil {
		t.Error("AppendChunk took a token of generation 0")
	}
}

// TestRangeFormat2: an answer with a tokened record is of format 2, the record encoded as
// in a chunk of format 2 (with its table); one without tokens is format 1 as before; it
// parses back whole; the digest hashes a tokened record with its token and an untokened one
// exactly as before tokens; a tokened bit in format 1, or a token cut short or not a token,
// is bad-range.
func TestRangeFormat2(t *testing.T) {
	o := wire.OriginID{7}
	plain := []wire.RangeRecord{{Table: []byte("t"), Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: o},
		{Table: []byte("t"), Key: []byte("b"), Deleted: true, HLC: 9, Origin: o}}
	// The encoding of a record before tokens: kind, table, key, HLC, origin, value.
	before := func(r wire.RangeRecord) []byte {
		kind := byte(wire.ChunkPut)
		if r.Deleted {
			kind = wire.ChunkTombstone
		}
		b := append([]byte{kind, byte(len(r.Table))}, r.Table...)
		b = append(append(b, byte(len(r.Key))), r.Key...)
		b = binary.BigEndian.AppendUint64(b, uint64(r.HLC))
		b = append(b, r.Origin[:]...)
		if !r.Deleted {
			b = append(append(b, byte(len(r.Value))), r.Value...)
		}
		return b
	}
	h := wire.NewRangeHash()
	var hashed []byte
	for i := range plain {
		if got := wire.AppendRangeRecord(nil, &plain[i]); !bytes.Equal(got, before(plain[i])) {
			t.Errorf("untokened record %d: %x, before tokens %x", i, got, before(plain[i]))
		}
		h.Add(&plain[i])
		hashed = append(hashed, before(plain[i])...)
	}
	if h.Sum() != sha256.Sum256(hashed) {
		t.Error("the digest of untokened records is not what it was before tokens")
	}
	body1, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{}, plain)
	if err != nil || body1[0] != wire.RangeFormat1 {
		t.Fatalf("an answer without tokens: %x, %v", body1, err)
	}
	tokened := append([]wire.RangeRecord(nil), plain...)
	tokened[1].Token = testToken
	rec := wire.AppendRangeRecord(nil, &tokened[1])
	want := append([]byte{wire.ChunkTombstone | wire.ChunkTokened}, before(plain[1])[1:]...)
	want = wire.AppendToken(want, testToken)
	if !bytes.Equal(rec, want) || wire.RangeRecordSize(&tokened[1]) != len(rec) {
		t.Fatalf("tokened record %x (size %d), want %x", rec, wire.RangeRecordSize(&tokened[1]), want)
	}
	ht := wire.NewRangeHash()
	for i := range tokened {
		ht.Add(&tokened[i])
	}
	if ht.Sum() == h.Sum() {
		t.Error("the digest does not hash the token")
	}
	body2, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{}, tokened)
	if err != nil || body2[0] != wire.RangeFormat2 {
		t.Fatalf("an answer with a token: %x, %v", body2, err)
	}
	v, err := wire.ParseRangeRecords(body2)
	if err != nil || v.Format != wire.RangeFormat2 || len(v.Records) != 2 || !v.Records[0].Token.IsZero() || v.Records[1].Token != testToken {
		t.Fatalf("ParseRangeRecords: %+v, %v", v, err)
	}
	tokAt := len(body2) - wire.TokenSize
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"a tokened bit in format 1", append([]byte{wire.RangeFormat1}, body2[1:]...)},
		{"format 2 with no tokened record", append([]byte{wire.RangeFormat2}, body1[1:]...)},
		{"a token cut short", body2[:len(body2)-1]},
		{"generation 0", func() []byte { b := bytes.Clone(body2); clear(b[tokAt : tokAt+8]); return b }()},
		{"a zero home", func() []byte { b := bytes.Clone(body2); clear(b[tokAt+24:]); return b }()},
	} {
		if _, err := wire.ParseRangeRecords(c.body); err == nil || rangeCode(err) != wire.CodeBadRange {
			t.Errorf("%s: %v, want bad-range", c.name, err)
		}
	}
}
