package replica_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"plait/protocol/clustermap"
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

// TestLockLapsed: a lease past its expiry at the home is lock-lost to renew and check, and
// its holder no longer holds it past its deadline.
func TestLockLapsed(t *testing.T) {
	h, _, b, _ := lockCluster(t, `"A"`)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	op := replica.LockOp{Table: "t", Key: []byte("k"), Token: g.Token, TTL: time.Second}
	op.Kind = replica.KindLockCheck
	b.lockResult(b.lockOp(op), "")
	h.advance(time.Second + 10*time.Millisecond)
	if _, ok := b.rep.HeldLease(b.clock(), g.Token); ok {
		t.Fatal("B holds a lease past its holder deadline")
	}
	for _, k := range []string{replica.KindLockRenew, replica.KindLockCheck, replica.KindLockFence} {
		op.Kind = k
		b.lockResult(b.lockOp(op), wire.Code(lock.CodeLost))
	}
}

// TestLockHomeRestart: a restarted home has a new incarnation and grants nothing until its
// restart quarantine ends.
func TestLockHomeRestart(t *testing.T) {
	h, a, b, _ := lockCluster(t, `"A"`)
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	a.restart()
	h.connect(b, a)
	if inc := a.rep.LockStatus().Incarnation; inc != g.Token.Incarnation+1 {
		t.Fatalf("incarnation after the restart %d, want %d", inc, g.Token.Incarnation+1)
	}
	q := b.lockResult(b.acquire("k2", time.Second, 0), wire.Code(lock.CodeQuarantined))
	if q.RetryAfter <= 0 || q.RetryAfter > lockQuarantine {
		t.Fatalf("quarantined for %v, want within %v", q.RetryAfter, lockQuarantine)
	}
	h.advance(q.RetryAfter)
	g2 := b.lockResult(b.acquire("k", time.Second, 0), "")
	if g2.Token.Incarnation != g.Token.Incarnation+1 || g2.Token.Counter != 1 {
		t.Fatalf("the grant after the restart %v", g2.Token)
	}
}

