package node

import (
	"plait/protocol/feed"
	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Change feeds (docs/design.md §26.3): the API reads a table's changes from the logs on the
// loop, in bounded chunks (FeedRead), and between chunks waits for the loop to move
// (FeedWake). There is no queue per feed: what a feed holds is the chunk it is sending.

// FeedWake returns a channel the loop closes after its next step that may have moved the
// store: an apply, a local write, a write around the log (repair, fill, copy), a sync, a
// tick. A feed takes it before it reads, so that a step between its read and its wait
// still wakes it. No channel is made, and nothing is closed, while no feed waits.
func (n *Node) FeedWake() <-chan struct{} {
	n.feedMu.Lock()
	defer n.feedMu.Unlock()
	if n.feedCh == nil {
		n.feedCh = make(chan struct{})
	}
	return n.feedCh
}

// wakeFeeds wakes every feed waiting on FeedWake (loop only, after a step that moved).
func (n *Node) wakeFeeds() {
	n.feedMu.Lock()
	ch := n.feedCh
	n.feedCh = nil
	n.feedMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// Stopping is closed once the node begins to stop: its feeds close then.
func (n *Node) Stopping() <-chan struct{} { return n.ctx.Done() }

// FeedRead runs f on the loop as a read, with the store as a feed sees it: this node's own
// origin only up to the seq the replica knows durable when entries wait for their sync
// (HoldUnsynced), as its peers are sent them, so that a consumer is never given a local
// write a power loss could take back, and whose seq a later write would then reuse.
// in is what the replica tells a feed of table beside the store (replica.FeedInputs), at
// the same step.
func (n *Node) FeedRead(table []byte, f func(st store.Store, in feed.Inputs)) error {
	return n.read(func() {
		st := store.Store(n.store)
		if n.cfg.Sync != SyncNone {
			st = syncedStore{Store: n.store, origin: n.rep.Identity().Origin, synced: n.rep.SyncedSeq()}
		}
		f(st, n.rep.FeedInputs(table))
	})
}

// syncedStore is a store whose vector stops at the node's own durable seq. The capped
// entry has no chain hash (the store keeps the hash of its cursor only): a feed reads
// seqs, never hashes (docs/design.md §26.1).
type syncedStore struct {
	store.Store
	origin wire.OriginID
	synced uint64
}

func (s syncedStore) Vector() (vector.Vector, error) {
	v, err := s.Store.Vector()
	if err != nil || v.Get(s.origin).Seq <= s.synced {
		return v, err
	}
	var capped vector.Vector
	for _, e := range v.Entries() {
		if e.Origin == s.origin {
			if s.synced == 0 {
				continue
			}
			e = vector.Entry{Origin: e.Origin, Seq: s.synced}
		}
		capped.Advance(e)
	}
	return capped, nil
}
