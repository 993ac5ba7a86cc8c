package wire_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"plait/protocol/wire"
)

// chunkBytes builds a CHUNK body by hand, so that a test can break any rule AppendChunk
// keeps.
type chunkBytes struct {
	format byte
	table  []byte
	count  int // -1: the number of records
	recs   []chunkRec
	tail   []byte
}

type chunkRec struct {
	kind   byte
	key    []byte
	hlc    uint64
	origin wire.OriginID
	value  []byte
}

func (c chunkBytes) enc() []byte {
	b := []byte{c.format}
	b = binary.AppendUvarint(b, uint64(len(c.table)))
	b = append(b, c.table...)
	n := c.count
	if n < 0 {
		n = len(c.recs)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, r := range c.recs {
		b = append(b, r.kind)
		b = binary.AppendUvarint(b, uint64(len(r.key)))
		b = append(b, r.key...)
		b = binary.BigEndian.AppendUint64(b, r.hlc)
		b = append(b, r.origin[:]...)
		if r.kind == wire.ChunkPut {
			b = binary.AppendUvarint(b, uint64(len(r.value)))
			b = append(b, r.value...)
		}
	}
	return append(b, c.tail...)
}

func okChunk() chunkBytes {
	return chunkBytes{format: 1, table: []byte("t"), count: -1, recs: []chunkRec{
		{kind: wire.ChunkPut, key: []byte("a"), hlc: 9, origin: originA, value: []byte("v")},
		{kind: wire.ChunkTombstone, key: []byte("b"), hlc: 10, origin: originB},
	}}
}

func chunkWith(f func(*chunkBytes)) []byte {
	c := okChunk()
	c.recs = append([]chunkRec(nil), c.recs...)
	f(&c)
	return c.enc()
}

// TestChunkBody: CHUNK's binary body (SPEC.md, "CHUNK"): the hand-built encoding parses to
// what AppendChunk writes; each rule broken is bad-chunk, in ParseChunk and in the frame
// decoder; CHUNK names a channel, never 0, and has no body bound but the frame limit.
func TestChunkBody(t *testing.T) {
	good := okChunk().enc()
	app, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{
		{Key: []byte("a"), Value: []byte("v"), HLC: 9, Origin: originA},
		{Key: []byte("b"), Deleted: true, HLC: 10, Origin: originB},
	})
	if err != nil || !bytes.Equal(app, good) {
		t.Fatalf("AppendChunk = %x, %v\nwant %x", app, err, good)
	}
	v, err := wire.ParseChunk(good)
	if err != nil || string(v.Table) != "t" || v.Count != 2 || string(v.First) != "a" || string(v.Last) != "b" {
		t.Fatalf("ParseChunk: %+v %v", v, err)
	}
	it := v.Records()
	r1, ok1, e1 := it.Next()
	r2, ok2, e2 := it.Next()
	_, ok3, e3 := it.Next()
	if !ok1 || !ok2 || ok3 || e1 != nil || e2 != nil || e3 != nil ||
		string(r1.Value) != "v" || r1.Deleted || r1.HLC != 9 || r1.Origin != originA ||
		!r2.Deleted || r2.Value != nil || r2.HLC != 10 || r2.Origin != originB {
		t.Fatalf("records %+v %+v", r1, r2)
	}
	if n := wire.ChunkHeaderSize([]byte("t"), 2) + wire.ChunkSize(&wire.CopyRecord{Key: []byte("a"), Value: []byte("v")}) +
		wire.ChunkSize(&wire.CopyRecord{Key: []byte("b"), Deleted: true}); n != len(good) {
		t.Fatalf("sizes add up to %d, the chunk is %d bytes", n, len(good))
	}

	for _, c := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"format 0", chunkWith(func(c *chunkBytes) { c.format = 0 })},
		{"format 3", chunkWith(func(c *chunkBytes) { c.format = 3 })},
		{"no table", chunkWith(func(c *chunkBytes) { c.table = nil })},
		{"a table name with a space", chunkWith(func(c *chunkBytes) { c.table = []byte("a b") })},
		{"a table name of 65 bytes", chunkWith(func(c *chunkBytes) { c.table = bytes.Repeat([]byte("t"), 65) })},
		{"no record", chunkWith(func(c *chunkBytes) { c.recs = nil })},
		{"a count above the records", chunkWith(func(c *chunkBytes) { c.count = 3 })},
		{"a count below the records", chunkWith(func(c *chunkBytes) { c.count = 1 })},
		{"a huge count", chunkWith(func(c *chunkBytes) { c.count = 1 << 40 })},
		{"trailing bytes", chunkWith(func(c *chunkBytes) { c.tail = []byte{0} })},
		{"kind 0", chunkWith(func(c *chunkBytes) { c.recs[0].kind = 0 })},
		{"kind 3", chunkWith(func(c *chunkBytes) { c.recs[1].kind = 3 })},
		{"an empty key", chunkWith(func(c *chunkBytes) { c.recs[0].key = nil })},
		{"keys descending", chunkWith(func(c *chunkBytes) { c.recs[0].key = []byte("c") })},
		{"a key twice", chunkWith(func(c *chunkBytes) { c.recs[1].key = []byte("a") })},
		{"an all-zero origin", chunkWith(func(c *chunkBytes) { c.recs[1].origin = wire.OriginID{} })},
		{"a value running past the end", func() []byte { b := chunkWith(func(c *chunkBytes) { c.recs = c.recs[:1] }); return b[:len(b)-1] }()},
		{"a version cut short", good[:len(good)-3]},
		{"a non-minimal table length", append([]byte{1, 0x81, 0x00}, good[2:]...)},
	} {
		if _, err := wire.ParseChunk(c.body); err == nil {
			t.Errorf("ParseChunk of %s: accepted", c.name)
		}
		_, err := decode(cat(pingFrame, raw(wire.TypeChunk, 0, 2, c.body), pingFrame))
		if err == nil || err.Code != wire.CodeBadChunk || err.Class != wire.ClassProtocol || err.Frame != wire.TypeChunk || err.Offset != len(pingFrame) {
			t.Errorf("CHUNK of %s: %v, want bad-chunk at %d", c.name, err, len(pingFrame))
		}
	}
	// AppendChunk refuses what a receiver refuses, writing nothing a peer would see.
	for _, c := range []struct {
		name  string
		table string
		recs  []wire.CopyRecord
	}{
		{"no record", "t", nil},
		{"a bad table", "a b", []wire.CopyRecord{{Key: []byte("a"), Origin: originA}}},
		{"an empty key", "t", []wire.CopyRecord{{Origin: originA}}},
		{"a zero origin", "t", []wire.CopyRecord{{Key: []byte("a")}}},
		{"keys out of order", "t", []wire.CopyRecord{{Key: []byte("b"), Origin: originA}, {Key: []byte("a"), Origin: originA}}},
	} {
		if _, err := wire.AppendChunk(nil, []byte(c.table), c.recs); err == nil {
			t.Errorf("AppendChunk of %s: accepted", c.name)
		}
	}
	// Channel 0 is bad-channel; any flag is bad-flags; a body over 64 KiB decodes.
	if _, err := decode(raw(wire.TypeChunk, 0, 0, good)); err == nil || err.Code != wire.CodeBadChannel {
		t.Errorf("CHUNK on channel 0: %v", err)
	}
	if _, err := decode(raw(wire.TypeChunk, 1, 2, good)); err == nil || err.Code != wire.CodeBadFlags {
		t.Errorf("CHUNK with flag 1: %v", err)
	}
	big, err := wire.AppendChunk(nil, []byte("t"), []wire.CopyRecord{{Key: []byte("k"), Value: make([]byte, 100<<10), Origin: originA}})
	if err != nil {
		t.Fatal(err)
	}
	if frames, err := decode(raw(wire.TypeChunk, 0, 7, big)); err != nil || frames[0].Channel != 7 {
		t.Errorf("a CHUNK of %d bytes: %v", len(big), err)
	}
}

