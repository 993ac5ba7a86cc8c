package rocksstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// A hub's leaf marks (docs/design.md §27.8): one key per leaf, 'm' leaf origin, whose value
// is the mark's leaf seq (8), the leaf entry's chain hash (32), and the origin (16) and seq
// (8) of the entry that carried it. Apply writes a batch's mark in the batch's own write;
// the keys sort by leaf origin, which is LeafMarks' order. A store that is no hub holds none.

const leafMarkSize = 8 + 32 + 16 + 8

func leafMarkValue(m *store.LeafMark) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, leafMarkSize), m.Seq)
	v = append(v, m.Hash[:]...)
	v = append(v, m.Carrier[:]...)
	return binary.BigEndian.AppendUint64(v, m.At)
}

func decodeLeafMark(leaf, v []byte) (store.LeafMark, error) {
	if len(leaf) != 16 || len(v) != leafMarkSize {
		return store.LeafMark{}, errors.New("rocksstore: a leaf mark is damaged")
	}
	var m store.LeafMark
	copy(m.Leaf[:], leaf)
	m.Seq = binary.BigEndian.Uint64(v)
	copy(m.Hash[:], v[8:40])
	copy(m.Carrier[:], v[40:56])
	m.At = binary.BigEndian.Uint64(v[56:])
	return m, nil
}

// LeafMark returns the mark of one leaf.
func (s *Store) LeafMark(leaf wire.OriginID) (store.LeafMark, bool, error) {
	v, err := s.db.GetBytes(s.ro, key(pLeaf, leaf[:]))
	if err != nil || v == nil {
		return store.LeafMark{}, false, err
	}
	m, err := decodeLeafMark(leaf[:], v)
	return m, err == nil, err
}

// LeafMarks calls fn for every leaf mark, by leaf origin.
func (s *Store) LeafMarks(fn func(store.LeafMark) bool) error {
	return s.each([]byte{pLeaf}, nil, func(k, v []byte) (bool, error) {
		m, err := decodeLeafMark(k[1:], v)
		if err != nil {
			return false, err
		}
		return fn(m), nil
	})
}

// putLeafMark adds m to wb when it raises the leaf's mark (a lower or equal seq is
// ignored, as memstore does).
func (s *Store) putLeafMark(wb *grocksdb.WriteBatch, m *store.LeafMark) error {
	cur, _, err := s.LeafMark(m.Leaf) // none: seq 0, below every mark (CheckBatch, CheckLeafMark)
	if err != nil {
		return err
	}
	if m.Seq > cur.Seq {
		wb.Put(key(pLeaf, m.Leaf[:]), leafMarkValue(m))
	}
	return nil
}

// PutLeafMark raises one leaf's mark, in one write.
func (s *Store) PutLeafMark(m store.LeafMark) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	if err := store.CheckLeafMark(&m); err != nil {
		return err
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	if err := s.putLeafMark(wb, &m); err != nil {
		return err
	}
	if wb.Count() == 0 {
		return nil
	}
	if err := s.write("leaf-mark", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: raising the mark of leaf %s: %w", m.Leaf, err)
	}
	return nil
}

// DropLeafMarks forgets the marks of these leaves, in one write.
func (s *Store) DropLeafMarks(leaves []wire.OriginID) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	if len(leaves) == 0 {
		return nil
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for _, o := range leaves {
		wb.Delete(key(pLeaf, o[:]))
	}
	if err := s.write("leaf-marks", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: dropping %d leaf marks: %w", len(leaves), err)
	}
	return nil
}
