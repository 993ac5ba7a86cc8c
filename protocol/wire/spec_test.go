package wire_test

import (
	"bytes"
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
