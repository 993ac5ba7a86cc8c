package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"plait/protocol/replica"
)

// LocksDoc is the document's locks (docs/contract.md §8.9): this node as a lock home
// (replica.LockStatus) and as a caller (the API's counts).
type LocksDoc struct {
	Caller LockCallerDoc `json:"caller"`
	// ConfirmsLost counts confirms and checks the home answered lock-lost; Overlaps those of
	// them for a lease it had freed (docs/design.md §25.8).
	ConfirmsLost    uint64 `json:"confirms_lost"`
	ConfirmsWaiting int    `json:"confirms_waiting"` // lock-confirm requests waiting for their writes here
	// Delegation (docs/design.md §25.9): Delegated is the delegations this node's deputy
	// holds now, DelegatedGrants the leases it granted under them since start,
	// DelegationsRenewed the delegations it renewed at their homes; DelegationsOut the
	// delegations this home keeps now (live, recalled, ended unreturned, or of keys moved
	// away), DelegateForwards the requests for their tokens it passed on to the delegates.
	DelegateForwards   uint64 `json:"delegate_forwards"`
	Delegated          int    `json:"delegated"`
	DelegatedGrants    uint64 `json:"delegated_grants"`
	DelegationsOut     int    `json:"delegations_out"`
	DelegationsRenewed uint64 `json:"delegations_renewed"`
	Expired            uint64 `json:"expired"`
	Generation         uint64 `json:"generation"` // the generation the home grants under
	Granted            uint64 `json:"granted"`
	Held               int    `json:"held"` // leases this node was granted whose holder deadline has not passed
	Home               bool   `json:"home"` // the map names this node a home and its table exists
	// HomeError is why the map's naming this node a home could not be honoured; null when
	// none.
	HomeError   *string `json:"home_error"`
	Incarnation uint64  `json:"incarnation"`
	Leases      int     `json:"leases"` // held at this home now
	// MovedAway counts leases the home dropped because a generation moved their key away;
	// MovesPending is the moves that brought it keys it does not grant yet (quarantined or
	// waiting for a floor: docs/design.md §25.2).
	MovedAway    uint64            `json:"moved_away"`
	MovesPending int               `json:"moves_pending"`
	Overlaps     uint64            `json:"overlaps"`
	Queued       uint64            `json:"queued"`
	Refused      map[string]uint64 `json:"refused"` // the home's refusals by code; {} when none
	Released     uint64            `json:"released"`
	Renewed      uint64            `json:"renewed"`
	TimedOut     uint64            `json:"timed_out"`
	Waiting      int               `json:"waiting"` // requests waiting at this home now
}

// LockCallerDoc is the API's counts of lock requests it made for its clients and of the
// writes and reads under a token it served.
type LockCallerDoc struct {
	Acquired      uint64            `json:"acquired"`
	FenceTimeouts uint64            `json:"fence_timeouts"`
	FenceWaits    uint64            `json:"fence_waits"` // reads under a token that had to wait for the fence
	Refused       map[string]uint64 `json:"refused"`     // the lock endpoints' and locked writes' refusals by code; {} when none
	Released      uint64            `json:"released"`
	Renewed       uint64            `json:"renewed"`
	Writes        uint64            `json:"writes"`      // writes under a token written
	WritesLost    uint64            `json:"writes_lost"` // of them, those whose confirm the home refused
}

// NewLocksDoc is the document's locks of a lock status; the caller's counts are SetLocks'.
func NewLocksDoc(ls replica.LockStatus) LocksDoc {
	d := LocksDoc{ConfirmsLost: ls.Table.ConfirmsLost, ConfirmsWaiting: ls.WaitingConfirms, Expired: ls.Table.Expired,
		Generation: ls.Table.Generation, Granted: ls.Table.Granted, Held: ls.Held, Home: ls.Home, Incarnation: ls.Incarnation,
		Leases: ls.Table.Leases, MovedAway: ls.Table.MovedAway, MovesPending: ls.Table.MoveQuarantines + ls.Table.MovesAwaitingFloor,
		Overlaps: ls.Table.Overlaps, Queued: ls.Table.Queued, Refused: map[string]uint64{},
		Released: ls.Table.Released, Renewed: ls.Table.Renewed, TimedOut: ls.Table.TimedOut, Waiting: ls.Table.Waiting,
		Caller:           LockCallerDoc{Refused: map[string]uint64{}},
		DelegateForwards: ls.Forwarded, Delegated: ls.Deputy.Delegations, DelegatedGrants: ls.Deputy.Granted,
		DelegationsOut: ls.Table.Delegations, DelegationsRenewed: ls.DelegationsRenewed}
	if ls.Err != "" {
		e := ls.Err
		d.HomeError = &e
	}
	for c, n := range ls.Table.Refused {
		d.Refused[string(c)] = n
	}
	return d
}

// callerDoc is the API's counts now.
func (c *lockCounters) doc() LockCallerDoc {
	d := LockCallerDoc{Acquired: c.acquired.Load(), Renewed: c.renewed.Load(), Released: c.released.Load(),
		Writes: c.writes.Load(), WritesLost: c.writesLost.Load(), FenceWaits: c.fenceWaits.Load(),
		FenceTimeouts: c.fenceTimeouts.Load(), Refused: c.refused.snapshot()}
	if d.Refused == nil {
		d.Refused = map[string]uint64{}
	}
	return d
}

