package replica

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"plait/protocol"
	"plait/protocol/clustermap"
	"plait/protocol/store"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Fan-in hubs (docs/design.md §27): a hub takes leaves, each on one connection the leaf
// dialed, and writes each leaf entry into its own origin's log as a new entry of
// transaction format 3 (re-origination), so that downstream of a hub a leaf is no origin.
// The hub side is here; the leaf side is in leaf.go.
//
// A leaf's link at the hub is a version-2 channel of the leaf's origin, subscribed from the
// leaf's mark (store.LeafMark: the highest leaf seq re-originated anywhere this node saw),
// whose entries go to reoriginate instead of receive. The leaf's origin never gets an
// originState here: it is in no vector, no routing, no status row, no HEADS; routing, copies
// and anti-entropy take nothing from a leaf (receivesFrom).

// The reasons a hub does not re-originate a leaf entry (docs/design.md §27.4). They are
// not wire codes: LEAFSTATE carries them as text, status counts them by reason.
const (
	LeafTooOld     wire.Code = "too-old"     // its HLC is below the hub's clock less the map's leaf window
	LeafNotCarried wire.Code = "not-carried" // it writes a table the hub does not carry
	LeafFenced     wire.Code = "fenced"      // it writes a fenced table, or carries a token: leaves take no locks
	LeafTooLarge   wire.Code = "too-large"   // its format-3 form would pass the write limit's MaxTxn
)

// CodeLeafNoLocks refuses, at a leaf, a lock request or a write of a fenced table
// (docs/design.md §27.5): a leaf takes no locks, since its writes reach a lock's home only
// through its hub, as the hub's.
const CodeLeafNoLocks wire.Code = "leaf-no-locks"

// maxLeafCarried bounds a leaf link's list of re-originated leaf seqs whose carrying hub
// entries the core has not shown it applied (core). Past it every other pair is dropped:
// the core seq told then lags by a little, never runs ahead.
const maxLeafCarried = 1024

// hubState is a hub's leaves: the open leaf links and the counts status shows.
type hubState struct {
	links map[ConnID]*leafLink
	// refused counts the leaves refused by code; writesRefused the leaf entries not
	// re-originated by reason.
	refused       map[wire.Code]uint64
	writesRefused map[wire.Code]uint64
	// leafNames are the peer names of the leaves this node took since it started: their
	// retention holds lapse at LeafHold, not RetainHold. seen is when each leaf with a mark
	// here was last connected (or the start, for a mark found in the store): marks of
	// leaves unseen for LeafHold are dropped.
	leafNames map[string]bool
	seen      map[wire.OriginID]time.Time
	loaded    bool
	// unwritten: under the mutation ReoriginateTwiceAfterCrash only, the marks of this
	// node's own re-originated entries, kept in memory instead of written with them: lost
	// in a crash.
	unwritten map[wire.OriginID]store.LeafMark
}

// leafLink is one leaf's connection at its hub.
type leafLink struct {
	conn   ConnID
	origin wire.OriginID
	name   string
	// floor is the leaf's floor when it answered purged below the mark: the channel starts
	// there (a leaf purges only what the core has).
	floor vector.Entry
	// held says why the leaf's channel is held back ("": it is not): its clock ("clock",
	// until heldUntil) or the gate ("gate"). Nothing is re-originated meanwhile; the
	// channel is subscribed again from the mark when the hold ends.
	held      string
	heldUntil time.Time
	// acks are the leaf seqs handled (re-originated, refused or duplicate) waiting for the
	// hub entry at or below which they are durable (HoldUnsynced): acknowledged to the
	// leaf, and told in LEAFSTATE, only then.
	acks []leafAck
	// durable is the highest leaf seq acknowledged; hubSeq the hub seq of the entry
	// carrying the highest re-originated one; markHLC that leaf entry's HLC.
	durable uint64
	hubSeq  uint64
	markHLC wire.HLC
	// carried are the durable (leaf seq, hub seq) pairs the core has not shown it applied;
	// core is the highest leaf seq whose pair it has.
	carried []leafAck
	core    uint64
	// refused, lastRefused and reason are the leaf's entries refused on this connection.
	refused     uint64
	lastRefused uint64
	reason      wire.Code
	// head is the newest entry of its own origin the leaf advertised (lag, and the stall
	// rule); seen is the highest leaf seq this link handled or subscribed from, and
	// progressAt when it last rose: a head above seen for StallTimeout is an entry lost at
	// the tail of the stream, asked for again (leafStalls), as routing does for an origin.
	head       wire.Head
	seen       uint64
	progressAt time.Time
	sent       *wire.LeafState // the last LEAFSTATE sent (nil: none yet)
}

