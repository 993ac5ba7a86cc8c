package lock_test

import (
	"reflect"
	"testing"
	"time"

	"plait/protocol/lock"
)

// block is the counters a delegation reserves in these tests; delegTTL their longest
// delegation, past goodConfig's MaxTTL (10 s).
const (
	block    = 3
	delegTTL = 20 * time.Second
)

// delegating is a home of goodConfig with delegation on (two delegations, blocks of
// three counters) past its restart quarantine, a deputy of the same bounds, and that
// instant.
func delegating(t *testing.T) (*lock.Table, *lock.Deputy, time.Time) {
	t.Helper()
	tab, now := open(t, func(c *lock.Config) { c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 2, block, delegTTL })
	cfg := goodConfig()
	cfg.MaxDelegations, cfg.DelegationBlock, cfg.MaxDelegationTTL = 2, block, delegTTL
	dep, err := lock.NewDeputy(cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	return tab, dep, now
}

func mustDelegate(t *testing.T, r lock.Result) lock.Delegation {
	t.Helper()
	if r.Code != lock.CodeDelegated {
		t.Fatalf("got %s (%+v), want delegated", r.Code, r)
	}
	return r.Delegation
}

func mustTake(t *testing.T, dep *lock.Deputy, now time.Time, d lock.Delegation) {
	t.Helper()
	if c := dep.Take(now, now, d); c != lock.CodeDelegated {
		t.Fatalf("Take: got %s, want delegated", c)
	}
}

// TestDelegationTokensOrder: a delegate's tokens order above the home's grants before the
// delegation and below its grants after, and the delegate grants no more than its block.
func TestDelegationTokensOrder(t *testing.T) {
	tab, dep, now := delegating(t)
	before := mustGrant(t, tab.Acquire(now, key("other"), "h", time.Second, 0, 1, fence))
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", 5*time.Second, 1, fence))
	mustTake(t, dep, now, d)
	var tokens []lock.Token
	for i := range block + 1 {
		r := dep.Acquire(now, key("k"), "c", time.Second, nil)
		if i == block {
			if r.Code != lock.CodeNotDelegated {
				t.Fatalf("acquire %d past the block of %d: got %s, want not-delegated", i+1, block, r.Code)
			}
			break
		}
		l := mustGrant(t, r)
		tokens = append(tokens, l.Token)
		if got := dep.Release(now, key("k"), l.Token); got.Code != lock.CodeReleased {
			t.Fatalf("release: got %s", got.Code)
		}
	}
	after := mustGrant(t, tab.Acquire(now, key("third"), "h", time.Second, 0, 1, fence))
	all := append(append([]lock.Token{before.Token}, tokens...), after.Token)
	for i := 1; i < len(all); i++ {
		if lock.Compare(all[i-1], all[i]) >= 0 {
			t.Fatalf("token %d %v does not order below token %d %v (home before, %d delegated, home after)", i-1, all[i-1], i, all[i], block)
		}
	}
}

// TestDelegationRecallReturn: a request at the home for a delegated key recalls the
// delegation and waits; the deputy returns it only once its lease ended; the waiter is then
// granted with a fence that covers the delegate's returned positions.
func TestDelegationRecallReturn(t *testing.T) {
	tab, dep, now := delegating(t)
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", 5*time.Second, 1, fence))
	mustTake(t, dep, now, d)
	l := mustGrant(t, dep.Acquire(now, key("k"), "c", time.Second, fence))

	r := tab.Acquire(now, key("k"), "other", time.Second, time.Second, 1, fence)
	if r.Code != lock.CodeQueued || !r.Recall || r.Delegation.Token != d.Token {
		t.Fatalf("acquire of a delegated key: got %s recall=%v %v, want queued, recalling %v", r.Code, r.Recall, r.Delegation.Token, d.Token)
	}
	if r2 := tab.Acquire(now, key("k"), "third", time.Second, 0, 1, fence); r2.Code != lock.CodeRecalled || r2.Recall {
		t.Fatalf("second acquire: got %s recall=%v, want lock-recalled, no second recall", r2.Code, r2.Recall)
	}
	if !dep.Recall(now, key("k"), d.Token) {
		t.Fatal("the deputy does not hold the delegation it took")
	}
	if got := dep.Acquire(now, key("x"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("acquire of a key never delegated: got %s", got.Code)
	}
	if got := dep.Return(now, key("k"), d.Token); got.Code != lock.CodeHeld {
		t.Fatalf("return while a lease is live: got %s, want lock-held", got.Code)
	}
	if got := dep.Renew(now, key("k"), l.Token, time.Second); got.Code != lock.CodeRecalled {
		t.Fatalf("renew after the recall: got %s, want lock-recalled", got.Code)
	}
	later := now.Add(100 * time.Millisecond)
	if got := dep.Release(later, key("k"), l.Token); got.Code != lock.CodeReleased {
		t.Fatalf("release: got %s", got.Code)
	}
	if got := dep.Acquire(later, key("k"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("acquire of a recalled delegation's free key: got %s, want not-delegated", got.Code)
	}
	if got := dep.Returnable(later); len(got) != 1 || got[0].Token != d.Token {
		t.Fatalf("returnable: got %v", got)
	}
	if got := dep.Return(later, key("k"), d.Token); got.Code != lock.CodeReturned {
		t.Fatalf("return: got %s, want returned", got.Code)
	}
	if got := dep.Acquire(later, key("k"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("acquire after the return: got %s, want not-delegated", got.Code)
	}
	if got := dep.Confirm(later, key("k"), l.Token); got {
		t.Fatal("the deputy confirms a lease it released")
	}

	positions := lock.Fence{{Origin: homeB, Seq: 40}}
	ret := tab.Return(later, key("k"), d.Token, positions, fence)
	if ret.Code != lock.CodeReturned || len(ret.Events) != 1 || ret.Events[0].Result.Code != lock.CodeGranted {
		t.Fatalf("return at the home: got %s %+v, want returned and the waiter granted", ret.Code, ret.Events)
	}
	want := lock.Fence{{Origin: homeA, Seq: 7}, {Origin: homeB, Seq: 40}}
	if got := ret.Events[0].Result.Lease.Fence; !reflect.DeepEqual(got, want) {
		t.Fatalf("the waiter's fence: got %v, want %v (the home's joined with the delegate's)", got, want)
	}
	if got := tab.Return(later, key("k"), d.Token, positions, fence); got.Code != lock.CodeLost {
		t.Fatalf("a second return: got %s, want lock-lost", got.Code)
	}
	// Once the home's own positions cover what was returned, fences are its own again.
	caught := lock.Fence{{Origin: homeA, Seq: 7}, {Origin: homeB, Seq: 41}}
	tab.Tick(later, caught)
	if owed, ready := tab.FloorOwed(); len(owed) != 0 || !ready {
		t.Fatalf("owed after the home caught up: %v %v", owed, ready)
	}
	if s := tab.Stats(); s.Delegations != 0 || s.Delegated != 1 || s.Recalled != 1 || s.Returned != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestDelegationExpiry: an unreturned delegation holds its key until its expiry at the home
// (Granted + TTL·(1+ρ)), and after it until its delegate answers with its positions; the
// delegate stops before that expiry, and grants no lease that would outlive its deadline.
func TestDelegationExpiry(t *testing.T) {
	tab, dep, now := delegating(t)
	const ttl = 5 * time.Second
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", ttl, 1, fence))
	if want := now.Add(lock.HomeTTL(ttl, lock.DefaultDrift)); !d.Expiry.Equal(want) {
		t.Fatalf("expiry %v, want %v", d.Expiry, want)
	}
	mustTake(t, dep, now, d)
	deadline := lock.HolderDeadline(now, ttl, lock.DefaultDrift)
	if !deadline.Before(d.Expiry) {
		t.Fatalf("the delegate's deadline %v is not before the home's expiry %v", deadline, d.Expiry)
	}
	// A lease that would end one nanosecond past the deadline is sent to the home; one
	// that ends at it is granted.
	at := deadline.Add(-lock.HomeTTL(time.Second, lock.DefaultDrift))
	if got := dep.Acquire(at.Add(time.Nanosecond), key("k"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("a lease past the deadline: got %s, want not-delegated", got.Code)
	}
	dep2, _ := lock.NewDeputy(func() lock.Config {
		c := goodConfig()
		c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL = 1, 1, delegTTL
		return c
	}(), now)
	if c := dep2.Take(now, now, d); c != lock.CodeDelegated {
		t.Fatalf("take: %s", c)
	}
	if got := dep2.Acquire(at, key("k"), "c", time.Second, nil); got.Code != lock.CodeGranted {
		t.Fatalf("a lease ending at the deadline: got %s, want granted", got.Code)
	}

	before := d.Expiry.Add(-time.Nanosecond)
	if got := tab.Acquire(before, key("k"), "o", time.Second, 0, 1, fence); got.Code != lock.CodeRecalled || !got.Recall {
		t.Fatalf("before the expiry: got %s recall=%v, want lock-recalled", got.Code, got.Recall)
	}
	if got := tab.Acquire(d.Expiry, key("k"), "o", time.Second, 0, 1, fence); got.Code != lock.CodeDelegationPending {
		t.Fatalf("at the expiry, unreturned: got %s, want delegation-pending", got.Code)
	}
	if got := tab.Delegate(d.Expiry, key("k"), "n3", time.Second, 1, fence); got.Code != lock.CodeHeld {
		t.Fatalf("delegate while one is pending: got %s, want lock-held", got.Code)
	}
	// The delegate forgot it (past its deadline): it answers with its positions all the
	// same, once no lease a deputy of its node made before could still be live.
	if got := dep.Return(now.Add(lock.HomeTTL(goodConfig().MaxTTL, lock.DefaultDrift)), key("k"), d.Token); got.Code != lock.CodeNotDelegated {
		t.Fatalf("deputy's return after its deadline: got %s, want not-delegated", got.Code)
	}
	if got := tab.Return(d.Expiry, key("k"), d.Token, lock.Fence{{Origin: homeB, Seq: 9}}, fence); got.Code != lock.CodeReturned {
		t.Fatalf("return of an ended delegation: got %s", got.Code)
	}
	l := mustGrant(t, tab.Acquire(d.Expiry, key("k"), "o", time.Second, 0, 1, fence))
	if want := (lock.Fence{{Origin: homeA, Seq: 7}, {Origin: homeB, Seq: 9}}); !reflect.DeepEqual(l.Fence, want) {
		t.Fatalf("fence after the return: %v, want %v", l.Fence, want)
	}
	if s := tab.Stats(); s.DelegationsExpired != 1 || s.Delegations != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestDelegationBounds: a home keeps at most MaxDelegations delegations (an ended one
// counts until returned), delegates no held key, and renews a delegation only until it is
// recalled.
func TestDelegationBounds(t *testing.T) {
	tab, _, now := delegating(t)
	d1 := mustDelegate(t, tab.Delegate(now, key("a"), "n2", time.Second, 1, fence))
	mustDelegate(t, tab.Delegate(now, key("b"), "n2", time.Second, 1, fence))
	if got := tab.Delegate(now, key("c"), "n2", time.Second, 1, fence); got.Code != lock.CodeNoDelegation {
		t.Fatalf("a third delegation: got %s, want no-delegation", got.Code)
	}
	mustGrant(t, tab.Acquire(now, key("held"), "h", time.Second, 0, 1, fence))
	if got := tab.Delegate(now, key("held"), "n2", time.Second, 1, fence); got.Code != lock.CodeHeld {
		t.Fatalf("delegate a held key: got %s, want lock-held", got.Code)
	}
	if got := tab.Acquire(now, key("a"), "h", time.Second, 0, 1, fence); got.Code != lock.CodeRecalled {
		t.Fatalf("acquire a delegated key: got %s", got.Code)
	}
	if got := tab.RenewDelegation(now, key("a"), d1.Token, time.Second); got.Code != lock.CodeRecalled {
		t.Fatalf("renew a recalled delegation: got %s, want lock-recalled", got.Code)
	}
	end := now.Add(lock.HomeTTL(time.Second, lock.DefaultDrift))
	tab.Tick(end, fence)
	if got := tab.Delegate(end, key("c"), "n2", time.Second, 1, fence); got.Code != lock.CodeNoDelegation {
		t.Fatalf("a delegation while two ended unreturned: got %s, want no-delegation", got.Code)
	}
	if got := len(tab.Delegations()); got != 2 {
		t.Fatalf("delegations kept: %d, want 2", got)
	}
	off, _ := open(t, nil)
	if got := off.Delegate(end, key("c"), "n2", time.Second, 1, fence); got.Code != lock.CodeNoDelegation {
		t.Fatalf("a home with delegation off: got %s, want no-delegation", got.Code)
	}
}

// TestDelegationMoveAway: a map that moves a delegated key away keeps the delegation until
// its delegate returns it, and the floor the old home gives is not ready until then, and
// then holds the delegate's positions.
func TestDelegationMoveAway(t *testing.T) {
	tab, _, now := delegating(t)
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", time.Second, 1, fence))
	tab.MoveAway(now, 2, func(k lock.Key) bool { return string(k.Key) != "k" })
	if _, ready := tab.FloorOwed(); ready {
		t.Fatal("the floor is ready while a delegation of a key moved away is out")
	}
	if got := tab.Delegations(); len(got) != 1 || got[0].Token != d.Token || !got[0].Recalled {
		t.Fatalf("delegations after the move: %+v, want the one out, recalled", got)
	}
	positions := lock.Fence{{Origin: homeB, Seq: 12}}
	if got := tab.Return(now, key("k"), d.Token, positions, fence); got.Code != lock.CodeReturned {
		t.Fatalf("return after the move: got %s", got.Code)
	}
	owed, ready := tab.FloorOwed()
	if !ready || !reflect.DeepEqual(owed, positions) {
		t.Fatalf("floor owed: %v ready=%v, want %v ready", owed, ready, positions)
	}
}

// TestDeputyReturnEnds: a delegate that returns a delegation of its own accord (not
// recalled) grants, renews and confirms nothing under it afterwards.
func TestDeputyReturnEnds(t *testing.T) {
	tab, dep, now := delegating(t)
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", 5*time.Second, 1, fence))
	mustTake(t, dep, now, d)
	l := mustGrant(t, dep.Acquire(now, key("k"), "c", time.Second, nil))
	dep.Release(now, key("k"), l.Token)
	if got := dep.Return(now, key("k"), d.Token); got.Code != lock.CodeReturned {
		t.Fatalf("return: got %s, want returned", got.Code)
	}
	if got := dep.Acquire(now, key("k"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("acquire after a return: got %s, want not-delegated", got.Code)
	}
	if _, ok := dep.Delegation(key("k")); ok {
		t.Fatal("the deputy still holds a delegation it returned")
	}
	if s := dep.Stats(); s.Delegations != 0 || s.Taken != 1 || s.Returned != 1 || s.Granted != 1 {
		t.Fatalf("deputy stats: %+v", s)
	}
}

// TestDelegationRestore: a table made after a restart holds the delegations its home noted
// and did not see returned as ended unreturned, grants their keys only once returned, and
// delegates no more than MaxDelegations; a delegation may last past MaxTTL.
func TestDelegationRestore(t *testing.T) {
	tab, _, now := delegating(t)
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", delegTTL, 1, fence))
	if got := tab.Delegate(now, key("long"), "n2", delegTTL+1, 1, fence); got.Code != lock.CodeBadTTL {
		t.Fatalf("a delegation past MaxDelegationTTL: got %s, want bad-ttl", got.Code)
	}
	cfg := goodConfig()
	cfg.MaxDelegations, cfg.DelegationBlock, cfg.MaxDelegationTTL = 1, block, delegTTL
	re, err := lock.New(cfg, homeA, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	other := d
	other.Key = key("other")
	if n := re.Restore([]lock.Delegation{d, other}, lock.Fence{{Origin: homeA, Seq: 9}}); n != 1 {
		t.Fatalf("restored %d, want 1 (MaxDelegations)", n)
	}
	open := now.Add(cfg.Quarantine())
	if got := re.Acquire(open, key("k"), "h", time.Second, 0, 1, fence); got.Code != lock.CodeDelegationPending {
		t.Fatalf("acquire of a restored delegation's key: got %s, want delegation-pending", got.Code)
	}
	if got := re.Return(open, key("k"), d.Token, lock.Fence{{Origin: homeB, Seq: 5}}, fence); got.Code != lock.CodeReturned {
		t.Fatalf("return of a restored delegation: got %s", got.Code)
	}
	l := mustGrant(t, re.Acquire(open, key("k"), "h", time.Second, 0, 1, fence))
	if want := (lock.Fence{{Origin: homeA, Seq: 9}, {Origin: homeB, Seq: 5}}); !reflect.DeepEqual(l.Fence, want) {
		t.Fatalf("fence after the return: %v, want %v (the noted owed positions and the returned ones)", l.Fence, want)
	}
}

// TestDeputyRestart: a deputy made after its node restarted gives back a delegation it
// does not hold only once every lease an earlier deputy could have granted has ended
// (MaxTTL·(1+ρ)), since their holders may not have stopped.
func TestDeputyRestart(t *testing.T) {
	tab, _, now := delegating(t)
	d := mustDelegate(t, tab.Delegate(now, key("k"), "n2", delegTTL, 1, fence))
	cfg := goodConfig()
	cfg.MaxDelegations, cfg.DelegationBlock, cfg.MaxDelegationTTL = 2, block, delegTTL
	restarted := now.Add(time.Second)
	dep, err := lock.NewDeputy(cfg, restarted)
	if err != nil {
		t.Fatal(err)
	}
	over := restarted.Add(lock.HomeTTL(cfg.MaxTTL, cfg.Drift))
	if got := dep.Return(over.Add(-time.Nanosecond), key("k"), d.Token); got.Code != lock.CodeHeld || got.RetryAfter != time.Nanosecond {
		t.Fatalf("return of a forgotten delegation just before its leases surely ended: got %s after %v, want lock-held after 1ns", got.Code, got.RetryAfter)
	}
	if got := dep.Return(over, key("k"), d.Token); got.Code != lock.CodeNotDelegated {
		t.Fatalf("return of a forgotten delegation once its leases ended: got %s, want not-delegated", got.Code)
	}
}

// TestDeputyTakesNoDelegationGivenBack: a delegation whose recall reached the delegate before
// the home's answer that granted it (the deputy answered that it held nothing, and the home
// took the key back and granted it on) is not taken when that answer comes, nor is one the
// deputy returned when an answer for it comes again: its leases would overlap the home's.
func TestDeputyTakesNoDelegationGivenBack(t *testing.T) {
	tab, dep, now := delegating(t)
	cfg := goodConfig()
	late := now.Add(lock.HomeTTL(cfg.MaxTTL, cfg.Drift)) // past the deputy's forgetting
	d := mustDelegate(t, tab.Delegate(late, key("k"), "n2", delegTTL, 1, fence))
	if r := tab.Acquire(late, key("k"), "other", time.Second, 0, 1, fence); !r.Recall {
		t.Fatalf("acquire of a delegated key: got %s, want a recall", r.Code)
	}
	if got := dep.Return(late, key("k"), d.Token); got.Code != lock.CodeNotDelegated {
		t.Fatalf("recall before the delegation came: got %s, want not-delegated", got.Code)
	}
	if got := tab.Return(late, key("k"), d.Token, fence, fence); got.Code != lock.CodeReturned {
		t.Fatalf("home return: got %s, want returned", got.Code)
	}
	if c := dep.Take(late, late, d); c == lock.CodeDelegated {
		t.Fatal("the deputy took a delegation it had answered a recall of")
	}
	if got := dep.Acquire(late, key("k"), "c", time.Second, nil); got.Code != lock.CodeNotDelegated {
		t.Fatalf("acquire under a delegation given back: got %s, want not-delegated", got.Code)
	}

	d2 := mustDelegate(t, tab.Delegate(late, key("j"), "n2", delegTTL, 1, fence))
	mustTake(t, dep, late, d2)
	if got := dep.Return(late, key("j"), d2.Token); got.Code != lock.CodeReturned {
		t.Fatalf("return: got %s, want returned", got.Code)
	}
	if c := dep.Take(late, late, d2); c == lock.CodeDelegated {
		t.Fatal("the deputy took again a delegation it returned")
	}
	if got := tab.Return(late, key("j"), d2.Token, fence, fence); got.Code != lock.CodeReturned {
		t.Fatalf("home return: got %s, want returned", got.Code)
	}
	d3 := mustDelegate(t, tab.Delegate(late, key("j"), "n2", delegTTL, 1, fence))
	mustTake(t, dep, late, d3) // a later delegation of the same home is taken
}
