package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Digest summarizes a table's live records: their count and the SHA-256, in key order, of
// uvarint(len(key)) key uvarint(len(value)) value for each. Two nodes have the same digest
// of a table iff they hold the same keys with the same values; tombstones and versions do
// not take part.
func Digest(s Store, table []byte) (count int, sum string, err error) {
	h := sha256.New()
	var buf []byte
	err = s.Scan(table, nil, func(r Record) bool {
		if r.Deleted {
			return true
		}
		count++
		buf = binary.AppendUvarint(buf[:0], uint64(len(r.Key)))
		buf = append(buf, r.Key...)
		buf = binary.AppendUvarint(buf, uint64(len(r.Value)))
		h.Write(buf)
		h.Write(r.Value)
		return true
	})
	return count, hex.EncodeToString(h.Sum(nil)), err
}