type leafAck struct {
	leaf, hub uint64
	carrier   bool // hub is the seq of the entry that re-originated leaf
}

// isHub reports whether this node takes leaves.
func (r *Replica) isHub() bool { return r.cfg.MaxLeaves > 0 }

// leafOf is c's leaf link when c is a leaf's connection at this hub.
func (r *Replica) leafOf(c *conn) *leafLink {
	if !c.leaf {
		return nil
	}
	return r.hub.links[c.id]
}

// greetLeaf takes a connection whose peer said in its HELLO it is a leaf (on a version-4
// connection with the capability leaf): refused with a named code (counted,
// leaves_refused), or taken as the leaf's link: the leaf is told the map, its channel is
// subscribed from its mark, and it is told what was re-originated of it before.
func (r *Replica) greetLeaf(c *conn, info protocol.HandshakeInfo) {
	c.peerName, c.peerOrigin = info.PeerName, info.PeerOrigin
	if code, why := r.leafRefusal(c, info); code != "" {
		if r.hub.refused == nil {
			r.hub.refused = map[wire.Code]uint64{}
		}
		r.hub.refused[code]++
		r.counters.LeavesRefused++
		r.closeConn(c, code, why)
		return
	}
	c.established, c.version, c.leaf = true, info.Version, true
	// One connection per leaf: a newer one replaces the older (the leaf dialed again).
	for _, d := range r.connList {
		if d != c && d.leaf && d.peerOrigin == c.peerOrigin && d.sess.State() != protocol.StateClosed {
			r.closeConn(d, wire.CodeGoingAway, "leaf "+c.peerName+" connected again")
		}
	}
	l := &leafLink{conn: c.id, origin: c.peerOrigin, name: c.peerName}
	r.hubInit()
	r.hub.links[c.id] = l
	r.hub.leafNames[c.peerName] = true
	r.hub.seen[l.origin] = r.now
	r.greetV4(c)
	c.fullAdv, r.advFull = true, true
	if m, found, err := r.store.LeafMark(l.origin); !r.check(err) {
		return
	} else if found {
		// What was re-originated before this link: told from the start. A mark another
		// hub carries counts as at the core once this hub's head is (it applied that entry,
		// from a peer of the core): the nearest this hub knows.
		if m.Carrier == r.id.Origin {
			l.acks = append(l.acks, leafAck{leaf: m.Seq, hub: m.At, carrier: true})
		} else {
			l.acks = append(l.acks, leafAck{leaf: m.Seq, hub: r.origins[r.id.Origin].applied.Seq})
		}
	}
	if why := r.leafGateShut(); why != "" {
		l.held = "gate"
	} else {
		r.subscribeLeaf(c, l)
	}
	r.ackLeaf(c, l)
	r.tellLeaf(c, l)
}

func (r *Replica) hubInit() {
	if r.hub.links == nil {
		r.hub.links = map[ConnID]*leafLink{}
		r.hub.leafNames = map[string]bool{}
		r.hub.seen = map[wire.OriginID]time.Time{}
		r.hub.writesRefused = map[wire.Code]uint64{}
	}
}