// TestLockMoveQuarantine: a generation that moves a key's home to A puts that key in A's
// move quarantine; a key A homed under both generations is granted at once.
func TestLockMoveQuarantine(t *testing.T) {
	h, a, b, _ := lockCluster(t, `"A","B"`)
	m := a.rep.ClusterMap()
	var moved, stays string
	for i := 0; moved == "" || stays == ""; i++ {
		k := string(rune('a'+i%26)) + string(rune('a'+i/26))
		switch m.Home([]byte("t"), []byte(k)) {
		case "B":
			moved = k
		case "A":
			stays = k
		}
	}
	if _, err := a.publish(mapDoc(2, `,"lock_homes":["A"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	b.lockResult(b.acquire(stays, time.Second, 0), "")
	q := b.lockResult(b.acquire(moved, time.Second, 0), wire.Code(lock.CodeQuarantined))
	if q.RetryAfter <= lockQuarantine-100*time.Millisecond {
		t.Fatalf("quarantined for %v, want about %v", q.RetryAfter, lockQuarantine)
	}
	h.advance(q.RetryAfter)
	if g := b.lockResult(b.acquire(moved, time.Second, 0), ""); g.Token.Generation != 2 {
		t.Fatalf("the moved key's grant %v, want generation 2", g.Token)
	}
}

// TestLockConfirm: a confirm is answered only once the home applied the write it names:
// ok while the lease is live, lock-lost (an overlap) when it ended first; one whose write
// never arrives times out.
func TestLockConfirm(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	cb := h.links[1]
	g := b.lockResult(b.acquire("k", time.Second, 0), "")
	cb.hold = true
	seq := c.write(put("t", "k", "1"))
	op := replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: g.Token, Origin: c.origin, Seq: seq}
	id := b.lockOp(op)
	h.advance(200 * time.Millisecond)
	b.unanswered(id)
	if st := a.rep.LockStatus(); st.WaitingConfirms != 1 {
		t.Fatalf("A's confirms waiting %d, want 1", st.WaitingConfirms)
	}
	cb.hold = false
	h.pump()
	b.lockResult(id, "")
	// A second write, confirmed after the lease ended.
	cb.hold = true
	op.Seq = c.write(put("t", "k", "2"))
	id = b.lockOp(op)
	h.advance(time.Second)
	b.unanswered(id)
	cb.hold = false
	h.pump()
	b.lockResult(id, wire.Code(lock.CodeLost))
	if st := a.rep.LockStatus(); st.Table.ConfirmsLost != 1 || st.Table.Overlaps != 1 || st.WaitingConfirms != 0 {
		t.Fatalf("A's lock status %+v: one confirm lost, an overlap", st)
	}
	// A write that never arrives: request-timeout at the caller's deadline.
	cb.hold = true
	op.Seq = c.write(put("t", "k", "3"))
	id = b.lockOp(op)
	h.advance(replica.DefaultRequestTimeout)
	b.lockResult(id, replica.CodeRequestTimeout)
	if st := a.rep.LockStatus(); st.WaitingConfirms != 0 {
		t.Fatalf("A keeps %d confirms past their deadline", st.WaitingConfirms)
	}
}

// TestLockRefusals: not-home, no-lock-homes, cluster-not-v4, and the bounds at their limit
// and one past.
func TestLockRefusals(t *testing.T) {
	h, a, b, c := lockCluster(t, `"A"`)
	// B is not the home: asked directly, it says so.
	body, err := wire.Marshal(replica.LockArgs{Table: "t", Key: []byte("k"), TTLMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.rep.Ask(c.clock(), "B", replica.KindLockAcquire, "write", body)
	if err != nil {
		t.Fatal(err)
	}
	h.pump()
	c.lockResult(id, replica.CodeNotHome)
	// ttl at MaxTTL and one past; wait at MaxWait and one past; waits at the request's
	// remaining time.
	g1 := b.lockResult(b.acquire("k1", 2*time.Second, 0), "")
	b.lockResult(b.acquire("k2", 2*time.Second+time.Millisecond, 0), wire.Code(lock.CodeBadTTL))
	b.lockResult(b.acquire("k1", time.Second, time.Second+time.Millisecond), wire.Code(lock.CodeBadWait))
	// leases: two at the limit, the third refused.
	b.lockResult(b.acquire("k2", time.Second, 0), "")
	b.lockResult(b.acquire("k3", time.Second, 0), wire.Code(lock.CodeTooManyLeases))
	// waiters: two at the limit, the third refused.
	w1, w2 := b.acquire("k1", time.Second, time.Second), c.acquire("k1", time.Second, time.Second)
	b.unanswered(w1)
	c.unanswered(w2)
	a.lockResult(a.acquire("k1", time.Second, time.Second), wire.Code(lock.CodeTooManyWaiters))
	_ = g1
	st := a.rep.LockStatus()
	if st.Table.Refused[lock.CodeBadTTL] != 1 || st.Table.Refused[lock.CodeBadWait] != 1 || st.Table.Refused[lock.CodeTooManyLeases] != 1 || st.Table.Refused[lock.CodeTooManyWaiters] != 1 {
		t.Fatalf("A's refusals %v", st.Table.Refused)
	}
	// A member not known at version 4.
	if _, err := a.publish(mapDoc(2, `,"lock_homes":["A"]`, "A", "B", "C", "D")); err != nil {
		t.Fatal(err)
	}
	b.lockResult(b.acquire("k1", time.Second, 0), replica.CodeClusterNotV4)
	// A map with no lock homes: answered at once, nothing sent.
	if _, err := a.publish(mapDoc(3, "", "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	b.lockResult(b.acquire("k1", time.Second, 0), replica.CodeNoLockHomes)
}

// TestLockWaitBelowDeadline: a wait must leave a quarter of the request's remaining time at
// the home (here 1 s: 750 ms); the home answers lock-held when it ends, before the caller's
// deadline.
func TestLockWaitBelowDeadline(t *testing.T) {
	h := newHarness(t)
	cfg := lockCfg
	cfg.RequestTimeout = time.Second
	a, b := h.addNode("A", cfg), h.addNode("B", cfg)
	h.connect(b, a)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"]`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	b.lockResult(b.acquire("k", time.Second, 0), "")
	b.lockResult(b.acquire("k", time.Second, 751*time.Millisecond), wire.Code(lock.CodeBadWait))
	w := b.acquire("k", time.Second, 750*time.Millisecond)
	b.unanswered(w)
	h.advance(time.Second)
	b.lockResult(w, wire.Code(lock.CodeHeld))
}

// TestLockMoveFloor: a generation adds A to the homes, which moves key k from B to A, and A
// has not applied a write B confirmed (the link B-A held). B, once it holds the generation,
// drops its lease on k and confirms nothing more for it; A grants k nothing once its
// quarantine is over until B's floor is in and applied (move-pending), and its first
// grant's fence then covers the confirmed write.
func TestLockMoveFloor(t *testing.T) {
	h, a, b, c := lockCluster(t, `"B"`)
	ba := h.links[0]
	k := ""
	for i := 0; k == ""; i++ {
		if x := "k" + strconv.Itoa(i); (clustermap.Map{LockHomes: []string{"A", "B"}}).Home([]byte("t"), []byte(x)) == "A" {
			k = x
		}
	}
	g := c.lockResult(c.acquire(k, 2*time.Second, 0), "")
	ba.hold = true
	seq := c.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
	op := replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte(k), Token: g.Token, Origin: c.origin, Seq: seq}
	c.lockResult(c.lockOp(op), "")
	// A confirm of a write not made yet waits at B, and B adopts the move meanwhile.
	op.Seq = seq + 1
	late := c.lockOp(op)
	c.unanswered(late)
	doc := mapDoc(2, `,"lock_homes":["A","B"]`, "A", "B", "C")
	for _, n := range []*node{a, b} {
		if _, err := n.publish(doc); err != nil {
			t.Fatal(err)
		}
	}
	c.writeTokened(replica.WireToken(g.Token), put("t", "k", "2"))
	h.pump()
	c.lockResult(late, wire.Code(lock.CodeLost))
	if st := b.rep.LockStatus(); st.Table.MovedAway != 1 || st.Table.Leases != 0 {
		t.Fatalf("B's lock status %+v: its lease on the moved key dropped", st)
	}
	// A's quarantine ends with B's floor out of reach: nothing granted.
	h.advance(lockQuarantine)
	a.lockResult(a.acquire(k, time.Second, 0), wire.Code(lock.CodeMovePending))
	if st := a.rep.LockStatus(); st.Table.MovesAwaitingFloor != 1 || st.Table.Refused[lock.CodeMovePending] != 1 {
		t.Fatalf("A's lock status %+v: one move waiting for its floor, one move-pending", st)
	}
	ba.hold = false
	h.advance(2 * replica.DefaultPlacementPoll)
	// B's floor is in: B let go of k before it gave it, so B's leases end within a
	// quarantine of its arrival, and A waits that out (a B that adopted the generation
	// late would have granted until then).
	a.lockResult(a.acquire(k, time.Second, 0), wire.Code(lock.CodeQuarantined))
	h.advance(lockQuarantine)
	first := a.lockResult(a.acquire(k, time.Second, 0), "")
	covered := false
	for _, p := range first.Fence {
		covered = covered || p.Origin == c.origin && p.Seq >= seq+1
	}
	if !covered || first.Token.Generation != 2 {
		t.Fatalf("A's first grant %v, fence %v: want generation 2 and C's seq %d inside", first.Token, first.Fence, seq+1)
	}
	if st := a.rep.LockStatus(); st.Table.MovesAwaitingFloor != 0 || st.Table.MoveQuarantines != 0 {
		t.Fatalf("A's lock status %+v: the move is over", st)
	}
}

// TestLockMoveFloorHomeGone: B, the lock home, is gone for good: a map drops it from the
// nodes and names A. B never answers; A's floor for B's keys is then every member's
// (A's and C's) applied positions, so A grants only once it has C's write that B confirmed.
func TestLockMoveFloorHomeGone(t *testing.T) {
	h, a, b, c := lockCluster(t, `"B"`)
	ba := h.links[0]
	ca := h.connect(c, a)
	g := c.lockResult(c.acquire("k", 2*time.Second, 0), "")
	ba.hold, ca.hold = true, true
	seq := c.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
	c.lockResult(c.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: g.Token, Origin: c.origin, Seq: seq}), "")
	h.links[1].hold = true // C-B: B is gone
	doc := mapDoc(2, `,"lock_homes":["A"]`, "A", "C")
	for _, n := range []*node{a, b, c} {
		if _, err := n.publish(doc); err != nil {
			t.Fatal(err)
		}
	}
	h.advance(lockQuarantine)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeMovePending))
	ca.hold = false
	h.advance(2 * replica.DefaultPlacementPoll)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeQuarantined)) // from the floor's arrival
	h.advance(lockQuarantine)
	first := a.lockResult(a.acquire("k", time.Second, 0), "")
	covered := false
	for _, p := range first.Fence {
		covered = covered || p.Origin == c.origin && p.Seq >= seq
	}
	if !covered {
		t.Fatalf("A's first grant's fence %v: want C's seq %d inside", first.Fence, seq)
	}
}

