package protocol

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// Version 4 (SPEC.md, "Version 4: the cluster map and requests (draft)"): version 3 and the
// cluster map's frames. The session carries MAP and MEMBERS without holding them (which map
// to keep is the caller's), and keeps of requests only their ids: which this side sent and
// still awaits, which the peer sent and this side still owes, so that every request is
// answered once and the requests in flight stay within Limits.MaxRequestsInFlight each way.
// Deadlines and forwarding are the caller's (protocol/replica).

// v4State is what a version-4 connection adds to version 3's: the requests in flight, both
// ways, by id.
type v4State struct {
	lastOut uint64              // the highest id this side gave a request on the connection
	out     map[uint64]struct{} // requests this side sent, neither answered nor forgotten
	lastIn  uint64              // the highest id the peer gave a request
	in      map[uint64]struct{} // requests the peer sent that this side has not answered
	// The quiet control plane's sets (QUIET): the origins the peer said it takes directly
	// from their own node (bounded by Limits.MaxOrigins), and those this side said so of.
	peerQuiet map[wire.OriginID]struct{}
	quietOut  map[wire.OriginID]struct{}
	quietSent bool // this side sent its first QUIET
}

// resetV4 forgets every request: a new session, or a closed one, which holds nothing for
// the peer.
func (s *Session) resetV4() {
	s.v4 = v4State{out: map[uint64]struct{}{}, in: map[uint64]struct{}{},
		peerQuiet: map[wire.OriginID]struct{}{}, quietOut: map[wire.OriginID]struct{}{}}
}

// ---- the quiet control plane (QUIET) ----

// onQuiet takes in the peer's QUIET: its quiet set moves (Loud out, Quiet in), bounded by
// MaxOrigins (too-many-origins). The peer forgets the heads of its quiet origins (it asked
// not to be told them), so the session forgets what it advertised of them: the next head
// AdvertiseHeads is given goes out even when unchanged.
func (s *Session) onQuiet(f wire.Frame, q *wire.Quiet) {
	n := len(s.v4.peerQuiet)
	for _, o := range q.Loud {
		if _, in := s.v4.peerQuiet[o]; in {
			n--
		}
	}
	for _, o := range q.Quiet {
		if _, in := s.v4.peerQuiet[o]; !in {
			n++
		}
	}
	if n > s.limits.MaxOrigins {
		s.fail(wire.FrameError(wire.CodeTooManyOrigins, f.Type, f.Offset, "the peer's quiet set would hold "+
			strconv.Itoa(n)+" origins, above "+strconv.Itoa(s.limits.MaxOrigins)))
		return
	}
	for _, o := range q.Loud {
		delete(s.v4.peerQuiet, o)
	}
	for _, o := range q.Quiet {
		s.v4.peerQuiet[o] = struct{}{}
		delete(s.chans.advertised, o)
	}
	s.emit(Event{Kind: EventQuiet, Quiet: q})
}

// onMap hands the peer's cluster map to the caller.
func (s *Session) onMap(_ wire.Frame, m *wire.Map) {
	s.emit(Event{Kind: EventMap, Map: m})
}

// onMembers hands the peer's member entries to the caller.
func (s *Session) onMembers(_ wire.Frame, m *wire.Members) {
	s.emit(Event{Kind: EventMembers, Members: m})
}

// onRequest takes in a request: its id above every id the peer used, its path ending at the
// peer. Beyond the bound on requests owed, the session answers it too-many-requests itself.
func (s *Session) onRequest(f wire.Frame, r *wire.Request) {
	switch {
	case r.ID <= s.v4.lastIn:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "request id "+strconv.FormatUint(r.ID, 10)+
			" is not above the last one received, "+strconv.FormatUint(s.v4.lastIn, 10)))
		return
	case r.Path[len(r.Path)-1] != s.info.PeerName:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "the request's path ends at "+
			quote(r.Path[len(r.Path)-1])+", not at the peer "+quote(s.info.PeerName)))
		return
	}
	s.v4.lastIn = r.ID
	if len(s.v4.in) >= s.limits.MaxRequestsInFlight {
		s.sendControl(&wire.Response{ID: r.ID, Code: wire.CodeTooManyRequests,
			Message: strconv.Itoa(s.limits.MaxRequestsInFlight) + " requests received are not answered yet"})
		s.emit(Event{Kind: EventRequestRefused, Request: r})
		return
	}
	s.v4.in[r.ID] = struct{}{}
	s.emit(Event{Kind: EventRequest, Request: r})
}

