package httpapi

import (
	"testing"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// TestPositionText pins as_of's text (docs/contract.md §24.5): each origin above seq 0 as
// 32 lowercase hex digits, a colon and its seq in decimal, sorted by origin id whatever
// order the vector was built in, joined by commas; the empty vector and one at seq 0 are
// the empty string.
func TestPositionText(t *testing.T) {
	o := func(b byte) wire.OriginID {
		var id wire.OriginID
		for i := range id {
			id[i] = b + byte(i)
		}
		return id
	}
	h := wire.Hash{1}
	for _, c := range []struct {
		v    vector.Vector
		want string
	}{
		{vector.Vector{}, ""},
		{vector.Of(vector.Entry{Origin: o(0x45)}), ""},
		{vector.Of(vector.Entry{Origin: o(0x45), Seq: 9, Hash: h}, vector.Entry{Origin: o(0x01), Seq: 5, Hash: h}, vector.Entry{Origin: o(0x30)}),
			"0102030405060708090a0b0c0d0e0f10:5,45464748494a4b4c4d4e4f5051525354:9"},
		{vector.Of(vector.Entry{Origin: o(0xf0), Seq: 18446744073709551615, Hash: h}), "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:18446744073709551615"},
	} {
		if got := positionText(c.v); got != c.want {
			t.Errorf("positionText: %q, want %q", got, c.want)
		}
	}
}