// leafRefusal says why this node does not take the leaf on c ("": it does).
func (r *Replica) leafRefusal(c *conn, info protocol.HandshakeInfo) (wire.Code, string) {
	if !r.isHub() || r.cfg.Hub != "" {
		return wire.CodeNotAHub, "node " + r.id.Name + " takes no leaves"
	}
	for _, n := range r.cmap.cur.Nodes {
		if n.Name == info.PeerName {
			return wire.CodeLeafIsMember, "node " + info.PeerName + " is a member of the cluster map (generation " +
				strconv.FormatUint(r.cmap.cur.Generation, 10) + "): a member is a peer, never a leaf"
		}
	}
	n := 0
	for _, d := range r.connList {
		if d != c && d.leaf && d.peerOrigin != info.PeerOrigin && d.sess.State() != protocol.StateClosed {
			n++
		}
	}
	if n >= r.cfg.MaxLeaves {
		return wire.CodeTooManyLeaves, "node " + r.id.Name + " has its " + strconv.Itoa(r.cfg.MaxLeaves) + " leaves"
	}
	if why := r.leafGateShut(); why != "" {
		return wire.CodeNoLeafWindow, why
	}
	return "", ""
}

// leafGateShut is the version-4 gate of re-origination (docs/design.md §27.4), "" while it
// is open: the map has a leaf window, every member speaks version 4, and every member's
// entry holds this node's map generation or a later one, so that every member's tombstone
// horizon already allows for the window.
func (r *Replica) leafGateShut() string {
	m := &r.cmap.cur
	if m.LeafWindow <= 0 {
		return "the cluster map (generation " + strconv.FormatUint(m.Generation, 10) + ") has no leaf_window"
	}
	if below := clustermap.BelowV4(*m, r.cmap.members); len(below) > 0 {
		return "members below protocol version 4: " + strings.Join(below, ", ")
	}
	var behind []string
	for _, n := range m.Nodes {
		if n.Name != r.id.Name && r.cmap.members[n.Name].Generation < m.Generation {
			behind = append(behind, n.Name)
		}
	}
	if len(behind) > 0 {
		return "members whose entries hold a map generation below " + strconv.FormatUint(m.Generation, 10) + ": " + strings.Join(behind, ", ")
	}
	return ""
}

// leafMarkOf is where a leaf's channel starts here: its mark, or the floor the leaf
// answered when that is higher.
func (r *Replica) leafMarkOf(l *leafLink) (vector.Entry, bool) {
	m, found, err := r.store.LeafMark(l.origin)
	if !r.check(err) {
		return vector.Entry{}, false
	}
	pos := vector.Entry{Origin: l.origin}
	if found {
		pos.Seq, pos.Hash = m.Seq, m.Hash
	}
	if u, ok := r.hub.unwritten[l.origin]; ok && u.Seq > pos.Seq {
		pos.Seq, pos.Hash = u.Seq, u.Hash // the mutation's mark, in memory only
	}
	if l.floor.Seq > pos.Seq {
		pos = l.floor
	}
	return pos, true
}

// subscribeLeaf subscribes the leaf's channel from its mark.
func (r *Replica) subscribeLeaf(c *conn, l *leafLink) {
	pos, ok := r.leafMarkOf(l)
	if !ok {
		return
	}
	l.held, l.heldUntil = "", time.Time{}
	l.seen, l.progressAt = pos.Seq, r.now
	r.unsubscribe(c, l.origin)
	if r.checkConn(c, c.sess.V2().Subscribe([]vector.Entry{pos})) {
		c.in[l.origin] = true
	}
}

