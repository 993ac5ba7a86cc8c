package lock

import (
	"bytes"
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"time"

	"plait/protocol/wire"
)

// Key is a locked key: a table and a key in it. The table keeps its own copy of the bytes.
type Key struct {
	Table string
	Key   []byte
}

func (k Key) clone() Key { return Key{Table: k.Table, Key: bytes.Clone(k.Key)} }

func (k Key) String() string { return fmt.Sprintf("%s/%q", k.Table, k.Key) }

func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	return bytes.Compare(a.Key, b.Key)
}

type keyID struct{ table, key string }

func (k Key) id() keyID { return keyID{k.Table, string(k.Key)} }

// Position is one origin's applied seq at the home.
type Position struct {
	Origin wire.OriginID
	Seq    uint64
}

// Fence is the home's applied positions when it granted a lease (docs/design.md §25.7),
// sorted by origin. The table does not read it: the caller gives the home's positions with
// every input that may grant, and the table hands a copy of them back with each grant it
// makes then.
type Fence []Position

// Lease is a key's lease at the home.
type Lease struct {
	Token  Token
	Holder string // the caller's name for whoever asked: reported, never interpreted
	// Granted is when the home granted the lease or last renewed it, on its clock.
	Granted time.Time
	// TTL is the ttl asked at the grant or at the last renewal.
	TTL time.Duration
	// Expiry is when the home frees the key: Granted + TTL·(1+ρ). The lease is live before it.
	Expiry time.Time
	// Fence is the fence of the grant (docs/design.md §25.7), kept with the lease so that the
	// home can answer for it (kind lock-fence) as long as the lease is live; a renewal keeps
	// it.
	Fence Fence
}

// Result is the answer to one input.
type Result struct {
	Code Code
	// Lease is the lease granted or renewed (CodeGranted, CodeRenewed).
	Lease Lease
	// Fence is a grant's fence (CodeGranted): the positions given with the input that
	// granted it.
	Fence Fence
	// RetryAfter is how long until the key's lease expires at the home (CodeHeld; 0 when it
	// expires at the same instant), or until the quarantine ends (CodeQuarantined).
	RetryAfter time.Duration
	// Until is when the quarantine that refused the request ends (CodeQuarantined).
	Until time.Time
	// Waiter is the id of a queued request (CodeQueued): the Event that answers it carries
	// it.
	Waiter uint64
	// Delegation is the delegation granted, renewed or returned (CodeDelegated, CodeRenewed
	// of RenewDelegation, CodeReturned), or the one this input recalled (Recall).
	Delegation Delegation
	// Recall: this Acquire found its key delegated and recalled the delegation (the first
	// to do so): the caller asks Delegation's delegate to return it.
	Recall bool
	// Events are the answers to earlier requests that this input decided: waiters granted
	// (the key freed) or refused (their wait ended, or their key was quarantined).
	Events []Event
}

// Event answers a queued request, exactly once: CodeGranted, CodeHeld (its wait ended first)
// or CodeQuarantined (a move quarantine took its key).
type Event struct {
	Waiter uint64
	Key    Key
	Result Result // its Events are nil
}

type entry struct {
	key     Key
	lease   *Lease // nil when no lease holds the key
	expiry  *timer // the lease's, or the delegation's
	waiters []*waiter
	// deleg is the key's live delegation (its timer is expiry); pending one that ended at
	// its expiry unreturned. Either holds the key as a lease does, and a key has at most one
	// of lease, deleg and pending (docs/design.md §25.9).
	deleg, pending *Delegation
}

type waiter struct {
	id     uint64
	holder string
	ttl    time.Duration
	timer  *timer
}

type move struct {
	generation uint64
	until      time.Time
	newlyHomed func(Key) bool
	// from is the previous home of a key and whether it is newly homed (nil: no floor is
	// wanted, MoveQuarantine);
	// floors, the floor of each previous home once known (Floor): the move waits for a floor
	// of every name in wanted.
	from   func(Key) (string, bool)
	wanted []string
	floors map[string]Fence
}

// FloorWant is a move and the previous homes whose floors it still lacks (FloorsWanted).
type FloorWant struct {
	Generation uint64
	Homes      []string
}

