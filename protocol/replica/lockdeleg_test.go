package replica_test

import (
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// delegCfg is lockCfg with delegation on: a delegation lasts 4 s (past MaxTTL, 2 s) and
// reserves 8 counters.
var delegCfg = func() replica.Config {
	c := lockCfg
	c.Locks.MaxDelegations, c.Locks.DelegationBlock, c.Locks.MaxDelegationTTL = 4, 8, 4*time.Second
	return c
}()

// delegCluster is lockCluster with delegation on: A the home, B-A, C-B.
func delegCluster(t *testing.T) (*harness, *node, *node, *node) {
	t.Helper()
	h := newHarness(t)
	a, b, c := h.addNode("A", delegCfg), h.addNode("B", delegCfg), h.addNode("C", delegCfg)
	h.connect(b, a)
	h.connect(c, b)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	return h, a, b, c
}

// TestLockDelegation (docs/design.md §25.9): B's first acquire of a free key is one request
// to A, which delegates the key; B's next acquires are answered by B itself at once, with
// tokens of the delegation's block, and a write under one is confirmed by B. C's acquire
// makes A recall the delegation; B gives it back only once its lease ended, and C is
// granted then, with a token above B's and a fence that covers B's confirmed write.
func TestLockDelegation(t *testing.T) {
	h, a, b, c := delegCluster(t)
	first := b.lockResult(b.acquire("k", time.Second, 0), "")
	if st := a.rep.LockStatus(); st.Table.Delegated != 1 || st.Table.Granted != 0 {
		t.Fatalf("A's lock status after B's first acquire %+v: one delegation, no lease", st.Table)
	}
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: first.Token}), "")

	// The repeat acquire is answered by B's deputy before anything is sent.
	id, err := b.rep.Lock(b.clock(), "write", replica.LockOp{Kind: replica.KindLockAcquire, Table: "t", Key: []byte("k"), TTL: time.Second, Holder: "B"})
	if err != nil {
		t.Fatal(err)
	}
	again := b.lockResult(id, "")
	if again.Token.Counter != first.Token.Counter+1 || again.Token.Home != a.origin {
		t.Fatalf("B's repeat grant %v, want the block's next token after %v", again.Token, first.Token)
	}
	if st := b.rep.LockStatus(); st.Deputy.Granted != 2 || st.Deputy.Delegations != 1 || st.Held != 1 {
		t.Fatalf("B's lock status %+v: two grants by its deputy, one lease held", st)
	}
	seq := b.writeTokened(replica.WireToken(again.Token), put("t", "k", "1"))
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: again.Token, Origin: b.origin, Seq: seq}), "")
	if st := a.rep.LockStatus(); st.WaitingConfirms != 0 || st.Table.Delegated != 1 {
		t.Fatalf("A's lock status %+v: the confirm is B's", st)
	}

	// C's acquire recalls the delegation; B holds a live lease, so C waits.
	waiting := c.acquire("k", time.Second, time.Second)
	h.advance(100 * time.Millisecond)
	c.unanswered(waiting)
	if st := a.rep.LockStatus(); st.Table.Recalled != 1 {
		t.Fatalf("A's lock status %+v: one recall", st.Table)
	}
	if got := b.rep.LockStatus().Deputy; got.Delegations != 1 {
		t.Fatalf("B gave the delegation back while its lease was live: %+v", got)
	}
	h.advance(100 * time.Millisecond)
	c.unanswered(waiting)
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: again.Token}), "")
	h.pump()
	gc := c.lockResult(waiting, "")
	if lock.Compare(gc.Token, again.Token) <= 0 || gc.Token.Counter <= first.Token.Counter+7 {
		t.Fatalf("C's token %v, want above B's block (from %v, 8 counters)", gc.Token, first.Token)
	}
	covered := false
	for _, p := range gc.Fence {
		covered = covered || p.Origin == b.origin && p.Seq >= seq
	}
	if !covered {
		t.Fatalf("C's fence %v does not cover B's confirmed write %d", gc.Fence, seq)
	}
	if st := a.rep.LockStatus(); st.Table.Returned != 1 || st.Table.Delegations != 0 {
		t.Fatalf("A's lock status %+v: the delegation returned", st.Table)
	}
	// B no longer holds it: its next acquire goes to A, and waits for C's lease.
	b.lockResult(b.acquire("k", time.Second, 0), wire.Code(lock.CodeHeld))
}