// The lock metrics (docs/contract.md §9).
var (
	descLockHome      = prometheus.NewDesc("plait_lock_home", "1 while the cluster map names this node a lock home and it is one.", nil, nil)
	descLockLeases    = prometheus.NewDesc("plait_lock_leases", "Leases held at this lock home now.", nil, nil)
	descLockWaiting   = prometheus.NewDesc("plait_lock_waiting", "Lock requests waiting at this home now.", nil, nil)
	descLockHeld      = prometheus.NewDesc("plait_lock_held", "Leases this node was granted whose holder deadline has not passed.", nil, nil)
	descLockMoves     = prometheus.NewDesc("plait_lock_moves_pending", "Moves that brought this lock home keys it does not grant yet (quarantined, or waiting for the previous home's floor).", nil, nil)
	descLockHomeOps   = prometheus.NewDesc("plait_lock_home_total", "What this lock home did: granted, queued, renewed, released, expired, timed_out (a wait that ended first), confirms_lost, overlaps, moved_away (a lease dropped as a map moved its key away).", []string{"result"}, nil)
	descLockRefused   = prometheus.NewDesc("plait_lock_refused_total", "Lock requests this home refused, by code.", []string{"code"}, nil)
	descLockRequests  = prometheus.NewDesc("plait_lock_requests_total", "Lock requests this node's API made for its clients, by outcome: acquired, renewed, released, or the refusal's code.", []string{"outcome"}, nil)
	descLockWrites    = prometheus.NewDesc("plait_lock_writes_total", "Writes under a lock's token this node wrote: confirmed (acknowledged) or lost (the home refused the confirm).", []string{"result"}, nil)
	descLockDelegOut  = prometheus.NewDesc("plait_lock_delegations_out", "Delegations this lock home keeps now: live, recalled, ended unreturned, or of keys moved away.", nil, nil)
	descLockDelegHeld = prometheus.NewDesc("plait_lock_delegated", "Delegations this node's deputy holds now.", nil, nil)
	descLockDeleg     = prometheus.NewDesc("plait_lock_delegation_total", "Delegation: grants (leases this node's deputy granted), renewed (delegations it renewed at their homes), forwarded (requests for delegated tokens this home passed on to their delegates).", []string{"result"}, nil)
	descLockFence     = prometheus.NewDesc("plait_lock_fence_total", "Reads under a lock's token that waited for the lease's fence: waited, or timed_out (fence-timeout).", []string{"result"}, nil)
)

var lockDescs = []*prometheus.Desc{descLockHome, descLockLeases, descLockWaiting, descLockHeld, descLockMoves, descLockHomeOps, descLockRefused, descLockRequests, descLockWrites, descLockFence, descLockDelegOut, descLockDelegHeld, descLockDeleg}

// collectLocks sends the lock metrics of ls and the API's counts.
func (a *API) collectLocks(ch chan<- prometheus.Metric) {
	ls, err := a.n.LockStatus()
	if err != nil {
		return
	}
	d := NewLocksDoc(ls)
	c := a.locks.doc()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descLockHome, is(d.Home))
	gauge(descLockLeases, float64(d.Leases))
	gauge(descLockWaiting, float64(d.Waiting))
	gauge(descLockHeld, float64(d.Held))
	gauge(descLockMoves, float64(d.MovesPending))
	for _, r := range []struct {
		name string
		v    uint64
	}{{"granted", d.Granted}, {"queued", d.Queued}, {"renewed", d.Renewed}, {"released", d.Released}, {"expired", d.Expired},
		{"timed_out", d.TimedOut}, {"confirms_lost", d.ConfirmsLost}, {"overlaps", d.Overlaps}, {"moved_away", d.MovedAway}} {
		counter(descLockHomeOps, r.v, r.name)
	}
	for code, n := range d.Refused {
		counter(descLockRefused, n, code)
	}
	counter(descLockRequests, c.Acquired, "acquired")
	counter(descLockRequests, c.Renewed, "renewed")
	counter(descLockRequests, c.Released, "released")
	for code, n := range c.Refused {
		if code == "acquired" || code == "renewed" || code == "released" {
			continue // no code is one of those: a series is one outcome
		}
		counter(descLockRequests, n, code)
	}
	counter(descLockWrites, c.Writes-c.WritesLost, "confirmed")
	counter(descLockWrites, c.WritesLost, "lost")
	counter(descLockFence, c.FenceWaits, "waited")
	counter(descLockFence, c.FenceTimeouts, "timed_out")
	gauge(descLockDelegOut, float64(d.DelegationsOut))
	gauge(descLockDelegHeld, float64(d.Delegated))
	counter(descLockDeleg, d.DelegatedGrants, "grants")
	counter(descLockDeleg, d.DelegationsRenewed, "renewed")
	counter(descLockDeleg, d.DelegateForwards, "forwarded")
}
