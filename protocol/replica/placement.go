package replica

import (
	"errors"

	"plait/protocol/store"
)

// Placement (docs/design.md §24): which tables this node and its peers carry, as the
// cluster map's placement says (clustermap.Map.Carries, the one answer to it).

// carries reports whether this node carries table under its map: it writes and stores
// that table's records, and applies an entry's operations of it.
func (r *Replica) carries(table []byte) bool { return r.cmap.cur.Carries(r.id.Name, table) }

// skipped reports whether a store's answer for one seq is a run it holds as a skip (a
// *store.SkippedError), and the run.
func skipped(err error) (*store.SkippedError, bool) {
	var sk *store.SkippedError
	ok := errors.As(err, &sk)
	return sk, ok
}
