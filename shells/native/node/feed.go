package node

import (
	"plait/protocol/feed"
	"plait/protocol/store"
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

// Origin is this node's own origin id (its data directory's).
func (n *Node) Origin() wire.OriginID { return n.origin }

// Stopping is closed once the node begins to stop: its feeds close then.
func (n *Node) Stopping() <-chan struct{} { return n.ctx.Done() }

// FeedRead runs f on the loop as a read, with the store and what the replica tells a feed
// of table beside it (replica.FeedInputs) at the same step: among it, this node's own
// seq known durable, past which the reader gives no entry of this node's own origin
// (docs/design.md §26.1).
func (n *Node) FeedRead(table []byte, f func(st store.Store, in feed.Inputs)) error {
	return n.read(func() { f(n.store, n.rep.FeedInputs(table)) })
}
