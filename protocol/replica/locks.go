package replica

import (
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/lock"
	"plait/protocol/wire"
)

// Locks at a key's home (docs/design.md §25): a node the map names among its lock_homes
// keeps a lease table (protocol/lock) and serves the lock request kinds over the request
// exchange (requests.go); any node asks a key's home for it (Lock), itself included
// without the exchange, and keeps the holder deadline of every lease it was granted, so
// that a write under a token is checked here (HeldLease). The decisions about leases are
// the table's; this file carries requests to it and its answers back.

// The lock request kinds (protocol/SPEC.md, Version 4). Every body is a LockArgs, every
// success's body a LockReply.
const (
	KindLockAcquire = "lock-acquire" // table, key, ttl_ms, wait_ms, holder → token, expires_in_ms, fence
	KindLockRenew   = "lock-renew"   // table, key, token, ttl_ms → token, expires_in_ms
	KindLockRelease = "lock-release" // table, key, token → empty
	KindLockCheck   = "lock-check"   // table, key, token → empty (live by its holder's deadline)
	KindLockConfirm = "lock-confirm" // table, key, token, origin, seq → empty, once applied
	KindLockFence   = "lock-fence"   // table, key, token → token, fence
	// KindLockFloor is asked of a key's previous home by its new one once the move
	// quarantine is over (docs/design.md §25.2); any node answers it, home or not.
	KindLockFloor = "lock-floor" // generation → fence (its applied positions, once it holds the generation)
)

// The lock codes the replica adds to the table's (lock.Code*, which travel as they are).
const (
	CodeNotHome         wire.Code = "not-home"      // this node is not the key's home under its map
	CodeNoLockHomes     wire.Code = "no-lock-homes" // the map names no lock home
	CodeClusterNotV4    wire.Code = clustermap.CodeClusterNotV4
	CodeTooManyConfirms wire.Code = "too-many-confirms" // the home's pending confirms are at LockMaxConfirms
	CodeLockHomeOff     wire.Code = "lock-home-off"     // the map names this node a home, its Config cannot be one
	CodeMapBehind       wire.Code = "map-behind"        // lock-floor: this node has not adopted the generation asked
)

// controlLockIncarnation is the store's control key of the home's incarnation: raised each
// time the home's table is made (after every start, before it grants), so a restarted home
// never reissues a token.
const controlLockIncarnation = "lock-incarnation"

// controlLockMoves is the store's control key of the home's moves still waiting for their
// previous homes' floors (storedLockMove, CBOR): a table made after a restart takes them
// again, since its restart quarantine gives exclusion but no floor.
const controlLockMoves = "lock-moves"

// storedLockMove is one move kept under controlLockMoves: the generation that brought keys
// to this home and the lock homes of the map it held before; [""] (anyHome) when it skipped
// a generation.
type storedLockMove struct {
	Generation uint64   `cbor:"1,keyasint"`
	PrevHomes  []string `cbor:"2,keyasint"`
}

// floorAsk is one lock-floor request: a move's generation, the previous home whose floor
// it is for, and the member asked (the home itself, or, for a home the map no longer
// lists among its nodes, each member: askFloors).
type floorAsk struct {
	generation uint64
	home       string
	member     string
}

// lockConn is the connection id the hops of lock requests answered later (a waiting
// acquire, a confirm waiting for its write) are kept under: no connection has it, so
// expiry and a closing connection treat them as they treat every hop.
const lockConn ConnID = ^ConnID(0)

// LockArgs is the body of every lock request kind; each kind reads the fields it names.
type LockArgs struct {
	Table  string `cbor:"1,keyasint"`
	Key    []byte `cbor:"2,keyasint"`
	TTLMS  uint64 `cbor:"3,keyasint,omitempty"`
	WaitMS uint64 `cbor:"4,keyasint,omitempty"`
	Holder string `cbor:"5,keyasint,omitempty"`
	Token  []byte `cbor:"6,keyasint,omitempty"` // lock.TokenBytes bytes
	Origin []byte `cbor:"7,keyasint,omitempty"` // 16 bytes: lock-confirm's writer origin
	Seq    uint64 `cbor:"8,keyasint,omitempty"`
	// Delegate: an acquire that asks for a delegation of the key (docs/design.md §25.9).
	Delegate bool `cbor:"9,keyasint,omitempty"`
}

// lockFloorArgs is the body of a lock-floor: the generation that moved the keys.
type lockFloorArgs struct {
	Generation uint64 `cbor:"1,keyasint"`
}

// LockReply is the body of a lock request's answer: a grant, a renewal or a fence carry
// the token and what they say; a refusal (its code in the answer) carries RetryAfterMS when
// the table gave one (lock-held, quarantined).
type LockReply struct {
	Token        []byte       `cbor:"1,keyasint,omitempty"`
	ExpiresInMS  uint64       `cbor:"2,keyasint,omitempty"`
	Fence        []storedSeqs `cbor:"3,keyasint,omitempty"`
	RetryAfterMS uint64       `cbor:"4,keyasint,omitempty"`
	// Block, above 0, makes an acquire's answer a delegation: Token is its block's first
	// token, Block its size, ExpiresInMS its time at the home, Fence its fence.
	Block uint64 `cbor:"5,keyasint,omitempty"`
}

// LockResult is a LockReply read (ParseLockReply).
type LockResult struct {
	Token      lock.Token
	ExpiresIn  time.Duration // until the home frees the key, on its clock at the answer
	Fence      lock.Fence
	RetryAfter time.Duration
	Block      uint64 // a delegation's block (LockReply.Block)
}

