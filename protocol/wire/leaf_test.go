package wire_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"plait/protocol/wire"
)

// Transaction format 3 (docs/design.md §27): a leaf's transaction a hub re-originated, its
// leaf block after prev inside the hashed encoding.

var testLeaf = wire.LeafBlock{Origin: wire.OriginID{0xe0, 15: 0xef}, Seq: 5, HLC: 90, Hash: sha256.Sum256([]byte("leaf entry"))}

// leafTxn is a format-3 transaction of originA at HLC 99 carrying testLeaf.
func leafTxn() wire.Txn {
	l := testLeaf
	return wire.Txn{Origin: originA, Seq: 2, HLC: 99, Prev: sha256.Sum256([]byte("prev")), Leaf: &l,
		Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}, {Kind: wire.OpDelete, Table: []byte("u"), Key: []byte("j")}}}
}

// TestTxnFormat3: a transaction with a leaf block encodes in format 3, the block's 64 bytes
// after prev (leaf origin, leaf seq and leaf HLC big-endian, leaf hash), inside the hashed
// encoding; it is format 1 with the block inserted; it parses back whole, through Txn too;
// a format-1 view has no leaf block.
func TestTxnFormat3(t *testing.T) {
	txn := leafTxn()
	enc, err := txn.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if enc[0] != wire.TxnFormat3 {
		t.Fatalf("format %#x, want 3", enc[0])
	}
	blk := enc[65 : 65+wire.LeafBlockSize]
	if !bytes.Equal(blk[:16], testLeaf.Origin[:]) || binary.BigEndian.Uint64(blk[16:]) != 5 || binary.BigEndian.Uint64(blk[24:]) != 90 ||
		!bytes.Equal(blk[32:], testLeaf.Hash[:]) {
		t.Fatalf("leaf block bytes %x", blk)
	}
	plain := txn
	plain.Leaf = nil
	enc1, err := plain.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if enc1[0] != wire.TxnFormat1 || !bytes.Equal(enc1[1:65], enc[1:65]) || !bytes.Equal(enc1[65:], enc[65+wire.LeafBlockSize:]) {
		t.Fatalf("format 3 %x is not format 1 %x with a leaf block", enc, enc1)
	}
	v, err := wire.ParseTxn(enc)
	if err != nil {
		t.Fatal(err)
	}
	if v.Format() != wire.TxnFormat3 || v.Leaf != testLeaf || v.Origin != originA || v.Seq != 2 || v.HLC != 99 || v.NumOps != 2 || !v.Token.IsZero() {
		t.Fatalf("view %+v", v)
	}
	if back := v.Txn(); back.Leaf == nil || *back.Leaf != testLeaf || len(back.Ops) != 2 {
		t.Fatalf("Txn() %+v", back)
	}
	back := v.Txn()
	if again, err := back.Encode(); err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("re-encoded %x, %v; want %x", again, err, enc)
	}
	if v.Hash() != sha256.Sum256(enc) {
		t.Fatal("the chain hash is not SHA-256 of the whole encoding")
	}
	v1, err := wire.ParseTxn(enc1)
	if err != nil || v1.Format() != wire.TxnFormat1 || v1.Leaf != (wire.LeafBlock{}) || v1.Txn().Leaf != nil {
		t.Fatalf("format 1: %+v, %v", v1, err)
	}
	// The hash covers the leaf block: another leaf seq is another entry.
	other := leafTxn()
	other.Leaf.Seq++
	enc2, _ := other.Encode()
	if sha256.Sum256(enc2) == sha256.Sum256(enc) {
		t.Fatal("the leaf block is outside the hash")
	}
	// A receiver that takes formats up to 2 answers unsupported-txn, judged on the format
	// byte, whatever the block holds.
	broken := append([]byte(nil), enc...)
	clear(broken[65 : 65+16])
	for _, b := range [][]byte{enc, broken} {
		if _, err := wire.ParseTxnUpTo(b, wire.TxnFormat2); err == nil || wire.TxnErrorCode(err) != wire.CodeUnsupportedTxn {
			t.Errorf("ParseTxnUpTo(format 2) of format 3: %v, want unsupported-txn", err)
		}
	}
}

// TestTxnFormat3Rules: a leaf block of a zero leaf origin, of the entry's own origin, at
// leaf seq 0, at leaf HLC 0 or not below the entry's, or of a zero leaf hash, is bad-txn,
// encoded and parsed alike; so is a format-3 transaction with a token, and an encoding cut
// inside the block or right after it.
func TestTxnFormat3Rules(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(l *wire.LeafBlock)
	}{
		{"zero leaf origin", func(l *wire.LeafBlock) { l.Origin = wire.OriginID{} }},
		{"the leaf is the entry's origin", func(l *wire.LeafBlock) { l.Origin = originA }},
		{"leaf seq 0", func(l *wire.LeafBlock) { l.Seq = 0 }},
		{"leaf HLC 0", func(l *wire.LeafBlock) { l.HLC = 0 }},
		{"leaf HLC equal to the entry's", func(l *wire.LeafBlock) { l.HLC = 99 }},
		{"leaf HLC above the entry's", func(l *wire.LeafBlock) { l.HLC = 100 }},
		{"zero leaf hash", func(l *wire.LeafBlock) { l.Hash = wire.Hash{} }},
	} {
		x := leafTxn()
		c.mod(x.Leaf)
		if _, err := x.Encode(); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("%s: Encode: %v, want bad-txn", c.name, err)
		}
		// The same bytes, written by hand: ParseTxn refuses them.
		gt := leafTxn()
		good, err := gt.Encode()
		if err != nil {
			t.Fatal(err)
		}
		enc := append([]byte(nil), good[:65]...)
		enc = append(enc, x.Leaf.Origin[:]...)
		enc = binary.BigEndian.AppendUint64(enc, x.Leaf.Seq)
		enc = binary.BigEndian.AppendUint64(enc, uint64(x.Leaf.HLC))
		enc = append(enc, x.Leaf.Hash[:]...)
		enc = append(enc, good[65+wire.LeafBlockSize:]...)
		if _, err := wire.ParseTxn(enc); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("%s: ParseTxn: %v, want bad-txn", c.name, err)
		}
	}
	tokened := leafTxn()
	tokened.Token = testToken
	if _, err := tokened.Encode(); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
		t.Errorf("a format-3 transaction with a token: Encode: %v, want bad-txn", err)
	}
	whole := leafTxn()
	enc, err := whole.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{65, 66, 65 + 16, 65 + 32, 65 + wire.LeafBlockSize - 1, 65 + wire.LeafBlockSize} {
		if _, err := wire.ParseTxn(enc[:n]); err == nil || wire.TxnErrorCode(err) != wire.CodeBadTxn {
			t.Errorf("cut at %d: %v, want bad-txn", n, err)
		}
	}
}
