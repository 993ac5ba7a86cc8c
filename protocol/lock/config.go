package lock

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Code is the answer of one input, or the class of an Error. The refusals are the API's
// codes (docs/design.md §25).
type Code string

// Answers that grant, queue, renew or release.
const (
	CodeGranted  Code = "granted"  // a new lease, with its token and fence
	CodeQueued   Code = "queued"   // waiting; answered later by an Event with its Waiter id
	CodeRenewed  Code = "renewed"  // the lease runs from now for the ttl asked
	CodeReleased Code = "released" // the key is free (or granted to its next waiter)
)

// Refusals.
const (
	CodeHeld           Code = "lock-held"        // another lease holds the key; RetryAfter says until when
	CodeLost           Code = "lock-lost"        // the token is not the key's live lease
	CodeTooManyLeases  Code = "too-many-leases"  // the home holds Config.MaxLeases leases
	CodeTooManyWaiters Code = "too-many-waiters" // the home's queue holds Config.MaxWaiters requests
	CodeBadTTL         Code = "bad-ttl"          // ttl not in (0, Config.MaxTTL]
	CodeBadWait        Code = "bad-wait"         // wait not in [0, Config.MaxWait]
	CodeQuarantined    Code = "quarantined"      // the home grants nothing for the key until Until
	CodeBadToken       Code = "bad-token"        // a token's text that ParseToken refuses
	// CodeMovePending: the key's move quarantine is over, but the home does not know yet, or
	// has not applied, what the key's previous home had applied once it let the key go
	// (its floor: docs/design.md §25.2).
	CodeMovePending Code = "move-pending"
	// CodeNotHome answers the waiters of a key a later generation moved away from this home
	// (MoveAway); the replica answers its requests the same.
	CodeNotHome Code = "not-home"
)

// Delegation's answers (docs/design.md §25.9).
const (
	// CodeDelegated grants a delegation (Table.Delegate); CodeReturned takes one back
	// (Table.Return, Deputy.Return).
	CodeDelegated Code = "delegated"
	CodeReturned  Code = "returned"
	// CodeRecalled: the key is delegated to a node, and the home recalled it; the request may
	// retry once the delegate returned it (at the latest RetryAfter, its expiry at the home).
	// A deputy answers it to a renewal once its delegation is recalled.
	CodeRecalled Code = "lock-recalled"
	// CodeDelegationPending: a delegation of the key ended at its expiry without being
	// returned; the home grants nothing for the key until its delegate answers with the
	// positions that cover what it confirmed (Table.Return).
	CodeDelegationPending Code = "delegation-pending"
	// CodeNoDelegation: the home delegates nothing (Config.MaxDelegations 0) or holds
	// MaxDelegations delegations.
	CodeNoDelegation Code = "no-delegation"
	// CodeNotDelegated: the deputy holds no delegation of the key that can grant this lease
	// (none, recalled, returned, its counters spent, or it ends before the lease would): the
	// request goes to the home.
	CodeNotDelegated Code = "not-delegated"
)

// Refused reports whether c is a refusal rather than a grant, a place in the queue, a
// renewal or a release.
func (c Code) Refused() bool {
	switch c {
	case CodeGranted, CodeQueued, CodeRenewed, CodeReleased, CodeDelegated, CodeReturned:
		return false
	}
	return true
}

// Error is a malformed input refused: its Code, and a message that names what is wrong.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// The bounds of a Config. A duration bound keeps every instant the table computes
// (now + MaxTTL·(1+ρ) + OffsetBound) far inside time.Duration's range; a lease of a day is
// already past any use a lock has (Consul caps a session's TTL there too). DriftLimit keeps
// ttl·(1−ρ), the holder's share of a lease, at least nine tenths of it: a clock that runs
// 10% off is broken, not drifting.
const (
	MaxTTLLimit      = 24 * time.Hour
	MaxWaitLimit     = 24 * time.Hour
	OffsetBoundLimit = 24 * time.Hour
	// DelegationBlockLimit bounds the counters one delegation reserves: a delegate grants at
	// most that many leases under it, and 2^64 counters still last 2^44 delegations.
	DelegationBlockLimit = 1 << 20
	DriftLimit           = 0.1
	// DefaultDrift is the design's ρ: 1,000 ppm, ten times a commodity crystal's worst drift
	// and above NTP-slewed clocks' 500 ppm ceiling (docs/design.md §25.5).
	DefaultDrift = 0.001
)

// The errors of Config.Check and New, each wrapped with the value refused.
var (
	ErrMaxTTL      = errors.New("lock: MaxTTL must be above 0 and at most 24h")
	ErrMaxWait     = errors.New("lock: MaxWait must be at least 0 and at most 24h")
	ErrMaxLeases   = errors.New("lock: MaxLeases must be at least 1")
	ErrMaxWaiters  = errors.New("lock: MaxWaiters must be at least 0")
	ErrDrift       = errors.New("lock: Drift must be at least 0 and at most 0.1")
	ErrOffsetBound = errors.New("lock: OffsetBound must be above 0 and at most 24h (a lock home needs the clock-offset guard on)")
	ErrHome        = errors.New("lock: the home's origin id is all zeros")
	ErrDelegation  = errors.New("lock: MaxDelegations must be at least 0, and when it is above 0, DelegationBlock between 1 and 2^20 and MaxDelegationTTL above 0 and at most 24h")
	ErrIncarnation = errors.New("lock: the incarnation is 0 (it is raised at every start, so the first is 1)")
)