// Stats are a table's counters.
type Stats struct {
	Leases  int // leases held now
	Waiting int // requests waiting now
	// Granted counts leases granted (at once or to a waiter), Queued requests that waited,
	// Renewed renewals, Released releases, Expired leases that ran out, TimedOut waiters
	// whose wait ended first.
	Granted, Queued, Renewed, Released, Expired, TimedOut uint64
	// Refused counts every refusal by code, whether answered at once or by an Event.
	Refused map[Code]uint64
	// ConfirmsLost counts Confirm and Check answering false; Overlaps those of them for a
	// token this home granted in this incarnation whose lease it no longer holds (ended,
	// released, or replaced by a later grant), the overlap the home can see
	// (docs/design.md §25.8).
	ConfirmsLost, Overlaps uint64
	// MovedAway counts leases dropped because a later generation moved their key away
	// (MoveAway).
	MovedAway       uint64
	Generation      uint64    // the generation the home grants under
	Incarnation     uint64    // the home's, given to New
	Counter         uint64    // the last grant's counter
	RestartUntil    time.Time // the restart quarantine's end; zero once it is over
	MoveQuarantines int       // move quarantines not yet over
	// MovesAwaitingFloor counts moves whose quarantine is over that wait for a previous
	// home's floor, or for the home to apply it.
	MovesAwaitingFloor int
	// Delegations counts the delegations the home keeps now (live, recalled, ended
	// unreturned, or of keys moved away); Delegated those it granted, Recalled those it
	// recalled, Returned those returned, DelegationsExpired those that reached their expiry
	// unreturned.
	Delegations                                       int
	Delegated, Recalled, Returned, DelegationsExpired uint64
}

// Table is one home's leases. It is not safe for concurrent use; the replica owns it.
//
// Time is an input: every method takes the home's clock reading now, and the table keeps the
// latest it was given. A now earlier than that is taken as that (time never goes back in
// the table), so nothing that expired or ended comes back to life, whatever the inputs.
type Table struct {
	cfg          Config
	home         wire.OriginID
	incarnation  uint64
	generation   uint64
	counter      uint64
	last         time.Time
	restartUntil time.Time
	moves        []move
	keys         map[keyID]*entry
	timers       timerHeap
	seq          uint64
	nextWaiter   uint64
	leases       int
	waiting      int
	stats        Stats
	// delegations counts the delegations kept (in entries and in away), at most
	// MaxDelegations; away holds those of keys moved away, by their token, until returned;
	// owed joins the positions delegates returned, until a fence given covers them.
	delegations int
	away        map[Token]*Delegation
	owed        Fence
}

// New starts the lease table of a home: its origin id, its incarnation (raised in its store
// at every start before it grants anything) and its clock now. It starts in its restart
// quarantine, until now + MaxTTL·(1+ρ) + OffsetBound: it forgot its leases, and their
// holders may still write (docs/design.md §25.5).
func New(cfg Config, home wire.OriginID, incarnation uint64, now time.Time) (*Table, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if home.IsZero() {
		return nil, ErrHome
	}
	if incarnation == 0 {
		return nil, ErrIncarnation
	}
	return &Table{
		cfg:          cfg,
		home:         home,
		incarnation:  incarnation,
		last:         now,
		restartUntil: now.Add(cfg.Quarantine()),
		keys:         map[keyID]*entry{},
		away:         map[Token]*Delegation{},
		stats:        Stats{Refused: map[Code]uint64{}},
	}, nil
}

// clamp takes now as the table's time: the latest input.
func (t *Table) clamp(now time.Time) time.Time {
	if now.After(t.last) {
		t.last = now
	}
	return t.last
}

func (t *Table) raise(generation uint64) { t.generation = max(t.generation, generation) }

