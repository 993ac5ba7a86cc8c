package replica

import (
	"bytes"
	"slices"
	"time"

	"plait/protocol"
	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Replica is one plait node's decisions: see the package documentation. It is not safe for
// concurrent use.
type Replica struct {
	cfg   Config
	store store.Store
	id    store.Identity
	now   time.Time

	origins     map[wire.OriginID]*originState
	originOrder []wire.OriginID // sorted
	originList  []*originState  // the origins in originOrder's order
	conns       map[ConnID]*conn
	connOrder   []ConnID // ascending
	connList    []*conn  // conns in connOrder's order: the walks after every input read no map
	lastConn    ConnID
	out         map[ConnID]*Output

	hlc          wire.HLC
	storedHLC    wire.HLC       // no stored record version is newer (Store.RecordHLC and later applies)
	storedToken  wire.Token     // no stored record version carries a higher token (Store.RecordToken and later writes)
	lwwIdx       map[string]int // lww's scratch: record index by table and key
	lwwKey       []byte         // lww's scratch: a table and key
	arrivals     uint64         // the last arrival position
	synced       uint64         // local seq durable against power loss (HoldUnsynced)
	syncedHLC    wire.HLC       // its timestamp
	syncedArrive uint64         // arrival position durable against power loss (HoldUnsynced)

	routeAll   bool                   // re-evaluate every origin's source (timers)
	routeSome  map[wire.OriginID]bool // re-evaluate these (heads, lost sources, direct peers)
	headsDirty map[wire.OriginID]bool
	// advFull: some connection waits for its full advertisement; advNext: the earliest
	// advDue of the connections' waiting heads when advertise last walked them. With
	// neither due and no dirty head, advertise has nothing to walk for.
	advFull    bool
	advNext    time.Time
	counters   Counters
	moves      []Move
	lastErrors map[string]PeerError
	refusals   refusalLog // refusals.go
	evbuf      []protocol.Event
	streamBuf  []*outStream // pump's copy of a connection's streams (kept for the next)
	excludedN  int          // exclusions held in every connection's excluded
	ret        retention    // bounded history (retention.go)
	cp         copying      // base copies taken and served (basecopy.go)
	ae         antiEntropy  // anti-entropy passes (antientropy.go)
	fatal      error
	storage    storageState  // degraded storage (storage.go)
	rewound    *RewindStatus // evidence that this node's own origin is rewound (rewind.go)
	lagHist    lagHistory    // the lag history (health.go)
	cmap       clusterState  // the cluster map and member entries (clustermap.go)
	// removals: the tables this node holds records of and no longer carries, each waiting
	// for the carriers (tablemove.go); removalsDirty: planned again at the next settle (a
	// map was adopted, or the replica started).
	removals      map[string]*removal
	removalsDirty bool
	// fills: the tables this node was added to and has not filled, each with its applied
	// positions when it was (tablemove.go), as the map's control value keeps them.
	fills map[string]*fill
	// held: the tables this node holds records of and no longer carries, and how far it
	// holds them (holds.go).
	held map[string]*tableHold
	// writers: of each table a map this node held placed, the nodes that carried it
	// under one (nil: every node may have written it; holds.go).
	writers map[string][]string
	// ownSince: of each table this node does not carry, the seq of its own log from
	// which its entries write none of it (holds.go).
	ownSince map[string]uint64
	// named: the named feeds by name (namedfeeds.go).
	named map[string]*namedFeed
	// passed: the held tables whose operations the entry being applied passes (lww).
	passed [][]byte
	// links: this node's settings for the links to its peers, by peer name, the default
	// (both ways, nothing excluded) left out; linkTables: every table some link excludes,
	// on either end (links.go).
	links      map[string]LinkSettings
	linkTables map[string]bool
	reqs       requestState // requests between nodes (requests.go)
	locks      lockState    // the lock home and the leases held (locks.go)
	feeds      feedCounts   // what change feeds cannot read from the logs (feed.go)
	hub        hubState     // a hub's leaves (hub.go)
	leaf       leafSide     // a leaf's hub (leaf.go)

	// traffic: the ended connections' traffic, by peer name (traffic.go).
	traffic map[string]*Traffic
}

// originState is what the replica knows of one origin.
type originState struct {
	// What NextDeadline reads of every origin after every input comes first, in the
	// struct's first cache lines: that walk runs over every origin after every input, so
	// fields spread over the struct would make it a cache miss each.
	source     ConnID      // version-2 source; 0: none
	srcHead    uint64      // the head the source advertises (its heads[id].Seq; 0: none or no source)
	aheadSince time.Time   // when another candidate's head got ahead of the source's
	progressAt time.Time   // the last apply, or the last (re)subscription
	stuck      StuckReason // why its next entry is held back (clock.go); "": it is not
	stuckUntil time.Time   // when the hold ends
	retry      retryState  // its next entry failed to apply (retry.go)
	applied    vector.Entry

	id            wire.OriginID
	name          string
	namePersisted bool
	nameVouched   bool // the name is the one the origin's own node gave in a handshake with this node
	appliedHLC    wire.HLC
	headSeq       uint64 // highest seq known (applied or advertised)
	headHLC       wire.HLC
	lastSource    string // the peer of the last source, kept after it is lost
	changes       uint64
	lostReason    MoveReason // why the last source was lost, until the next is chosen
	lostAt        time.Time
	appliedAt     time.Time // the last apply (or copy's progress), for health.go
	behindAt      time.Time // when a head above the applied seq became known, for health.go
	diverged      bool
	divergedAt    uint64
	legacySource  string // the version-1 peer that delivered the last applied entry
	rewound       bool   // its own node was found rewound on a connection to it (rewind.go)
	// writes: the placed tables its entries and runs were seen to write (placement.go),
	// which a source must carry where this node does; bounded by the map's placement.
	writes map[string]bool
}

// New opens a replica on its store: it reads the identity, the cursor vector and the
// origin names, so that a restart resumes exactly where the data ends.
func New(cfg Config, store store.Store) (*Replica, error) {
	cfg = cfg.withDefaults()
	if cfg.Mutations.ServeUnsynced {
		cfg.HoldUnsynced = false // test-only: serve what a power loss can take back
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if cfg.RetainAge < 0 || cfg.RetainHold < 0 || cfg.PurgeStep < 0 || cfg.RetentionInterval < 0 {
		return nil, errorf("retention: a negative age, hold, step or interval")
	}
	if cfg.HealthyLag < 0 || cfg.HealthWindow < 0 || cfg.LagSampleEvery < 0 || cfg.LagHistory < cfg.LagSampleEvery ||
		cfg.lagSamples() > MaxLagSamples {
		return nil, errorf("health: HealthyLag and HealthWindow may not be negative, and LagHistory is 1..%d samples of LagSampleEvery (%s of %s is %d)",
			MaxLagSamples, cfg.LagHistory, cfg.LagSampleEvery, cfg.lagSamples())
	}
	if cfg.ApplyRetries < 1 || cfg.ApplyRetryDelay < 0 || cfg.ApplyRetryDelay > MaxApplyRetryDelay {
		return nil, errorf("apply retries: ApplyRetries is at least 1, ApplyRetryDelay at most %s", MaxApplyRetryDelay)
	}
	if cfg.AntiEntropyRange < 1 || cfg.AntiEntropyRange > wire.MaxRangeCount ||
		cfg.AntiEntropyBytes < MinCopyChunk || cfg.AntiEntropyBytes > int(cfg.Limits.MaxFrameBody) {
		return nil, errorf("anti-entropy: AntiEntropyRange is 1..%d records and AntiEntropyBytes %d..%d bytes (the frame body limit)",
			wire.MaxRangeCount, MinCopyChunk, cfg.Limits.MaxFrameBody)
	}
	if cfg.MaxCopies < 0 || cfg.CopyRetry < 0 || cfg.CopyChunk < MinCopyChunk || cfg.CopyChunk > int(cfg.Limits.MaxFrameBody) {
		return nil, errorf("copies: MaxCopies and CopyRetry may not be negative, and CopyChunk is %d..%d bytes (the frame body limit)",
			MinCopyChunk, cfg.Limits.MaxFrameBody)
	}
	if cfg.MaxMembers < 1 || cfg.MaxMembers > MaxMemberEntries || cfg.MaxRequestHops < 2 || cfg.MaxRequestHops > wire.MaxRequestPath ||
		cfg.RequestTimeout < time.Millisecond || cfg.RequestTimeout > wire.MaxRequestTimeout*time.Millisecond {
		return nil, errorf("cluster map: MaxMembers is 1..%d, MaxRequestHops 2..%d and RequestTimeout 1ms..%s",
			MaxMemberEntries, wire.MaxRequestPath, wire.MaxRequestTimeout*time.Millisecond)
	}
	if cfg.MaxNamedFeeds < 0 {
		return nil, errorf("MaxNamedFeeds may not be below -1")
	}
	id, err := store.Identity()
	if err != nil {
		return nil, err
	}
	if id.Origin.IsZero() || !wire.ValidName(id.Name) {
		return nil, errorf("the store's identity needs a non-zero origin and a valid name")
	}
	r := &Replica{cfg: cfg, store: store, id: id,
		origins: map[wire.OriginID]*originState{}, conns: map[ConnID]*conn{}, out: map[ConnID]*Output{},
		headsDirty: map[wire.OriginID]bool{}, routeSome: map[wire.OriginID]bool{}, lastErrors: map[string]PeerError{}}
	for peer, ls := range cfg.Links {
		ls, err := CheckLink(ls)
		if err != nil {
			return nil, errorf("the link to %s: %v", peer, err)
		}
		if ls.Mode != wire.LinkBoth || len(ls.Exclude) > 0 {
			if r.links == nil {
				r.links = map[string]LinkSettings{}
			}
			r.links[peer] = ls
		}
	}
	r.noteExcluded()
	names, err := store.Names()
	if err != nil {
		return nil, err
	}
	r.origin(id.Origin).name = id.Name
	r.origin(id.Origin).namePersisted = true
	for o, n := range names {
		st := r.origin(o)
		if o != id.Origin {
			st.name, st.namePersisted = n, true
		}
	}
	if err := r.loadRetention(); err != nil {
		return nil, err
	}
	if err := r.loadCopy(); err != nil {
		return nil, err
	}
	r.removalsDirty = true // a removal a restart interrupted goes on
	if err := r.loadClusterMap(); err != nil {
		return nil, err
	}
	r.reqs.hops = map[hopKey]*hop{}
	vec, err := store.Vector()
	if err != nil {
		return nil, err
	}
	for _, e := range vec.Entries() {
		st := r.origin(e.Origin)
		st.applied, st.headSeq = e, e.Seq
		if e.Seq == 0 {
			continue
		}
		if f := r.floor(e.Origin); f.Seq == e.Seq {
			// A log a copy raised holds no entry yet: its floor is the head.
			st.appliedHLC, st.headHLC = f.HLC, f.HLC
			r.hlc = max(r.hlc, f.HLC)
			continue
		}
		raw, err := store.Entry(e.Origin, e.Seq)
		if sk, ok := skipped(err); ok {
			// The head is a run this node was not sent (§24.2): its HLC is the head's.
			// The write clock does not follow it: this node holds no record of it.
			st.appliedHLC, st.headHLC = sk.HLC, sk.HLC
			continue
		}
		if err != nil {
			return nil, err
		}
		v, err := wire.ParseTxn(raw)
		if err != nil {
			return nil, errorf("log entry %s/%d: %w", e.Origin, e.Seq, err)
		}
		st.appliedHLC, st.headHLC = v.HLC, v.HLC
		r.hlc = max(r.hlc, v.HLC)
	}
	if err := r.loadNamedFeeds(); err != nil {
		return nil, err
	}
	if r.storedHLC, err = store.RecordHLC(); err != nil {
		return nil, err
	}
	if r.storedToken, err = store.RecordToken(); err != nil {
		return nil, err
	}
	r.hlc = max(r.hlc, r.storedHLC) // local writes order after every stored version, copied ones included
	if r.arrivals, err = store.LastArrival(); err != nil {
		return nil, err
	}
	if cfg.HoldUnsynced {
		// A process crash keeps writes that were applied but never synced: sync them now,
		// before any of them is served.
		if err := store.Sync(); err != nil {
			return nil, err
		}
	}
	own := r.origin(id.Origin)
	r.synced, r.syncedHLC, r.syncedArrive = own.applied.Seq, own.appliedHLC, r.arrivals
	return r, nil
}

// Identity is the node's identity.
func (r *Replica) Identity() store.Identity { return r.id }

func (r *Replica) origin(o wire.OriginID) *originState {
	st := r.origins[o]
	if st == nil {
		st = &originState{id: o}
		r.origins[o] = st
		i, _ := slices.BinarySearchFunc(r.originOrder, o, cmpOrigin)
		r.originOrder = slices.Insert(r.originOrder, i, o)
		r.originList = slices.Insert(r.originList, i, st)
	}
	return st
}

func cmpOrigin(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) }

// Receive feeds one message the connection received. The shell must not call it while
// ReadPaused(id) is true (version 1's flow control).
func (r *Replica) Receive(now time.Time, id ConnID, msg []byte) error {
	if r.fatal != nil {
		return r.fatal
	}
	c := r.conns[id]
	if c == nil {
		return ErrUnknownConn
	}
	r.setNow(now)
	c.lastHeard = now
	if err := c.sess.Receive(now, msg); err != nil {
		return err
	}
	return r.settle()
}

// Receiving tells the replica that bytes of a message are arriving on connection id, the
// message not whole yet (the shell reads messages in parts and says so at most every
// half second): its session counts the peer alive (PartialReceiver), and every origin
// streamed from that connection counts as progressing, so no stall is declared while its
// next entries may be in that message. Why: on a slow link one message can take longer
// than the stall timeout; asking the stream again then made the peer send it again from
// the start, and nothing was ever applied.
func (r *Replica) Receiving(now time.Time, id ConnID) error {
	if r.fatal != nil {
		return r.fatal
	}
	c := r.conns[id]
	if c == nil {
		return ErrUnknownConn
	}
	r.setNow(now)
	c.lastHeard = now
	if pr, ok := c.sess.(PartialReceiver); ok {
		pr.Receiving(now)
	}
	for o := range c.in {
		if st := r.origins[o]; st != nil && st.source == id {
			st.progressAt = now // assignments only: the map's order cannot show
		}
	}
	return nil
}

// Tick advances the timers of every session and of routing (the move delay, divergence
// retries). Call it at NextDeadline.
func (r *Replica) Tick(now time.Time) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.setNow(now)
	for _, c := range r.connList {
		if d := c.sess.NextDeadline(); !d.IsZero() && !now.Before(d) {
			r.check(c.sess.Tick(now)) // refused only before Start (never here) or when closed (tolerated)
		}
	}
	r.routeAll = true // move delays, stalls and divergence retries are timers
	r.confirmHeads()
	r.retain()
	r.tickLocks() // before the requests' deadlines: a wait ends before its request's
	r.expireRequests(now)
	return r.settle()
}

