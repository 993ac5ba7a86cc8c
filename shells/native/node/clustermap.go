package node

import (
	"context"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
)

// The cluster map and requests between nodes, as the HTTP API calls them
// (docs/contract.md §22): the decisions are the replica's; the node runs them on its loop
// and waits for a request's answer.

// PublishMap publishes a document given to this node (replica.PublishMap).
func (n *Node) PublishMap(doc []byte) (st replica.MapStatus, err error) {
	if derr := n.do(func() { st, err = n.rep.PublishMap(time.Now(), doc) }); derr != nil {
		return replica.MapStatus{}, derr
	}
	return st, err
}

// ClusterMap is the map this node holds and what it knows of members' versions.
func (n *Node) ClusterMap() (st replica.MapStatus, err error) {
	if derr := n.read(func() { st = n.rep.MapStatus() }); derr != nil {
		return replica.MapStatus{}, derr
	}
	return st, nil
}

// Ask sends a request of kind to node target with the caller's scope and waits for its
// answer: the replica answers every request once (the target's answer, a refusal on the
// way, or its own timeout), so the wait is bounded by the replica's RequestTimeout; ctx
// ends it earlier (the answer is then dropped when it comes).
func (n *Node) Ask(ctx context.Context, target, kind, scope string, body []byte) (replica.Answer, error) {
	return n.await(ctx, func(now time.Time) (replica.RequestID, error) { return n.rep.Ask(now, target, kind, scope, body) })
}

// await runs ask on the loop, which sends a request of the replica's, and waits for its
// answer (Ask, Lock): the replica answers every request once, so the wait is bounded by its
// RequestTimeout; ctx ends it earlier, and the answer is then dropped when it comes.
func (n *Node) await(ctx context.Context, ask func(now time.Time) (replica.RequestID, error)) (replica.Answer, error) {
	reply := make(chan replica.Answer, 1)
	err := n.do(func() {
		id, err := ask(time.Now())
		n.check(err)
		if err != nil {
			reply <- replica.Answer{Code: wire.CodeInternal, Message: err.Error()}
			return
		}
		if n.asks == nil {
			n.asks = map[replica.RequestID]chan replica.Answer{}
		}
		n.asks[id] = reply
	})
	if err != nil {
		return replica.Answer{}, err
	}
	select {
	case a := <-reply:
		return a, nil
	case <-ctx.Done():
		return replica.Answer{}, ctx.Err()
	case <-n.stopped:
		return replica.Answer{}, errStopped
	}
}

// deliverAnswers hands the replica's answers to the callers waiting for them.
func (n *Node) deliverAnswers() {
	for _, a := range n.rep.Answers() {
		if reply := n.asks[a.ID]; reply != nil {
			reply <- a // buffered: a caller that went away leaves it there
			delete(n.asks, a.ID)
		}
	}
}