// Acquire asks for a lease on key for ttl, waiting up to wait if it is held. generation is
// the map generation the home has adopted: the table grants under the highest it was given,
// so a key's tokens rise within one incarnation whatever the inputs. Across a restart they
// rise only if the first generation given is no lower than the last one before it, which
// holds when the caller gives its adopted map's (kept in its store), not a request's.
// fence is the home's applied positions now. It first does what time made due (as Tick),
// then answers, checking in this order:
//
//   - CodeBadTTL: ttl not above 0, or above MaxTTL;
//   - CodeBadWait: wait below 0, or above MaxWait;
//   - CodeQuarantined: the home's restart quarantine, or a move quarantine of the key, is
//     not over (Until says when it is);
//   - CodeMovePending: the key's move quarantine is over, and its previous home's floor is
//     not known (Floor) or fence does not cover it yet;
//   - the key is free: CodeTooManyLeases if the home holds MaxLeases leases, else
//     CodeGranted: the next counter's token, expiry now + ttl·(1+ρ), the fence;
//   - the key is held: CodeHeld with RetryAfter when wait is 0, CodeTooManyWaiters when
//     MaxWaiters requests wait, else CodeQueued: the request waits until now + wait, after
//     those that came before it, and an Event answers it.
func (t *Table) Acquire(now time.Time, key Key, holder string, ttl, wait time.Duration, generation uint64, fence Fence) Result {
	events := t.advance(now, fence)
	now = t.last
	t.raise(generation)
	r := t.acquire(now, key, holder, ttl, wait, fence)
	t.count(r.Code)
	r.Events = events
	return r
}

func (t *Table) acquire(now time.Time, key Key, holder string, ttl, wait time.Duration, fence Fence) Result {
	if ttl <= 0 || ttl > t.cfg.MaxTTL {
		return Result{Code: CodeBadTTL}
	}
	if wait < 0 || wait > t.cfg.MaxWait {
		return Result{Code: CodeBadWait}
	}
	if until, ok := t.quarantinedUntil(now, key); ok {
		return quarantined(now, until)
	}
	if !t.floorMet(now, key, fence) {
		return Result{Code: CodeMovePending}
	}
	e := t.keys[key.id()]
	if e != nil && (e.deleg != nil || e.pending != nil) {
		return t.delegatedKey(now, e, holder, ttl, wait)
	}
	if e == nil || e.lease == nil {
		// advance ran first, so a lease here is live, and a key with waiters has a lease
		// or a delegation.
		if t.leases >= t.cfg.MaxLeases {
			return Result{Code: CodeTooManyLeases}
		}
		if e == nil {
			e = &entry{key: key.clone()}
			t.keys[key.id()] = e
		}
		l := t.grant(e, holder, ttl, now, fence)
		return Result{Code: CodeGranted, Lease: l, Fence: l.Fence}
	}
	if wait == 0 {
		return Result{Code: CodeHeld, RetryAfter: e.lease.Expiry.Sub(now)}
	}
	return t.queue(now, e, holder, ttl, wait)
}

// queue makes the request wait for e until now + wait.
func (t *Table) queue(now time.Time, e *entry, holder string, ttl, wait time.Duration) Result {
	if t.waiting >= t.cfg.MaxWaiters {
		return Result{Code: CodeTooManyWaiters}
	}
	t.nextWaiter++
	w := &waiter{id: t.nextWaiter, holder: holder, ttl: ttl}
	w.timer = t.setTimer(now.Add(wait), timerWait, e, w)
	e.waiters = append(e.waiters, w)
	t.waiting++
	t.stats.Queued++
	return Result{Code: CodeQueued, Waiter: w.id}
}

// grant gives the free key e to holder from now.
func (t *Table) grant(e *entry, holder string, ttl time.Duration, now time.Time, fence Fence) Lease {
	t.counter++ // 2^64 grants: it does not wrap in practice
	l := Lease{
		Token:   Token{Generation: t.generation, Incarnation: t.incarnation, Counter: t.counter, Home: t.home},
		Holder:  holder,
		Granted: now,
		TTL:     ttl,
		Expiry:  now.Add(HomeTTL(ttl, t.cfg.Drift)),
		Fence:   t.fenceOf(fence),
	}
	e.lease = &l
	e.expiry = t.setTimer(l.Expiry, timerExpiry, e, nil)
	t.leases++
	t.stats.Granted++
	return l
}

// live is key's lease if token is it and it is live at now.
func (t *Table) live(now time.Time, key Key, token Token) *entry {
	e := t.keys[key.id()]
	if e == nil || e.lease == nil || e.lease.Token != token || !now.Before(e.lease.Expiry) {
		return nil
	}
	return e
}

// Lease is token's lease on key if it is the key's lease and live at now, uncounted: the
// home's answer to a lock-fence (its Fence). It changes nothing but the table's time.
func (t *Table) Lease(now time.Time, key Key, token Token) (Lease, bool) {
	now = t.clamp(now)
	e := t.live(now, key, token)
	if e == nil {
		return Lease{}, false
	}
	return *e.lease, true
}

