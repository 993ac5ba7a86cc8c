package wire_test

import (
	"bytes"
	"testing"

	"plait/protocol/wire"
)

// TestRangeDigestBounds: the count and the keys of a RANGEDIGEST at their bounds decode,
// one past is bad-field.
func TestRangeDigestBounds(t *testing.T) {
	key := bytes.Repeat([]byte("k"), wire.MaxCopyKey)
	for _, c := range []struct {
		name string
		d    wire.RangeDigest
		ok   bool
	}{
		{"count at the bound", wire.RangeDigest{Count: wire.MaxRangeCount}, true},
		{"count one past", wire.RangeDigest{Count: wire.MaxRangeCount + 1}, false},
		{"keys at the bound", wire.RangeDigest{AfterTable: []byte("a"), AfterKey: key, ThroughTable: []byte("b"), ThroughKey: key}, true},
		{"an after key one past", wire.RangeDigest{AfterTable: []byte("a"), AfterKey: append(key, 'k')}, false},
		{"a through key one past", wire.RangeDigest{ThroughTable: []byte("b"), ThroughKey: append(key, 'k')}, false},
		{"a table without a key", wire.RangeDigest{AfterTable: []byte("a")}, false},
		{"a bad table name", wire.RangeDigest{ThroughTable: []byte("a/b"), ThroughKey: []byte("k")}, false},
		{"through not above after", wire.RangeDigest{AfterTable: []byte("b"), AfterKey: []byte("k"), ThroughTable: []byte("b"), ThroughKey: []byte("k")}, false},
	} {
		body, err := c.d.AppendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, werr := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: wire.TypeRangeDigest, Length: uint32(len(body))}, Body: body})
		if c.ok != (werr == nil) {
			t.Errorf("%s: %v", c.name, werr)
		}
		if werr != nil && werr.Code != wire.CodeBadField {
			t.Errorf("%s: code %s, want bad-field", c.name, werr.Code)
		}
	}
}

// TestRangeRecordsTruncated: every prefix and every one-byte change of a valid body is
// refused with bad-range or parses to something that re-encodes to itself; none panics.
func TestRangeRecordsTruncated(t *testing.T) {
	var o wire.OriginID
	o[0] = 1
	body, err := wire.AppendRangeRecords(nil, false, wire.RangePoint{Table: []byte("u"), Key: []byte("z")}, []wire.RangeRecord{
		{Table: []byte("t"), Key: []byte("a"), Value: []byte("v"), HLC: 5, Origin: o},
		{Table: []byte("u"), Key: []byte("b"), Deleted: true, HLC: 6, Origin: o}})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(body) {
		if _, err := wire.ParseRangeRecords(body[:n]); err == nil || rangeCode(err) != wire.CodeBadRange {
			t.Errorf("a body cut to %d bytes: %v, want bad-range", n, err)
		}
		// Decoded as a frame (tools, the ABI's DECODE), the code is the same.
		if _, werr := wire.DecodeBody(wire.Frame{Header: wire.Header{Type: wire.TypeRangeRecords, Length: uint32(n)}, Body: body[:n]}); werr == nil || werr.Code != wire.CodeBadRange {
			t.Errorf("a body cut to %d bytes, decoded as a frame: %v, want bad-range", n, werr)
		}
	}
	for i := range body {
		for _, b := range []byte{0x00, 0x7f, 0x80, 0xff} {
			m := bytes.Clone(body)
			m[i] = b
			v, err := wire.ParseRangeRecords(m)
			if err != nil {
				if rangeCode(err) != wire.CodeBadRange {
					t.Errorf("byte %d = %#x: code %s", i, b, rangeCode(err))
				}
				continue
			}
			re, err := wire.AppendRangeRecords(nil, v.Equal, v.Through, v.Records)
			if err != nil || !bytes.Equal(re, m) {
				t.Errorf("byte %d = %#x: parsed, re-encodes to %x (%v)", i, b, re, err)
			}
		}
	}
}

func rangeCode(err error) wire.Code {
	if c, ok := err.(interface{ Code() wire.Code }); ok {
		return c.Code()
	}
	return ""
}