// onResponse takes in an answer to a request this side sent: one still awaited, or a late
// one (already answered, or forgotten), which the caller drops and counts.
func (s *Session) onResponse(f wire.Frame, r *wire.Response) {
	if r.ID > s.v4.lastOut {
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "RESPONSE to request "+strconv.FormatUint(r.ID, 10)+
			", which this side never sent"))
		return
	}
	_, awaited := s.v4.out[r.ID]
	delete(s.v4.out, r.ID)
	s.emit(Event{Kind: EventResponse, Response: r, Late: !awaited})
}

// ---- placement: runs of left-out entries (SKIP) ----

// sent moves the channel's sent position to (seq, hash), the end of an entry or a run just
// queued; a version-4 channel records it among its ends.
func (ch *outChannel) sent(seq uint64, hash wire.Hash, v4 bool) {
	ch.next, ch.chain = seq+1, hash
	if v4 {
		ch.ends = append(ch.ends, pendingEntry{seq: seq, hash: hash})
	}
}

// ackEnds forgets the ends below the acknowledged position: the subscriber never goes back
// below it, so no RESEND names them. The last end at or below it stays, the base.
func (ch *outChannel) ackEnds() {
	i := 0
	for i+1 < len(ch.ends) && ch.ends[i+1].seq <= ch.acked {
		i++
	}
	ch.ends = ch.ends[i:]
}