// Renew extends token's lease on key: it runs from now for ttl (at most MaxTTL), its expiry
// now + ttl·(1+ρ), with the same token. CodeBadTTL as Acquire; CodeLost when token is not
// the key's lease live now (it expired, was released, or never was); CodeQuarantined when a
// move quarantine of the key is not over (the lease then runs out: the key's previous home
// may grant it meanwhile).
func (t *Table) Renew(now time.Time, key Key, token Token, ttl time.Duration) Result {
	now = t.clamp(now)
	r := t.renew(now, key, token, ttl)
	t.count(r.Code)
	return r
}

func (t *Table) renew(now time.Time, key Key, token Token, ttl time.Duration) Result {
	if ttl <= 0 || ttl > t.cfg.MaxTTL {
		return Result{Code: CodeBadTTL}
	}
	e := t.live(now, key, token)
	if e == nil {
		return Result{Code: CodeLost}
	}
	if until, ok := t.quarantinedUntil(now, key); ok {
		return quarantined(now, until)
	}
	e.lease.Granted = now
	e.lease.TTL = ttl
	e.lease.Expiry = now.Add(HomeTTL(ttl, t.cfg.Drift))
	t.moveTimer(e.expiry, e.lease.Expiry)
	t.stats.Renewed++
	return Result{Code: CodeRenewed, Lease: *e.lease}
}

// Release frees key if token is its lease live now (CodeReleased), and grants it at once to
// its first waiter, if any, with fence (an Event). Otherwise CodeLost, and nothing changes:
// a release that reaches the home after its lease ended frees nothing (docs/design.md
// §25.7). Like Acquire it first does what time made due.
func (t *Table) Release(now time.Time, key Key, token Token, fence Fence) Result {
	events := t.advance(now, fence)
	now = t.last
	e := t.live(now, key, token)
	if e == nil {
		t.count(CodeLost)
		return Result{Code: CodeLost, Events: events}
	}
	t.stopTimer(e.expiry)
	e.lease, e.expiry = nil, nil
	t.leases--
	t.stats.Released++
	events = append(events, t.grantNext(e, now, fence)...)
	return Result{Code: CodeReleased, Events: events}
}

// Confirm reports whether token is key's lease and live now, its key in no quarantine: the
// home's answer to a write under the lock it applies (docs/design.md §25.6). A false for a
// token this home granted in this incarnation, whose lease it no longer holds, is an overlap
// it can see: counted (Stats.Overlaps).
func (t *Table) Confirm(now time.Time, key Key, token Token) bool {
	now = t.clamp(now)
	e := t.live(now, key, token)
	return t.answer(now, key, token, e, e != nil)
}

// Check reports whether token is key's lease and live now by its holder's deadline on the
// home's clock (Granted + TTL·(1−ρ)), its key in no quarantine: the home's answer to a
// lock-check, whether a node other than the holder's may take a write under it
// (docs/design.md §25.6). Counted as Confirm is; a lease past its holder's deadline but not
// past its expiry is not an overlap (the home still holds it).
func (t *Table) Check(now time.Time, key Key, token Token) bool {
	now = t.clamp(now)
	e := t.live(now, key, token)
	return t.answer(now, key, token, e, e != nil && now.Before(HolderDeadline(e.lease.Granted, e.lease.TTL, t.cfg.Drift)))
}

// answer counts a Confirm's or a Check's answer: e is the key's lease if token is it and it
// is live at the home, ok whether the answer is yes before the quarantines.
func (t *Table) answer(now time.Time, key Key, token Token, e *entry, ok bool) bool {
	if ok {
		if _, q := t.quarantinedUntil(now, key); !q {
			return true
		}
	}
	t.stats.ConfirmsLost++
	if e == nil && token.Home == t.home && token.Incarnation == t.incarnation && token.Counter >= 1 && token.Counter <= t.counter {
		t.stats.Overlaps++
	}
	return false
}

// Tick does what time made due by now: leases that expired free their keys (each granted to
// its first waiter, with fence), waits that ended are answered CodeHeld, quarantines that
// ended end. Instants are taken in order, and at one instant expiries before waits.
func (t *Table) Tick(now time.Time, fence Fence) []Event { return t.advance(now, fence) }

