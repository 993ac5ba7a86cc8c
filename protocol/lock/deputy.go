package lock

import (
	"slices"
	"time"
)

// Deputy is the delegate's side of its delegations (docs/design.md §25.9): it grants,
// renews, releases and confirms the leases of the keys delegated to its node, with no
// request to their home. It is not safe for concurrent use; the replica owns it.
//
// Time is the delegate's clock, an input as in Table. A delegation lasts on it until its
// holder deadline (HolderDeadline from the moment the delegate sent its request), which
// within the drift bound comes before the home takes the key back; every lease the deputy
// grants ends there by that deadline (it grants or renews none that would outlive it), so
// its holders too have stopped before the home grants the key again. A lease's fence is
// the delegation's joined with the positions given (the delegate's applied positions): the
// first covers what the home's earlier holders confirmed, the second what this deputy's
// earlier holders confirmed (the replica confirms a write under a delegated lease only once
// the delegate applied and synced it, as a home does).
type Deputy struct {
	cfg   Config
	last  time.Time
	keys  map[keyID]*deputed
	stats DeputyStats
	// forgot is when every lease a deputy of this node granted before this one was made
	// has ended: MaxTTL·(1+ρ) after it was made. Until then it answers no return of a
	// delegation it does not hold (the node may have restarted, forgetting it).
	forgot time.Time
	// given is, per home, the highest token of a delegation this deputy gave back or
	// answered a recall of holding nothing: the answer that grants a delegation may come
	// after the home's recall of it (another request for the key came meanwhile), and the
	// home, answered, grants the key on. A delegation at or below it is never taken: a
	// home's delegations order by token as it grants them. At most MaxDelegations homes;
	// once full, a delegation of a home not in it is not taken either.
	given map[[16]byte]Token
}

type deputed struct {
	d        Delegation
	deadline time.Time // the delegate stops using d then, on its clock
	next     uint64    // the counter of the next lease it grants
	lease    *Lease    // nil when no lease holds the key
}

// DeputyStats are a deputy's counters.
type DeputyStats struct {
	Delegations int // delegations held now
	Leases      int // leases live now
	// Taken counts delegations taken, Returned those returned, Ended those that reached
	// their deadline; Granted, Renewed, Released and Expired count leases as Stats does;
	// NotDelegated the acquires and renewals sent on to the home (CodeNotDelegated).
	Taken, Returned, Ended              uint64
	Granted, Renewed, Released, Expired uint64
	NotDelegated, ConfirmsLost          uint64
}

// NewDeputy makes an empty deputy with the node's bounds (MaxDelegations bounds the
// delegations it holds) and its clock now. Made after a restart, it may have forgotten
// leases it granted whose holders have not stopped: it gives back no delegation it does
// not hold until MaxTTL·(1+ρ) from now (Return).
func NewDeputy(cfg Config, now time.Time) (*Deputy, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Deputy{cfg: cfg, last: now, keys: map[keyID]*deputed{}, given: map[[16]byte]Token{}, forgot: now.Add(HomeTTL(cfg.MaxTTL, cfg.Drift))}, nil
}

func (p *Deputy) clamp(now time.Time) time.Time {
	if now.After(p.last) {
		p.last = now
	}
	return p.last
}

// Take holds d, which the home granted (or renewed: the same Token) in answer to a request
// this node sent at sent, on its clock. CodeDelegated (or CodeRenewed for a delegation it
// holds, whose deadline then runs from sent); CodeHeld when it holds another delegation of
// the key; CodeNoDelegation when it holds MaxDelegations; CodeBadTTL for a TTL not in (0,
// MaxDelegationTTL], or a block not in [1, DelegationBlockLimit]. A delegation recalled, or one whose deadline is already past, is not taken
// (CodeRecalled, CodeNotDelegated): the caller returns it at once. Nor is one whose token is
// at or below one of its home this deputy gave back or answered a recall of (CodeRecalled):
// the recall overtook the answer that delegated it, and the home may have granted the key on.
func (p *Deputy) Take(now, sent time.Time, d Delegation) Code {
	p.tick(now)
	now = p.last
	deadline := HolderDeadline(sent, d.TTL, p.cfg.Drift)
	switch {
	case d.TTL <= 0 || d.TTL > p.cfg.MaxDelegationTTL || d.Block < 1 || d.Block > DelegationBlockLimit:
		return CodeBadTTL
	case d.Recalled:
		return CodeRecalled
	case !now.Before(deadline):
		return CodeNotDelegated
	}
	if h := p.keys[d.Key.id()]; h != nil {
		if h.d.Token != d.Token {
			return CodeHeld
		}
		h.d.TTL, h.d.Granted, h.d.Expiry = d.TTL, d.Granted, d.Expiry
		h.deadline = deadline
		return CodeRenewed
	}
	if len(p.keys) >= p.cfg.MaxDelegations {
		return CodeNoDelegation
	}
	if g, ok := p.given[d.Token.Home]; ok && d.Token.Compare(g) <= 0 || !ok && len(p.given) >= p.cfg.MaxDelegations {
		return CodeRecalled // given back before it came: the home may have granted the key on
	}
	p.keys[d.Key.id()] = &deputed{d: d.clone(), deadline: deadline, next: d.Token.Counter}
	p.stats.Taken++
	return CodeDelegated
}

