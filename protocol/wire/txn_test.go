package wire_test

import (
	"strings"
	"testing"

	"plait/protocol/wire"
)

// TestUnknownKindFirst: an operation of an unknown kind is unsupported-txn naming the
// origin and seq, even when nothing follows its kind byte (its layout is unknown), and kind
// 0 stays bad-txn.
func TestUnknownKindFirst(t *testing.T) {
	base := wire.Txn{Origin: wire.OriginID{7}, Seq: 1, HLC: 1, Ops: []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k")}}}
	enc, err := base.Encode()
	if err != nil {
		t.Fatal(err)
	}
	prefix := enc[:66] // fixed part and the count (1)
	for _, c := range []struct {
		ops  []byte
		code wire.Code
	}{
		{[]byte{3}, wire.CodeUnsupportedTxn},
		{[]byte{0xff, 1}, wire.CodeUnsupportedTxn},
		{[]byte{0}, wire.CodeBadTxn},
		{[]byte{1}, wire.CodeBadTxn}, // a put cut short
	} {
		b := append(append([]byte(nil), prefix...), c.ops...)
		_, err := wire.ParseTxn(b)
		if err == nil || wire.TxnErrorCode(err) != c.code {
			t.Errorf("ops %x: %v, want %s", c.ops, err, c.code)
			continue
		}
		if c.code == wire.CodeUnsupportedTxn && !strings.Contains(err.Error(), base.Origin.String()+" seq 1") {
			t.Errorf("ops %x: %q does not name the origin and seq", c.ops, err)
		}
	}
}