// NextDeadline is when Tick must next be called; zero when no timer is pending.
func (r *Replica) NextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, c := range r.connList {
		earlier(c.sess.NextDeadline())
		if c.advWaiting {
			earlier(c.advDue)
		}
		if c.headSuspect != nil {
			earlier(c.headSuspect.until)
		}
		if r.storage.err == nil && r.excludedN > 0 {
			for _, t := range c.excluded {
				earlier(t)
			}
		}
	}
	if r.storage.err != nil {
		// Degraded: routing, retention and copies wait for a new replica (storage.go), so
		// their timers would only come due again and again; the sessions' (liveness,
		// PINGs) go on.
		return next
	}
	for _, st := range r.originList {
		if !st.aheadSince.IsZero() && !r.holding(st) && !r.retryWaiting(st) {
			// A held origin moves no source (routeOrigin) until its hold or retry wait
			// ends, which has a deadline of its own: the move delay's, past, would be due
			// at once, again and again, for as long as the hold lasts (a node whose clock
			// is behind its peers' by more than the bound holds their entries).
			earlier(st.aheadSince.Add(r.cfg.MoveDelay))
		}
		if r.stalling(st) {
			earlier(st.progressAt.Add(r.cfg.StallTimeout))
		}
		if st.stuck == StuckClockAhead { // apply-failed keeps its reason past the retry below
			earlier(st.stuckUntil) // the hold ends: Tick routes the origin again
		}
		if st.retry.retryAt.After(r.now) {
			earlier(st.retry.retryAt) // a failed entry's retry: Tick routes the origin again
		}
	}
	earlier(r.ret.nextAt)
	earlier(r.aeDeadline())
	earlier(r.requestsDue())
	earlier(r.locksDue())
	earlier(r.removalsDue())
	earlier(r.floorsDue())
	earlier(r.leavesDue())
	if len(r.fills) > 0 && r.cp.take == nil {
		earlier(r.now.Add(r.cfg.CopyRetry)) // a fill waits for a carrier that can serve it
	}
	if r.cp.retryAt.After(r.now) {
		earlier(r.cp.retryAt)
	}
	for _, t := range r.cp.busy {
		if t.After(r.now) { // a past one waits for the next copy to be asked for
			earlier(t)
		}
	}
	return next
}