// Acquire grants a lease on key for ttl under the key's delegation, at once: CodeGranted
// with the block's next token and a fence of the delegation's joined with positions. It
// first does what time made due (as Tick). CodeBadTTL as Table.Acquire; CodeNotDelegated
// when it holds no delegation of key, it is recalled, its counters are spent, or the lease
// would end after the delegation's deadline (the request goes to the home, which recalls
// it); CodeHeld, with RetryAfter, when a lease holds the key (nothing waits here: a waiter
// goes to the home).
func (p *Deputy) Acquire(now time.Time, key Key, holder string, ttl time.Duration, positions Fence) Result {
	p.tick(now)
	now = p.last
	if ttl <= 0 || ttl > p.cfg.MaxTTL {
		return Result{Code: CodeBadTTL}
	}
	h := p.keys[key.id()]
	expiry := now.Add(HomeTTL(ttl, p.cfg.Drift))
	switch {
	case h != nil && h.lease != nil:
		return Result{Code: CodeHeld, RetryAfter: h.lease.Expiry.Sub(now)}
	case h == nil || h.d.Recalled || h.next-h.d.Token.Counter >= h.d.Block || expiry.After(h.deadline):
		p.stats.NotDelegated++
		return Result{Code: CodeNotDelegated}
	}
	tok := h.d.Token
	tok.Counter = h.next
	h.next++
	h.lease = &Lease{Token: tok, Holder: holder, Granted: now, TTL: ttl, Expiry: expiry, Fence: join(h.d.Fence, positions)}
	p.stats.Granted++
	return Result{Code: CodeGranted, Lease: *h.lease, Fence: slices.Clone(h.lease.Fence)}
}

// live is key's deputed state if token is its lease and live at now.
func (p *Deputy) live(now time.Time, key Key, token Token) *deputed {
	h := p.keys[key.id()]
	if h == nil || h.lease == nil || h.lease.Token != token || !now.Before(h.lease.Expiry) {
		return nil
	}
	return h
}

// Renew runs token's lease on key from now for ttl, as Table.Renew: CodeRenewed;
// CodeBadTTL; CodeLost when it is not the key's live lease here; CodeRecalled once the
// delegation is recalled, and CodeNotDelegated when the renewed lease would outlive the
// delegation's deadline (the lease then runs out where it was).
func (p *Deputy) Renew(now time.Time, key Key, token Token, ttl time.Duration) Result {
	p.tick(now)
	now = p.last
	if ttl <= 0 || ttl > p.cfg.MaxTTL {
		return Result{Code: CodeBadTTL}
	}
	h := p.live(now, key, token)
	expiry := now.Add(HomeTTL(ttl, p.cfg.Drift))
	switch {
	case h == nil:
		return Result{Code: CodeLost}
	case h.d.Recalled:
		return Result{Code: CodeRecalled, RetryAfter: h.lease.Expiry.Sub(now)}
	case expiry.After(h.deadline):
		p.stats.NotDelegated++
		return Result{Code: CodeNotDelegated}
	}
	h.lease.Granted, h.lease.TTL, h.lease.Expiry = now, ttl, expiry
	p.stats.Renewed++
	return Result{Code: CodeRenewed, Lease: *h.lease}
}

// Release frees key if token is its live lease here (CodeReleased), else CodeLost.
func (p *Deputy) Release(now time.Time, key Key, token Token) Result {
	p.tick(now)
	h := p.live(p.last, key, token)
	if h == nil {
		return Result{Code: CodeLost}
	}
	h.lease = nil
	p.stats.Released++
	return Result{Code: CodeReleased}
}

// Confirm reports whether token is key's live lease here: the delegate's answer to a write
// under it that it applied (docs/design.md §25.6).
func (p *Deputy) Confirm(now time.Time, key Key, token Token) bool {
	p.tick(now)
	ok := p.live(p.last, key, token) != nil
	if !ok {
		p.stats.ConfirmsLost++
	}
	return ok
}

// Check reports whether token is key's live lease here by its holder's deadline on this
// clock (Granted + TTL·(1−ρ)), as Table.Check.
func (p *Deputy) Check(now time.Time, key Key, token Token) bool {
	p.tick(now)
	h := p.live(p.last, key, token)
	ok := h != nil && p.last.Before(HolderDeadline(h.lease.Granted, h.lease.TTL, p.cfg.Drift))
	if !ok {
		p.stats.ConfirmsLost++
	}
	return ok
}

// Lease is token's lease on key if it is live here, uncounted (a lock-fence's answer).
func (p *Deputy) Lease(now time.Time, key Key, token Token) (Lease, bool) {
	h := p.live(p.clamp(now), key, token)
	if h == nil {
		return Lease{}, false
	}
	return *h.lease, true
}

