package wire_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"plait/protocol/wire"
)

// Chunk and range format 3 (docs/design.md §27.1): a record written by a hub's format-3
// entry carries its delivering identity in a via block, which RangeHash leaves out.

var (
	viaLeaf = wire.OriginID{0x1e}
	viaHub  = wire.OriginID{0x4b}
)

// TestChunkFormat3: a chunk with a via record is of format 3, the record's kind with the
// via bit and the via block after its version (and its token, in a record of another
// chunk); its other records are encoded as in format 2; it parses back whole; a via bit in
// format 1 or 2, format 3 with no via record, a via block cut short, of a zero origin, of
// the record's own origin, not above the record's HLC, or beside a token is bad-chunk.
func TestChunkFormat3(t *testing.T) {
	o := wire.OriginID{7}
	recs := []wire.CopyRecord{{Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: o, Token: testToken},
		{Key: []byte("b"), Deleted: true, HLC: 9, Origin: viaLeaf}}
	body2, err := wire.AppendChunk(nil, []byte("t"), recs)
	if err != nil || body2[0] != wire.ChunkFormat2 {
		t.Fatalf("a chunk with a token and no via: %x, %v", body2, err)
	}
	recs[1].Via, recs[1].ViaHLC = viaHub, 12
	body3, err := wire.AppendChunk(nil, []byte("t"), recs)
	if err != nil {
		t.Fatal(err)
	}
	// Format 3 is format 2 with the format byte, the kind's bit and the via block.
	want := append([]byte{wire.ChunkFormat3}, body2[1:len(body2)-(1+1+1+8+16)]...)
	want = append(want, wire.ChunkTombstone|wire.ChunkVia, 1, 'b')
	want = binary.BigEndian.AppendUint64(want, 9)
	want = append(want, viaLeaf[:]...)
	want = append(want, viaHub[:]...)
	want = binary.BigEndian.AppendUint64(want, 12)
	if !bytes.Equal(body3, want) {
		t.Fatalf("format 3:\n%x\nwant\n%x", body3, want)
	}
	if n := wire.ChunkHeaderSize([]byte("t"), 2) + wire.ChunkSize(&recs[0]) + wire.ChunkSize(&recs[1]); n != len(body3) {
		t.Fatalf("sizes add up to %d, the chunk is %d bytes", n, len(body3))
	}
	v, err := wire.ParseChunk(body3)
	if err != nil || v.Format != wire.ChunkFormat3 {
		t.Fatalf("ParseChunk: %+v, %v", v, err)
	}
	it := v.Records()
	r1, _, _ := it.Next()
	r2, _, err := it.Next()
	if err != nil || r1.Token != testToken || !r1.Via.IsZero() || r2.Via != viaHub || r2.ViaHLC != 12 || !r2.Token.IsZero() || r2.Origin != viaLeaf {
		t.Fatalf("records %+v %+v, %v", r1, r2, err)
	}
	viaAt := len(body3) - wire.ViaBlockSize
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"a via bit in format 1", append([]byte{wire.ChunkFormat1}, body3[1:]...)},
		{"a via bit in format 2", append([]byte{wire.ChunkFormat2}, body3[1:]...)},
		{"format 3 with no via record", append([]byte{wire.ChunkFormat3}, body2[1:]...)},
		{"format 4", append([]byte{4}, body3[1:]...)},
		{"a via block cut short", body3[:len(body3)-1]},
		{"a zero via origin", func() []byte { b := bytes.Clone(body3); clear(b[viaAt : viaAt+16]); return b }()},
		{"the record's own origin", func() []byte { b := bytes.Clone(body3); copy(b[viaAt:], viaLeaf[:]); return b }()},
		{"a via HLC at the record's", func() []byte { b := bytes.Clone(body3); b[len(b)-1] = 9; return b }()},
	} {
		if _, err := wire.ParseChunk(c.body); err == nil || rangeCode(err) != wire.CodeBadChunk {
			t.Errorf("%s: %v, want bad-chunk", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		edit func(r *wire.CopyRecord)
	}{
		{"a via HLC below the record's", func(r *wire.CopyRecord) { r.ViaHLC = 8 }},
		{"a via of the record's origin", func(r *wire.CopyRecord) { r.Via = r.Origin }},
		{"a via beside a token", func(r *wire.CopyRecord) { r.Token = testToken }},
	} {
		bad := append([]wire.CopyRecord(nil), recs...)
		c.edit(&bad[1])
		if _, err := wire.AppendChunk(nil, []byte("t"), bad); err == nil || rangeCode(err) != wire.CodeBadChunk {
			t.Errorf("AppendChunk of %s: %v, want bad-chunk", c.name, err)
		}
	}
}

// TestRangeFormat3: an answer with a via record is of format 3, the record encoded as in
// a chunk of format 3 (with its table); it parses back whole; the digest hashes every
// record without its via block, so a record delivered by another hub, or by none, hashes
// alike; a via bit below format 3, format 3 with no via record, or a via block that breaks
// its rules is bad-range.
func TestRangeFormat3(t *testing.T) {
	plain := []wire.RangeRecord{{Table: []byte("t"), Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: viaLeaf},
		{Table: []byte("t"), Key: []byte("b"), Deleted: true, HLC: 9, Origin: viaLeaf}}
	body1, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{}, plain)
	if err != nil || body1[0] != wire.RangeFormat1 {
		t.Fatalf("an answer without via: %x, %v", body1, err)
	}
	via := append([]wire.RangeRecord(nil), plain...)
	via[0].Via, via[0].ViaHLC = viaHub, 12
	other := append([]wire.RangeRecord(nil), plain...)
	other[0].Via, other[0].ViaHLC = wire.OriginID{0x4c}, 30
	rec := wire.AppendRangeRecord(nil, &via[0])
	want := append([]byte{wire.ChunkPut | wire.ChunkVia}, wire.AppendRangeRecord(nil, &plain[0])[1:1+1+1+1+1+8+16]...)
	want = append(want, viaHub[:]...)
	want = binary.BigEndian.AppendUint64(want, 12)
	want = append(want, 1, 'v')
	if !bytes.Equal(rec, want) || wire.RangeRecordSize(&via[0]) != len(rec) {
		t.Fatalf("via record %x (size %d), want %x", rec, wire.RangeRecordSize(&via[0]), want)
	}
	sum := func(rs []wire.RangeRecord) wire.Hash {
		h := wire.NewRangeHash()
		for i := range rs {
			h.Add(&rs[i])
		}
		return h.Sum()
	}
	if sum(via) != sum(plain) || sum(other) != sum(plain) {
		t.Error("the digest of a range depends on its records' via blocks")
	}
	body3, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{}, via)
	if err != nil || body3[0] != wire.RangeFormat3 {
		t.Fatalf("an answer with a via record: %x, %v", body3, err)
	}
	v, err := wire.ParseRangeRecords(body3)
	if err != nil || v.Format != wire.RangeFormat3 || len(v.Records) != 2 || v.Records[0].Via != viaHub || v.Records[0].ViaHLC != 12 ||
		string(v.Records[0].Value) != "v" || !v.Records[1].Via.IsZero() {
		t.Fatalf("ParseRangeRecords: %+v, %v", v, err)
	}
	viaAt := len(body3) - (1 + 1 + 1 + 1 + 1 + 8 + 16) - 2 - wire.ViaBlockSize // before the tombstone and the value
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"a via bit in format 1", append([]byte{wire.RangeFormat1}, body3[1:]...)},
		{"a via bit in format 2", append([]byte{wire.RangeFormat2}, body3[1:]...)},
		{"format 3 with no via record", append([]byte{wire.RangeFormat3}, body1[1:]...)},
		{"format 4", append([]byte{4}, body3[1:]...)},
		{"a zero via origin", func() []byte { b := bytes.Clone(body3); clear(b[viaAt : viaAt+16]); return b }()},
		{"a via HLC below the record's", func() []byte { b := bytes.Clone(body3); clear(b[viaAt+16 : viaAt+24]); return b }()},
	} {
		if _, err := wire.ParseRangeRecords(c.body); err == nil || rangeCode(err) != wire.CodeBadRange {
			t.Errorf("%s: %v, want bad-range", c.name, err)
		}
	}
}
