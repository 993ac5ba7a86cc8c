package lock

import (
	"slices"
	"time"
)

// Delegation is a key's delegation (docs/design.md §25.9): for a bounded time its delegate
// grants, renews, releases and confirms the key's leases itself (a Deputy), under tokens of
// a block of counters the home reserved from its own. The home raised its counter past the
// block when it delegated, so the delegate's tokens order above every lease the home granted
// before and below every one it grants after: token order stays the order of grants.
type Delegation struct {
	Key      Key
	Delegate string // the caller's name for the delegate node: reported, never interpreted
	// Token is the block's first token; it names the delegation (Return, RenewDelegation).
	// The delegate's tokens are Token with Counter from Token.Counter to
	// Token.Counter+Block-1.
	Token Token
	Block uint64
	// Granted is when the home delegated or last renewed the delegation, on its clock; TTL
	// the time asked then; Expiry when the home takes the key back, Granted + TTL·(1+ρ).
	// The delegate stops at TTL·(1−ρ) from the moment it sent its request (HolderDeadline),
	// and grants no lease that would outlive that.
	Granted time.Time
	TTL     time.Duration
	Expiry  time.Time
	// Fence is the home's fence when it delegated (with what delegates returned before):
	// every lease the delegate grants has a fence at or past it.
	Fence Fence
	// Recalled: the home wants the key back (another request came for it, or a map moved
	// it away); it renews the delegation no more.
	Recalled bool
}

// Delegate asks for a delegation of key to delegate for ttl (at most MaxDelegationTTL), with the
// home's generation and fence as Acquire takes them. Like Acquire it first does what time
// made due, then answers, checking in this order: CodeNoDelegation when the home delegates
// nothing (MaxDelegations 0); CodeBadTTL; CodeQuarantined and
// CodeMovePending as Acquire; CodeHeld when a lease, a delegation or a waiter holds the key
// (RetryAfter as Acquire's, 0 for a delegation recalled or ended); CodeNoDelegation when
// the home keeps MaxDelegations delegations; else CodeDelegated with
// Result.Delegation: the next DelegationBlock counters reserved, its expiry now +
// ttl·(1+ρ), its fence. A delegation holds the key as a lease does: the home grants it to
// nobody else until it is returned, or it expired and its delegate answered (Return). Its
// refusals are not counted in Stats.Refused: a node asks for a delegation with an acquire,
// which goes on as an Acquire when none is given.
func (t *Table) Delegate(now time.Time, key Key, delegate string, ttl time.Duration, generation uint64, fence Fence) Result {
	events := t.advance(now, fence)
	now = t.last
	t.raise(generation)
	r := t.delegate(now, key, delegate, ttl, fence)
	r.Events = events
	return r
}

func (t *Table) delegate(now time.Time, key Key, delegate string, ttl time.Duration, fence Fence) Result {
	if t.cfg.MaxDelegations == 0 {
		return Result{Code: CodeNoDelegation}
	}
	if ttl <= 0 || ttl > t.cfg.MaxDelegationTTL {
		return Result{Code: CodeBadTTL}
	}
	if until, ok := t.quarantinedUntil(now, key); ok {
		return quarantined(now, until)
	}
	if !t.floorMet(now, key, fence) {
		return Result{Code: CodeMovePending}
	}
	e := t.keys[key.id()]
	if e != nil {
		var retry time.Duration
		if e.lease != nil {
			retry = e.lease.Expiry.Sub(now)
		} else if e.deleg != nil && !e.deleg.Recalled {
			retry = e.deleg.Expiry.Sub(now)
		}
		return Result{Code: CodeHeld, RetryAfter: retry}
	}
	if t.delegations >= t.cfg.MaxDelegations {
		return Result{Code: CodeNoDelegation}
	}
	e = &entry{key: key.clone()}
	t.keys[key.id()] = e
	first := t.counter + 1
	t.counter += t.cfg.DelegationBlock // 2^64 counters: it does not wrap in practice
	d := &Delegation{
		Key:      key.clone(),
		Delegate: delegate,
		Token:    Token{Generation: t.generation, Incarnation: t.incarnation, Counter: first, Home: t.home},
		Block:    t.cfg.DelegationBlock,
		Granted:  now,
		TTL:      ttl,
		Expiry:   now.Add(HomeTTL(ttl, t.cfg.Drift)),
		Fence:    t.fenceOf(fence),
	}
	e.deleg = d
	e.expiry = t.setTimer(d.Expiry, timerExpiry, e, nil)
	t.delegations++
	t.stats.Delegated++
	return Result{Code: CodeDelegated, Delegation: d.clone()}
}