// tokenBytes and tokenOf are the one conversion between lock.Token and the bytes a
// request carries (the token's lock.TokenBytes bytes, as the record's token section).
func tokenBytes(t lock.Token) []byte { return wire.AppendToken(nil, t) }

func tokenOf(b []byte) (lock.Token, bool) {
	if len(b) != lock.TokenBytes {
		return lock.Token{}, false
	}
	var t lock.Token
	t.Generation = binary.BigEndian.Uint64(b[0:])
	t.Incarnation = binary.BigEndian.Uint64(b[8:])
	t.Counter = binary.BigEndian.Uint64(b[16:])
	copy(t.Home[:], b[24:])
	return t, !t.IsZero()
}

// WireToken is the record's token of a lease's (Replica.WriteTokened takes it).
func WireToken(t lock.Token) wire.Token {
	return wire.Token{Generation: t.Generation, Incarnation: t.Incarnation, Counter: t.Counter, Home: t.Home}
}

// ParseLockReply reads the body of a lock request's answer.
func ParseLockReply(body []byte) (LockResult, error) {
	var rep LockReply
	if len(body) > 0 {
		if err := wire.Unmarshal(body, &rep); err != nil {
			return LockResult{}, err
		}
	}
	res := LockResult{ExpiresIn: time.Duration(rep.ExpiresInMS) * time.Millisecond,
		RetryAfter: time.Duration(rep.RetryAfterMS) * time.Millisecond, Block: rep.Block}
	if len(rep.Token) > 0 {
		t, ok := tokenOf(rep.Token)
		if !ok {
			return LockResult{}, wire.NewError(wire.CodeBadArgument, "a lock answer's token is not "+strconv.Itoa(lock.TokenBytes)+" bytes of a token")
		}
		res.Token = t
	}
	for _, p := range rep.Fence {
		res.Fence = append(res.Fence, lock.Position{Origin: p.Origin, Seq: p.Seq})
	}
	return res, nil
}

// lockState is the home's lease table and the requests it answers later, and the leases
// this node was granted as a caller.
type lockState struct {
	incarnation uint64      // raised in the store when the table is made
	table       *lock.Table // nil while the map names this node no home
	err         error       // why the map's naming this node a home could not be honoured
	// waiters: the hop of each queued acquire, by the table's waiter id.
	waiters map[uint64]hopKey
	// confirms: lock-confirm requests waiting for their write to be applied here, in
	// arrival order.
	confirms []*pendingConfirm
	lastHop  uint64
	// held: the leases this node was granted as a caller, by token, until their holder
	// deadline passes or they are released.
	held map[lock.Token]HeldLease
	// moves: the moves this home waits for floors of, as kept in the store
	// (controlLockMoves); floorAsking: their lock-floor requests in flight; floorParts: the
	// answers of the members for a previous home gone from the map; floorNext: when the
	// floors wanted are asked again. Each is bounded by the moves times the map's members.
	moves       []storedLockMove
	floorAsking map[floorAsk]RequestID
	floorParts  map[floorAsk]lock.Fence
	floorNext   time.Time
	// Delegation (lockdeleg.go): deputy holds the delegations this node took; leaving, the
	// table of a node the map no longer names a home while delegations of it are out;
	// recalling, the home's lock-recall requests in flight, by delegation; recallNext, when
	// they are asked again; recalls, the recalls this node waits to answer until its last
	// lease under them ends. Each is bounded by MaxDelegations.
	deputy     *lock.Deputy
	leaving    *lock.Table
	recalling  map[lock.Token]RequestID
	recallNext time.Time
	recalls    []*pendingRecall
	// toDelegates, the requests for delegated tokens kept to pass on to their delegates
	// (askDelegates); forwarded counts those passed on.
	toDelegates []delegateAsk
	forwarded   uint64
	// renewing, the deputy's renewals of its delegations in flight (renewDelegation), by
	// delegation; renewed counts those the homes granted.
	renewing map[lock.Token]RequestID
	renewed  uint64
}

type pendingConfirm struct {
	hop    hopKey
	key    lock.Key
	token  lock.Token
	origin wire.OriginID
	seq    uint64
	// arrival is the arrival position by which this home had applied the write, once it
	// had (0 before): the sync that covers it makes the write the home's for good.
	arrival uint64
	// deputy: the write is under a lease of this node's deputy, which answers it.
	deputy bool
}

// HeldLease is a lease this node was granted: the key, the holder deadline (its clock,
// from when the acquire was sent: lock.HolderDeadline) and the grant's fence.
type HeldLease struct {
	Key      lock.Key
	Token    lock.Token
	Deadline time.Time
	Fence    lock.Fence
}

// raiseIncarnation raises the home's incarnation in the store: each time the table is made,
// before it grants, so that no token of an earlier table is granted again.
func (r *Replica) raiseIncarnation() error {
	raw, err := r.store.Control(controlLockIncarnation)
	if err != nil {
		return err
	}
	var n uint64
	if len(raw) == 8 {
		n = binary.BigEndian.Uint64(raw)
	} else if raw != nil {
		return errorf("the control document %s is %d bytes, not 8", controlLockIncarnation, len(raw))
	}
	n++
	if err := r.store.PutControl(controlLockIncarnation, binary.BigEndian.AppendUint64(nil, n)); err != nil {
		return err
	}
	r.locks.incarnation = n
	return nil
}

// isLockHome reports whether m names this node among its lock homes.
func (r *Replica) isLockHome(m *clustermap.Map) bool {
	_, found := slices.BinarySearch(m.LockHomes, r.id.Name)
	return found
}

