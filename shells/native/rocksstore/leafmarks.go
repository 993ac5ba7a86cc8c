package rocksstore

import (
	"errors"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// errLeafMarks stands until the store persists leaf marks with Apply (docs/design.md §27.3).
var errLeafMarks = errors.New("rocksstore: leaf marks are not stored yet")

// LeafMark returns the mark of one leaf.
func (s *Store) LeafMark(leaf wire.OriginID) (store.LeafMark, bool, error) {
	return store.LeafMark{}, false, nil
}

// LeafMarks calls fn for every leaf mark.
func (s *Store) LeafMarks(fn func(store.LeafMark) bool) error { return nil }

// PutLeafMark raises one leaf's mark.
func (s *Store) PutLeafMark(m store.LeafMark) error { return errLeafMarks }

// DropLeafMarks forgets the marks of these leaves.
func (s *Store) DropLeafMarks(leaves []wire.OriginID) error { return errLeafMarks }