// onLeafEvent handles what a leaf's connection reports at its hub where it differs from a
// peer's; it reports whether the event was handled (false: as any peer's).
func (r *Replica) onLeafEvent(c *conn, l *leafLink, ev *protocol.Event) bool {
	switch ev.Kind {
	case protocol.EventOriginNamed, protocol.EventMap, protocol.EventMembers:
		// A leaf's origin is no origin here; its map and member entries are not the
		// cluster's (a leaf is not a member).
		return true
	case protocol.EventSkip:
		if ev.Origin == l.origin {
			r.receiveLeafSkip(c, l, ev.Skip)
		}
		return true
	case protocol.EventHeads:
		for _, hd := range ev.Heads.Heads {
			if hd.Origin == l.origin {
				l.head = hd
				continue
			}
			c.showed(hd.Origin, hd.Seq) // what the leaf holds of this hub's origins: its holds
			r.advanceHold(c.peerName, hd.Origin, hd.Seq)
		}
		return true
	case protocol.EventSubscribed, protocol.EventUnsubscribed, protocol.EventResend:
		return ev.Origin == l.origin // the leaf's own origin is never sent back to it
	case protocol.EventTxn:
		if ev.Txn.Origin == l.origin {
			r.receiveLeaf(c, l, ev.Txn)
		}
		return true
	case protocol.EventDuplicate:
		r.counters.LeafWritesDuplicate++
		return true
	case protocol.EventDivergence:
		if ev.Origin != l.origin || ev.Outgoing {
			return false
		}
		r.leafRewound(c, l, "its entry "+strconv.FormatUint(ev.DivergedAt, 10)+" does not extend the entry at its mark")
		return true
	case protocol.EventPurged:
		if ev.Origin != l.origin {
			return false
		}
		// The leaf purged below the mark: it purges only what its hub's core has (its
		// retention holds its own log down to LEAFSTATE's core seq), so what lies below its
		// floor was re-originated by some hub; the channel starts at the floor.
		r.counters.PurgedAnswers++
		delete(c.in, l.origin)
		l.floor = vector.Entry{Origin: l.origin, Seq: ev.Seq, Hash: ev.Hash}
		if l.held == "" {
			r.subscribeLeaf(c, l)
		}
		return true
	}
	return false
}

// leafRewound closes a leaf's connection whose entries contradict what was re-originated
// of it (its data directory went back): counted as an origin rewind.
func (r *Replica) leafRewound(c *conn, l *leafLink, why string) {
	r.counters.OriginRewinds++
	r.closeConn(c, wire.CodeLeafRewound, "leaf "+l.name+": "+why)
}

// receiveLeaf decides what to do with a leaf's entry (docs/design.md §27.3): a duplicate
// at or below the mark, a rewind, a gap, a hold (the gate, the leaf's clock), a refusal, or
// re-origination.
func (r *Replica) receiveLeaf(c *conn, l *leafLink, v wire.TxnView) {
	if r.storage.err != nil {
		return // degraded: nothing applied or acknowledged; the leaf sends it again
	}
	if l.held != "" {
		return // what the channel had in flight when it was held comes again
	}
	pos, ok := r.leafMarkOf(l)
	if !ok {
		return
	}
	h := v.Hash()
	switch {
	case v.Seq < pos.Seq || v.Seq == pos.Seq && h == pos.Hash:
		r.counters.LeafWritesDuplicate++
		r.leafHandled(c, l, v.Seq, r.carrierOf(l.origin, v.Seq), false)
		return
	case v.Seq == pos.Seq:
		r.leafRewound(c, l, "its entry "+strconv.FormatUint(v.Seq, 10)+" differs from the one re-originated")
		return
	case v.Seq == pos.Seq+1 && v.Prev != pos.Hash:
		r.leafRewound(c, l, "its entry "+strconv.FormatUint(v.Seq, 10)+" does not extend the entry at its mark")
		return
	case v.Seq > pos.Seq+1:
		// The channel is ahead of the mark (the session's position and the store's
		// differ): resume from the mark.
		r.counters.GapsDetected++
		r.subscribeLeaf(c, l)
		return
	}
	if why := r.leafGateShut(); why != "" {
		l.held = "gate"
		r.unsubscribe(c, l.origin)
		return
	}
	if until, ahead := r.aheadOfClock(v.HLC); ahead {
		// This leaf's channel only: the hub's origin and every other leaf go on.
		l.held, l.heldUntil = "clock", until
		r.unsubscribe(c, l.origin)
		return
	}
	if r.clockRefusal() != nil || r.rewindRefusal() != nil {
		// The hub refuses its own writes (its clock is off by its peers' measure, or its
		// origin is rewound): it stamps no leaf's either. Tried again after a while.
		l.held, l.heldUntil = "clock", r.now.Add(r.cfg.StallTimeout)
		r.unsubscribe(c, l.origin)
		return
	}
	r.reoriginate(c, l, &v, h)
}