func (t *Table) advance(now time.Time, fence Fence) []Event {
	now = t.clamp(now)
	var events []Event
	for len(t.timers) > 0 && !t.timers[0].at.After(now) {
		tm := heap.Pop(&t.timers).(*timer)
		e := tm.e
		switch tm.kind {
		case timerExpiry:
			if e.deleg != nil {
				// Its delegate stopped granting before this (within the bounds), but what it
				// confirmed may be applied only there: the key waits for its return.
				e.pending, e.deleg, e.expiry = e.deleg, nil, nil
				t.stats.DelegationsExpired++
				continue
			}
			e.lease, e.expiry = nil, nil
			t.leases--
			t.stats.Expired++
			events = append(events, t.grantNext(e, now, fence)...)
		case timerWait:
			e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool { return w == tm.w })
			t.waiting--
			t.stats.TimedOut++
			var retry time.Duration
			switch { // a key with waiters is held by a lease or a delegation
			case e.lease != nil:
				retry = max(0, e.lease.Expiry.Sub(now))
			case e.deleg != nil:
				retry = max(0, e.deleg.Expiry.Sub(now))
			}
			t.count(CodeHeld)
			events = append(events, Event{Waiter: tm.w.id, Key: e.key.clone(), Result: Result{Code: CodeHeld, RetryAfter: retry}})
			t.drop(e)
		}
	}
	if !t.restartUntil.IsZero() && !now.Before(t.restartUntil) {
		t.restartUntil = time.Time{}
	}
	t.moves = slices.DeleteFunc(t.moves, func(m move) bool { return !now.Before(m.until) && t.floorsMet(m, fence) })
	if covers(fence, t.owed) {
		t.owed = nil
	}
	return events
}

// grantNext gives the free key e to its first waiter, if any.
func (t *Table) grantNext(e *entry, now time.Time, fence Fence) []Event {
	if len(e.waiters) == 0 {
		t.drop(e)
		return nil
	}
	w := e.waiters[0]
	e.waiters = e.waiters[1:]
	t.stopTimer(w.timer)
	t.waiting--
	l := t.grant(e, w.holder, w.ttl, now, fence)
	return []Event{{Waiter: w.id, Key: e.key.clone(), Result: Result{Code: CodeGranted, Lease: l, Fence: l.Fence}}}
}

// drop forgets a key with no lease and no waiter.
func (t *Table) drop(e *entry) {
	if e.lease == nil && e.deleg == nil && e.pending == nil && len(e.waiters) == 0 {
		delete(t.keys, e.key.id())
	}
}

// MoveQuarantine starts a move quarantine: the home adopted generation, under which it
// homes the keys for which newlyHomed is true and did not before (nil: every key). It grants,
// renews and confirms nothing for them until now + MaxTTL·(1+ρ) + OffsetBound, since their
// previous home's leases run on that home's clock (docs/design.md §25.2). Requests waiting
// for such a key are answered CodeQuarantined (the Events, in key order); leases it holds on
// them run out. The table grants under generation from now on, if it is the highest it was
// given. newlyHomed is kept until the quarantine ends and called with the keys asked about
// then.
func (t *Table) MoveQuarantine(now time.Time, generation uint64, newlyHomed func(Key) bool) []Event {
	if newlyHomed == nil {
		newlyHomed = func(Key) bool { return true }
	}
	return t.startMove(now, move{generation: generation, newlyHomed: newlyHomed})
}

// MoveHome is MoveQuarantine with a floor (docs/design.md §25.2): from says whether a key
// is newly homed under generation and its previous home ("" when there was none), and
// homes lists every previous home whose floor is wanted (a name from gives that is not in
// homes wants none). After the quarantine a newly homed key is still
// granted nothing (CodeMovePending) until its previous home's floor is known (Floor) and
// the fence given with the request covers it: the floor covers every write that home
// confirmed, so the first grant's fence does too. Its state is one floor per previous
// home, never per key.
func (t *Table) MoveHome(now time.Time, generation uint64, from func(Key) (string, bool), homes []string) []Event {
	return t.startMove(now, move{
		generation: generation,
		newlyHomed: func(k Key) bool { _, newly := from(k); return newly },
		from:       from,
		wanted:     slices.Compact(slices.Sorted(slices.Values(homes))),
		floors:     map[string]Fence{},
	})
}

