package replica

import "plait/protocol/wire"

// The quiet control plane's advertisements (docs/design.md §28.3-28.6, SPEC.md "The quiet
// control plane"), on version-4 links between peers (not a hub's link to its leaf):
//
//   - This node's quiet set is the origins whose source here is the origin's own node
//     (routing's direct source). It tells each peer its set with QUIET: the whole set as
//     soon as the connection is established, then the changes. An origin turning quiet
//     waits for the connection's heads round (HeadsInterval), as a moved head does; one
//     turning loud (its direct source lost) goes at once, because this node needs
//     candidates now.
//   - To a peer, no head of an origin in the peer's quiet set (it takes it from the origin
//     itself), and no withdrawal when the origin turns quiet: the peer forgets it. When
//     the origin turns loud again its head goes at once. The first full advertisement
//     waits for the peer's first QUIET.
//   - To a peer that subscribes an origin from this node, DATA is the head (below): a head
//     goes at the heads round only when the stream is behind it, or when the peer's
//     CURSOR stayed below what was sent for a whole round (a tail entry may be lost: the
//     head lets the peer's stall rule ask again).
//   - An entry (or run) received counts as the peer advertising the origin's head at its
//     seq and HLC: routing, lag and the stall rule read it like any head.
//
// A version-3 link, and a hub's link to its leaf, advertise as before.

// quietLink reports whether the connection follows the quiet control plane: version 4,
// and not a hub's link to its leaf (either side).
func (c *conn) quietLink() bool { return c.established && c.version >= v4 && !c.leaf && !c.toHub }

// directSource reports whether an origin's source is the origin's own node: the origin is
// in this node's quiet set.
func (r *Replica) directSource(st *originState) bool {
	if st.source == 0 {
		return false
	}
	src := r.conns[st.source]
	return src != nil && src.direct(st.id)
}

// greetQuiet sends a new quiet link its first QUIET: this node's whole quiet set (the
// peer's own origin left out: the peer serves it as the origin's subscriber rule says).
func (r *Replica) greetQuiet(c *conn) {
	var quiet []wire.OriginID
	for _, o := range r.originOrder {
		if o != c.peerOrigin && r.directSource(r.origins[o]) {
			quiet = append(quiet, o)
		}
	}
	for _, o := range quiet {
		c.told[o] = true
	}
	r.checkConn(c, c.sess.V4().Quiet(quiet, nil))
}

// onQuiet takes in the peer's QUIET. Its first lets the connection's full advertisement
// go; a quiet origin is advertised to it no more (and not withdrawn: it forgot it); a loud
// one is advertised again at once, its head going as a first advertisement does.
func (r *Replica) onQuiet(c *conn, q *wire.Quiet) {
	if !c.quietLink() {
		return
	}
	if !c.quietHeard {
		c.quietHeard, r.advFull = true, true
	}
	for _, o := range q.Loud {
		if c.peerQuiet[o] {
			delete(c.peerQuiet, o)
			if r.origins[o] != nil {
				r.headsDirty[o] = true // an origin this node holds: its head goes at once
			}
			r.memberToLoud(c, o)
		}
	}
	for _, o := range q.Quiet {
		c.peerQuiet[o] = true
		delete(c.adv, o)
		delete(c.advLater, o)
	}
}

// toldQuiet does what this node owes once it told the peer on c that it takes o directly:
// it forgets the peer's heads of o, which the peer no longer keeps current, unless the peer
// is its source of o (the origin itself); and it releases the peer's retention hold on o
// unless the peer subscribes o from this node, since the peer no longer advertises o to it
// and the hold would freeze until it lapsed (a new subscription makes a new hold).
func (r *Replica) toldQuiet(c *conn, o wire.OriginID) {
	if st := r.origins[o]; st == nil || st.source != c.id {
		delete(c.heads, o)
	}
	if c.out[o] == nil {
		r.releasePeerHold(c.peerName, o)
	}
}

// impliedHead takes an entry (or a run) received on a quiet link as the peer's head of its
// origin at its seq and HLC, as onHeads takes an advertised one.
func (r *Replica) impliedHead(c *conn, o wire.OriginID, seq uint64, hlc wire.HLC) {
	if o == r.id.Origin || seq <= c.heads[o].Seq {
		return
	}
	r.peerHead(c, wire.Head{Origin: o, Seq: seq, HLC: hlc})
}

// subscriberHead decides at a heads round whether the head of o (seq) goes to a peer that
// subscribes o from this node on a quiet link, whose stream s is: when the stream is behind
// it, or when the peer's cursor stayed below what was sent a round ago. Otherwise the
// origin waits for the next round while the peer's cursor is below what was sent, and is
// done when it is not.
func (r *Replica) subscriberHead(c *conn, o wire.OriginID, s *outStream, seq uint64) (send, wait bool) {
	sent := s.next - 1
	switch late, waited := c.lateSeq[o]; {
	case seq > sent:
		delete(c.lateSeq, o)
		return true, false
	case c.shown[o] >= sent:
		delete(c.lateSeq, o)
		return false, false
	case waited && c.shown[o] < late:
		delete(c.lateSeq, o)
		return true, false
	default:
		c.lateSeq[o] = sent
		return false, true
	}
}

// waitRound puts o among the origins that wait for the connection's next heads round.
func (r *Replica) waitRound(c *conn, o wire.OriginID, set map[wire.OriginID]bool) {
	if !c.waiting() {
		c.advDue = r.now.Add(r.cfg.HeadsInterval)
	}
	set[o] = true
}

// waiting reports whether anything waits for the connection's heads round: moved heads,
// or origins turned quiet.
func (c *conn) waiting() bool { return len(c.advLater) > 0 || len(c.quietAdd) > 0 }