// TestLockDelegationHomeRestart: a home that restarts with a delegation out takes it back
// from its store: after its restart quarantine the key still waits (delegation-pending)
// until the delegate answers the recall, and the first grant's fence then covers the
// delegate's write.
func TestLockDelegationHomeRestart(t *testing.T) {
	h, a, b, _ := delegCluster(t)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	seq := b.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: g.Token, Origin: b.origin, Seq: seq}), "")
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: g.Token}), "")
	a.restart()
	ba := h.connect(b, a)
	ba.hold = true
	h.advance(lockQuarantine)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeDelegationPending))
	if st := a.rep.LockStatus(); st.Table.Delegations != 1 {
		t.Fatalf("A's lock status after its restart %+v: the delegation out", st.Table)
	}
	ba.hold = false
	h.advance(replica.DefaultPlacementPoll)
	ga := a.lockResult(a.acquire("k", time.Second, 0), "")
	covered := false
	for _, p := range ga.Fence {
		covered = covered || p.Origin == b.origin && p.Seq >= seq
	}
	if !covered || ga.Token.Incarnation != g.Token.Incarnation+1 {
		t.Fatalf("A's grant after the return %v, fence %v: want the new incarnation, covering B's write %d", ga.Token, ga.Fence, seq)
	}
	if st := b.rep.LockStatus(); st.Deputy.Delegations != 0 || st.Deputy.Returned != 1 {
		t.Fatalf("B's deputy %+v: the delegation returned", st.Deputy)
	}
}