// resendEnd finds the end at seq (a RESEND's from - 1) and drops the ends above it, which
// the stream sends again; false when seq is not an end (inside a run sent as one SKIP).
func (ch *outChannel) resendEnd(seq uint64) (wire.Hash, bool) {
	i, found := slices.BinarySearchFunc(ch.ends, seq, func(e pendingEntry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !found {
		return wire.Hash{}, false
	}
	ch.ends = ch.ends[:i+1]
	return ch.ends[i].hash, true
}

// onSkip checks a run of left-out entries on a channel this side subscribed to, as onData
// checks an entry (SPEC.md, "SKIP"), the run (From..To, Prev, Hash) in place of one entry.
// A SKIP takes no credit, so nothing is charged or released.
func (s *Session) onSkip(f wire.Frame, k *wire.Skip) {
	ch, _ := s.inChannel(f, k.Channel, "SKIP")
	if ch == nil {
		return
	}
	if !s.peerOrigins[ch.origin].named {
		s.unexpected(f, "SKIP of origin "+ch.origin.String()+" before its ORIGIN frame")
		return
	}
	a, h := ch.seq, ch.hash
	run := strconv.FormatUint(k.From, 10) + ".." + strconv.FormatUint(k.To, 10)
	switch {
	case k.To < a, k.To == a && k.Hash == h:
		s.stats.Duplicates++
		s.emit(Event{Kind: EventDuplicate, Origin: ch.origin, Skip: k})
	case k.To == a:
		s.divergedSkip(ch, k, a, "the run "+run+" ends at the position held with another chain hash")
	case k.From == a+1 && k.Prev != h:
		s.divergedSkip(ch, k, k.From, "the run "+run+" does not extend the chain held at "+strconv.FormatUint(a, 10))
	case k.From == a+1, s.cfg.Mutations.BreakGapDetection: // the mutation: a receiver blind to gaps (tests only)
		ch.seq, ch.hash = k.To, k.Hash
		ch.resendFrom, ch.lastDiscarded = 0, 0
		ch.pending.push(pendingEntry{seq: k.To, hash: k.Hash}, 0)
		s.emit(Event{Kind: EventSkip, Origin: ch.origin, Skip: k})
	default: // From > a+1, or a run from at or below a to above it
		if ch.resendFrom != 0 && k.From > ch.lastDiscarded {
			ch.lastDiscarded = k.To // still the stream from before the resend
			s.stats.Discarded++
			return
		}
		s.stats.Gaps++
		s.stats.ResendsRequested++
		ch.resendFrom, ch.lastDiscarded = a+1, k.To
		s.sendControl(&wire.Resend{Channel: ch.id, From: a + 1})
		s.emit(Event{Kind: EventGap, Origin: ch.origin, Skip: k, Expected: a + 1})
	}
}

// divergedSkip reports a run that does not fit the chain held (at seq at) and closes the
// channel, as divergedIn does for an entry.
func (s *Session) divergedSkip(ch *inChannel, k *wire.Skip, at uint64, why string) {
	s.stats.Divergences++
	s.emit(Event{Kind: EventDivergence, Origin: ch.origin, Skip: k, DivergedAt: at, Seq: ch.seq, Hash: ch.hash,
		Err: wire.NewError(wire.CodeDivergence, "origin "+ch.origin.String()+": "+why)})
	s.sendControl(&wire.Divergence{Channel: ch.id, Seq: ch.seq, Hash: ch.hash, Side: wire.SideSubscriber})
	s.closeIn(ch)
}

// onLink hands the peer's settings for this link to the caller, which decides what they
// mean with its own (protocol/replica's links).
func (s *Session) onLink(_ wire.Frame, l *wire.Link) {
	s.emit(Event{Kind: EventLink, Link: l})
}

// leafLink reports whether this connection joins a leaf and its hub: version 4, the
// capability leaf, and the leaf's HELLO saying so (this side's when leaf, else the
// peer's).
func (s *Session) leafLink(leaf bool) bool {
	if s.info.Version < 4 || !slices.Contains(s.info.Caps, wire.CapLeaf) {
		return false
	}
	if leaf {
		return s.cfg.Leaf
	}
	return s.info.PeerLeaf
}

// onLeafState hands the hub's LEAFSTATE to the leaf. Only a leaf takes one: a hub's state
// of a node that is not its leaf means nothing, and a frame that means nothing is refused.
func (s *Session) onLeafState(f wire.Frame, l *wire.LeafState) {
	if !s.leafLink(true) {
		s.unexpected(f, "LEAFSTATE on a connection that is not a leaf's to its hub (version 4, capability leaf, the leaf's HELLO key 10)")
		return
	}
	s.emit(Event{Kind: EventLeafState, LeafState: l})
}

// ---- placement: what a copy's snapshot holds (HOLDS) ----

// holdsEnd is where the HOLDS of one copy end so far, on the side that sends them and on
// the side that receives them: the last one's table (nil: none yet), its last origin
// (zero: it listed none, and a HOLDS lists no zero origin) and its since, which the
// sender keeps for every frame of a table.
type holdsEnd struct {
	table []byte
	last  wire.OriginID
	since uint64
}

// after says why a HOLDS of table listing seqs does not go forward from e ("" when it
// does): its table is above the last one's, or it is the same table going on with origins
// above the last one's, which listed some. Why: a receiver that took a later frame as the
// table's whole list, or one listing no origin as "held not at all" after origins were
// listed, would take the table's records as held further than they are.
func (e *holdsEnd) after(table []byte, seqs []wire.OriginSeq) string {
	if e.table == nil {
		return ""
	}
	switch t := bytes.Compare(table, e.table); {
	case t < 0:
		return "HOLDS of table " + quote(string(table)) + " after one of table " + quote(string(e.table))
	case t > 0:
		return ""
	case e.last.IsZero():
		return "a second HOLDS of table " + quote(string(table)) + " after one that listed no origin"
	case len(seqs) == 0:
		return "a HOLDS of table " + quote(string(table)) + " listing no origin after one that listed some"
	case bytes.Compare(seqs[0].Origin[:], e.last[:]) <= 0:
		return "a HOLDS of table " + quote(string(table)) + " goes on from origin " + seqs[0].Origin.String() +
			", not above the previous one's last, " + e.last.String()
	}
	return ""
}

// advance moves e to the end of a HOLDS of table listing seqs, with since.
func (e *holdsEnd) advance(table []byte, seqs []wire.OriginSeq, since uint64) {
	e.table, e.since = append(e.table[:0], table...), since
	e.last = wire.OriginID{}
	if len(seqs) > 0 {
		e.last = seqs[len(seqs)-1].Origin
	}
}

// onCopyHolds checks a HOLDS of the copy this side receives (SPEC.md, "HOLDS"): on its
// channel, with COPYBEGIN's checks of the channel; before the copy's first COPYBEGIN; going
// forward from the previous HOLDS by (table, first origin).
func (s *Session) onCopyHolds(f wire.Frame, h *wire.Holds) {
	c := s.inCopy(f, h.Channel)
	if c == nil {
		return
	}
	if c.begun {
		s.unexpected(f, "HOLDS after the copy's COPYBEGIN")
		return
	}
	if why := c.holds.after(h.Table, h.Seqs); why != "" {
		s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, why))
		return
	}
	c.holds.advance(h.Table, h.Seqs, h.Since)
	s.emit(Event{Kind: EventCopyHolds, Holds: h})
}
