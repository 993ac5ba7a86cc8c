package node

import (
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Named feeds (docs/contract.md §24.6): the decisions and the control documents are the
// replica's (replica.PutNamedFeed and the rest); the node runs them on its loop. A PUT,
// an ack and a delete return once the store has the change.

// PutNamedFeed creates a named feed of table at this node's positions, or sets its cap.
func (n *Node) PutNamedFeed(name, table string, holdBytes uint64) (st replica.NamedFeedStatus, created bool, err error) {
	if derr := n.do(func() { st, created, err = n.rep.PutNamedFeed(name, table, holdBytes) }); derr != nil {
		return replica.NamedFeedStatus{}, false, derr
	}
	return st, created, err
}

// NamedFeed is one named feed's state (false: none of that name).
func (n *Node) NamedFeed(name string) (st replica.NamedFeedStatus, ok bool, err error) {
	if derr := n.read(func() { st, ok = n.rep.NamedFeed(name) }); derr != nil {
		return replica.NamedFeedStatus{}, false, derr
	}
	return st, ok, nil
}

// DeleteNamedFeed forgets a named feed and its hold (false: there was none).
func (n *Node) DeleteNamedFeed(name string) (ok bool, err error) {
	if derr := n.do(func() { ok, err = n.rep.DeleteNamedFeed(name) }); derr != nil {
		return false, derr
	}
	return ok, err
}

// AckNamedFeed moves a named feed's position up to pos.
func (n *Node) AckNamedFeed(name string, pos []wire.OriginSeq) (st replica.NamedFeedStatus, err error) {
	if derr := n.do(func() { st, err = n.rep.AckNamedFeed(name, pos) }); derr != nil {
		return replica.NamedFeedStatus{}, derr
	}
	return st, err
}