// TestLockConfirmWriteSynced: with HoldUnsynced, a home confirms a write under a lock only
// once a sync of its own store covers it, and asks for that sync (NeedsSync) while the
// confirm waits: its own write once synced, another node's once the sync of the arrival
// that applied it returned. Its fences and the floor it gives a key's next home are its own
// applied positions, which a power loss before the sync would take back below a write it
// acknowledged, though another writer holds its own.
func TestLockConfirmWriteSynced(t *testing.T) {
	for _, writer := range []string{"A", "B"} {
		t.Run("written on "+writer, func(t *testing.T) {
			h := newHarness(t)
			cfg := lockCfg
			cfg.HoldUnsynced = true
			a, b := h.addNode("A", cfg), h.addNode("B", lockCfg)
			h.connect(b, a)
			if _, err := a.publish(mapDoc(1, `,"lock_homes":["A"]`, "A", "B")); err != nil {
				t.Fatal(err)
			}
			h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
			h.advance(lockQuarantine)
			w := map[string]*node{"A": a, "B": b}[writer]
			g := w.lockResult(w.acquire("k", 2*time.Second, 0), "")
			seq := w.writeTokened(replica.WireToken(g.Token), put("t", "k", "1"))
			id := w.lockOp(replica.LockOp{Kind: replica.KindLockConfirm, Table: "t", Key: []byte("k"), Token: g.Token, Origin: w.origin, Seq: seq})
			if got := a.rep.Origin(w.origin).AppliedSeq; got < seq {
				t.Fatalf("A applied %s's seq %d, want %d: the write reached the home", writer, got, seq)
			}
			w.unanswered(id)
			if !a.rep.NeedsSync() {
				t.Fatal("A waits to confirm a write it applied and has not synced, and does not ask for a sync")
			}
			h.check(a, a.rep.Synced(a.clock(), a.rep.SyncPoint()))
			h.pump()
			w.lockResult(id, "")
			if a.rep.NeedsSync() {
				t.Fatal("A still asks for a sync once the confirm is answered")
			}
		})
	}
}