// receiveLeafSkip takes a run of the leaf's entries the leaf left out of the channel: they
// write only tables this hub does not carry under the leaf's map (placement), so they are
// refused not-carried, as each would be whole (§27.4), and the mark moves to the run's end.
func (r *Replica) receiveLeafSkip(c *conn, l *leafLink, sk *wire.Skip) {
	if r.storage.err != nil || l.held != "" {
		return
	}
	pos, ok := r.leafMarkOf(l)
	if !ok {
		return
	}
	switch {
	case sk.To <= pos.Seq:
		r.counters.LeafWritesDuplicate++
		r.leafHandled(c, l, sk.To, 0, false)
		return
	case sk.From != pos.Seq+1 || sk.Prev != pos.Hash:
		r.leafRewound(c, l, "its run "+strconv.FormatUint(sk.From, 10)+"-"+strconv.FormatUint(sk.To, 10)+" does not extend the entry at its mark")
		return
	}
	if !r.check(r.store.PutLeafMark(store.LeafMark{Leaf: l.origin, Seq: sk.To, Hash: sk.Hash})) {
		return
	}
	n := sk.To - sk.From + 1
	r.hub.writesRefused[LeafNotCarried] += n
	r.counters.LeafWritesRefused += n
	l.refused += n
	l.lastRefused, l.reason = sk.To, LeafNotCarried
	r.leafHandled(c, l, sk.To, r.origins[r.id.Origin].applied.Seq, false)
}

// carrierOf is the hub seq at or below which a leaf seq at or below the mark is durable
// here: the mark's carrier when it is this node's own entry, else 0 (another hub's entry,
// applied: nothing of this node's own log to wait for).
func (r *Replica) carrierOf(leaf wire.OriginID, seq uint64) uint64 {
	m, found, err := r.store.LeafMark(leaf)
	if !r.check(err) || !found || m.Carrier != r.id.Origin || seq > m.Seq {
		return 0
	}
	return m.At
}

// reoriginate writes leaf entry v as this node's next entry (format 3: this node's origin,
// seq, HLC and chain, the leaf's operations, the leaf block), its records by last-writer-wins
// under the leaf's conflict identity, and the leaf's mark, in one store.Apply
// (docs/design.md §27.3): or refuses it (§27.4), moving the mark past it.
func (r *Replica) reoriginate(c *conn, l *leafLink, v *wire.TxnView, h wire.Hash) {
	st := r.origins[r.id.Origin]
	last := r.hlc
	// The leaf's HLC is merged into the clock first, as any receive does, so the entry's
	// HLC is above it (§27.2).
	r.hlc = max(r.hlc, v.HLC)
	hlc := r.advanceClock(r.now)
	reason := r.leafEntryRefusal(v, hlc)
	var enc []byte
	if reason == "" {
		t := v.Txn()
		t.Origin, t.Seq, t.HLC, t.Prev = r.id.Origin, st.applied.Seq+1, hlc, st.applied.Hash
		t.Leaf = &wire.LeafBlock{Origin: v.Origin, Seq: v.Seq, HLC: v.HLC, Hash: h}
		var err error
		enc, err = t.Encode()
		switch {
		case err != nil:
			reason = LeafFenced // a leaf entry whose operations a format-3 entry cannot carry (a token)
		case len(enc) > r.cfg.Write.MaxTxn:
			reason = LeafTooLarge
		}
	}
	if reason != "" {
		r.hlc = last // nothing is stamped with it
		r.hlc = max(r.hlc, v.HLC)
		if !r.check(r.store.PutLeafMark(store.LeafMark{Leaf: v.Origin, Seq: v.Seq, Hash: h})) {
			return
		}
		r.hub.writesRefused[reason]++
		r.counters.LeafWritesRefused++
		l.refused++
		l.lastRefused, l.reason = v.Seq, reason
		r.leafHandled(c, l, v.Seq, st.applied.Seq, false)
		return
	}
	nv, err := wire.ParseTxn(enc)
	if err != nil {
		r.check(errorf("a re-originated entry does not parse: %v", err))
		return
	}
	if err := r.apply(&nv, nv.Hash(), nil, 0); err != nil {
		r.hlc = last
		if entryFault(err) {
			// The store refused the batch, or a record it could not read: nothing was
			// written; the leaf's channel starts again from the mark.
			r.counters.ApplyFailures++
			r.unsubscribe(c, l.origin)
			l.held, l.heldUntil = "clock", r.now.Add(r.cfg.ApplyRetryDelay)
			return
		}
		r.check(err)
		return
	}
	r.counters.LeafWritesReoriginated++
	l.markHLC = v.HLC
	r.leafHandled(c, l, v.Seq, nv.Seq, true)
}

