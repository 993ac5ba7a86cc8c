package replica

import (
	"strconv"

	"plait/protocol"
	"plait/protocol/wire"
)

// Event dispatch: what the replica does with each event its sessions report.

// drain takes one session's output and acts on its events.
func (r *Replica) drain(c *conn) {
	rd := c.sess.Ready()
	if len(rd.Messages) > 0 {
		o := r.output(c.id)
		o.Messages = append(o.Messages, rd.Messages...)
	}
	// Commands issued while handling the events reuse the session's event buffer: copy.
	evs := append(r.evbuf[:0], rd.Events...)
	r.evbuf = evs[:0]
	for i := range evs {
		if r.conns[c.id] == nil || r.fatal != nil {
			return
		}
		r.onEvent(c, &evs[i])
	}
}

func (r *Replica) onEvent(c *conn, ev *protocol.Event) {
	if c.closing {
		switch ev.Kind {
		case protocol.EventTxn, protocol.EventSkip, protocol.EventDuplicate, protocol.EventGap:
			return // the rest of a message that came with the entry this side closed for
		}
	}
	if l := r.leafOf(c); l != nil && r.onLeafEvent(c, l, ev) {
		return // hub.go: a leaf's connection
	}
	if c.toHub && r.onHubEvent(c, ev) {
		return // leaf.go: the connection to this leaf's hub
	}
	switch ev.Kind {
	case protocol.EventHandshake:
		r.onHandshake(c)
	case protocol.EventOriginNamed:
		r.learnName(ev.Origin, ev.Name)
	case protocol.EventSubscribed:
		if c.version >= 2 {
			c.showed(ev.Origin, ev.Seq)
		}
		switch {
		case c.version == 1 && ev.Position < r.ret.afloor:
			r.purgedAnswer(c, wire.OriginID{}, "the arrival order is purged up to "+strconv.FormatUint(r.ret.afloor, 10))
		case c.version == 1:
			c.v1Subscribed, c.v1After = true, ev.Position
			r.holdAt(c.peerName, wire.OriginID{}, ev.Position, true)
		case ev.Origin == r.id.Origin && r.checkOwnPosition(c, ev.Seq, ev.Hash, true, "subscribe"):
			// The peer holds this node's origin beyond its log: rewound (rewind.go).
		case ev.Seq < r.floor(ev.Origin).Seq:
			r.purgedAnswer(c, ev.Origin, "origin "+ev.Origin.String()+" is purged up to "+strconv.FormatUint(r.floor(ev.Origin).Seq, 10))
		case !r.sendsTo(c):
			// The link's direction: nothing goes to this peer (links.go). The channel stays
			// open and empty; a version-4 peer knows from LINK, and unsubscribes.
		default:
			st := r.origin(ev.Origin) // an origin this node may not hold (yet): nothing to send
			c.addOut(ev.Origin, &outStream{st: st, next: ev.Seq + 1, since: r.now})
			r.holdAt(c.peerName, ev.Origin, ev.Seq, true)
		}
	case protocol.EventUnsubscribed:
		c.dropOut(ev.Origin)
		if c.quietLink() && c.told[ev.Origin] {
			// Told quiet while it subscribed, its hold was kept; it no longer advertises
			// the origin to this node, so the hold would freeze (quiet.go, toldQuiet).
			r.releasePeerHold(c.peerName, ev.Origin)
		}
	case protocol.EventResend:
		if ev.From <= r.floor(ev.Origin).Seq {
			r.purgedAnswer(c, ev.Origin, "origin "+ev.Origin.String()+" is purged up to "+strconv.FormatUint(r.floor(ev.Origin).Seq, 10))
		} else if s := c.out[ev.Origin]; s != nil {
			s.next, s.blocked, s.run = ev.From, 0, skipRun{}
		}
	case protocol.EventCursor:
		c.showed(ev.Origin, ev.Seq)
		r.advanceHold(c.peerName, ev.Origin, ev.Seq)
	case protocol.EventAcked:
		r.advanceHold(c.peerName, wire.OriginID{}, ev.Position)
		n := 0
		for _, p := range c.v1InFlight {
			if p.pos > ev.Position {
				break
			}
			c.v1Unacked -= p.size
			n++
		}
		c.v1InFlight = c.v1InFlight[:copy(c.v1InFlight, c.v1InFlight[n:])]
	case protocol.EventHeads:
		r.onHeads(c, ev.Heads)
	case protocol.EventTxn:
		if c.quietLink() {
			r.impliedHead(c, ev.Txn.Origin, ev.Txn.Seq, ev.Txn.HLC) // DATA is the head (quiet.go)
		}
		r.receive(c, ev.Txn, ev.Position)
	case protocol.EventSkip:
		if c.quietLink() {
			r.impliedHead(c, ev.Origin, ev.Skip.To, ev.Skip.HLC)
		}
		r.receiveSkip(c, ev.Origin, ev.Skip)
	case protocol.EventQuiet:
		r.onQuiet(c, ev.Quiet)
	case protocol.EventDuplicate:
		r.counters.DuplicatesReceived++
		if c.version == 1 {
			c.v1LastPos[ev.Txn.Origin] = ev.Position
			r.check(c.sess.V1().Ack(ev.Position))
			r.check(r.store.SetPeerCursor(c.peerOrigin, ev.Position))
		}
	case protocol.EventGap:
		r.counters.GapsDetected++
		if c.version >= 2 {
			r.counters.ResendsRequested++
		} else {
			r.rewindV1(c, ev.Txn.Origin)
		}
	case protocol.EventDivergence:
		r.onDivergence(c, ev)
	case protocol.EventClosed:
		r.onClosed(c, ev)
	case protocol.EventPurged:
		r.onPurged(c, ev)
	case protocol.EventCopyRequested:
		r.onCopyRequested(c, ev.Copy)
	case protocol.EventCopyHolds:
		r.onCopyHolds(c, ev.Holds)
	case protocol.EventCopyBegin:
		r.onCopyBegin(c, ev.CopyBegin)
	case protocol.EventChunk:
		r.onChunk(c, ev.Chunk)
	case protocol.EventCopyEnd:
		r.onCopyEnd(c)
	case protocol.EventCopyAborted:
		r.onCopyAborted(c, ev)
	case protocol.EventRangeAsked:
		r.onRangeAsked(c, ev.RangeDigest)
	case protocol.EventRangeAnswered:
		r.onRangeAnswered(c, ev.Range)
	case protocol.EventMap:
		r.onMap(c, ev.Map)
	case protocol.EventLink:
		r.onLink(c, ev.Link)
	case protocol.EventMembers:
		r.onMembers(c, ev.Members.Entries)
	case protocol.EventRequest:
		r.onRequest(c, ev.Request)
	case protocol.EventResponse:
		r.onResponse(c, ev.Response, ev.Late)
	case protocol.EventRequestRefused:
		r.counters.RequestsRefused++
	case protocol.EventCredit, protocol.EventIgnoredFrame:
		// Credit is acted on by pump; ignored frames are counted by the session (Stats).
	}
}