// TestCopyFieldRules: the rules of COPY, COPYBEGIN, COPYEND and COPYABORT (bad-field).
func TestCopyFieldRules(t *testing.T) {
	pos := func(o wire.OriginID, seq uint64, h wire.Hash) wire.CopyPosition {
		return wire.CopyPosition{Origin: o, Seq: seq, Hash: h}
	}
	for _, c := range []struct {
		name string
		body wire.Body
		ok   bool
	}{
		{"COPY from the start", &wire.Copy{Channel: 1}, true},
		{"COPY after a point", &wire.Copy{Channel: 1, Table: []byte("t"), Key: []byte("k")}, true},
		{"COPY after a key of MaxCopyKey bytes", &wire.Copy{Channel: 1, Table: []byte("t"), Key: make([]byte, wire.MaxCopyKey)}, true},
		{"COPY after a key one byte longer", &wire.Copy{Channel: 1, Table: []byte("t"), Key: make([]byte, wire.MaxCopyKey+1)}, false},
		{"COPY on channel 0", &wire.Copy{}, false},
		{"COPY after a table alone", &wire.Copy{Channel: 1, Table: []byte("t")}, false},
		{"COPY after a key alone", &wire.Copy{Channel: 1, Key: []byte("k")}, false},
		{"COPY after a bad table", &wire.Copy{Channel: 1, Table: []byte("a/b"), Key: []byte("k")}, false},
		{"COPYBEGIN valid", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(originA, 1, hash9), pos(originB, 2, hash9)}}, true},
		{"COPYBEGIN on channel 0", &wire.CopyBegin{}, false},
		{"COPYBEGIN at seq 0", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(originA, 0, wire.Hash{})}}, false},
		{"COPYBEGIN without a hash", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(originA, 1, wire.Hash{})}}, false},
		{"COPYBEGIN of the zero origin", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(wire.OriginID{}, 1, hash9)}}, false},
		{"COPYBEGIN out of order", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(originB, 1, hash9), pos(originA, 1, hash9)}}, false},
		{"COPYBEGIN with an origin twice", &wire.CopyBegin{Channel: 1, Positions: []wire.CopyPosition{pos(originA, 1, hash9), pos(originA, 2, hash9)}}, false},
		{"COPYEND valid", &wire.CopyEnd{Channel: 1, Records: 3}, true},
		{"COPYEND on channel 0", &wire.CopyEnd{Records: 3}, false},
		{"COPYABORT valid", &wire.CopyAbort{Channel: 1, Code: "going-away", Class: "transient"}, true},
		{"COPYABORT with a newer code", &wire.CopyAbort{Channel: 1, Side: 1, Code: "some-new-code", Class: "transient"}, true},
		{"COPYABORT on channel 0", &wire.CopyAbort{Code: "going-away", Class: "transient"}, false},
		{"COPYABORT side 2", &wire.CopyAbort{Channel: 1, Side: 2, Code: "going-away", Class: "transient"}, false},
		{"COPYABORT with a bad code", &wire.CopyAbort{Channel: 1, Code: "Going Away", Class: "transient"}, false},
		{"COPYABORT with a message of 1025 bytes", &wire.CopyAbort{Channel: 1, Code: "going-away", Class: "transient", Message: strings.Repeat("m", 1025)}, false},
	} {
		enc, err := wire.AppendFrame(nil, 0, 0, c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, derr := decode(enc)
		if c.ok != (derr == nil) || (derr != nil && derr.Code != wire.CodeBadField) {
			t.Errorf("%s: %v, want ok=%v (bad-field otherwise)", c.name, derr, c.ok)
		}
	}
}