// TestLockMoveSkippedGeneration: A held generation 1 (home B) and adopts generation 3
// (home A) without generation 2, whose homes it never saw and which may have granted and
// confirmed any key. Every key A homes then waits, past its quarantine, for the floor of
// every member (move-pending while C cannot answer), and after it for a quarantine from
// the floor's arrival.
func TestLockMoveSkippedGeneration(t *testing.T) {
	h, a, b, c := lockCluster(t, `"B"`)
	ba, cb := h.links[0], h.links[1]
	ba.hold = true
	for _, n := range []*node{b, c} {
		if _, err := n.publish(mapDoc(2, `,"lock_homes":["C"]`, "A", "B", "C")); err != nil {
			t.Fatal(err)
		}
	}
	doc3 := mapDoc(3, `,"lock_homes":["A"]`, "A", "B", "C")
	if _, err := a.publish(doc3); err != nil {
		t.Fatal(err)
	}
	cb.hold = true // C's answers cannot reach A
	ba.hold = false
	h.pump()
	h.advance(lockQuarantine)
	h.advance(2 * replica.DefaultPlacementPoll)
	// The maps A held name B alone as k's previous home, whose floor need not cover what
	// C, k's home under generation 2, confirmed: A waits for every member's, C's too.
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeMovePending))
	cb.hold = false
	h.advance(2 * replica.DefaultPlacementPoll)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeQuarantined))
	h.advance(lockQuarantine)
	a.lockResult(a.acquire("k", time.Second, 0), "")
}