// leafEntryRefusal says why a leaf entry is not re-originated at HLC hlc ("": it is):
// what this node's own writes may not write is not re-originated either (§27.4).
func (r *Replica) leafEntryRefusal(v *wire.TxnView, hlc wire.HLC) wire.Code {
	if v.Format() != wire.TxnFormat1 {
		return LeafFenced // a token (or a leaf block): leaves take no locks
	}
	// Compared as HLCs, as the tombstone horizon subtracts the window (hlcBelow): by wall
	// milliseconds alone, a leaf write in the window's last millisecond with a lower logical
	// counter would pass, below a horizon term a node may already have dropped tombstones to.
	if w := r.leafWindow(); w > 0 && v.HLC < hlcBelow(hlc, w) {
		return LeafTooOld
	}
	m := &r.cmap.cur
	it := v.Ops()
	for op, ok := it.Next(); ok; op, ok = it.Next() {
		if len(m.Placement) > 0 && !m.Carries(r.id.Name, op.Table) {
			return LeafNotCarried
		}
		if m.Fenced(op.Table) {
			return LeafFenced
		}
	}
	return ""
}

// leafHandled notes a leaf seq handled, durable once this node's own log is synced up to
// hub (0: at once), and acknowledges what is durable.
func (r *Replica) leafHandled(c *conn, l *leafLink, seq, hub uint64, carrier bool) {
	if seq > l.seen {
		l.seen, l.progressAt = seq, r.now
	}
	l.acks = append(l.acks, leafAck{leaf: seq, hub: hub, carrier: carrier})
	r.ackLeaf(c, l)
}

// ackLeaf acknowledges the leaf seqs whose carrying entries are durable (persist before
// ack: with HoldUnsynced only once synced).
func (r *Replica) ackLeaf(c *conn, l *leafLink) {
	n := 0
	for _, a := range l.acks {
		if r.cfg.HoldUnsynced && a.hub > r.synced {
			break
		}
		n++
		if a.leaf <= l.durable {
			continue
		}
		l.durable = a.leaf
		if a.carrier {
			l.hubSeq = a.hub
		}
		l.carried = append(l.carried, leafAck{leaf: a.leaf, hub: a.hub})
	}
	if n == 0 {
		return
	}
	l.acks = l.acks[:copy(l.acks, l.acks[n:])]
	if len(l.carried) > maxLeafCarried {
		k := 0
		for i := range l.carried {
			if i%2 == 1 || i == len(l.carried)-1 {
				l.carried[k] = l.carried[i]
				k++
			}
		}
		l.carried = l.carried[:k]
	}
	if c.in[l.origin] {
		r.checkConn(c, c.sess.V2().Ack(l.origin, l.durable))
	}
}

// coreSeq is the highest seq of this node's own origin that every member of its map it
// knows a position of has shown it applied: the members it links to (or did: their
// retention holds, persisted, which subscriptions, cursors and heads on a connection move).
// A hub knows no position of a member it never linked to, which is left out; with none
// known the core has nothing. Without a member list: every peer that is not a leaf. A hub
// that is the map's only member is its whole core.
func (r *Replica) coreSeq() uint64 {
	core, known, others := ^uint64(0), false, false
	at := func(peer string) {
		others = true
		if h := r.ret.holds[holdKey{peer, r.id.Origin}]; h != nil {
			core, known = min(core, h.seq), true
		}
	}
	if nodes := r.cmap.cur.Nodes; len(nodes) > 0 {
		for _, n := range nodes {
			if n.Name != r.id.Name {
				at(n.Name)
			}
		}
	} else {
		for _, c := range r.connList {
			if c.established && !c.leaf && c.version >= 2 {
				at(c.peerName)
			}
		}
	}
	switch {
	case !others:
		return r.origins[r.id.Origin].applied.Seq
	case !known:
		return 0
	}
	return core
}

