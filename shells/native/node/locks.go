package node

import (
	"context"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Locks as the HTTP API calls them (docs/design.md §25): the decisions are the replica's
// and its home's; the node runs a lock request on the loop and waits for its answer as it
// waits for a forwarded request's (forward.go), and writes under a token as it writes.

// Lock sends op to the key's home (itself included) with the caller's scope and waits for
// the answer: the replica answers every request once, so the wait is bounded by its
// RequestTimeout; ctx ends it earlier.
func (n *Node) Lock(ctx context.Context, scope string, op replica.LockOp) (replica.Answer, error) {
	return n.await(ctx, func(now time.Time) (replica.RequestID, error) { return n.rep.Lock(now, scope, op) })
}

// HeldLease is replica.HeldLease now: a lease this node was granted, while its holder
// deadline has not passed.
func (n *Node) HeldLease(tok lock.Token) (h replica.HeldLease, ok bool) {
	err := n.read(func() { h, ok = n.rep.HeldLease(time.Now(), tok) })
	if err != nil {
		return replica.HeldLease{}, false
	}
	return h, ok
}

// LockStatus is replica.LockStatus now.
func (n *Node) LockStatus() (st replica.LockStatus, err error) {
	err = n.read(func() { st = n.rep.LockStatus() })
	return st, err
}

// FenceReach is replica.FenceReach now: whether this node applied fence, may still, or
// cannot from the connections it has, and the first origin it is below.
func (n *Node) FenceReach(fence lock.Fence) (state replica.FenceState, origin wire.OriginID, err error) {
	err = n.read(func() { state, origin = n.rep.FenceReach(fence) })
	return state, origin, err
}

// Fenced reports whether table is fenced under the map this node held after the last
// input (its writes need a lock).
func (n *Node) Fenced(table []byte) bool {
	m := n.cmap.Load()
	return m != nil && m.Fenced(table)
}

// WriteTokened is Write of a transaction under a lock's token (a format-2 entry): it
// answers once the entry is durable as the sync mode says, with its seq in this node's
// origin, which the home's confirm names.
func (n *Node) WriteTokened(ctx context.Context, tok lock.Token, ops []wire.Op) (origin wire.OriginID, seq uint64, err error) {
	reply := make(chan writeResult, 1)
	err = n.do(func() {
		origin = n.rep.Identity().Origin
		seq, err := n.rep.WriteTokened(time.Now(), replica.WireToken(tok), ops)
		if err != nil {
			reply <- writeResult{err: err}
			return
		}
		n.waiters = append(n.waiters, waiter{seq: seq, reply: reply})
	})
	if err != nil {
		return origin, 0, err
	}
	select {
	case r := <-reply:
		return origin, r.seq, r.err
	case <-ctx.Done():
		return origin, 0, ctx.Err()
	case <-n.stopped:
		return origin, 0, errStopped
	}
}
