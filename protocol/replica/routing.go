package replica

import (
	"slices"
	"strings"
	"time"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Routing (docs/contract.md §10): each origin comes from one source at a time, a
// version-2 connection. Candidates are the origin itself when directly connected and the
// peers advertising the origin with a head above the applied seq; the choice prefers the
// origin itself, then the highest head, the lowest RTT and the lowest peer name. An origin
// moves only when its source is lost (disconnected, withdrawn, diverged), when the origin
// itself connects, or when another candidate's head stays ahead of the source's for the
// move delay. A move touches only that origin's channel and resumes from this node's own
// applied position, so nothing applied is sent again.

type candidate struct {
	c      *conn
	direct bool
	head   uint64
}

// route re-evaluates the source of every origin (on Tick), or of those whose candidates
// may have changed.
func (r *Replica) route() {
	if r.storage.err != nil {
		// Degraded: no origin gets a source, so nothing is subscribed and nothing arrives
		// to apply; no copy starts. A new replica routes again after recovery.
		r.routeAll = false
		clear(r.routeSome)
		return
	}
	set := r.originOrder
	if !r.routeAll {
		set = make([]wire.OriginID, 0, len(r.routeSome))
		for o := range r.routeSome {
			set = append(set, o)
		}
		slices.SortFunc(set, cmpOrigin)
	}
	r.routeAll = false
	clear(r.routeSome)
	for _, o := range set {
		if o != r.id.Origin {
			r.routeOrigin(r.origin(o))
		}
	}
	r.maybeCopy()
}

func (r *Replica) routeOrigin(st *originState) {
	if !st.retry.retryAt.IsZero() {
		if r.retryWaiting(st) {
			return // a failed entry waits for its retry: no source moves, nothing is subscribed
		}
		r.retryDue(st)
	}
	if st.stuck == StuckClockAhead {
		if r.holding(st) {
			return // held for the clock: no source moves, nothing is subscribed
		}
		r.releaseHold(st)
	}
	src := r.conns[st.source]
	if st.source != 0 {
		why := MoveReason("")
		switch {
		case src == nil || !r.usable(src, st.id):
			why = ReasonWithdrawn
		case r.linkHides(src, st):
			// The origin was seen to write a table this node carries and the link excludes
			// (links.go): never taken over that link, even with no other candidate.
			why = ReasonLinkHides
		case src.direct(st.id):
		case !src.advertises(st.id):
			why = ReasonWithdrawn
		case src.heads[st.id].Seq < st.applied.Seq:
			// The source holds less than this node (it lost entries in a power loss, or
			// this node got them over version 1): it cannot serve the origin, and split
			// horizon would hide from it the entries it lacks.
			why = ReasonBehind
		}
		if why != "" {
			if src != nil {
				r.unsubscribe(src, st.id)
			}
			r.loseSource(st, why)
			src = nil
		}
	}
	if src == nil {
		if cands := r.candidates(st); len(cands) > 0 {
			r.moveTo(st, best(cands), st.lostReason)
		}
		return
	}
	// The candidates are needed only while the source is a relay: the origin itself as
	// the source is never moved from but when lost (above). Listing them for every origin
	// at every Tick cost O(origins x connections) a Tick.
	var cands []candidate
	if !src.direct(st.id) {
		cands = r.candidates(st)
	} else {
		r.expireExcluded(st.id) // what candidates' usable does on its way, so the timers stay the same
	}
	if !src.direct(st.id) {
		for _, k := range cands {
			if k.direct {
				r.moveTo(st, k, ReasonDirect)
				return
			}
		}
	}
	if r.stalling(st) && !r.now.Before(st.progressAt.Add(r.cfg.StallTimeout)) {
		// The source advertises entries that do not come: one was lost at the tail of the
		// stream. Ask again from the applied seq.
		r.counters.GapsDetected++
		r.counters.ResendsRequested++
		r.subscribe(src, st, st.applied.Seq)
		return
	}
	if src.direct(st.id) {
		// The origin itself is the first choice: a relay that seems ahead only relays the
		// origin's own entries, and moving to it would move straight back.
		st.aheadSince = time.Time{}
		return
	}
	srcHead := src.heads[st.id].Seq
	var ahead []candidate
	for _, k := range cands {
		if k.c != src && k.head > srcHead {
			ahead = append(ahead, k)
		}
	}
	switch {
	case len(ahead) == 0:
		st.aheadSince = time.Time{}
	case st.aheadSince.IsZero():
		st.aheadSince = r.now
	case !r.now.Before(st.aheadSince.Add(r.cfg.MoveDelay)):
		r.moveTo(st, best(ahead), ReasonAhead)
	}
}

// usable reports whether a connection can carry an origin now: an established session of
// version 2 or later whose channel of the origin has not diverged recently, on a link this
// node receives on. A lapsed exclusion is forgotten before the direction is asked: kept,
// NextDeadline would give its time, past, at every call.
func (r *Replica) usable(c *conn, o wire.OriginID) bool {
	if !c.established || c.version < 2 {
		return false
	}
	if until, ok := c.excluded[o]; ok {
		if r.now.Before(until) {
			return false
		}
		r.unexclude(c, o)
	}
	return r.receivesFrom(c)
}

// exclude leaves a diverged channel out of routing for DivergenceRetry.
func (r *Replica) exclude(c *conn, o wire.OriginID) {
	if _, ok := c.excluded[o]; !ok && r.conns[c.id] == c {
		r.excludedN++
	}
	c.excluded[o] = r.now.Add(r.cfg.DivergenceRetry)
}

func (r *Replica) unexclude(c *conn, o wire.OriginID) {
	delete(c.excluded, o)
	if r.conns[c.id] == c {
		r.excludedN--
	}
}

// expireExcluded forgets the lapsed exclusions of an origin's diverged channels, as
// usable does for each connection candidates looks at.
func (r *Replica) expireExcluded(o wire.OriginID) {
	if r.excludedN == 0 {
		return
	}
	for _, c := range r.connList {
		if len(c.excluded) > 0 && c.established && c.version >= 2 {
			if until, ok := c.excluded[o]; ok && !r.now.Before(until) {
				r.unexclude(c, o)
			}
		}
	}
}

func (c *conn) direct(o wire.OriginID) bool { return c.peerOrigin == o }

func (c *conn) advertises(o wire.OriginID) bool { _, ok := c.heads[o]; return ok }

// candidates lists the connections an origin may be taken from, in connection order: none
// whose link hides a table this node carries and the origin writes (linkHides).
func (r *Replica) candidates(st *originState) []candidate {
	var cands []candidate
	for _, c := range r.connList {
		if !r.usable(c, st.id) || !r.canServe(c, st) || r.linkHides(c, st) {
			continue
		}
		h, has := c.heads[st.id]
		if c.floors[st.id] > st.applied.Seq {
			continue // version 3: its floor is above what this node applied
		}
		if c.direct(st.id) || has && h.Seq > st.applied.Seq {
			cands = append(cands, candidate{c: c, direct: c.direct(st.id), head: h.Seq})
		}
	}
	return cands
}

// best is the routing rule's choice: the origin itself, then the highest advertised head,
// then the lowest RTT, then the lowest peer name.
func best(cands []candidate) candidate {
	return slices.MinFunc(cands, func(a, b candidate) int {
		switch {
		case a.direct != b.direct:
			if a.direct {
				return -1
			}
			return 1
		case a.head != b.head:
			if a.head > b.head {
				return -1
			}
			return 1
		case a.c.sess.RTT() != b.c.sess.RTT():
			if a.c.sess.RTT() < b.c.sess.RTT() {
				return -1
			}
			return 1
		}
		return strings.Compare(a.c.peerName, b.c.peerName)
	})
}

// moveTo makes k the origin's source: the old source's channel closes, the new one opens
// at this node's applied position. A change of peer since the last source is a move.
func (r *Replica) moveTo(st *originState, k candidate, why MoveReason) {
	if old := r.conns[st.source]; old != nil {
		r.unsubscribe(old, st.id)
	}
	m := Move{At: r.now, Origin: st.id, From: st.lastSource, To: k.c.peerName, Reason: why, LostAt: st.lostAt}
	moved := st.lastSource != "" && st.lastSource != k.c.peerName
	if !moved {
		m.Reason = ReasonFirst
	} else {
		st.changes++
	}
	from := st.applied.Seq
	if moved && r.cfg.Mutations.BreakRouting {
		from = 0 // test-only: the legacy re-streamed tail
	}
	st.source, st.lastSource, st.lostReason, st.lostAt, st.aheadSince = k.c.id, k.c.peerName, "", time.Time{}, time.Time{}
	st.srcHead = k.c.heads[st.id].Seq
	r.subscribe(k.c, st, from)
	r.headsDirty[st.id] = true // split horizon: the new source is no longer told of it
	if len(r.moves) == maxMoves {
		r.moves = append(r.moves[:0], r.moves[1:]...)
	}
	r.moves = append(r.moves, m)
}

func subscribePosition(st *originState, from uint64) vector.Entry {
	if from == st.applied.Seq {
		return vector.Entry{Origin: st.id, Seq: st.applied.Seq, Hash: st.applied.Hash}
	}
	return vector.Entry{Origin: st.id}
}

// stalling reports whether an origin's source advertises a head above the applied seq.
func (r *Replica) stalling(st *originState) bool {
	// st.srcHead is the source's heads[st.id].Seq, kept as they change: NextDeadline asks
	// this of every origin after every input.
	return st.source != 0 && st.srcHead > st.applied.Seq && !r.holding(st) && !r.retryWaiting(st) && r.conns[st.source] != nil
}

func (r *Replica) subscribe(c *conn, st *originState, from uint64) {
	r.unsubscribe(c, st.id)
	st.progressAt = r.now
	if r.check(c.sess.V2().Subscribe([]vector.Entry{subscribePosition(st, from)})) {
		c.in[st.id] = true
	}
}

func (r *Replica) unsubscribe(c *conn, o wire.OriginID) {
	if c.in[o] {
		delete(c.in, o)
		r.check(c.sess.V2().Unsubscribe([]wire.OriginID{o}))
	}
}

// advertise tells every version-2 peer the heads of the origins this node holds, except
// the peer's own and those taken from that peer (split horizon), and withdraws what no
// longer qualifies.
func (r *Replica) advertise() {
	if len(r.headsDirty) == 0 && !r.advFull && (r.advNext.IsZero() || r.now.Before(r.advNext)) {
		return // nothing moved, and no waiting head is due: the walk below would send nothing
	}
	r.advFull, r.advNext = false, time.Time{}
	var dirty []wire.OriginID
	if len(r.headsDirty) > 0 {
		for o := range r.headsDirty {
			dirty = append(dirty, o)
		}
		slices.SortFunc(dirty, cmpOrigin)
		clear(r.headsDirty)
	}
	// The moved origins' heads, looked up once for every connection that walks them.
	dirtyHeads := make([]advHead, len(dirty))
	for i, o := range dirty {
		dirtyHeads[i] = r.advHeadOf(o)
	}
	for _, c := range r.connList {
		if !c.established || c.version < 2 {
			continue
		}
		quiet := c.quietLink()
		if quiet && !c.quietHeard {
			continue // the first full advertisement waits for the peer's first QUIET
		}
		set, now, looked := dirty, c.fullAdv, dirtyHeads // now: nothing waits this time
		if c.fullAdv {
			set, c.fullAdv, looked = r.originOrder, false, nil
			clear(c.advLater)
			clear(c.quietAdd)
		} else if c.waiting() && !r.now.Before(c.advDue) {
			set, now, looked = r.dueHeads(c, dirty), true, nil
		}
		var heads []wire.Head
		var gone, quieted, loud []wire.OriginID
		var floors []wire.Floor
		sends := r.sendsTo(c) // the link's direction: no heads to a peer this node does not send to
		waits := r.cfg.HeadsInterval > 0
		for i, o := range set {
			var ah advHead
			if looked != nil {
				ah = looked[i]
			} else {
				ah = r.advHeadOf(o)
			}
			st, seq, hlc := ah.st, ah.seq, ah.hlc
			if quiet {
				// This node's own quiet set: an origin turned quiet waits for the round,
				// one turned loud goes at once.
				switch q := o != c.peerOrigin && r.directSource(st); {
				case q && !c.told[o] && (now || !waits):
					delete(c.quietAdd, o)
					c.told[o] = true
					quieted = append(quieted, o)
				case q && !c.told[o]:
					r.waitRound(c, o, c.quietAdd)
				case !q && c.told[o] && !r.cfg.Mutations.NeverLoud:
					delete(c.told, o)
					loud = append(loud, o)
				case !q:
					delete(c.quietAdd, o)
				}
			}
			out := c.out[o]
			if quiet && c.peerQuiet[o] && out == nil {
				// The peer takes o from its own node: no head, and no withdrawal (it
				// forgot o when it said so).
				delete(c.adv, o)
				delete(c.advLater, o)
				continue
			}
			if seq > 0 && o != c.peerOrigin && st.source != c.id && !c.purged[o] && sends {
				switch {
				case quiet && out != nil && waits && c.adv[o]:
					// A subscriber of o on a quiet link: DATA is its head. At the round,
					// the head goes when the stream is behind it or the peer's cursor is
					// late; otherwise o waits for the next round while the cursor is below
					// what was sent.
					if !now {
						r.waitRound(c, o, c.advLater)
						continue
					}
					send, wait := r.subscriberHead(c, o, out, seq)
					if r.cfg.Mutations.SilentToSubscribers {
						send, wait = false, false
					}
					if wait {
						r.waitRound(c, o, c.advLater)
					}
					if !send {
						continue
					}
				case waits && !now && c.adv[o] && out == nil:
					// A head that moved, to a peer that does not take the origin from
					// this node: it only informs the peer's routing and lag, so it waits
					// with the others for the connection's next round.
					r.waitRound(c, o, c.advLater)
					continue
				}
				delete(c.advLater, o)
				heads = append(heads, wire.Head{Origin: o, Seq: seq, HLC: hlc})
				c.adv[o] = true
				if f := r.floor(o); f.Seq > 0 && c.version >= 3 {
					floors = append(floors, wire.Floor{Origin: o, Seq: f.Seq, Hash: f.Hash})
				}
			} else if c.adv[o] {
				delete(c.advLater, o)
				gone = append(gone, o)
				delete(c.adv, o)
			}
		}
		c.advWaiting = c.waiting()
		if c.advWaiting && (r.advNext.IsZero() || c.advDue.Before(r.advNext)) {
			r.advNext = c.advDue
		}
		if len(quieted)+len(loud) > 0 {
			if !r.checkConn(c, c.sess.V4().Quiet(quieted, loud)) {
				continue // the connection is closing
			}
			for _, o := range quieted {
				r.toldQuiet(c, o)
			}
		}
		if len(heads) > 0 {
			named := true
			for _, h := range heads {
				named = named && r.nameOrigins(c, h.Origin)
			}
			if !named {
				continue // the connection is closing
			}
			r.checkConn(c, c.sess.V2().AdvertiseHeads(heads))
		}
		if len(gone) > 0 {
			r.checkConn(c, c.sess.V2().WithdrawHeads(gone))
		}
		if len(floors) > 0 { // the session sends only the floors that moved
			r.checkConn(c, c.sess.V3().AdvertiseFloors(floors))
		}
	}
}

// advHead is one origin's head as advertise sends it.
type advHead struct {
	st  *originState
	seq uint64
	hlc wire.HLC
}

// advHeadOf is the head advertise sends of origin o: what this node applied, or for its own
// origin with HoldUnsynced what is durable.
func (r *Replica) advHeadOf(o wire.OriginID) advHead {
	st := r.origins[o]
	seq, hlc := st.applied.Seq, st.appliedHLC
	if o == r.id.Origin && r.cfg.HoldUnsynced && r.synced < seq {
		seq, hlc = r.synced, r.syncedHLC
	}
	return advHead{st: st, seq: seq, hlc: hlc}
}

// dueHeads is what advertise walks for a connection whose waiting heads are due: those
// and the dirty origins, in origin order. The waiting ones go out now (advLater is
// emptied), whatever their heads are by then.
func (r *Replica) dueHeads(c *conn, dirty []wire.OriginID) []wire.OriginID {
	set := make([]wire.OriginID, 0, len(c.advLater)+len(c.quietAdd)+len(dirty))
	for o := range c.advLater {
		set = append(set, o)
	}
	for o := range c.quietAdd {
		set = append(set, o) // the walk sends it, or forgets it turned loud again
	}
	clear(c.advLater)
	clear(c.quietAdd)
	for _, o := range dirty {
		set = append(set, o)
	}
	slices.SortFunc(set, cmpOrigin)
	return slices.Compact(set)
}

// Move is one change of an origin's source, recorded for the status and for the
// simulator's invariants.
type Move struct {
	At       time.Time
	Origin   wire.OriginID
	From, To string // peer names; From is empty for the first source after start
	Reason   MoveReason
	LostAt   time.Time // when the previous source was lost (zero when it was not)
}

// MoveReason says why an origin's source changed (docs/contract.md §10).
type MoveReason string

// The reasons of the routing rule. ReasonFirst is not a move (source_changes does not
// count it): the first source chosen since start, or the same peer again after it was lost.
const (
	ReasonFirst        MoveReason = "first"
	ReasonDisconnected MoveReason = "disconnected" // the source's connection closed
	ReasonWithdrawn    MoveReason = "withdrawn"    // the source stopped advertising the origin
	ReasonBehind       MoveReason = "behind"       // the source advertises less than this node applied
	ReasonDiverged     MoveReason = "diverged"     // the source's channel diverged
	ReasonDirect       MoveReason = "direct"       // the origin itself connected
	ReasonAhead        MoveReason = "ahead"        // another head stayed ahead for MoveDelay
	ReasonPurged       MoveReason = "purged"       // the source answered PURGED: its log begins above this node's position (version 3)
	ReasonRewound      MoveReason = "rewound"      // the source is the origin's own node, found rewound (rewind.go)
	ReasonSkipRefused  MoveReason = "skip-refused" // the source sent a run of a table this node carries (placement.go)
	ReasonLinkHides    MoveReason = "link-hides"   // the source's link excludes a table this node carries and the origin writes (links.go)
)

// Moves hands over the source changes since the last call (for the simulator and logs).
// The replica keeps at most maxMoves of them between calls, the latest.
func (r *Replica) Moves() []Move {
	m := r.moves
	r.moves = nil
	return m
}

// loseSource records that an origin has no source any more; route chooses the next one
// and counts the move, giving the first reason the source was lost for.
func (r *Replica) loseSource(st *originState, why MoveReason) {
	st.source, st.srcHead = 0, 0
	st.aheadSince = time.Time{}
	if st.lostReason == "" {
		st.lostReason, st.lostAt = why, r.now
	}
	r.routeSome[st.id] = true
	r.headsDirty[st.id] = true // split horizon no longer hides it from the old source
}
