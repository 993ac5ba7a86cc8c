package rocksstore

import (
	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
)

// Control documents live under their own prefix ('s'), apart from the records ('r', 't'),
// the logs ('l', 'a', 'c', 'f', 'g') and every other key: each read and write of those is
// bounded to its own prefix, so no scan, snapshot, digest, audit, copy, repair or reseed
// reaches a control document.

// Control returns the control document under name, nil when there is none.
func (s *Store) Control(name string) ([]byte, error) {
	if err := store.CheckControlKey(name); err != nil {
		return nil, err
	}
	return s.db.GetBytes(s.ro, key(pControl, []byte(name)))
}

// PutControl writes a control document in one put, synced: control documents are
// configuration (a cluster map this node answered 200 for, member versions), written
// seldom, and a power loss should not take them back.
func (s *Store) PutControl(name string, value []byte) error {
	if err := store.CheckControl(name, value); err != nil {
		return err
	}
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	wo.SetSync(true)
	return s.put("control", wo, key(pControl, []byte(name)), value)
}