// Config holds a home's bounds (docs/design.md §25.5).
type Config struct {
	// MaxTTL bounds a lease's ttl (--lock-max-ttl); a restart and a move quarantine last
	// MaxTTL·(1+Drift) + OffsetBound.
	MaxTTL time.Duration
	// MaxWait bounds how long a request may wait for a held key (--lock-max-wait); 0: no
	// request waits.
	MaxWait time.Duration
	// MaxLeases bounds the leases the home holds at once (--max-leases).
	MaxLeases int
	// MaxWaiters bounds the requests waiting at the home, over all its keys; 0: none waits.
	MaxWaiters int
	// Drift is ρ, the bound on how far a clock's rate may be off (--lock-drift): the home
	// frees a key ttl·(1+ρ) after its grant, the holder stops ttl·(1−ρ) after it sent the
	// request.
	Drift float64
	// OffsetBound is the bound on clock offset between nodes (--max-clock-offset), which
	// the quarantines add: lock homes are refused while the guard is off (0).
	OffsetBound time.Duration
	// MaxDelegations bounds the delegations the home keeps at once, live, recalled, ended
	// unreturned, or of keys moved away (docs/design.md §25.9); 0: it delegates nothing.
	// A Deputy holds at most as many.
	MaxDelegations int
	// DelegationBlock is how many counters a delegation reserves: the leases its delegate
	// may grant under it (at most DelegationBlockLimit).
	DelegationBlock uint64
	// MaxDelegationTTL bounds a delegation's time (at most MaxTTLLimit). It may pass MaxTTL,
	// so that a delegate can grant a lease of MaxTTL under it: a delegation is noted in the
	// home's store before it is granted, and a restarted home takes its notes back
	// (Table.Restore), so no restart quarantine needs to cover it.
	MaxDelegationTTL time.Duration
}

// Check refuses a Config outside its bounds, with one of the Err values above wrapped with
// the value refused. The checks run in field order; the first that fails is the answer.
func (c Config) Check() error {
	switch {
	case c.MaxTTL <= 0 || c.MaxTTL > MaxTTLLimit:
		return fmt.Errorf("%w: %v", ErrMaxTTL, c.MaxTTL)
	case c.MaxWait < 0 || c.MaxWait > MaxWaitLimit:
		return fmt.Errorf("%w: %v", ErrMaxWait, c.MaxWait)
	case c.MaxLeases < 1:
		return fmt.Errorf("%w: %d", ErrMaxLeases, c.MaxLeases)
	case c.MaxWaiters < 0:
		return fmt.Errorf("%w: %d", ErrMaxWaiters, c.MaxWaiters)
	case !(c.Drift >= 0 && c.Drift <= DriftLimit): // NaN fails both
		return fmt.Errorf("%w: %v", ErrDrift, c.Drift)
	case c.OffsetBound <= 0 || c.OffsetBound > OffsetBoundLimit:
		return fmt.Errorf("%w: %v", ErrOffsetBound, c.OffsetBound)
	case c.MaxDelegations < 0 || c.MaxDelegations > 0 && (c.DelegationBlock < 1 || c.DelegationBlock > DelegationBlockLimit ||
		c.MaxDelegationTTL <= 0 || c.MaxDelegationTTL > MaxTTLLimit):
		return fmt.Errorf("%w: %d, %d, %v", ErrDelegation, c.MaxDelegations, c.DelegationBlock, c.MaxDelegationTTL)
	}
	return nil
}

// driftOf is ttl·ρ rounded up to the nanosecond: the home adds it (frees the key later)
// and the holder subtracts it (stops earlier), so each rounds toward safety. One product and
// a ceiling: IEEE-754 gives every build, native or WASM, the same nanosecond, and there is
// no sum for a compiler to fuse. The bounds keep both operands small: ttl ≤ 24h is exact in
// a float64.
func driftOf(ttl time.Duration, rho float64) time.Duration {
	if ttl <= 0 || !(rho > 0) {
		return 0
	}
	return time.Duration(math.Ceil(float64(ttl) * rho))
}

// HomeTTL is how long the home keeps a lease of ttl: ttl·(1+ρ), rounded up.
func HomeTTL(ttl time.Duration, rho float64) time.Duration { return ttl + driftOf(ttl, rho) }

// HolderDeadline is when the holder of a lease of ttl stops using it: sent, the moment its
// node sent the request (on its monotonic clock), plus ttl·(1−ρ), rounded down. Within the
// drift bound this is before the home frees the key, however long the request took
// (docs/design.md §25.5).
func HolderDeadline(sent time.Time, ttl time.Duration, rho float64) time.Time {
	return sent.Add(ttl - driftOf(ttl, rho))
}

// Quarantine is how long a restart or a move quarantine lasts: MaxTTL·(1+ρ) plus the
// offset bound.
func (c Config) Quarantine() time.Duration { return HomeTTL(c.MaxTTL, c.Drift) + c.OffsetBound }
