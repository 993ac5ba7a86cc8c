package replica_test

import (
	"slices"
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// Locks at a key's home (docs/design.md §25): A is the only lock home; B asks it over the
// exchange (B-A), C through B (C-B-A), and A asks itself without it.

var lockCfg = replica.Config{Locks: lock.Config{MaxTTL: 2 * time.Second, MaxWait: time.Second, MaxLeases: 2, MaxWaiters: 2}}

// lockQuarantine is how long lockCfg's restart and move quarantines last: MaxTTL·(1+ρ)
// plus the default clock-offset bound.
var lockQuarantine = lock.Config{MaxTTL: 2 * time.Second, Drift: lock.DefaultDrift, OffsetBound: replica.DefaultMaxClockOffset}.Quarantine()

// lockCluster is A, B and C under a map that names A the lock home, past A's restart
// quarantine.
func lockCluster(t *testing.T, homes string) (*harness, *node, *node, *node) {
	t.Helper()
	h := newHarness(t)
	a, b, c := h.addNode("A", lockCfg), h.addNode("B", lockCfg), h.addNode("C", lockCfg)
	h.connect(b, a)
	h.connect(c, b)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":[`+homes+`]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	return h, a, b, c
}

// lockOp asks for op from n and returns its request id.
func (n *node) lockOp(op replica.LockOp) replica.RequestID {
	n.h.t.Helper()
	id, err := n.rep.Lock(n.clock(), "write", op)
	if err != nil {
		n.h.t.Fatalf("%s: Lock: %v", n.name, err)
	}
	n.h.pump()
	return id
}

func (n *node) acquire(key string, ttl, wait time.Duration) replica.RequestID {
	return n.lockOp(replica.LockOp{Kind: replica.KindLockAcquire, Table: "t", Key: []byte(key), TTL: ttl, Wait: wait, Holder: n.name})
}

// answerOf is the answer to the node's request id, if it came.
func (n *node) answerOf(id replica.RequestID) (replica.Answer, bool) {
	if n.lockAnswers == nil {
		n.lockAnswers = map[replica.RequestID]replica.Answer{}
	}
	for _, a := range n.rep.Answers() {
		n.lockAnswers[a.ID] = a
	}
	a, ok := n.lockAnswers[id]
	return a, ok
}

// lockResult is the answer to id, which must have come with code want.
func (n *node) lockResult(id replica.RequestID, want wire.Code) replica.LockResult {
	n.h.t.Helper()
	a, ok := n.answerOf(id)
	if !ok {
		n.h.t.Fatalf("%s: request %d not answered, want %q", n.name, id, want)
	}
	if a.Code != want {
		n.h.t.Fatalf("%s: request %d answered %q (%s), want %q", n.name, id, a.Code, a.Message, want)
	}
	res, err := replica.ParseLockReply(a.Body)
	if err != nil {
		n.h.t.Fatalf("%s: request %d's body: %v", n.name, id, err)
	}
	return res
}

func (n *node) unanswered(id replica.RequestID) {
	n.h.t.Helper()
	if a, ok := n.answerOf(id); ok {
		n.h.t.Fatalf("%s: request %d answered %q (%s) already", n.name, id, a.Code, a.Message)
	}
}

func fenceOf(n *node) lock.Fence {
	var f lock.Fence
	for o, s := range n.applied() {
		if s > 0 {
			f = append(f, lock.Position{Origin: o, Seq: s})
		}
	}
	slices.SortFunc(f, func(x, y lock.Position) int { return slices.Compare(x.Origin[:], y.Origin[:]) })
	return f
}

// TestLockAcquire: B's acquire goes to A over the exchange, C's through B, A's is local;
// each grant carries A's token (its incarnation, counters in grant order) and the fence of
// A's applied positions at the grant; a held key answers lock-held with when it frees; the
// holder keeps its deadline.
func TestLockAcquire(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	b.write(put("t", "x", "1"))
	c.write(put("t", "y", "1"))
	h.pump()
	inc := a.rep.LockStatus().Incarnation
	sent := b.clock()
	gb := b.lockResult(b.acquire("k", time.Second, 0), "")
	if want := (lock.Token{Generation: 1, Incarnation: inc, Counter: 1, Home: a.origin}); gb.Token != want {
		t.Fatalf("B's token %v, want %v", gb.Token, want)
	}
	if want := fenceOf(a); !slices.Equal(gb.Fence, want) || len(want) != 2 {
		t.Fatalf("B's fence %v, want A's applied positions %v", gb.Fence, want)
	}
	if hl, ok := b.rep.HeldLease(b.clock(), gb.Token); !ok || !hl.Deadline.Equal(lock.HolderDeadline(sent, time.Second, lock.DefaultDrift)) {
		t.Fatalf("B's held lease %+v %v, want its holder deadline", hl, ok)
	}
	ga := a.lockResult(a.acquire("k2", time.Second, 0), "")
	if ga.Token.Counter != 2 || ga.Token.Home != a.origin {
		t.Fatalf("A's local grant %v, want counter 2", ga.Token)
	}
	held := c.lockResult(c.acquire("k", time.Second, 0), wire.Code(lock.CodeHeld))
	if held.RetryAfter <= 0 || held.RetryAfter > time.Second+time.Millisecond {
		t.Fatalf("C's lock-held retry after %v, want within B's lease", held.RetryAfter)
	}
	if st := a.rep.LockStatus(); !st.Home || st.Table.Granted != 2 || st.Table.Refused[lock.CodeHeld] != 1 || st.Table.Leases != 2 {
		t.Fatalf("A's lock status %+v", st)
	}
	if st := b.rep.LockStatus(); st.Home || st.Held != 1 {
		t.Fatalf("B's lock status %+v: no home, one lease held", st)
	}
}

// TestLockWaitOrder: two acquires wait for B's key, from C and from A; B's release grants
// C's, C's release A's; a renewal keeps the token and moves the expiry.
func TestLockWaitOrder(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	gb := b.lockResult(b.acquire("k", time.Second, 0), "")
	wc := c.acquire("k", 2*time.Second, 900*time.Millisecond)
	c.unanswered(wc)
	h.advance(100 * time.Millisecond)
	wa := a.acquire("k", time.Second, 900*time.Millisecond)
	a.unanswered(wa)
	rb := b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRenew, Table: "t", Key: []byte("k"), Token: gb.Token, TTL: time.Second}), "")
	if rb.Token != gb.Token || rb.ExpiresIn != time.Second+time.Millisecond {
		t.Fatalf("renewal %+v, want the same token for 1.001s", rb)
	}
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: gb.Token}), "")
	if _, ok := b.rep.HeldLease(b.clock(), gb.Token); ok {
		t.Fatal("B still holds the lease it released")
	}
	gc := c.lockResult(wc, "")
	if gc.Token.Counter != 2 {
		t.Fatalf("C's grant %v, want counter 2 (the first waiter)", gc.Token)
	}
	a.unanswered(wa)
	c.lockResult(c.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: gc.Token}), "")
	if ga := a.lockResult(wa, ""); ga.Token.Counter != 3 {
		t.Fatalf("A's grant %v, want counter 3", ga.Token)
	}
}