// delegatedKey answers an Acquire of e, which a delegation holds: the first such request
// recalls a live delegation (Result.Recall: the caller asks its delegate for it back). With
// wait 0 it is answered CodeRecalled (RetryAfter until the delegation's expiry at the home)
// or CodeDelegationPending; else it waits, and is granted when the delegation is returned.
func (t *Table) delegatedKey(now time.Time, e *entry, holder string, ttl, wait time.Duration) Result {
	var recall bool
	if e.deleg != nil && !e.deleg.Recalled {
		e.deleg.Recalled = true
		t.stats.Recalled++
		recall = true
	}
	var r Result
	switch {
	case wait > 0:
		r = t.queue(now, e, holder, ttl, wait)
	case e.deleg != nil:
		r = Result{Code: CodeRecalled, RetryAfter: e.deleg.Expiry.Sub(now)}
	default:
		r = Result{Code: CodeDelegationPending}
	}
	if recall {
		r.Recall = true
		r.Delegation = e.deleg.clone()
	}
	return r
}

// RenewDelegation runs token's delegation of key from now for ttl (at most MaxDelegationTTL), its
// expiry now + ttl·(1+ρ): CodeRenewed with Result.Delegation. CodeBadTTL as Acquire;
// CodeLost when token names no live delegation of key; CodeRecalled once it is recalled (it
// then runs out, or its delegate returns it); CodeQuarantined as Renew.
func (t *Table) RenewDelegation(now time.Time, key Key, token Token, ttl time.Duration) Result {
	now = t.clamp(now)
	r := t.renewDelegation(now, key, token, ttl)
	t.count(r.Code)
	return r
}

func (t *Table) renewDelegation(now time.Time, key Key, token Token, ttl time.Duration) Result {
	if ttl <= 0 || ttl > t.cfg.MaxDelegationTTL {
		return Result{Code: CodeBadTTL}
	}
	e := t.keys[key.id()]
	if e == nil || e.deleg == nil || e.deleg.Token != token || !now.Before(e.deleg.Expiry) {
		return Result{Code: CodeLost}
	}
	if e.deleg.Recalled {
		return Result{Code: CodeRecalled, RetryAfter: e.deleg.Expiry.Sub(now)}
	}
	if until, ok := t.quarantinedUntil(now, key); ok {
		return quarantined(now, until)
	}
	e.deleg.Granted = now
	e.deleg.TTL = ttl
	e.deleg.Expiry = now.Add(HomeTTL(ttl, t.cfg.Drift))
	t.moveTimer(e.expiry, e.deleg.Expiry)
	return Result{Code: CodeRenewed, Delegation: e.deleg.clone()}
}

// Return takes back token's delegation of key, live or ended at its expiry, or of a key
// moved away: positions are its delegate's applied positions, given once none of the
// leases it granted under it is live (or once it has forgotten them all, restarted), so
// they cover every write it confirmed. The home joins them into every fence it gives until
// a fence given with an input covers them (and into FloorOwed), and grants the key to its
// first waiter, with fence, if any (an Event). CodeReturned; CodeLost, changing nothing but
// the table's time, when token names no delegation the home keeps.
func (t *Table) Return(now time.Time, key Key, token Token, positions, fence Fence) Result {
	events := t.advance(now, fence)
	now = t.last
	var d *Delegation
	e := t.keys[key.id()]
	switch {
	case e != nil && e.deleg != nil && e.deleg.Token == token:
		d = e.deleg
		t.stopTimer(e.expiry)
		e.deleg, e.expiry = nil, nil
	case e != nil && e.pending != nil && e.pending.Token == token:
		d, e.pending = e.pending, nil
	case t.away[token] != nil && compareKeys(t.away[token].Key, key) == 0:
		d, e = t.away[token], nil // the key is no longer this home's
		delete(t.away, token)
	default:
		t.count(CodeLost)
		return Result{Code: CodeLost, Events: events}
	}
	t.delegations--
	t.stats.Returned++
	t.owed = join(t.owed, positions)
	if e != nil {
		events = append(events, t.grantNext(e, now, fence)...)
	}
	return Result{Code: CodeReturned, Delegation: d.clone(), Events: events}
}