// syncLockHome makes the table exist exactly while the map names this node a home. A
// table made here starts in its restart quarantine, which a key newly homed needs too.
func (r *Replica) syncLockHome() {
	ls := &r.locks
	home := r.isLockHome(&r.cmap.cur)
	switch {
	case home && ls.table == nil && ls.err == nil:
		// A new incarnation for every table, raised in the store before it grants: a node
		// that is no home writes nothing for locks (a write at every start would be one
		// more at a reopen on a nearly full disk, before the free-space guard could look).
		if !r.check(r.raiseIncarnation()) {
			return
		}
		start := r.now
		if r.cfg.Mutations.SkipRestartQuarantine {
			start = start.Add(-r.cfg.Locks.Quarantine()) // its quarantine ends now
		}
		t, err := lock.New(r.cfg.Locks, r.id.Origin, ls.incarnation, start)
		if err != nil {
			ls.err = err
			return
		}
		ls.table = t
		r.restoreLockMoves()
		r.restoreDelegations()
	case !home && (ls.table != nil || ls.err != nil):
		r.dropLockHome()
	}
}

// dropLockHome forgets the table of a node the map no longer names a home: the requests it
// was to answer later are answered not-home (the key's new home has it now).
func (r *Replica) dropLockHome() {
	ls := &r.locks
	if ls.table != nil && len(ls.table.Delegations()) > 0 {
		// Its delegations out are recalled before it gives a floor (serveLockFloor): what
		// their delegates confirmed may be applied only there.
		ls.table.MoveAway(r.now, r.cmap.cur.Generation, func(lock.Key) bool { return false })
		ls.leaving = ls.table
		r.recallNow()
	}
	ls.table, ls.err = nil, nil
	ls.floorAsking, ls.floorParts = nil, nil
	if len(ls.moves) > 0 {
		// Its keys are other homes' now, and their floors those homes' to ask.
		ls.moves = nil
		r.writeLockMoves()
	}
	ids := slices.Sorted(func(yield func(uint64) bool) {
		for id := range ls.waiters {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		r.answerLater(ls.waiters[id], CodeNotHome, "the cluster map no longer names "+r.id.Name+" a lock home", nil)
	}
	ls.waiters = nil
	for _, c := range ls.confirms {
		r.answerLater(c.hop, CodeNotHome, "the cluster map no longer names "+r.id.Name+" a lock home", nil)
	}
	ls.confirms = nil
}

// lockMapAdopted follows a new map at the home: a table that goes on lets go of the keys
// the new map moves away, and starts a move for the keys it brings (their old home's
// leases run on, and what it confirmed must be applied here first); a node named a home or
// no longer one gets or drops its table.
func (r *Replica) lockMapAdopted(prev, next clustermap.Map) {
	ls := &r.locks
	had := ls.table != nil
	if had && r.isLockHome(&next) && next.Generation > prev.Generation {
		self := r.id.Name
		// The keys moved away first: from now on this home grants, renews and confirms
		// nothing for them, so its applied positions cover what it confirmed (its floor).
		r.lockEvents(ls.table.MoveAway(r.now, next.Generation, func(k lock.Key) bool {
			return next.Home([]byte(k.Table), k.Key) == self
		}))
		r.recallNow() // the delegations of keys moved away, before this home gives a floor
	}
	r.syncLockHome() // a table made now takes the move noted in the store (noteLockMove)
	// A table that goes on takes the move here: the keys it takes from the previous homes
	// wait for their floors. The store's note of it is rewritten either way.
	if had && ls.table != nil && next.Generation > prev.Generation {
		prevHomes := r.lockPrevHomes(prev, next)
		if slices.Contains(prevHomes, anyHome) && len(ls.moves) >= r.cfg.LockMaxMoves {
			ls.table.DropMoves() // merged into this one (lockPrevHomes)
			ls.moves = nil
		}
		if r.startLockMove(next, next.Generation, prevHomes) {
			ls.moves = append(ls.moves, storedLockMove{Generation: next.Generation, PrevHomes: prevHomes})
		}
		r.writeLockMoves()
	}
}

// noteLockMove writes, before the map next is stored, the move it makes at this home (the
// store's moves with it added), so that a crash between the two writes cannot leave a
// stored map whose move no table made after the restart takes: the move is the new home's
// floor, which its restart quarantine does not give.
func (r *Replica) noteLockMove(prev, next clustermap.Map) bool {
	if !r.isLockHome(&next) || next.Generation <= prev.Generation {
		return true
	}
	prevHomes := r.lockPrevHomes(prev, next)
	moves := slices.Clone(r.locks.moves)
	if slices.Contains(prevHomes, anyHome) && len(moves) >= r.cfg.LockMaxMoves {
		moves = nil // merged into this one (lockPrevHomes)
	}
	moves = append(moves, storedLockMove{Generation: next.Generation, PrevHomes: prevHomes})
	b, err := wire.Marshal(moves)
	return r.check(err) && r.check(r.store.PutControl(controlLockMoves, b))
}

// lockPrevHomes is the previous homes of the move from prev to next: prev's lock homes, or
// anyHome when a generation between them was skipped, or when the home keeps
// Config.LockMaxMoves moves already. A node that skipped a generation does not know the
// homes of the maps between, which may have granted and confirmed any of its keys: every
// key it homes then waits for the floor of every member, each given once the member holds
// next, so after each home of any generation before let go; that floor covers the floors
// of the moves kept, which the new move then replaces (bounding them).
func (r *Replica) lockPrevHomes(prev, next clustermap.Map) []string {
	if next.Generation > prev.Generation+1 || len(r.locks.moves) >= r.cfg.LockMaxMoves {
		return []string{anyHome}
	}
	return slices.Clone(prev.LockHomes)
}

// anyHome stands, as a move's previous home, for every home of the generations a node
// skipped: no member is named so, so its floor is the join of every member's (askFloors).
const anyHome = ""

// startLockMove starts the move of generation at the table: the keys next homes here that
// a map of lock homes prevHomes did not are in their quarantine, then wait for the floor
// of their previous home. It reports whether a floor is wanted (a previous home other than
// this node).
func (r *Replica) startLockMove(next clustermap.Map, generation uint64, prevHomes []string) bool {
	self := r.id.Name
	prev := clustermap.Map{LockHomes: prevHomes}
	skipped := slices.Contains(prevHomes, anyHome)
	from := func(k lock.Key) (string, bool) {
		if next.Home([]byte(k.Table), k.Key) != self {
			return "", false
		}
		if skipped {
			return anyHome, true
		}
		h := prev.Home([]byte(k.Table), k.Key)
		return h, h != self
	}
	homes := slices.DeleteFunc(slices.Clone(prevHomes), func(h string) bool { return h == self })
	if r.cfg.Mutations.SkipMoveFloor {
		homes = nil
	}
	r.lockEvents(r.locks.table.MoveHome(r.now, generation, from, homes))
	return len(homes) > 0
}

// restoreLockMoves gives a table just made the moves kept in the store that still wait for
// floors: their keys are under the current map's homes, a previous home's floor as before.
func (r *Replica) restoreLockMoves() {
	raw, err := r.store.Control(controlLockMoves)
	if !r.check(err) || raw == nil {
		return
	}
	var moves []storedLockMove
	if err := wire.Unmarshal(raw, &moves); err != nil {
		r.check(errorf("the control document %s is not a list of moves: %v", controlLockMoves, err))
		return
	}
	r.locks.moves = nil
	for _, mv := range moves {
		if r.startLockMove(r.cmap.cur, mv.Generation, mv.PrevHomes) {
			r.locks.moves = append(r.locks.moves, mv)
		}
	}
}

// writeLockMoves keeps the moves waiting for floors in the store.
func (r *Replica) writeLockMoves() {
	b, err := wire.Marshal(r.locks.moves)
	if r.check(err) {
		r.check(r.store.PutControl(controlLockMoves, b))
	}
}

// askFloors asks the previous homes whose floors the table wants (kind lock-floor), every
// PlacementPoll while one is wanted, and forgets in the store the moves the table no
// longer holds. A previous home the current map no longer lists among its nodes (gone for
// good, docs/operations.md) cannot answer: its floor is then the join of every member's
// answer, each given once the member holds the generation. A write it confirmed was made
// by its writer before, so the writer's answer covers it, unless the writer was the lost
// node itself and the write never left it.
func (r *Replica) askFloors() {
	ls := &r.locks
	t := ls.table
	if t == nil {
		return
	}
	if pending := t.PendingMoves(); len(ls.moves) > 0 && len(pending) < len(ls.moves) {
		ls.moves = slices.DeleteFunc(ls.moves, func(mv storedLockMove) bool { return !slices.Contains(pending, mv.Generation) })
		r.writeLockMoves()
		maps.DeleteFunc(ls.floorParts, func(k floorAsk, _ lock.Fence) bool { return !slices.Contains(pending, k.generation) })
	}
	if r.now.Before(ls.floorNext) {
		return
	}
	wants := t.FloorsWanted()
	if len(wants) == 0 {
		return
	}
	ls.floorNext = r.now.Add(r.cfg.PlacementPoll)
	for _, w := range wants {
		body, err := wire.Marshal(lockFloorArgs{Generation: w.Generation})
		if !r.check(err) {
			return
		}
		for _, h := range w.Homes {
			asked := []string{h}
			if !slices.ContainsFunc(r.cmap.cur.Nodes, func(n clustermap.Node) bool { return n.Name == h }) {
				asked = asked[:0]
				for _, n := range r.cmap.cur.Nodes {
					asked = append(asked, n.Name)
				}
			}
			for _, member := range asked {
				k := floorAsk{w.Generation, h, member}
				if _, busy := ls.floorAsking[k]; busy {
					continue
				}
				if _, done := ls.floorParts[k]; done {
					continue
				}
				if ls.floorAsking == nil {
					ls.floorAsking = map[floorAsk]RequestID{}
				}
				if !r.askThen(member, KindLockFloor, wire.ScopeRead, body, func(id RequestID) { ls.floorAsking[k] = id },
					func(a Answer) { r.floorAnswered(k, asked, a) }) {
					return
				}
			}
		}
	}
}

// floorAnswered gives the table a previous home's floor once every member in asked has
// answered (the home alone, or every member: askFloors); a refusal (down, unreachable,
// map-behind) is asked again at the next poll.
func (r *Replica) floorAnswered(k floorAsk, asked []string, a Answer) {
	ls := &r.locks
	if ls.floorAsking[k] != a.ID {
		return
	}
	delete(ls.floorAsking, k)
	if a.Code != "" || ls.table == nil {
		return
	}
	res, err := ParseLockReply(a.Body)
	if err != nil {
		return
	}
	if ls.floorParts == nil {
		ls.floorParts = map[floorAsk]lock.Fence{}
	}
	ls.floorParts[k] = res.Fence
	var parts []lock.Fence
	for _, m := range asked {
		f, ok := ls.floorParts[floorAsk{k.generation, k.home, m}]
		if !ok {
			return
		}
		parts = append(parts, f)
	}
	for _, m := range asked {
		delete(ls.floorParts, floorAsk{k.generation, k.home, m})
	}
	for _, f := range parts {
		ls.table.Floor(r.now, k.generation, k.home, f) // joined: Floor joins a second floor to the first
	}
}

// floorsDue is when askFloors next asks (zero: no floor is wanted).
func (r *Replica) floorsDue() time.Time {
	if t := r.locks.table; t != nil && len(t.FloorsWanted()) > 0 {
		return r.locks.floorNext
	}
	return time.Time{}
}

// serveLockFloor answers a lock-floor: this node's applied positions, once it holds the
// generation asked. Holding it, it confirms nothing for a key that generation moved away
// from it (confirm), so every write it confirmed for one is inside them.
func serveLockFloor(r *Replica, body []byte) (wire.Code, string, []byte) {
	var a lockFloorArgs
	if err := wire.Unmarshal(body, &a); err != nil || a.Generation == 0 {
		return wire.CodeBadArgument, "a lock-floor body is a map with a generation above 0", nil
	}
	if g := r.cmap.cur.Generation; g < a.Generation {
		return CodeMapBehind, "this node holds generation " + strconv.FormatUint(g, 10) + ", below " + strconv.FormatUint(a.Generation, 10), nil
	}
	// What the delegates of keys it homed confirmed is inside the floor only once they
	// returned their delegations (docs/design.md §25.9).
	floor := r.appliedFence()
	for _, t := range []*lock.Table{r.locks.table, r.locks.leaving} {
		if t == nil {
			continue
		}
		owed, ready := t.FloorOwed()
		if !ready {
			return wire.Code(lock.CodeMovePending), "delegations of keys moved away from this node are not returned yet", nil
		}
		floor = lock.Join(floor, owed)
	}
	var rep LockReply
	for _, p := range floor {
		rep.Fence = append(rep.Fence, storedSeqs{Origin: p.Origin, Seq: p.Seq})
	}
	b, err := wire.Marshal(rep)
	if err != nil {
		return wire.CodeInternal, err.Error(), nil
	}
	return "", "", b
}

// lockFence is the home's applied positions now: the fence of a grant made now.
func (r *Replica) lockFence() lock.Fence {
	var f lock.Fence
	if r.cfg.Mutations.SkipLockFence {
		return f
	}
	for _, st := range r.originList {
		if st.applied.Seq > 0 {
			f = append(f, lock.Position{Origin: st.id, Seq: st.applied.Seq})
		}
	}
	return f
}

// tickLocks does what time made due at the home, and forgets the held leases whose holder
// deadline passed.
func (r *Replica) tickLocks() {
	if t := r.locks.table; t != nil && !t.Next().IsZero() && !r.now.Before(t.Next()) {
		r.lockEvents(t.Tick(r.now, r.lockFence()))
	}
	if t := r.locks.leaving; t != nil && !t.Next().IsZero() && !r.now.Before(t.Next()) {
		t.Tick(r.now, r.lockFence())
	}
	if p := r.locks.deputy; p != nil && !p.Next().IsZero() && !r.now.Before(p.Next()) {
		p.Tick(r.now)
	}
	for tok, h := range r.locks.held {
		if !r.now.Before(h.Deadline) {
			delete(r.locks.held, tok) // a map's order cannot show: deletes only
		}
	}
}

// locksDue is when tickLocks has work (zero: none).
func (r *Replica) locksDue() time.Time {
	var next time.Time
	for _, at := range []time.Time{r.tableDue(r.locks.table), r.tableDue(r.locks.leaving), r.deputyDue(), r.recallsDue()} {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

func (r *Replica) tableDue(t *lock.Table) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Next()
}

// deferHop keeps a request to answer later (answerLater).
func (r *Replica) deferHop(h *hop) hopKey {
	r.locks.lastHop++
	h.out, h.outID = lockConn, r.locks.lastHop
	k := hopKey{lockConn, h.outID}
	r.reqs.hops[k] = h
	return k
}

// answerLater answers a request kept by deferHop; false when it is given up already (its
// deadline passed, or the connection it came on closed).
func (r *Replica) answerLater(k hopKey, code wire.Code, msg string, body []byte) bool {
	h := r.reqs.hops[k]
	if h == nil {
		return false
	}
	delete(r.reqs.hops, k)
	r.answerHop(h, code, msg, body)
	return true
}

// lockEvents answers the queued acquires the table decided. A grant whose request was
// given up meanwhile is released at once: nobody holds it, and the next waiter should not
// wait out its ttl.
func (r *Replica) lockEvents(evs []lock.Event) {
	for len(evs) > 0 {
		ev := evs[0]
		evs = evs[1:]
		k, ok := r.locks.waiters[ev.Waiter]
		if !ok {
			continue
		}
		delete(r.locks.waiters, ev.Waiter)
		code, msg, body := r.lockAnswer(ev.Result)
		if !r.answerLater(k, code, msg, body) && ev.Result.Code == lock.CodeGranted && r.locks.table != nil {
			evs = append(evs, r.locks.table.Release(r.now, ev.Key, ev.Result.Lease.Token, r.lockFence()).Events...)
		}
	}
}

// ceilMS is d in whole milliseconds, rounded up (a retry after it is never early).
func ceilMS(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// lockAnswer is the answer of a table's result.
func (r *Replica) lockAnswer(res lock.Result) (wire.Code, string, []byte) {
	var rep LockReply
	code, msg := wire.Code(""), ""
	switch res.Code {
	case lock.CodeGranted, lock.CodeRenewed:
		rep.Token = tokenBytes(res.Lease.Token)
		rep.ExpiresInMS = uint64(res.Lease.Expiry.Sub(r.now) / time.Millisecond)
		for _, p := range res.Lease.Fence {
			rep.Fence = append(rep.Fence, storedSeqs{Origin: p.Origin, Seq: p.Seq})
		}
		if res.Code == lock.CodeRenewed {
			rep.Fence = nil
		}
	case lock.CodeReleased:
		return "", "", nil
	default:
		code, msg = wire.Code(res.Code), lockMessage(res)
		rep.RetryAfterMS = ceilMS(res.RetryAfter)
	}
	if rep.Token == nil && rep.RetryAfterMS == 0 {
		return code, msg, nil
	}
	b, err := wire.Marshal(rep)
	if err != nil {
		return wire.CodeInternal, err.Error(), nil
	}
	return code, msg, b
}

func lockMessage(res lock.Result) string {
	switch res.Code {
	case lock.CodeHeld:
		return "another lease holds the key"
	case lock.CodeLost:
		return "the token is not the key's live lease"
	case lock.CodeTooManyLeases:
		return "the home holds as many leases as it may"
	case lock.CodeTooManyWaiters:
		return "the home's queue is full"
	case lock.CodeBadTTL:
		return "ttl_ms is not above 0 and at most the home's maximum"
	case lock.CodeBadWait:
		return "wait_ms is above the home's maximum"
	case lock.CodeQuarantined:
		return "the home grants nothing for the key until its quarantine ends"
	case lock.CodeMovePending:
		return "the key's home moved: the new home grants nothing for it until it has applied what the previous home had"
	case lock.CodeNotHome:
		return "a later generation moved the key's home away from this node"
	}
	return string(res.Code)
}

// serveLock serves a lock request for this node, h its hop: at once (done), or later, for a
// queued acquire and a confirm whose write is not applied here yet (the hop is kept).
func serveLock(r *Replica, h *hop, req *wire.Request) (code wire.Code, msg string, body []byte, done bool) {
	var a LockArgs
	if err := wire.Unmarshal(req.Body, &a); err != nil || !wire.ValidName(a.Table) {
		return wire.CodeBadArgument, "a " + req.Kind + " body is a map of a table name, a key and the kind's fields", nil, true
	}
	if code, msg, body, done, ok := r.serveDeputy(h, req.Kind, a); ok {
		return code, msg, body, done
	}
	m := &r.cmap.cur
	switch {
	case len(m.LockHomes) == 0:
		return CodeNoLockHomes, "the cluster map names no lock home", nil, true
	case r.RequireV4() != nil:
		return CodeClusterNotV4, r.RequireV4().Message, nil, true
	case m.Home([]byte(a.Table), a.Key) != r.id.Name:
		return CodeNotHome, "the key's home under generation " + strconv.FormatUint(m.Generation, 10) + " is " + m.Home([]byte(a.Table), a.Key), nil, true
	}
	r.syncLockHome()
	t := r.locks.table
	if t == nil {
		why := "its table could not be made"
		if r.locks.err != nil {
			why = r.locks.err.Error()
		}
		return CodeLockHomeOff, "this node cannot be a lock home: " + why, nil, true
	}
	key := lock.Key{Table: a.Table, Key: a.Key}
	var tok lock.Token
	if req.Kind != KindLockAcquire {
		var ok bool
		if tok, ok = tokenOf(a.Token); !ok {
			return wire.CodeBadArgument, "a " + req.Kind + " needs a token of " + strconv.Itoa(lock.TokenBytes) + " bytes", nil, true
		}
	}
	if req.Kind == KindLockRenew && a.Delegate {
		return r.serveDelegationRenew(req, t, key, tok, a.TTLMS)
	}
	if req.Kind != KindLockAcquire {
		if d, ok := t.DelegationOf(key, tok); ok {
			return r.askDelegate(h, req, d)
		}
	}
	ttl := time.Duration(min(a.TTLMS, uint64(lock.MaxTTLLimit/time.Millisecond)+1)) * time.Millisecond
	switch req.Kind {
	case KindLockAcquire:
		wait := time.Duration(min(a.WaitMS, uint64(lock.MaxWaitLimit/time.Millisecond)+1)) * time.Millisecond
		if remaining := h.deadline.Sub(r.now); wait > 0 && wait > remaining-remaining/4 {
			// A wait must end while the caller still waits: it leaves a quarter of the
			// request's remaining time here for the answer (granted or lock-held) to travel
			// back, since the caller's deadline is earlier by the request's way here.
			return wire.Code(lock.CodeBadWait), "wait_ms must leave a quarter of the request's remaining time (" + remaining.String() + ") for the answer", nil, true
		}
		if a.Delegate && r.delegating() && len(req.Path) > 0 && req.Path[0] != r.id.Name {
			// Every acquire from another node that finds the key free delegates it: the
			// answer is the same one frame, and the node's next acquires of the key cost
			// none. A key held, waited for or delegated is acquired as ever.
			dttl := r.cfg.Locks.MaxDelegationTTL
			if res := t.Delegate(r.now, key, req.Path[0], dttl, m.Generation, r.lockFence()); res.Code == lock.CodeDelegated {
				r.lockEvents(res.Events)
				if !r.noteDelegations() {
					return wire.CodeInternal, "the delegation could not be noted in the store", nil, true
				}
				return "", "", r.delegationReply(res.Delegation), true
			} else {
				r.lockEvents(res.Events)
			}
		}
		res := t.Acquire(r.now, key, a.Holder, ttl, wait, m.Generation, r.lockFence())
		r.lockEvents(res.Events)
		if res.Recall {
			r.recallNow()
		}
		if res.Code == lock.CodeQueued {
			if r.locks.waiters == nil {
				r.locks.waiters = map[uint64]hopKey{}
			}
			r.locks.waiters[res.Waiter] = r.deferHop(h)
			return "", "", nil, false
		}
		code, msg, body = r.lockAnswer(res)
		return code, msg, body, true
	case KindLockRenew:
		code, msg, body = r.lockAnswer(t.Renew(r.now, key, tok, ttl))
		return code, msg, body, true
	case KindLockRelease:
		res := t.Release(r.now, key, tok, r.lockFence())
		r.lockEvents(res.Events)
		code, msg, body = r.lockAnswer(res)
		return code, msg, body, true
	case KindLockCheck:
		if !t.Check(r.now, key, tok) {
			return wire.Code(lock.CodeLost), "the token is not the key's live lease by its holder's deadline", nil, true
		}
		return "", "", nil, true
	case KindLockFence:
		l, ok := t.Lease(r.now, key, tok)
		if !ok {
			return wire.Code(lock.CodeLost), "the token is not the key's live lease", nil, true
		}
		code, msg, body = r.lockAnswer(lock.Result{Code: lock.CodeGranted, Lease: l})
		return code, msg, body, true
	case KindLockConfirm:
		if len(a.Origin) != len(wire.OriginID{}) || a.Seq == 0 {
			return wire.CodeBadArgument, "a lock-confirm needs the writer's origin (16 bytes) and a seq above 0", nil, true
		}
		var o wire.OriginID
		copy(o[:], a.Origin)
		pc := &pendingConfirm{key: lock.Key{Table: a.Table, Key: slices.Clone(a.Key)}, token: tok, origin: o, seq: a.Seq}
		if r.confirmable(pc) || r.cfg.Mutations.ConfirmAtOnce {
			code, msg = r.confirm(pc)
			return code, msg, nil, true
		}
		if len(r.locks.confirms) >= r.cfg.LockMaxConfirms {
			return CodeTooManyConfirms, "the home holds " + strconv.Itoa(r.cfg.LockMaxConfirms) + " confirms waiting for their writes", nil, true
		}
		pc.hop = r.deferHop(h)
		r.locks.confirms = append(r.locks.confirms, pc)
		return "", "", nil, false
	}
	return CodeUnknownKind, "no lock request of kind " + strconv.Quote(req.Kind), nil, true
}

// confirm is the home's answer to a write under token it has applied, or the deputy's
// (c.deputy).
func (r *Replica) confirm(c *pendingConfirm) (wire.Code, string) {
	key, tok := c.key, c.token
	if c.deputy {
		if p := r.locks.deputy; p == nil || !p.Confirm(r.now, key, tok) {
			return wire.Code(lock.CodeLost), "the token was not the key's live lease when its delegate applied the write"
		}
		return "", ""
	}
	if r.cmap.cur.Home([]byte(key.Table), key.Key) != r.id.Name {
		// A generation moved the key away: what this home confirmed must stay inside the
		// floor it gives the new home (serveLockFloor).
		return wire.Code(lock.CodeLost), "the key's home moved away from this node before it applied the write"
	}
	if r.locks.table == nil || !r.locks.table.Confirm(r.now, key, tok) {
		return wire.Code(lock.CodeLost), "the token was not the key's live lease when the home applied the write"
	}
	return "", ""
}

// confirmable reports whether the home holds c's write for good: applied, and, with
// HoldUnsynced, synced, since a power loss takes back what a store had not synced, and a
// fence or a floor taken after it would miss the write it acknowledged. This node's own
// write is synced once its seq is (r.synced); another origin's once the sync of an arrival
// position at or past the one by which it was applied returned (r.syncedArrive): its
// writer holds it durably, but the home's fence and floor are the home's own positions.
// A write waiting for such a sync asks for one (NeedsSync).
func (r *Replica) confirmable(c *pendingConfirm) bool {
	st := r.origins[c.origin]
	if st == nil || st.applied.Seq < c.seq {
		return false
	}
	switch {
	case !r.cfg.HoldUnsynced:
		return true
	case c.origin == r.id.Origin:
		return c.seq <= r.synced
	}
	if c.arrival == 0 {
		c.arrival = r.arrivals
	}
	return c.arrival <= r.syncedArrive
}

// confirmsNeedSync reports whether a waiting confirm's write is applied and waits only for
// a sync of other origins' arrivals (confirmable).
func (r *Replica) confirmsNeedSync() bool {
	for _, c := range r.locks.confirms {
		if c.arrival > r.syncedArrive {
			return true
		}
	}
	return false
}

// serveConfirms answers the confirms whose write this node has applied now, and forgets
// those given up.
func (r *Replica) serveConfirms() {
	ls := &r.locks
	if len(ls.confirms) == 0 {
		return
	}
	keep := ls.confirms[:0]
	for _, c := range ls.confirms {
		if r.reqs.hops[c.hop] == nil {
			continue // its deadline passed, or its connection closed
		}
		if !r.confirmable(c) {
			keep = append(keep, c)
			continue
		}
		code, msg := r.confirm(c)
		r.answerLater(c.hop, code, msg, nil)
	}
	clear(ls.confirms[len(keep):])
	ls.confirms = keep
}

// LockOp is one lock request this node makes of a key's home (Lock): Kind is one of the
// Kind* lock kinds, and each reads the fields its LockArgs names.
type LockOp struct {
	Kind   string
	Table  string
	Key    []byte
	TTL    time.Duration // acquire, renew
	Wait   time.Duration // acquire
	Holder string        // acquire
	Token  lock.Token    // every kind but acquire
	Origin wire.OriginID // confirm: the writer's origin
	Seq    uint64        // confirm: the write's seq in it
}

// Lock asks the key's home under this node's map for op, with the caller's scope: itself
// without the exchange when it is the home. Its answer comes in Answers (ParseLockReply
// reads the body) as every request's does. A grant or a renewal is kept with its holder
// deadline measured from now (HeldLease), and a release forgets it. With no lock homes,
// or a member not known at version 4, it is answered at once without a request.
func (r *Replica) Lock(now time.Time, scope string, op LockOp) (RequestID, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.setNow(now)
	m := &r.cmap.cur
	args := LockArgs{Table: op.Table, Key: op.Key, TTLMS: ceilMS(op.TTL), WaitMS: ceilMS(op.Wait), Holder: op.Holder}
	if op.Kind != KindLockAcquire {
		args.Token = tokenBytes(op.Token)
	}
	if op.Kind == KindLockConfirm {
		args.Origin, args.Seq = op.Origin[:], op.Seq
	}
	body, err := wire.Marshal(args)
	if err != nil {
		return 0, err
	}
	rs := &r.reqs
	id := rs.last + 1 // noted before it is asked: the answer may come at once
	if r.isLeaf() {
		rs.last++
		r.answered(Answer{ID: id, Code: CodeLeafNoLocks, Message: "node " + r.id.Name + " is a leaf: it takes no locks"})
		return id, r.settle()
	}
	if len(m.LockHomes) == 0 || r.RequireV4() != nil {
		rs.last++
		a := Answer{ID: id, Code: CodeNoLockHomes, Message: "the cluster map names no lock home"}
		if e := r.RequireV4(); len(m.LockHomes) > 0 && e != nil {
			a.Code, a.Message = CodeClusterNotV4, e.Message
		}
		r.answered(a)
		return id, r.settle()
	}
	if rs.own == nil {
		rs.own = map[RequestID]func(Answer){}
	}
	sent := now
	key := lock.Key{Table: op.Table, Key: slices.Clone(op.Key)}
	if r.lockLocal(id, op, key) {
		return id, r.settle()
	}
	target := m.Home([]byte(op.Table), op.Key)
	if _, ok := r.deputyHolds(key, op.Token); ok && op.Kind != KindLockAcquire {
		target = r.id.Name // one of its deputy's tokens: it answers for the lease
	}
	if op.Kind == KindLockAcquire && r.delegating() && target != r.id.Name {
		if _, held := r.deputyHolds(key, lock.Token{}); !held {
			args.Delegate = true
			if body, err = wire.Marshal(args); err != nil {
				return 0, err
			}
		}
	}
	rs.own[id] = func(a Answer) {
		if a.Code == "" && op.Kind == KindLockAcquire {
			if res, err := ParseLockReply(a.Body); err == nil && res.Block > 0 {
				r.delegated(op, key, sent, &a, res)
			}
		}
		r.lockAnswered(op, key, sent, a)
		r.reqs.answers = append(r.reqs.answers, a)
	}
	r.ask(target, op.Kind, scope, body)
	return id, r.settle()
}

// lockAnswered keeps a lease this node was granted or renewed, and forgets one released.
func (r *Replica) lockAnswered(op LockOp, key lock.Key, sent time.Time, a Answer) {
	switch {
	case a.Code == "" && (op.Kind == KindLockAcquire || op.Kind == KindLockRenew):
		res, err := ParseLockReply(a.Body)
		if err != nil {
			return
		}
		h := HeldLease{Key: key, Token: res.Token, Deadline: lock.HolderDeadline(sent, op.TTL, r.cfg.Locks.Drift), Fence: res.Fence}
		if old, ok := r.locks.held[res.Token]; ok && op.Kind == KindLockRenew {
			h.Fence = old.Fence
		}
		if r.locks.held == nil {
			r.locks.held = map[lock.Token]HeldLease{}
		}
		r.locks.held[res.Token] = h
	case op.Kind == KindLockRelease && (a.Code == "" || a.Code == wire.Code(lock.CodeLost)):
		delete(r.locks.held, op.Token)
	}
}

// HeldLease is a lease this node was granted for token, while its holder deadline has not
// passed at now: a write under the token is taken here only then (docs/design.md §25.6).
func (r *Replica) HeldLease(now time.Time, tok lock.Token) (HeldLease, bool) {
	h, ok := r.locks.held[tok]
	if !ok || !now.Before(h.Deadline) {
		return HeldLease{}, false
	}
	return h, true
}

// LockStatus is this node's lock home's state and what it holds as a caller.
type LockStatus struct {
	Home            bool   // the map names this node a lock home and its table exists
	Err             string // why the map's naming it a home could not be honoured
	Incarnation     uint64
	Table           lock.Stats // zero when not a home
	WaitingConfirms int        // lock-confirm requests waiting for their writes
	Held            int        // leases this node was granted whose holder deadline has not passed
	// Deputy is this node's deputy's counters: the delegations it holds and the leases it
	// granted under them (docs/design.md §25.9); zero while it took none.
	Deputy lock.DeputyStats
	// Forwarded counts the requests for a delegated token this home passed on to the
	// delegate (another node's check, fence, confirm of a write under it).
	Forwarded uint64
	// DelegationsRenewed counts the delegations this node's deputy renewed at their homes.
	DelegationsRenewed uint64
}

// LockStatus is the lock home's status now.
func (r *Replica) LockStatus() LockStatus {
	ls := &r.locks
	s := LockStatus{Incarnation: ls.incarnation, WaitingConfirms: len(ls.confirms), Held: len(ls.held), Forwarded: ls.forwarded, DelegationsRenewed: ls.renewed}
	if ls.err != nil {
		s.Err = ls.err.Error()
	}
	if ls.table != nil {
		s.Home = true
		s.Table = ls.table.Stats()
	}
	if ls.deputy != nil {
		s.Deputy = ls.deputy.Stats()
	}
	return s
}