// serveLeaves runs at every settle on a hub: it acknowledges what was synced, ends the
// holds whose time came (or whose gate opened) and tells each leaf what changed.
func (r *Replica) serveLeaves() {
	if len(r.hub.links) == 0 {
		return
	}
	shut := r.leafGateShut()
	core := r.coreSeq()
	for id, l := range r.hub.links {
		c := r.conns[id]
		if c == nil || c.sess.State() != protocol.StateEstablished {
			continue
		}
		r.ackLeaf(c, l)
		switch {
		case l.held == "gate" && shut == "":
			r.subscribeLeaf(c, l)
		case l.held == "clock" && !r.now.Before(l.heldUntil) && shut == "":
			r.subscribeLeaf(c, l)
		case l.held == "clock" && shut != "":
			l.held = "gate"
		case r.leafStalls(c, l) && !r.now.Before(l.progressAt.Add(r.cfg.StallTimeout)):
			// The leaf advertises entries that do not come: one was lost at the tail of
			// the stream (a leaf's origin is no origin here, so routing's stall rule does
			// not see it). Ask again from the mark.
			r.counters.GapsDetected++
			r.counters.ResendsRequested++
			r.subscribeLeaf(c, l)
		}
		n := 0
		for _, p := range l.carried {
			if p.hub > core {
				break
			}
			l.core = max(l.core, p.leaf)
			n++
		}
		l.carried = l.carried[:copy(l.carried, l.carried[n:])]
		r.tellLeaf(c, l)
	}
}

// leafStalls reports whether a leaf advertises a head above what its subscribed channel
// brought.
func (r *Replica) leafStalls(c *conn, l *leafLink) bool {
	return l.held == "" && c.in[l.origin] && l.head.Seq > l.seen
}

// leavesDue is the next time a leaf's clock hold ends or a stalled leaf channel is asked
// again (zero: none).
func (r *Replica) leavesDue() time.Time {
	var next time.Time
	for id, l := range r.hub.links {
		if l.held == "clock" && (next.IsZero() || l.heldUntil.Before(next)) {
			next = l.heldUntil
		}
		if c := r.conns[id]; c != nil && r.leafStalls(c, l) {
			if due := l.progressAt.Add(r.cfg.StallTimeout); next.IsZero() || due.Before(next) {
				next = due
			}
		}
	}
	return next
}

// tellLeaf sends the leaf a LEAFSTATE when a field changed since the last one.
func (r *Replica) tellLeaf(c *conn, l *leafLink) {
	s := wire.LeafState{Reoriginated: l.durable, HubSeq: l.hubSeq, Core: min(l.core, l.durable), Refused: l.refused}
	if l.lastRefused > 0 && l.lastRefused <= l.durable {
		s.LastRefused, s.Reason = l.lastRefused, string(l.reason)
	}
	if w := r.leafWindow(); w > 0 {
		// The horizon is told in whole seconds: a LEAFSTATE per tick of the clock
		// would be noise.
		hw := r.hlc.WallMillis()
		if lw := uint64(w.Milliseconds()); hw > lw {
			s.Horizon = wire.MakeHLC((hw-lw)/1000*1000, 0)
		}
	}
	if l.sent != nil && sameLeafState(*l.sent, s) {
		return
	}
	if r.checkConn(c, c.sess.V4().LeafState(s)) {
		l.sent = &s
	}
}

// dropLeaf forgets a leaf's link when its connection goes.
func (r *Replica) dropLeaf(c *conn) {
	if l := r.hub.links[c.id]; l != nil {
		r.hub.seen[l.origin] = r.now
		delete(r.hub.links, c.id)
	}
}

// holdLapse is how long a peer's retention hold lasts without advancing: LeafHold for a
// leaf this node took since it started, RetainHold for a peer.
func (r *Replica) holdLapse(peer string) time.Duration {
	if r.hub.leafNames[peer] {
		return r.cfg.LeafHold
	}
	return r.cfg.RetainHold
}