// Recall marks the delegation of key named by token recalled: it grants and renews no
// more under it. It reports whether the deputy holds it.
func (p *Deputy) Recall(now time.Time, key Key, token Token) bool {
	p.tick(now)
	h := p.keys[key.id()]
	if h == nil || h.d.Token != token {
		return false
	}
	h.d.Recalled = true
	return true
}

// Return gives back key's delegation named by token once none of its leases is live:
// CodeReturned, and the deputy forgets it; the caller sends the home its applied positions
// with it (Table.Return). CodeHeld, with RetryAfter until the lease's expiry here, while a
// lease is live: the delegation is then recalled, so the key is returned at the latest
// when that lease ends. For a delegation it does not hold (it ended, it was returned, or
// the node restarted): CodeHeld, with RetryAfter, until every lease a deputy of this node
// granted before this one was made has ended (NewDeputy), then CodeNotDelegated: none of
// its leases is live, so the caller may answer with its applied positions all the same.
func (p *Deputy) Return(now time.Time, key Key, token Token) Result {
	p.tick(now)
	now = p.last
	h := p.keys[key.id()]
	switch {
	case (h == nil || h.d.Token != token) && now.Before(p.forgot):
		return Result{Code: CodeHeld, RetryAfter: p.forgot.Sub(now)}
	case h == nil || h.d.Token != token:
		p.give(token)
		return Result{Code: CodeNotDelegated}
	case h.lease != nil:
		h.d.Recalled = true
		return Result{Code: CodeHeld, RetryAfter: h.lease.Expiry.Sub(now)}
	}
	delete(p.keys, key.id())
	p.give(token)
	p.stats.Returned++
	return Result{Code: CodeReturned, Delegation: h.d.clone()}
}

// give notes token given back (given).
func (p *Deputy) give(token Token) {
	g, ok := p.given[token.Home]
	if !ok && len(p.given) >= p.cfg.MaxDelegations {
		return // full: Take refuses every home not in it
	}
	if !ok || token.Compare(g) > 0 {
		p.given[token.Home] = token
	}
}

// Returnable lists the delegations recalled with no live lease, in key order: the caller
// returns each (Return) and answers its home.
func (p *Deputy) Returnable(now time.Time) []Delegation {
	p.tick(now)
	var out []Delegation
	for _, h := range p.keys {
		if h.d.Recalled && h.lease == nil {
			out = append(out, h.d.clone())
		}
	}
	slices.SortFunc(out, func(a, b Delegation) int { return compareKeys(a.Key, b.Key) })
	return out
}

// RenewDue is the delegation of key when it is due to be renewed at its home
// (Table.RenewDelegation; the answer is taken with Take, the same Token): held, not
// recalled, counters left to grant, and less than half its TTL left before its deadline at
// now. The caller asks at a grant under it, so a key its node keeps locking is renewed about
// once per delegation time, never per lock, and one it stopped locking lapses.
func (p *Deputy) RenewDue(now time.Time, key Key) (Delegation, bool) {
	h := p.keys[key.id()]
	if h == nil || h.d.Recalled || h.next-h.d.Token.Counter >= h.d.Block || h.deadline.Sub(now) >= h.d.TTL/2 {
		return Delegation{}, false
	}
	return h.d.clone(), true
}

// Delegation is the delegation of key the deputy holds, if any.
func (p *Deputy) Delegation(key Key) (Delegation, bool) {
	h := p.keys[key.id()]
	if h == nil {
		return Delegation{}, false
	}
	return h.d.clone(), true
}

// Tick does what time made due by now: leases that ended free their keys, delegations past
// their deadline are forgotten (their leases ended by then).
func (p *Deputy) Tick(now time.Time) { p.tick(now) }

func (p *Deputy) tick(now time.Time) {
	now = p.clamp(now)
	for id, h := range p.keys { // each change is to h alone: the order does not matter
		if h.lease != nil && !now.Before(h.lease.Expiry) {
			h.lease = nil
			p.stats.Expired++
		}
		if !now.Before(h.deadline) {
			delete(p.keys, id)
			p.stats.Ended++
		}
	}
}

// Next is the earliest instant at which Tick has work (a lease's end, a delegation's
// deadline); zero when there is none.
func (p *Deputy) Next() time.Time {
	var next time.Time
	if p.last.Before(p.forgot) {
		next = p.forgot
	}
	for _, h := range p.keys {
		for _, at := range []time.Time{h.deadline, leaseEnd(h.lease)} {
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
	}
	return next
}

func leaseEnd(l *Lease) time.Time {
	if l == nil {
		return time.Time{}
	}
	return l.Expiry
}

// Stats are the deputy's counters now.
func (p *Deputy) Stats() DeputyStats {
	s := p.stats
	s.Delegations = len(p.keys)
	for _, h := range p.keys {
		if h.lease != nil {
			s.Leases++
		}
	}
	return s
}