// TestLockMoveNotedBeforeMap: a home notes the move a map makes at it in the store before
// it stores the map, so a crash between the two writes never leaves a stored map whose
// move is lost: here the note's write fails (the disk full), and A, restarted, holds the
// map before it, takes the new map again from C with its move, and grants k nothing while
// B's floor is out of reach; it never holds the new map without its move, whose only guard
// would then be its restart quarantine.
func TestLockMoveNotedBeforeMap(t *testing.T) {
	h, a, b, c := lockCluster(t, `"B"`)
	k := ""
	for i := 0; k == ""; i++ {
		if x := "k" + strconv.Itoa(i); (clustermap.Map{LockHomes: []string{"A", "B"}}).Home([]byte("t"), []byte(x)) == "A" {
			k = x
		}
	}
	f := a.withFaults() // a restart: its connections are gone
	f.failControl = map[string]bool{"lock-moves": true}
	h.connect(b, a)
	if _, err := b.publish(mapDoc(2, `,"lock_homes":["A","B"]`, "A", "B", "C")); err != nil {
		t.Fatal(err)
	}
	h.pump()
	f.failControl = nil
	a.restart()
	h.links[1].hold = true // C-B: B, and its floor, out of A's reach
	h.connect(c, a)
	if g := a.rep.ClusterMap().Generation; g != 2 {
		t.Fatalf("A holds generation %d, want 2 from C", g)
	}
	h.advance(lockQuarantine)
	h.advance(2 * replica.DefaultPlacementPoll)
	if ans, ok := a.answerOf(a.acquire(k, time.Second, 0)); !ok || ans.Code == "" {
		t.Fatalf("A, restarted, answered %+v (%v) for %s with B's floor out of reach, want a refusal", ans, ok, k)
	}
}

// TestLockMovesBounded: a home keeps at most LockMaxMoves moves waiting for floors; a map
// that would make one more merges them into one that waits for every member's floor,
// which covers each of theirs. A (at most 2) is given keys from B twice with B's floors out
// of reach (2 moves); the next map merges them into one (1), the next adds one (2); once B
// answers, every floor comes in and A grants.
func TestLockMovesBounded(t *testing.T) {
	h := newHarness(t)
	cfg := lockCfg
	cfg.LockMaxMoves = 2
	a, b := h.addNode("A", cfg), h.addNode("B", lockCfg)
	ab := h.connect(b, a)
	if _, err := a.publish(mapDoc(1, `,"lock_homes":["B"]`, "A", "B")); err != nil {
		t.Fatal(err)
	}
	h.advance(lockQuarantine)
	ab.hold = true
	moves := func() int {
		st := a.rep.LockStatus().Table
		return st.MoveQuarantines + st.MovesAwaitingFloor
	}
	for i, step := range []struct {
		homes string
		moves int
	}{{`"A","B"`, 1}, {`"A"`, 2}, {`"A","B"`, 1}, {`"A"`, 2}} {
		if _, err := a.publish(mapDoc(uint64(2+i), `,"lock_homes":[`+step.homes+`]`, "A", "B")); err != nil {
			t.Fatal(err)
		}
		h.pump()
		if n := moves(); n != step.moves {
			t.Fatalf("after generation %d: A keeps %d moves, want %d", 2+i, n, step.moves)
		}
	}
	h.advance(lockQuarantine)
	h.advance(2 * replica.DefaultPlacementPoll)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeMovePending))
	ab.hold = false
	h.connect(b, a) // the held connection timed out meanwhile
	h.advance(2 * replica.DefaultPlacementPoll)
	a.lockResult(a.acquire("k", time.Second, 0), wire.Code(lock.CodeQuarantined)) // from the floors' arrival
	h.advance(lockQuarantine)
	a.lockResult(a.acquire("k", time.Second, 0), "")
	if n := moves(); n != 0 {
		t.Fatalf("A keeps %d moves once every floor is in and applied", n)
	}
}