func (r *Replica) learnName(o wire.OriginID, name string) {
	st := r.origin(o)
	if st.name != "" || o == r.id.Origin {
		return
	}
	st.name = name // sessions get it when they first send the origin (nameOrigins)
}

func (r *Replica) onHeads(c *conn, h *wire.Heads) {
	for _, hd := range h.Heads {
		switch st := r.origin(hd.Origin); {
		case hd.Origin == r.id.Origin && r.checkOwnPosition(c, hd.Seq, wire.Hash{}, false, "heads"):
			return // a relay holds this node's origin beyond its log (rewind.go)
		case hd.Origin == c.peerOrigin && hd.Seq < st.applied.Seq:
			// Not yet evidence: the same entries may have come over a faster path through
			// a relay while this head was on its way (rewind.go, suspectHead).
			r.suspectHead(c, st, hd.Seq)
		case hd.Origin == c.peerOrigin && c.headSuspect != nil && hd.Seq >= c.headSuspect.applied:
			c.headSuspect = nil // its head caught up with what was applied here: it was in flight
		}
	}
	for _, hd := range h.Heads {
		r.peerHead(c, hd)
		r.routeSome[hd.Origin] = true
	}
	for _, o := range h.Withdrawn {
		delete(c.heads, o)
		if st := r.origins[o]; st != nil && st.source == c.id {
			st.srcHead = 0
		}
		r.routeSome[o] = true
	}
	for _, f := range h.Floors { // version 3: where the peer's logs begin
		c.floors[f.Origin] = f.Seq
		r.routeSome[f.Origin] = true
	}
}

