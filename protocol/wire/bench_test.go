package wire_test

import (
	"crypto/sha256"
	"strconv"
	"testing"

	"plait/protocol/wire"
)

// benchTxn is a transaction of n puts of 100-byte values.
func benchTxn(n int) wire.Txn {
	t := wire.Txn{Origin: wire.OriginID{1, 2, 3}, Seq: 1, HLC: wire.MakeHLC(1_800_000_000_000, 0)}
	for i := 0; i < n; i++ {
		v := make([]byte, 100)
		for j := range v {
			v[j] = byte(i + j)
		}
		t.Ops = append(t.Ops, wire.Op{Kind: wire.OpPut, Table: []byte("users"), Key: []byte("key-" + strconv.Itoa(i)), Value: v})
	}
	return t
}

var sizes = []int{1, 100}

// BenchmarkEncodeTxn1 encodes a TXN1 frame (header, position, transaction encoding) from
// a transaction value into a reused buffer.
func BenchmarkEncodeTxn1(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			body := &wire.Txn1{Position: 1, Txn: benchTxn(n)}
			buf, err := wire.AppendFrame(nil, 0, 0, body)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer() // the setup above is not what is measured
			for i := 0; i < b.N; i++ {
				body.Position = uint64(i + 1)
				if buf, err = wire.AppendFrame(buf[:0], 0, 0, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeTxn1 reads a TXN1 frame the way the session's receive path does: header,
// position, a checked view of the transaction, every operation, and the chain hash.
func BenchmarkDecodeTxn1(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			msg, err := wire.AppendFrame(nil, 0, 0, &wire.Txn1{Position: 1, Txn: benchTxn(n)})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer() // the setup above is not what is measured
			var sum int
			for i := 0; i < b.N; i++ {
				r := wire.NewReader(msg, 0)
				f, werr := r.Next()
				if werr != nil {
					b.Fatal(werr)
				}
				_, v, err := wire.ParseTxn1(f.Body)
				if err != nil {
					b.Fatal(err)
				}
				it := v.Ops()
				for op, ok := it.Next(); ok; op, ok = it.Next() {
					sum += len(op.Value)
				}
				h := v.Hash()
				sum += int(h[0])
			}
			_ = sum
		})
	}
}

// BenchmarkDecodeTxn1Owned decodes a TXN1 frame into an owned value (DecodeMessage), the
// path of tests, fuzzing and the ABI's DECODE command, not of the session.
func BenchmarkDecodeTxn1Owned(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			msg, err := wire.AppendFrame(nil, 0, 0, &wire.Txn1{Position: 1, Txn: benchTxn(n)})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer() // the setup above is not what is measured
			for i := 0; i < b.N; i++ {
				if _, werr := wire.DecodeMessage(msg, wire.DefaultMaxMessage, 0); werr != nil {
					b.Fatal(werr)
				}
			}
		})
	}
}

// BenchmarkBaselineSHA256 hashes the transaction encoding of the frames above: the cost no
// receiver that checks the hash chain can avoid, the baseline the decode and session
// benchmarks are read against.
func BenchmarkBaselineSHA256(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			t := benchTxn(n)
			enc, err := t.Encode()
			if err != nil {
				b.Fatal(err)
			}
			msg, _ := wire.AppendFrame(nil, 0, 0, &wire.Txn1{Position: 1, Txn: t})
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer() // the setup above is not what is measured
			var sum byte
			for i := 0; i < b.N; i++ {
				h := sha256.Sum256(enc)
				sum += h[0]
			}
			_ = sum
		})
	}
}

// BenchmarkEncodeData encodes a version-2 DATA frame (header, chain hash, transaction).
func BenchmarkEncodeData(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			body := &wire.Data{Txn: benchTxn(n)}
			buf, err := wire.AppendFrame(nil, 0, 1, body)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if buf, err = wire.AppendFrame(buf[:0], 0, 1, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeData reads a DATA frame as the session does: header, claimed hash, a
// checked view of the transaction, and the SHA-256 compared with the claim.
func BenchmarkDecodeData(b *testing.B) {
	for _, n := range sizes {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			t := benchTxn(n)
			enc, _ := t.Encode()
			msg, err := wire.AppendFrame(nil, 0, 1, &wire.Data{Hash: sha256.Sum256(enc), Txn: t})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := wire.NewReader(msg, 0)
				f, werr := r.Next()
				if werr != nil {
					b.Fatal(werr)
				}
				h, v, err := wire.ParseData(f.Body)
				if err != nil || v.Hash() != h {
					b.Fatal("hash mismatch", err)
				}
			}
		})
	}
}
