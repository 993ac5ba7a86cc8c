package wire_test

import (
	"bytes"
	"crypto/sha256"
	"os"
	"regexp"
	"slices"
	"testing"

	"plait/protocol/prototest"
	"plait/protocol/wire"
)

// readExamples parses the frame examples of SPEC.md.
func readExamples(t *testing.T) []prototest.Example {
	t.Helper()
	spec, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	exs, err := prototest.ParseFrameExamples(string(spec))
	if err != nil {
		t.Fatal(err)
	}
	return exs
}

// TestSpecExamples: every example decodes to exactly one frame of its type and re-encodes
// to the same bytes; every registered type has one; TXN1 examples chain.
func TestSpecExamples(t *testing.T) {
	exs := readExamples(t)
	seen := map[wire.Type]bool{}
	var prevTxn *wire.Txn1
	for _, ex := range exs {
		typ, ok := wire.TypeByName(ex.Name)
		if !ok {
			t.Errorf("SPEC.md:%d: example of unregistered type %s", ex.Line, ex.Name)
			continue
		}
		seen[typ] = true
		frames, err := wire.DecodeMessage(ex.Bytes, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil {
			t.Errorf("SPEC.md:%d: %s does not decode: %v", ex.Line, ex.Name, err)
			continue
		}
		if len(frames) != 1 || frames[0].Type != typ || frames[0].Value == nil {
			t.Errorf("SPEC.md:%d: %s decodes to %d frames", ex.Line, ex.Name, len(frames))
			continue
		}
		re, rerr := wire.EncodeMessage(frames)
		if rerr != nil || !bytes.Equal(re, ex.Bytes) {
			t.Errorf("SPEC.md:%d: %s re-encodes to %x (%v)", ex.Line, ex.Name, re, rerr)
		}
		if tx, ok := frames[0].Value.(*wire.Txn1); ok {
			if prevTxn != nil && prevTxn.Txn.Origin == tx.Txn.Origin {
				enc, _ := prevTxn.Txn.Encode()
				v, _ := wire.ParseTxn(enc)
				if tx.Txn.Seq != prevTxn.Txn.Seq+1 || tx.Txn.Prev != v.Hash() {
					t.Errorf("SPEC.md:%d: TXN1 example does not extend the previous one's chain", ex.Line)
				}
			}
			prevTxn = tx
		}
	}
	for _, typ := range wire.Registered() {
		if !seen[typ] {
			t.Errorf("frame type %s (0x%02x) has no example in SPEC.md", typ, uint8(typ))
		}
	}
}

// TestSpecErrorCodes: the code tables of SPEC.md list exactly the codes of this build, the
// transport codes and the request codes included, each with its class.
func TestSpecErrorCodes(t *testing.T) {
	spec, err := os.ReadFile("../SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| ([a-z-]+) \\|")
	documented := map[wire.Code]wire.Class{}
	for _, m := range row.FindAllStringSubmatch(string(spec), -1) {
		documented[wire.Code(m[1])] = wire.Class(m[2])
	}
	for _, c := range slices.Concat(wire.Codes(), wire.TransportCodes(), wire.RequestCodes()) {
		cl, _ := wire.ClassOf(c)
		if got, ok := documented[c]; !ok {
			t.Errorf("code %s is not in SPEC.md's tables", c)
		} else if got != cl {
			t.Errorf("code %s: SPEC.md says class %s, the code says %s", c, got, cl)
		}
	}
	for c := range documented {
		if _, ok := wire.ClassOf(c); !ok {
			t.Errorf("SPEC.md lists code %s, which this build does not define", c)
		}
	}
}

// TestSpecExampleChainsAndDigests: SPEC.md's DATA examples carry their encoding's chain
// hash and chain one after another (the second of transaction format 2, its token the one
// the text gives; the third of transaction format 3, its leaf block the one the text
// gives); each RANGEDIGEST example's digest is that of the records of the next
// RANGERECORDS example that holds records (a tokened record hashed with its token, a via
// record without its via block); the chunk of format 2 holds k1 as the DATA example of
// format 2 wrote it; one chunk example is of format 3.
func TestSpecExampleChainsAndDigests(t *testing.T) {
	var datas []*wire.Data
	var digest *wire.RangeDigest
	var chunk2 *wire.Chunk
	digests, via := 0, 0
	for _, ex := range readExamples(t) {
		frames, err := wire.DecodeMessage(ex.Bytes, wire.DefaultMaxMessage, wire.MaxFrameBody)
		if err != nil || len(frames) != 1 {
			t.Fatalf("SPEC.md:%d: %v", ex.Line, err)
		}
		switch b := frames[0].Value.(type) {
		case *wire.Data:
			enc, err := b.Txn.Encode()
			if err != nil || b.Hash != sha256.Sum256(enc) {
				t.Errorf("SPEC.md:%d: DATA's chain hash is not SHA-256 of its encoding (%v)", ex.Line, err)
			}
			if n := len(datas); n > 0 && (b.Txn.Seq != datas[n-1].Txn.Seq+1 || b.Txn.Prev != datas[n-1].Hash) {
				t.Errorf("SPEC.md:%d: DATA example does not extend the previous one's chain", ex.Line)
			}
			datas = append(datas, b)
		case *wire.RangeDigest:
			digest = b
		case *wire.RangeAnswer:
			if b.Equal || digest == nil {
				continue
			}
			h := wire.NewRangeHash()
			for i := range b.Records {
				h.Add(&b.Records[i])
			}
			if h.Sum() != digest.Digest || h.Count != digest.Count {
				t.Errorf("SPEC.md:%d: the records hash to %s (%d), the RANGEDIGEST before says %s (%d)", ex.Line, h.Sum(), h.Count, digest.Digest, digest.Count)
			}
			digest = nil
			digests++
		case *wire.Chunk:
			for _, r := range b.Records {
				if !r.Token.IsZero() {
					chunk2 = b
				}
				if !r.Via.IsZero() {
					via++
				}
			}
		}
	}
	if via != 1 {
		t.Errorf("%d CHUNK examples' records carry a via block, want 1 (chunk format 3)", via)
	}
	if digests != 3 {
		t.Errorf("%d RANGEDIGEST examples checked against records, want 3 (formats 1, 2 and 3)", digests)
	}
	want := wire.Token{Generation: 3, Incarnation: 1, Counter: 7,
		Home: wire.OriginID{0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff}}
	if len(datas) != 3 || !datas[0].Txn.Token.IsZero() || datas[1].Txn.Token != want {
		t.Fatalf("DATA examples: %d, want one of format 1, one of format 2 under %v and one of format 3", len(datas), want)
	}
	// The format-3 example: the leaf block the text gives, its leaf HLC 1 ms below the
	// entry's, encoded in format 3.
	leaf := wire.LeafBlock{Origin: wire.OriginID{0xe0, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xeb, 0xec, 0xed, 0xee, 0xef},
		Seq: 5, HLC: datas[2].Txn.HLC - 2 - 1<<16}
	for i := range leaf.Hash {
		leaf.Hash[i] = 0xc0 + byte(i)
	}
	if tx3 := datas[2].Txn; tx3.Leaf == nil || *tx3.Leaf != leaf || !tx3.Token.IsZero() {
		t.Errorf("the DATA example of format 3 carries the leaf block %+v, want %+v", tx3.Leaf, leaf)
	} else if enc, _ := tx3.Encode(); enc[0] != wire.TxnFormat3 {
		t.Errorf("the DATA example of format 3 encodes as format %d", enc[0])
	}
	tx := datas[1].Txn
	if chunk2 == nil || chunk2.Records[0].Token != tx.Token || chunk2.Records[0].HLC != tx.HLC || chunk2.Records[0].Origin != tx.Origin ||
		!bytes.Equal(chunk2.Records[0].Value, tx.Ops[0].Value) {
		t.Errorf("the CHUNK example of format 2 does not hold k1 as the DATA example of format 2 wrote it: %+v", chunk2)
	}
}