// dropLeafMarks forgets, at a retention step, the marks of leaves not seen for LeafHold
// (docs/design.md §27.3): a leaf that comes back after resumes from its floor (its
// entries then are counted duplicates at worst). A mark found in the store counts as seen
// when this node started.
func (r *Replica) dropLeafMarks() {
	if !r.isHub() || r.cfg.LeafHold <= 0 {
		return
	}
	r.hubInit()
	if !r.hub.loaded {
		r.hub.loaded = true
		r.check(r.store.LeafMarks(func(m store.LeafMark) bool {
			if _, ok := r.hub.seen[m.Leaf]; !ok {
				r.hub.seen[m.Leaf] = r.now
			}
			return true
		}))
	}
	connected := map[wire.OriginID]bool{}
	for _, l := range r.hub.links {
		connected[l.origin] = true
	}
	var gone []wire.OriginID
	for o, at := range r.hub.seen {
		if !connected[o] && r.now.Sub(at) >= r.cfg.LeafHold {
			gone = append(gone, o)
		}
	}
	if len(gone) == 0 {
		return
	}
	slices.SortFunc(gone, cmpOrigin)
	if r.check(r.store.DropLeafMarks(gone)) {
		for _, o := range gone {
			delete(r.hub.seen, o)
		}
	}
}

// noteLeafSeen notes, on a hub, that a format-3 entry naming a leaf was applied: the
// leaf's mark here is in use.
func (r *Replica) noteLeafSeen(v *wire.TxnView) {
	if r.isHub() && v.Format() == wire.TxnFormat3 {
		r.hubInit()
		r.hub.seen[v.Leaf.Origin] = r.now
	}
}

// LeavesStatus reports a hub's leaves (nil when this node takes none).
func (r *Replica) LeavesStatus(now time.Time) *LeavesStatus {
	if !r.isHub() {
		return nil
	}
	s := &LeavesStatus{Max: r.cfg.MaxLeaves}
	r.check(r.store.LeafMarks(func(store.LeafMark) bool { s.Marks++; return true }))
	s.Lag = make([]LeafLag, len(LeafLagBuckets)+1)
	for i, b := range LeafLagBuckets {
		s.Lag[i].LeMs = b
	}
	var rows []LeafBehind
	for id, l := range r.hub.links {
		c := r.conns[id]
		if c == nil || c.sess.State() != protocol.StateEstablished {
			continue
		}
		s.Connected++
		if l.held != "" {
			s.Held++
		}
		var behind uint64
		if l.head.Seq > l.durable && l.head.HLC.WallMillis() > l.markHLC.WallMillis() {
			behind = l.head.HLC.WallMillis() - l.markHLC.WallMillis()
			if l.markHLC == 0 {
				behind = uint64(max(now.UnixMilli(), 0)) - min(uint64(max(now.UnixMilli(), 0)), l.head.HLC.WallMillis())
			}
		}
		i := slices.IndexFunc(LeafLagBuckets, func(b uint64) bool { return behind <= b })
		if i < 0 {
			i = len(LeafLagBuckets)
		}
		s.Lag[i].Leaves++
		rows = append(rows, LeafBehind{Name: l.name, Seq: l.durable, BehindMs: behind})
	}
	slices.SortFunc(rows, func(a, b LeafBehind) int {
		if a.BehindMs != b.BehindMs {
			if a.BehindMs > b.BehindMs {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	s.Slowest = rows[:min(len(rows), MaxSlowestLeaves)]
	s.LeavesRefusedByCode = codeCounts(r.hub.refused)
	s.WritesRefusedByReason = codeCounts(r.hub.writesRefused)
	return s
}

func sameLeafState(a, b wire.LeafState) bool {
	return a.Horizon == b.Horizon && a.Reoriginated == b.Reoriginated && a.HubSeq == b.HubSeq && a.Core == b.Core &&
		a.Refused == b.Refused && a.LastRefused == b.LastRefused && a.Reason == b.Reason
}
