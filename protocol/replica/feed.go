package replica

import (
	"plait/protocol/feed"
	"plait/protocol/store"
)

// feedCounts is what a change feed cannot read from the logs (docs/design.md §26.2): per
// table, the records written around the log, and the base copies ended. In memory only: a
// feed's reader lives no longer than the process, and a reader started after a write
// around the log needs no reread for it (§26.2 says why).
type feedCounts struct {
	repaired    map[string]uint64 // by table: records anti-entropy wrote
	copied      map[string]uint64 // by table: records a copy or a fill wrote or deleted
	copiesEnded uint64
}

// FeedInputs is what a change feed of table is told beside the store (feed.Inputs): read
// on the loop, with the store as it is at the same step.
func (r *Replica) FeedInputs(table []byte) feed.Inputs {
	return feed.Inputs{Repaired: r.feeds.repaired[string(table)], Copied: r.feeds.copied[string(table)],
		CopiesEnded: r.feeds.copiesEnded}
}

// feedWritten counts records written around the log into m, by table.
func feedWritten(m *map[string]uint64, recs []store.Record) {
	for i := range recs {
		if *m == nil {
			*m = map[string]uint64{}
		}
		(*m)[string(recs[i].Table)]++
	}
}
