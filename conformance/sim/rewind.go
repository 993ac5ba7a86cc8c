package sim

import (
	"fmt"

	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// Restored backups (docs/design.md §20): a backup is a copy of a node's store as it is;
// restoring one makes a stopped node start from it, its origin's log back where the copy
// ends; Reseed is `plait reseed` on the stopped node's store.

// Backup returns a copy of a node's store as it is now.
func (c *Cluster) Backup(node string) (*memstore.Store, error) {
	n := c.nodes[node]
	if n == nil {
		return nil, fmt.Errorf("backup of %s: unknown node", node)
	}
	return n.Store.Store.Clone(), nil
}

// RestoreBackup makes a crashed node's store a copy of backup: it starts from it at the
// next Restart.
func (c *Cluster) RestoreBackup(node string, backup *memstore.Store) error {
	n := c.nodes[node]
	if n == nil || n.Rep != nil {
		return fmt.Errorf("restore %s: not crashed", node)
	}
	c.trace("%s is restored from a backup", node)
	n.Store = newRecordingStore(backup.Clone(), &c.inv, node, c.Now)
	n.restored = true
	return nil
}

// Reseed gives a crashed node a new origin id (store.ReseedStore), above its old one, and
// records the entries it re-issues as the new origin's writes: the oracle then expects
// them, and each write of the old origin that the node alone held, at every node.
func (c *Cluster) Reseed(node string) error {
	n := c.nodes[node]
	if n == nil || n.Rep != nil {
		return fmt.Errorf("reseed %s: not crashed", node)
	}
	o := n.origin
	o[14] = 0xff // above the old id, which holds the name's bytes there
	rs, err := store.ReseedStore(n.Store.Store, o)
	if err != nil {
		return err
	}
	c.trace("%s is reseeded: origin %s, %d entries re-issued", node, o, len(rs.Entries))
	c.writes[o] = map[uint64]written{}
	for _, b := range rs.Entries {
		v, err := wire.ParseTxn(b.Txn)
		if err != nil {
			return err
		}
		c.writes[o][b.Seq] = written{hlc: v.HLC, tok: v.Token, ops: v.Txn().Ops}
	}
	n.Store = newRecordingStore(n.Store.Store, &c.inv, node, c.Now)
	n.origin, n.restored = o, false
	return nil
}