// Output is what one connection has to send, in order; Closed says that its session is
// over: the shell sends Messages, then closes the socket, and forgets the ConnID.
type Output struct {
	Conn     ConnID
	Messages [][]byte
	Closed   bool
	Err      *wire.Error // why it closed (going-away for an orderly close)
}

// Output hands over what every connection has to send, by ConnID.
func (r *Replica) Output() []Output {
	if len(r.out) == 0 {
		return nil
	}
	outs := make([]Output, 0, len(r.out))
	for _, o := range r.out {
		outs = append(outs, *o)
	}
	clear(r.out)
	slices.SortFunc(outs, func(a, b Output) int { return cmpConn(a.Conn, b.Conn) })
	return outs
}

// Release gives a sent message of a connection back for reuse (optional).
func (r *Replica) Release(id ConnID, msg []byte) {
	if c := r.conns[id]; c != nil {
		c.sess.Release(msg)
	}
}

// settle drains every session until none has anything ready, acting on its events and
// re-evaluating routing, advertised heads and sending in between.
func (r *Replica) settle() error {
	if r.ret.nextAt.IsZero() {
		r.ret.nextAt = r.now // the first retention step runs at the next Tick
	}
	if !r.cmap.stamped {
		r.cmap.stamped = true
		r.stampSelf(r.now) // the first input's time: New has none
	}
	r.syncLockHome()
	if r.ret.restarted {
		r.ret.restarted = false
		for _, h := range r.ret.holds {
			h.since = r.now
		}
	}
	for {
		busy := false
		for i := 0; i < len(r.connList); i++ {
			c := r.connList[i]
			if c.sess.HasReady() {
				busy = true
				r.drain(c)
				if r.fatal != nil {
					return r.fatal
				}
				if r.conns[c.id] == nil {
					i-- // dropped: connOrder shrank
				}
			}
		}
		if r.routeAll || len(r.routeSome) > 0 {
			r.route()
		}
		r.advertise()
		r.pump()
		r.antiEntropy()
		r.removeTables()
		r.flushMembers()
		r.serveConfirms()
		r.serveLeaves()
		r.askFloors()
		r.serveRecalls()
		r.askRecalls()
		r.askDelegates()
		if r.fatal != nil {
			return r.fatal
		}
		if !busy && !r.anyReady() {
			return nil
		}
	}
}

func (r *Replica) anyReady() bool {
	for _, c := range r.connList {
		if c.sess.HasReady() {
			return true
		}
	}
	return false
}

func (r *Replica) output(id ConnID) *Output {
	o := r.out[id]
	if o == nil {
		o = &Output{Conn: id}
		r.out[id] = o
	}
	return o
}