// Restore gives a table made after a restart the delegations its home noted in its store
// before granting them and had not seen returned, and owed, the positions returned that it
// noted (FloorOwed): each delegation holds its key as one that ended unreturned
// (CodeDelegationPending) until its delegate answers (Return), and owed is joined into every
// fence until one given covers it, since what the delegates confirmed may be applied only
// there. Its own tokens order above theirs: its
// incarnation is higher. Beyond MaxDelegations, or
// for a key the table holds already, a delegation is not taken: it reports how many were.
func (t *Table) Restore(ds []Delegation, owed Fence) int {
	t.owed = join(t.owed, owed)
	n := 0
	for _, d := range ds {
		if t.delegations >= t.cfg.MaxDelegations || t.keys[d.Key.id()] != nil {
			continue
		}
		c := d.clone()
		c.Recalled = true
		t.keys[d.Key.id()] = &entry{key: d.Key.clone(), pending: &c}
		t.delegations++
		n++
	}
	return n
}

// Holds reports whether token is one of d's tokens (its block).
func (d Delegation) Holds(token Token) bool {
	f := d.Token
	return token.Generation == f.Generation && token.Incarnation == f.Incarnation && token.Home == f.Home &&
		token.Counter >= f.Counter && token.Counter-f.Counter < d.Block
}

// DelegationOf is the delegation of key whose block holds token while the home keeps it
// (live, recalled, or ended unreturned): until it is returned its delegate, not the home,
// knows whether the token's lease is live and which writes under it it confirmed.
func (t *Table) DelegationOf(key Key, token Token) (Delegation, bool) {
	e := t.keys[key.id()]
	if e == nil {
		return Delegation{}, false
	}
	for _, d := range []*Delegation{e.deleg, e.pending} {
		if d != nil && d.Holds(token) {
			return d.clone(), true
		}
	}
	return Delegation{}, false
}

// Delegations lists the delegations the home keeps, in key order (then by token): live,
// recalled, ended unreturned (Recalled and past Expiry), and of keys moved away. The caller
// asks each recalled or ended one back from its delegate until it is returned.
func (t *Table) Delegations() []Delegation {
	var out []Delegation
	for _, e := range t.keys {
		for _, d := range []*Delegation{e.deleg, e.pending} {
			if d != nil {
				out = append(out, d.clone())
			}
		}
	}
	for _, d := range t.away {
		out = append(out, d.clone())
	}
	slices.SortFunc(out, func(a, b Delegation) int {
		if c := compareKeys(a.Key, b.Key); c != 0 {
			return c
		}
		return a.Token.Compare(b.Token)
	})
	return out
}

// FloorOwed is what a floor this home gives (docs/design.md §25.2) must add to its applied
// positions: the positions its delegates returned that no fence given covered yet, and
// whether every delegation of a key moved away is returned. Until it is, the floor is not
// ready: the delegate may hold writes it confirmed that only it applied.
func (t *Table) FloorOwed() (Fence, bool) { return slices.Clone(t.owed), len(t.away) == 0 }

// fenceOf is the fence of a grant or a delegation made with fence: it, joined with what
// delegates returned that fence does not cover yet.
func (t *Table) fenceOf(fence Fence) Fence {
	if len(t.owed) == 0 {
		return slices.Clone(fence)
	}
	return join(fence, t.owed)
}

func (d *Delegation) clone() Delegation {
	c := *d
	c.Key = d.Key.clone()
	c.Fence = slices.Clone(d.Fence)
	return c
}
