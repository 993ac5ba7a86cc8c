package replica

import (
	"bytes"
	"errors"

	"plait/protocol/store"
)

// scanReadable is Store.Scan over the records this node can read: a record the store
// cannot decode (DamagedRecordError) is counted in RecordsDamaged and passed over, and the
// scan goes on after it. Anti-entropy then finds the range differing and writes a peer's
// version over it; retention's tombstone walk and a copy's check of its own records treat
// it as absent. It reports false when the store failed otherwise (r.check).
func (r *Replica) scanReadable(table, after []byte, fn func(store.Record) bool) bool {
	for {
		err := r.store.Scan(table, after, fn)
		var de *store.DamagedRecordError
		if !errors.As(err, &de) || !bytes.Equal(de.Table, table) || bytes.Compare(de.Key, after) <= 0 && after != nil {
			return r.check(err)
		}
		r.counters.RecordsDamaged++
		after = de.Key
	}
}
