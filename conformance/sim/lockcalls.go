package sim

import (
	"fmt"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Lock requests a test makes by hand (the version matrix's lock handoff), beside a lock
// run's drawn workload (locks.go): the same way to a node's replica and the same delivery of
// answers, so that a cluster that has both keeps one account of its requests.

// LockCall is a lock request a test started (Lock); Answered and Answer are set when its
// answer comes.
type LockCall struct {
	Answered bool
	Answer   replica.Answer
}

// lockCalls makes the cluster keep lock requests' answers. A cluster that makes lock
// requests takes a cluster-not-v4 refusal (a map that turns locks on, a write under a
// lock, before every member is known at version 4) as the replica doing its job, as a lock
// run does (callErr).
func (c *Cluster) lockCalls() *lockRun {
	if c.locks == nil {
		c.locks = &lockRun{pending: map[askKey]func(replica.Answer){}, early: map[askKey]replica.Answer{}, keys: map[string]*lockKey{}}
	}
	return c.locks
}

// ExpectLocks tells the cluster that the test turns locks on or writes under them, so that
// their refusals before every member speaks version 4 are not run failures (PublishMap,
// WriteTokened).
func (c *Cluster) ExpectLocks() { c.lockCalls() }

// Lock starts the lock request op on a running node, as the node's lock endpoints do; the
// returned call holds its answer once it came (run the cluster for it).
func (c *Cluster) Lock(node string, op replica.LockOp) (*LockCall, error) {
	n := c.nodes[node]
	if n == nil || n.Rep == nil {
		return nil, fmt.Errorf("lock request on %s: not running", node)
	}
	c.lockCalls()
	call := &LockCall{}
	c.lockAsk(n, op, func(a replica.Answer) { call.Answered, call.Answer = true, a })
	return call, nil
}

// WriteTokened writes ops on a running node under a lease's token, as a write carrying
// Plait-Lock does once the node checked the token: the oracle keeps it with its token, so
// the end's check of every record orders it by the token.
func (c *Cluster) WriteTokened(node string, tok lock.Token, ops []wire.Op) (uint64, error) {
	n := c.nodes[node]
	if n == nil || n.Rep == nil {
		return 0, fmt.Errorf("tokened write on %s: not running", node)
	}
	c.lockCalls()
	var seq uint64
	err := c.callErr(n, func(r *replica.Replica) error {
		var err error
		seq, err = r.WriteTokened(n.clock(c), replica.WireToken(tok), ops)
		return err
	})
	if err == nil && seq > 0 {
		c.noteWrite(n, seq, ops)
	}
	return seq, err
}