// TestLockDelegationMoveFloor: a map that moves a delegated key's home from A to C makes A
// recall the delegation, and A gives C no floor until B returned it: C grants the key
// only after that, with a fence that covers B's write. B reaches A over B-A, C over C-A.
func TestLockDelegationMoveFloor(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.addNode("A", delegCfg), h.addNode("B", delegCfg), h.addNode("C", delegCfg)
	ba := h.connect(b, a)
	h.connect(c, a)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	seq := b.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: g.Token, Origin: b.origin, Seq: seq}), "")
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: g.Token}), "")
	ba.hold = true // A's recall does not reach B
	if _, err := a.publish(mapDoc(2, `,"lock_homes":["C"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine + 2*replica.DefaultPlacementPoll)
	c.lockResult(c.acquire("k", time.Second, 0), wire.Code(lock.CodeMovePending))
	ba.hold = false
	h.advance(2 * replica.DefaultPlacementPoll)
	h.advance(lockQuarantine) // the quarantine counts from the floor's arrival too
	gc := c.lockResult(c.acquire("k", time.Second, 0), "")
	covered := false
	for _, p := range gc.Fence {
		covered = covered || p.Origin == b.origin && p.Seq >= seq
	}
	if !covered || gc.Token.Generation != 2 {
		t.Fatalf("C's grant %v, fence %v: want generation 2, covering B's write %d", gc.Token, gc.Fence, seq)
	}
	if st := b.rep.LockStatus(); st.Deputy.Delegations != 0 {
		t.Fatalf("B's deputy %+v: the delegation returned", st.Deputy)
	}
}

// TestLockDelegatedWriteThroughAnotherNode (docs/design.md §25.9): a write under a lease
// B's deputy granted is taken through C, which is neither the home nor the delegate: C's
// check, fence and confirm go to the home A, which passes them on to B; B confirms the
// write once it applied it, and its fence covers what it applied. After B released the
// lease, and after it returned the delegation, the same token is lost through C.
func TestLockDelegatedWriteThroughAnotherNode(t *testing.T) {
	h, a, b, c := delegCluster(t)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	if st := a.rep.LockStatus(); st.Table.Delegated != 1 {
		t.Fatalf("A's lock status %+v: one delegation", st.Table)
	}
	op := func(kind string) replica.LockOp {
		return replica.LockOp{Kind: kind, Table: "t", Key: []byte("k"), Token: g.Token}
	}
	c.lockResult(c.lockOp(op(replica.KindLockCheck)), "")
	fc := c.lockResult(c.lockOp(op(replica.KindLockFence)), "")
	if fc.Token != g.Token {
		t.Fatalf("C's lock-fence answered token %v, want B's lease %v", fc.Token, g.Token)
	}
	seq := c.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
	conf := op(replica.KindLockConfirm)
	conf.Origin, conf.Seq = c.origin, seq
	h.pump()
	c.lockResult(c.lockOp(conf), "")
	if got := b.applied()[c.origin]; got < seq {
		t.Fatalf("B confirmed C's write %d having applied %d of C", seq, got)
	}
	if st := a.rep.LockStatus(); st.Forwarded != 3 || st.WaitingConfirms != 0 {
		t.Fatalf("A's lock status %+v: three requests passed on to B, no confirm of its own", st)
	}
	b.lockResult(b.lockOp(op(replica.KindLockRelease)), "")
	c.lockResult(c.lockOp(op(replica.KindLockCheck)), wire.Code(lock.CodeLost))

	// C's acquire recalls the delegation; once it is back the token is A's to judge again.
	c.lockResult(c.acquire("k", time.Second, time.Second), "")
	if st := a.rep.LockStatus(); st.Table.Returned != 1 || st.Table.Delegations != 0 {
		t.Fatalf("A's lock status %+v: the delegation returned", st.Table)
	}
	forwarded := a.rep.LockStatus().Forwarded
	c.lockResult(c.lockOp(op(replica.KindLockConfirm)), wire.CodeBadArgument)
	conf.Seq = c.writeTokened(replica.WireToken(g.Token), put("t", "k", "2"))
	h.pump()
	c.lockResult(c.lockOp(conf), wire.Code(lock.CodeLost))
	if got := a.rep.LockStatus().Forwarded; got != forwarded {
		t.Fatalf("A passed on %d requests after the return, want none", got-forwarded)
	}
}

// TestLockDelegateRestartedLosesToken: a delegate that restarted holds its delegation no
// more, while the home still keeps it: a check of one of its tokens through another node,
// passed on by the home, answers lock-lost (not the delegate's not-home), since the
// restarted delegate confirms nothing it granted before.
func TestLockDelegateRestartedLosesToken(t *testing.T) {
	h, a, b, c := delegCluster(t)
	h.connect(c, a)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	b.restart()
	h.connect(b, a)
	h.pump()
	c.lockResult(c.lockOp(replica.LockOp{Kind: replica.KindLockCheck, Table: "t", Key: []byte("k"), Token: g.Token}), wire.Code(lock.CodeLost))
	if st := a.rep.LockStatus(); st.Forwarded != 1 || st.Table.Delegations != 1 {
		t.Fatalf("A's lock status %+v: the delegation still out, the check passed on to B", st)
	}
}

// TestLockDelegationRenewed: a delegate that keeps locking the key renews its delegation
// at the home about once per half delegation time (not per lock), so all its locks over
// three delegation times are its deputy's, under the one delegation, none recalled; once
// it stops, the delegation lapses and comes back to the home.
func TestLockDelegationRenewed(t *testing.T) {
	cfg := delegCfg
	cfg.Locks.DelegationBlock = 64
	h := newHarness(t)
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"]`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	first := b.lockResult(b.acquire("k", 100*time.Millisecond, 0), "")
	const locks = 40 // 12 s at 300 ms a lock: three delegation times of 4 s
	prev := first.Token
	for i := 1; i < locks; i++ {
		b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: prev}), "")
		h.advance(300 * time.Millisecond)
		g := b.lockResult(b.acquire("k", 100*time.Millisecond, 0), "")
		if g.Token.Counter != prev.Counter+1 {
			t.Fatalf("lock %d at %v: token %v, want the block's next after %v (the delegation kept)", i, h.now.Sub(time.Time{}), g.Token, prev)
		}
		prev = g.Token
	}
	st, bs := a.rep.LockStatus(), b.rep.LockStatus()
	if st.Table.Delegated != 1 || st.Table.Recalled != 0 || st.Table.Granted != 0 {
		t.Fatalf("A's lock status %+v: one delegation, never recalled, no lease of its own", st.Table)
	}
	// 12 s of locking at a renewal per 2 s (half of 4 s): 5 or 6, never one per lock.
	if bs.DelegationsRenewed < 4 || bs.DelegationsRenewed > 7 || bs.Deputy.Granted != locks {
		t.Fatalf("B's lock status %+v: %d locks by its deputy, want about one renewal per 2 s", bs, locks)
	}
	b.lockResult(b.lockOp(replica.LockOp{Kind: replica.KindLockRelease, Table: "t", Key: []byte("k"), Token: prev}), "")
	for i := 0; i < 6 && a.rep.LockStatus().Table.Delegations > 0; i++ {
		h.advance(time.Second)
	}
	if st := a.rep.LockStatus(); st.Table.Delegations != 0 || st.Table.Returned != 1 {
		t.Fatalf("A's lock status %+v: the lapsed delegation returned", st.Table)
	}
}
