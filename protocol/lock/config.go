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

// Refused reports whether c is a refusal rather than a grant, a place in the queue, a
// renewal or a release.
func (c Code) Refused() bool {
	switch c {
	case CodeGranted, CodeQueued, CodeRenewed, CodeReleased:
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
	DriftLimit       = 0.1
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