// Floor gives, at now, the floor of previous home from for the move of generation:
// positions that cover every write it confirmed (its applied positions taken once it had
// adopted a generation that moved its keys away). A floor for a move the table does not
// hold, or for a home it does not want, is ignored; a second one is joined to the first.
// The move's quarantine then lasts at least until now plus the quarantine: the home that
// gave the floor had let go of the keys before it gave it, so every lease it granted ends
// by then, however late it adopted the generation (a partition can hold it back well past
// this home's own quarantine).
func (t *Table) Floor(now time.Time, generation uint64, from string, floor Fence) {
	now = t.clamp(now)
	for i := range t.moves {
		m := &t.moves[i]
		if m.generation == generation && m.floors != nil && slices.Contains(m.wanted, from) {
			m.floors[from] = join(m.floors[from], floor)
			if end := now.Add(t.cfg.Quarantine()); end.After(m.until) {
				m.until = end
			}
		}
	}
}

// DropMoves forgets every move: the caller replaces them with one that covers them all (a
// move whose previous home stands for every member, started after this).
func (t *Table) DropMoves() { t.moves = nil }

// PendingMoves lists the generations of the moves given by MoveHome that the table still
// holds (in their quarantine, or waiting for a floor), in the order they were given: the
// caller keeps what it needs to give them again to a table made after a restart.
func (t *Table) PendingMoves() []uint64 {
	var out []uint64
	for _, m := range t.moves {
		if m.from != nil {
			out = append(out, m.generation)
		}
	}
	return out
}

// FloorsWanted lists the moves and the previous homes whose floors each lacks, by
// generation: the caller asks them (Floor) from the start of the move, since the
// quarantine a floor brings counts from its arrival.
func (t *Table) FloorsWanted() []FloorWant {
	var out []FloorWant
	for _, m := range t.moves {
		var homes []string
		for _, h := range m.wanted {
			if _, ok := m.floors[h]; !ok {
				homes = append(homes, h)
			}
		}
		if len(homes) > 0 {
			out = append(out, FloorWant{Generation: m.generation, Homes: homes})
		}
	}
	slices.SortFunc(out, func(a, b FloorWant) int { return cmp.Compare(a.Generation, b.Generation) })
	return out
}

// floorMet reports whether fence covers the floor of every move over at now that newly
// homes key (a move not over refused it already).
func (t *Table) floorMet(now time.Time, key Key, fence Fence) bool {
	for _, m := range t.moves {
		if m.from == nil || now.Before(m.until) {
			continue
		}
		h, newly := m.from(key)
		if !newly {
			continue
		}
		floor, ok := m.floors[h]
		if !ok && slices.Contains(m.wanted, h) || !covers(fence, floor) {
			return false
		}
	}
	return true
}

// floorsMet reports whether every floor m wants is known and fence covers it: the move is
// then over for every key.
func (t *Table) floorsMet(m move, fence Fence) bool {
	for _, h := range m.wanted {
		floor, ok := m.floors[h]
		if !ok || !covers(fence, floor) {
			return false
		}
	}
	return true
}

// covers reports whether fence is at or past floor at every origin.
func covers(fence, floor Fence) bool {
	for _, p := range floor {
		i := slices.IndexFunc(fence, func(q Position) bool { return q.Origin == p.Origin })
		if i < 0 || fence[i].Seq < p.Seq {
			return false
		}
	}
	return true
}

// Join is the positions at or past both a and b, sorted by origin (a fence or a floor that
// covers both).
func Join(a, b Fence) Fence { return join(a, b) }