// peerHead takes in one head of the peer's: advertised, or implied by an entry received
// on a quiet link (quiet.go).
func (r *Replica) peerHead(c *conn, hd wire.Head) {
	c.heads[hd.Origin] = hd
	c.showed(hd.Origin, hd.Seq)
	st := r.origin(hd.Origin)
	if st.source == c.id {
		st.srcHead = hd.Seq
	}
	if hd.Seq > st.headSeq {
		if st.headSeq <= st.applied.Seq {
			st.behindAt = r.now // level until now: the wait begins (health.go)
		}
		st.headSeq, st.headHLC = hd.Seq, hd.HLC
	}
	r.advanceHold(c.peerName, hd.Origin, hd.Seq) // a peer's position is its head too
}

// onPurged takes in that a peer cannot serve an origin from this node's position: its log
// begins above it (version 3). The channel is closed; the origin looks for another source.
func (r *Replica) onPurged(c *conn, ev *protocol.Event) {
	c.floors[ev.Origin] = max(c.floors[ev.Origin], ev.Seq)
	delete(c.in, ev.Origin)
	if st := r.origin(ev.Origin); st.source == c.id {
		r.loseSource(st, ReasonPurged)
	}
}

func (r *Replica) onDivergence(c *conn, ev *protocol.Event) {
	st := r.origin(ev.Origin)
	if c.version >= 2 && !ev.Outgoing && ev.ByPeer && ev.Origin == c.peerOrigin {
		// The origin's own node, sending, reports that this node's position of its origin
		// is not in its log: not a relay's divergence, the origin itself is rewound
		// (rewind.go). (An entry that contradicts the chain, found by the session, may be
		// one damaged in transit: that stays a divergence; the replica's own checks of
		// entries that hash as sent are in receive.) The session closed the channel.
		delete(c.in, ev.Origin)
		r.peerRewound(c, st, "it reports that its log does not hold the position applied here, seq "+
			strconv.FormatUint(st.applied.Seq, 10))
		return
	}
	if !(ev.Outgoing && ev.ByPeer) {
		// Found here: in an entry received, or (sending) a subscriber's position that is not
		// in this node's log. What a peer found in an entry this node sent is the peer's
		// to count; and this node's own origin is authoritative, never flagged here.
		r.counters.Divergences++
		if ev.Origin != r.id.Origin {
			st.diverged, st.divergedAt = true, ev.DivergedAt
		}
	}
	switch {
	case c.version < 2:
		// Version 1 closes the session; the connection is made again.
	case ev.Outgoing:
		c.dropOut(ev.Origin)
	default: // a channel this side subscribed to, closed by the session
		delete(c.in, ev.Origin)
		r.exclude(c, ev.Origin)
		if st.source == c.id {
			r.loseSource(st, ReasonDiverged)
		}
	}
}

func (r *Replica) onClosed(c *conn, ev *protocol.Event) {
	if ev.Err != nil {
		if ev.Err.Class == wire.ClassProtocol && ev.Err.Code != wire.CodeDivergence && ev.Err.Code != wire.CodeGapDetected {
			r.counters.ProtocolErrors++
		}
		if ev.Err.Code != wire.CodeGoingAway || ev.ByPeer {
			r.recordError(c, ev.Err)
		}
		if ev.ByPeer && ev.Err.Code == wire.CodeOriginRewound && r.rewound == nil && !c.peerOrigin.IsZero() {
			// A node that is not rewound itself reads the peer's origin-rewound as the
			// peer's own origin (its evidence was this node's SUBSCRIBE): rewind.go.
			r.origin(c.peerOrigin).rewound = true
		}
		r.connEnded(c, ev.Err, ev.ByPeer)
	}
	o := r.output(c.id)
	o.Closed, o.Err = true, ev.Err
	r.drop(c)
}

func (r *Replica) recordError(c *conn, err *wire.Error) {
	name := c.peerName
	if name == "" {
		name = c.expect
	}
	if name == "" {
		return // a connection that never named itself: counted only
	}
	r.lastErrors[name] = PeerError{Err: err, At: r.now}
}