// join is the positions at or past both a and b, sorted by origin.
func join(a, b Fence) Fence {
	out := slices.Clone(a)
	for _, p := range b {
		if i := slices.IndexFunc(out, func(q Position) bool { return q.Origin == p.Origin }); i >= 0 {
			out[i].Seq = max(out[i].Seq, p.Seq)
		} else {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(x, y Position) int { return bytes.Compare(x.Origin[:], y.Origin[:]) })
	return out
}

// MoveAway follows a generation that moved keys away from this home: homed reports whether
// it still homes a key. The leases it holds on the others are dropped (counted MovedAway)
// and their waiters answered CodeNotHome (the Events, in key order), so that it grants,
// renews and confirms nothing more for them: what it confirmed is then inside its applied
// positions from now on, the floor it gives their new home (docs/design.md §25.2).
func (t *Table) MoveAway(now time.Time, generation uint64, homed func(Key) bool) []Event {
	now = t.clamp(now)
	t.raise(generation)
	var gone []*entry
	for _, e := range t.keys {
		if !homed(e.key) {
			gone = append(gone, e)
		}
	}
	slices.SortFunc(gone, func(a, b *entry) int { return compareKeys(a.key, b.key) })
	var events []Event
	for _, e := range gone {
		if e.lease != nil {
			t.stopTimer(e.expiry)
			e.lease, e.expiry = nil, nil
			t.leases--
			t.stats.MovedAway++
		}
		// A delegation of a key moved away is kept until its delegate returns it: the
		// floor this home gives must hold what the delegate confirmed (FloorOwed).
		for _, d := range []*Delegation{e.deleg, e.pending} {
			if d != nil {
				d.Recalled = true
				t.away[d.Token] = d
			}
		}
		if e.deleg != nil {
			t.stopTimer(e.expiry)
			e.expiry = nil
		}
		e.deleg, e.pending = nil, nil
		for _, w := range e.waiters {
			t.stopTimer(w.timer)
			t.waiting--
			t.count(CodeNotHome)
			events = append(events, Event{Waiter: w.id, Key: e.key.clone(), Result: Result{Code: CodeNotHome}})
		}
		e.waiters = nil
		delete(t.keys, e.key.id())
	}
	return events
}

func (t *Table) startMove(now time.Time, mv move) []Event {
	now = t.clamp(now)
	generation, newlyHomed := mv.generation, mv.newlyHomed
	t.raise(generation)
	until := now.Add(t.cfg.Quarantine())
	mv.until = until
	t.moves = append(t.moves, mv)
	var waited []*entry
	for _, e := range t.keys {
		if len(e.waiters) > 0 {
			waited = append(waited, e)
		}
	}
	slices.SortFunc(waited, func(a, b *entry) int { return compareKeys(a.key, b.key) })
	var events []Event
	for _, e := range waited {
		if !newlyHomed(e.key) {
			continue
		}
		for _, w := range e.waiters {
			t.stopTimer(w.timer)
			t.waiting--
			t.count(CodeQuarantined)
			events = append(events, Event{Waiter: w.id, Key: e.key.clone(), Result: quarantined(now, until)})
		}
		e.waiters = nil
	}
	return events
}

// quarantined is the answer to a request for a key quarantined at now until until.
func quarantined(now, until time.Time) Result {
	return Result{Code: CodeQuarantined, Until: until, RetryAfter: until.Sub(now)}
}

// quarantinedUntil is when the quarantines that hold key at now end, the latest of them.
func (t *Table) quarantinedUntil(now time.Time, key Key) (time.Time, bool) {
	var until time.Time
	if now.Before(t.restartUntil) {
		until = t.restartUntil
	}
	for _, m := range t.moves {
		if now.Before(m.until) && m.until.After(until) && m.newlyHomed(key) {
			until = m.until
		}
	}
	return until, !until.IsZero()
}

// Next is the earliest instant at which Tick has work: a lease's expiry, a wait's end, a
// quarantine's end. Zero when there is none.
func (t *Table) Next() time.Time {
	var next time.Time
	earlier := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if len(t.timers) > 0 {
		earlier(t.timers[0].at)
	}
	if !t.restartUntil.IsZero() {
		earlier(t.restartUntil)
	}
	for _, m := range t.moves {
		if t.last.Before(m.until) { // one over waits for floors, not for time
			earlier(m.until)
		}
	}
	return next
}

// Stats are the table's counters now.
func (t *Table) Stats() Stats {
	s := t.stats
	s.Refused = maps.Clone(t.stats.Refused)
	s.Leases = t.leases
	s.Waiting = t.waiting
	s.Generation = t.generation
	s.Incarnation = t.incarnation
	s.Counter = t.counter
	s.RestartUntil = t.restartUntil
	s.Delegations = t.delegations
	for _, m := range t.moves {
		if t.last.Before(m.until) {
			s.MoveQuarantines++
		} else {
			s.MovesAwaitingFloor++
		}
	}
	return s
}

func (t *Table) count(c Code) {
	if c.Refused() {
		t.stats.Refused[c]++
	}
}
