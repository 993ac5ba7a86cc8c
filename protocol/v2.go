package protocol

import (
	"slices"
	"strconv"

	"plait/protocol/credit"
	"plait/protocol/wire"
)

// Version 2 (SPEC.md, "Version 2: per-origin channels"): one channel per origin and
// direction on the connection, numbered by its subscriber; per-channel and per-connection
// credit; every entry checked against the channel's chain position.

// maxListEntries bounds the entries of one SUBSCRIBE, UNSUBSCRIBE, CURSOR, HEADS or CREDIT
// this build sends, so that every such body stays within wire.MaxControlBody.
const maxListEntries = 512

// inChannel is a channel this side subscribed to: it receives the origin's entries.
type inChannel struct {
	id      uint32
	origin  wire.OriginID
	seq     uint64 // chain position received and checked
	hash    wire.Hash
	acked   uint64 // durable position acknowledged to the peer, and its chain hash
	ackHash wire.Hash
	win     credit.Receiver
	pending ackQueue[pendingEntry] // checked, handed to the caller, not yet acknowledged
	// queued for the next Ready: an acknowledgement (CURSOR) and a grant check (CREDIT)
	cursorQueued, grantQueued bool
	// resendFrom is the seq a RESEND asked for and not yet received (0: none);
	// lastDiscarded the highest seq dropped meanwhile.
	resendFrom    uint64
	lastDiscarded uint64
}

type pendingEntry struct {
	seq  uint64
	hash wire.Hash
}

// outChannel is a channel the peer subscribed to: this side sends the origin's entries.
type outChannel struct {
	id     uint32
	origin wire.OriginID
	next   uint64 // the seq Send (or V4().Skip) must offer next
	// chain is the chain hash of entry next-1, which next's entry must extend: the
	// subscriber's position's, then the last one sent's (version 2 and 3 need it only until
	// the first Send, and do not know it after a RESEND; version 4 finds it in ends).
	chain wire.Hash
	first bool // the first Send checks the chain against the subscriber's position
	acked uint64
	win   credit.Sender
	// ends (version 4) are the positions the subscriber can be at on the channel: the
	// acknowledged one first, then the end of every entry and run (SKIP) sent above it, in
	// seq order. A RESEND names one of them + 1, and a SKIP sent after it needs its hash,
	// which no entry the sender sends again carries.
	ends []pendingEntry
}

type channelState struct {
	in        map[uint32]*inChannel
	inOrigin  map[wire.OriginID]*inChannel
	lastIn    uint32 // the highest channel number this side allocated
	connIn    credit.Receiver
	connGiven bool // the connection's first CREDIT was sent
	out       map[uint32]*outChannel
	outOrigin map[wire.OriginID]*outChannel
	lastOut   uint32 // the highest channel number the peer opened
	connOut   credit.Sender

	advertised map[wire.OriginID]uint64 // heads this side advertised
	peerHeads  map[wire.OriginID]uint64 // heads the peer advertised
	advFloors  map[wire.OriginID]uint64 // version 3: floors this side advertised
	peerFloors map[wire.OriginID]uint64 // version 3: floors the peer advertised
	copyIn     *copyIn                  // version 3: the copy this side receives (basecopy.go)
	copyOut    *copyOut                 // version 3: the copy this side serves
	rangeOut   *rangeAsk                // version 3: the range this side asked, not yet answered (antientropy.go)
	rangeIn    *rangeAsk                // version 3: the range the peer asked, not yet answered

	cursors []uint32 // channels whose acknowledged position moved since the last Ready
	grants  []uint32 // channels that released credit since the last Ready
	connRel bool     // the connection window received or released bytes since the last Ready
}

func (s *Session) initChannels() {
	v := &s.chans
	v.in, v.inOrigin = map[uint32]*inChannel{}, map[wire.OriginID]*inChannel{}
	v.out, v.outOrigin = map[uint32]*outChannel{}, map[wire.OriginID]*outChannel{}
	v.advertised, v.peerHeads = map[wire.OriginID]uint64{}, map[wire.OriginID]uint64{}
	v.advFloors, v.peerFloors = map[wire.OriginID]uint64{}, map[wire.OriginID]uint64{}
	v.connIn = credit.NewReceiver(uint64(s.limits.MaxSessionBuffer), uint64(s.limits.MaxFrameBody)+wire.HeaderSize)
}

// hasChannels reports whether the session is established at a version with per-origin
// channels: 2, and 3, which keeps version 2's channels and adds to them.
func (s *Session) hasChannels() bool { return s.state == StateEstablished && s.info.Version >= 2 }

// ---- receiving: DATA ----

// onData checks one entry on a channel this side subscribed to.
func (s *Session) onData(f wire.Frame) {
	claimed, v, err := wire.ParseDataUpTo(f.Body, s.txnFormats())
	if err != nil {
		s.fail(wire.FrameError(wire.TxnErrorCode(err), f.Type, f.Offset, err.Error()))
		return
	}
	if !s.hasChannels() {
		s.unexpected(f, "DATA on a connection that is not an established version-2 one")
		return
	}
	size, ok := s.receiveOnConnection(f)
	if !ok {
		return
	}
	ch, stale := s.inChannel(f, f.Channel, "DATA")
	if ch == nil {
		if stale {
			s.releaseConn(size)
		}
		return
	}
	if err := ch.win.Receive(size); err != nil {
		s.fail(wire.FrameError(wire.CodeCreditOverrun, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(ch.id), 10)+": "+err.Error()))
		return
	}
	if v.Origin != ch.origin {
		s.unexpected(f, "an entry of origin "+v.Origin.String()+" on the channel of origin "+ch.origin.String())
		return
	}
	if !s.peerOrigins[v.Origin].named {
		s.unexpected(f, "DATA of origin "+v.Origin.String()+" before its ORIGIN frame")
		return
	}
	s.stats.TxnsReceived++
	h := v.Hash()
	if h != claimed {
		s.divergedIn(ch, v, size, "entry "+strconv.FormatUint(v.Seq, 10)+" does not hash to the chain hash sent with it")
		return
	}
	switch verdict, why := s.checkEntry(ch.seq, ch.hash, &v, h); verdict {
	case entryDuplicate:
		s.stats.Duplicates++
		s.releaseIn(ch, size)
		s.emit(Event{Kind: EventDuplicate, Origin: ch.origin, Txn: v})
	case entryDiverges:
		s.divergedIn(ch, v, size, why)
	case entryExtends:
		ch.seq, ch.hash = v.Seq, h
		ch.resendFrom, ch.lastDiscarded = 0, 0
		ch.pending.push(pendingEntry{seq: v.Seq, hash: h}, int(size))
		s.emit(Event{Kind: EventTxn, Origin: ch.origin, Txn: v})
	default:
		s.releaseIn(ch, size)
		if ch.resendFrom != 0 && v.Seq > ch.lastDiscarded {
			// Still the stream from before the resend: drop it until the resend arrives.
			ch.lastDiscarded = v.Seq
			s.stats.Discarded++
			return
		}
		// A new gap, or the resent stream skipped again: ask (again) from applied + 1.
		s.stats.Gaps++
		s.stats.ResendsRequested++
		ch.resendFrom, ch.lastDiscarded = ch.seq+1, v.Seq
		s.sendControl(&wire.Resend{Channel: ch.id, From: ch.seq + 1})
		s.emit(Event{Kind: EventGap, Origin: ch.origin, Txn: v, Expected: ch.seq + 1})
	}
}

// divergedIn reports a divergence on an incoming channel and closes it: the entry is not
// applied; the peer is told with DIVERGENCE, side subscriber.
func (s *Session) divergedIn(ch *inChannel, v wire.TxnView, size uint64, why string) {
	s.stats.Divergences++
	s.releaseIn(ch, size)
	s.emit(Event{Kind: EventDivergence, Origin: ch.origin, Txn: v, DivergedAt: v.Seq, Seq: ch.seq, Hash: ch.hash,
		Err: wire.NewError(wire.CodeDivergence, "origin "+ch.origin.String()+": "+why)})
	s.sendControl(&wire.Divergence{Channel: ch.id, Seq: ch.seq, Hash: ch.hash, Side: wire.SideSubscriber})
	s.closeIn(ch)
}

// closeIn forgets an incoming channel, releasing what it held of the connection window.
func (s *Session) closeIn(ch *inChannel) {
	s.releaseConn(ch.win.Buffered())
	delete(s.chans.in, ch.id)
	delete(s.chans.inOrigin, ch.origin)
}

// releaseIn frees bytes of a channel and of the connection, to be granted again at Ready.
func (s *Session) releaseIn(ch *inChannel, n uint64) {
	ch.win.Release(n)
	s.releaseConn(n)
	if !ch.grantQueued {
		ch.grantQueued = true
		s.chans.grants = append(s.chans.grants, ch.id)
	}
}

func (s *Session) releaseConn(n uint64) {
	s.chans.connIn.Release(n)
	s.chans.connRel = true
}

// ---- receiving: control frames of version 2 ----

// onUnsubscribe closes the channels the peer no longer takes.
func (s *Session) onUnsubscribe(f wire.Frame, b *wire.Unsubscribe) {
	for _, id := range b.Channels {
		if !s.knownOut(f, id) {
			return
		}
	}
	for _, id := range b.Channels {
		if ch := s.chans.out[id]; ch != nil {
			s.closeOut(ch)
			s.emit(Event{Kind: EventUnsubscribed, Origin: ch.origin})
		}
	}
}

// onCursor takes the peer's durable positions on the channels this side sends.
func (s *Session) onCursor(f wire.Frame, b *wire.Cursor) {
	for _, e := range b.Entries {
		if !s.knownOut(f, e.Channel) {
			return
		}
		switch ch := s.chans.out[e.Channel]; {
		case ch == nil:
		case e.Seq >= ch.next:
			s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "cursor at seq "+strconv.FormatUint(e.Seq, 10)+
				" on channel "+strconv.FormatUint(uint64(e.Channel), 10)+" beyond what was sent"))
			return
		case e.Seq < ch.acked:
			s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "cursor on channel "+strconv.FormatUint(uint64(e.Channel), 10)+" went back"))
			return
		}
	}
	for _, e := range b.Entries {
		if ch := s.chans.out[e.Channel]; ch != nil && e.Seq > ch.acked {
			ch.acked = e.Seq
			ch.ackEnds()
			s.emit(Event{Kind: EventCursor, Origin: ch.origin, Seq: e.Seq, Hash: e.Hash})
		}
	}
}

// onCredit takes the peer's new limits: of the connection (channel 0), a channel this
// side sends, or the copy it serves.
func (s *Session) onCredit(f wire.Frame, b *wire.Credit) {
	for _, e := range b.Entries {
		if e.Channel != 0 && !s.knownOut(f, e.Channel) {
			return
		}
	}
	for _, e := range b.Entries {
		if e.Channel == 0 {
			if s.chans.connOut.Update(e.Limit) {
				s.emit(Event{Kind: EventCredit})
			}
		} else if ch := s.chans.out[e.Channel]; ch != nil && ch.win.Update(e.Limit) {
			s.emit(Event{Kind: EventCredit, Origin: ch.origin})
		} else if c := s.chans.copyOut; c != nil && c.id == e.Channel && c.win.Update(e.Limit) {
			s.emit(Event{Kind: EventCredit})
		}
	}
}

// onResend streams a channel again from a seq sent and not yet acknowledged.
func (s *Session) onResend(f wire.Frame, b *wire.Resend) {
	if !s.knownOut(f, b.Channel) {
		return
	}
	ch := s.chans.out[b.Channel]
	if ch == nil {
		return
	}
	if b.From <= ch.acked || b.From > ch.next {
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "resend from "+strconv.FormatUint(b.From, 10)+
			" outside what is sent and not yet acknowledged ("+strconv.FormatUint(ch.acked+1, 10)+".."+strconv.FormatUint(ch.next, 10)+")"))
		return
	}
	if s.info.Version >= 4 {
		// The subscriber's position is the end of an entry or run sent, or the one it
		// subscribed at: a SKIP sent next joins it with that end's hash.
		h, ok := ch.resendEnd(b.From - 1)
		if !ok {
			s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "resend from "+strconv.FormatUint(b.From, 10)+
				", inside a run this side sent as one SKIP"))
			return
		}
		ch.chain = h
	}
	ch.next, ch.first = b.From, false
	s.stats.ResendsReceived++
	s.emit(Event{Kind: EventResend, Origin: ch.origin, From: b.From})
}

// receiveOnConnection charges a channel-scoped frame (DATA, CHUNK) to the connection's
// window and returns its size; a frame beyond the window fails the session
// (credit-overrun) and reports false.
func (s *Session) receiveOnConnection(f wire.Frame) (uint64, bool) {
	size := uint64(wire.HeaderSize + len(f.Body))
	if err := s.chans.connIn.Receive(size); err != nil {
		s.fail(wire.FrameError(wire.CodeCreditOverrun, f.Type, f.Offset, "connection: "+err.Error()))
		return 0, false
	}
	s.chans.connRel = true // receipts change what can be granted too (a stalled channel's above all)
	return size, true
}

// knownOut checks that the peer opened channel id at some point (it may be closed since:
// frames racing a close are ignored); otherwise it fails the session with bad-channel.
func (s *Session) knownOut(f wire.Frame, id uint32) bool {
	if id > s.chans.lastOut {
		s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(id), 10)+" was never opened"))
		return false
	}
	return true
}

func (s *Session) onSubscribe(f wire.Frame, b *wire.Subscribe) {
	// Entries are ascending by channel (checked by the decoder): the first must be above
	// every channel opened before.
	if first := b.Entries[0].Channel; first <= s.chans.lastOut {
		s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(first), 10)+
			" is not above the last opened, "+strconv.FormatUint(uint64(s.chans.lastOut), 10)))
		return
	}
	if n := len(s.chans.out) + len(b.Entries); n > s.limits.MaxChannels {
		s.fail(wire.FrameError(wire.CodeTooManyChannels, f.Type, f.Offset, "the peer would have "+strconv.Itoa(n)+
			" channels open; the bound is "+strconv.Itoa(s.limits.MaxChannels)))
		return
	}
	for _, e := range b.Entries {
		switch {
		case s.chans.outOrigin[e.Origin] != nil:
			s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "origin "+e.Origin.String()+" is already subscribed"))
			return
		case e.Origin == s.info.PeerOrigin:
			s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "the peer subscribed to its own origin"))
			return
		}
	}
	for _, e := range b.Entries {
		s.chans.lastOut = e.Channel
		ch := &outChannel{id: e.Channel, origin: e.Origin, next: e.Seq + 1, chain: e.Hash, first: true, acked: e.Seq}
		if s.info.Version >= 4 {
			ch.ends = []pendingEntry{{seq: e.Seq, hash: e.Hash}}
		}
		ch.win.Update(e.Credit)
		s.chans.out[ch.id] = ch
		s.chans.outOrigin[ch.origin] = ch
		s.emit(Event{Kind: EventSubscribed, Origin: e.Origin, Seq: e.Seq, Hash: e.Hash})
	}
}

func (s *Session) closeOut(ch *outChannel) {
	delete(s.chans.out, ch.id)
	delete(s.chans.outOrigin, ch.origin)
}

func (s *Session) onDivergence(f wire.Frame, b *wire.Divergence) {
	ev := Event{Kind: EventDivergence, Seq: b.Seq, Hash: b.Hash, DivergedAt: b.Seq, ByPeer: true}
	if b.Side == wire.SideSubscriber { // about a channel this side sends on
		if !s.knownOut(f, b.Channel) {
			return
		}
		ch := s.chans.out[b.Channel]
		if ch == nil {
			return
		}
		ev.Origin, ev.Outgoing = ch.origin, true
		s.closeOut(ch)
	} else { // the peer, sending, found this side's position not in its log
		ch := s.chans.in[b.Channel]
		if ch == nil {
			if b.Channel > s.chans.lastIn {
				s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(b.Channel), 10)+" was never opened"))
			}
			return
		}
		ev.Origin = ch.origin
		s.closeIn(ch)
	}
	s.stats.Divergences++
	ev.Err = wire.NewError(wire.CodeDivergence, "the peer reports that origin "+ev.Origin.String()+" diverged at seq "+strconv.FormatUint(b.Seq, 10))
	s.emit(ev)
}

func (s *Session) onHeads(f wire.Frame, b *wire.Heads) {
	// Heads are of named origins only, and names count against MaxOrigins: the heads a
	// peer advertises are bounded by the ORIGIN frames before them.
	for _, h := range b.Heads {
		switch {
		case !s.peerOrigins[h.Origin].named:
			s.unexpected(f, "a head of origin "+h.Origin.String()+" before its ORIGIN frame")
			return
		case h.Seq < s.chans.peerHeads[h.Origin]:
			s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "the head of origin "+h.Origin.String()+" went back"))
			return
		}
	}
	if s.info.Version < 3 {
		// Floors are version 3's: a version-2 peer sends none, and a receiver ignores them,
		// judging the rest as version 2 does.
		if len(b.Heads) == 0 && len(b.Withdrawn) == 0 {
			s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "HEADS with no head and nothing withdrawn"))
			return
		}
		b.Floors = nil
	}
	for _, fl := range b.Floors {
		switch {
		case !s.peerOrigins[fl.Origin].named:
			s.unexpected(f, "a floor of origin "+fl.Origin.String()+" before its ORIGIN frame")
			return
		case fl.Seq < s.chans.peerFloors[fl.Origin]:
			s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "the floor of origin "+fl.Origin.String()+" went back"))
			return
		}
	}
	for _, h := range b.Heads {
		s.chans.peerHeads[h.Origin] = h.Seq
	}
	for _, o := range b.Withdrawn {
		delete(s.chans.peerHeads, o)
	}
	for _, fl := range b.Floors {
		s.chans.peerFloors[fl.Origin] = fl.Seq
	}
	s.emit(Event{Kind: EventHeads, Heads: b})
}

// onPurged closes a channel this side subscribed to that the sender cannot serve: it asked
// below the sender's floor.
func (s *Session) onPurged(f wire.Frame, b *wire.Purged) {
	ch := s.chans.in[b.Channel]
	if ch == nil {
		if b.Channel > s.chans.lastIn {
			s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(b.Channel), 10)+" was never opened"))
		}
		return // it raced this side's close
	}
	if b.Seq <= ch.seq {
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "a floor at "+strconv.FormatUint(b.Seq, 10)+
			" is not above the position asked from, "+strconv.FormatUint(ch.seq, 10)))
		return
	}
	s.closeIn(ch)
	s.emit(Event{Kind: EventPurged, Origin: ch.origin, Seq: b.Seq, Hash: b.Hash})
}

// flushPending reports whether flushV2 may queue something: acknowledgements or credit
// the caller's calls released (V2().Ack), or bytes received or released on the
// connection's window. Without it a caller that asks HasReady before Ready would keep an
// acknowledgement until the next message arrives, and a sender out of credit would wait
// for it.
func (v *channelState) flushPending() bool {
	return len(v.cursors) > 0 || len(v.grants) > 0 || v.connRel
}

// flushV2 queues, at Ready, the acknowledgements and credit the caller's calls released:
// one CURSOR and one CREDIT frame for all channels, in channel order.
func (s *Session) flushV2() {
	v := &s.chans
	if len(v.cursors) > 0 {
		slices.Sort(v.cursors)
		var es []wire.CursorEntry
		for _, id := range v.cursors {
			if ch := v.in[id]; ch != nil {
				ch.cursorQueued = false
				es = append(es, wire.CursorEntry{Channel: id, Seq: ch.acked, Hash: ch.ackHash})
			}
		}
		v.cursors = v.cursors[:0]
		s.sendChunked(len(es), func(lo, hi int) wire.Body { return &wire.Cursor{Entries: es[lo:hi]} })
	}
	var cs []wire.CreditEntry
	if v.connRel {
		v.connRel = false
		if limit, ok := v.connIn.Grant(); ok {
			cs = append(cs, wire.CreditEntry{Channel: 0, Limit: limit})
		}
	}
	if len(v.grants) > 0 {
		slices.Sort(v.grants)
		for _, id := range v.grants {
			if ch := v.in[id]; ch != nil {
				ch.grantQueued = false
				if limit, ok := ch.win.Grant(); ok {
					cs = append(cs, wire.CreditEntry{Channel: id, Limit: limit})
				}
			} else if e, ok := s.copyGrant(id); ok {
				cs = append(cs, e)
			}
		}
		v.grants = v.grants[:0]
	}
	s.sendChunked(len(cs), func(lo, hi int) wire.Body { return &wire.Credit{Entries: cs[lo:hi]} })
}

// sendChunked sends a list of n entries as frames of at most maxListEntries each, none
// of them larger than the peer's frame limit.
func (s *Session) sendChunked(n int, body func(lo, hi int) wire.Body) {
	for lo := 0; lo < n; {
		lo = s.sendFitting(lo, min(n, lo+maxListEntries), body)
	}
}

// sendFitting sends entries lo..hi of a list as one control frame, or as many of them
// from lo as the peer's frame limit takes (halving until the body fits, one entry at
// least); it returns where the next frame starts. Why: the lists were bounded by their
// count alone, so at a peer's small frame limit (1 KiB is allowed) a HEADS, SUBSCRIBE or
// FLOORS frame of some 30 origins was refused with frame-too-large, and the connection
// closed and was made again for ever. A list that fits is sent exactly as before.
func (s *Session) sendFitting(lo, hi int, body func(lo, hi int) wire.Body) int {
	b := body(lo, hi)
	stamped := s.stamp(b) // version 4 (output.go's sendControl): each try, echoed once sent
	enc, err := b.AppendBody(nil)
	for err == nil && len(enc) > s.peerFrame && hi-lo > 1 {
		hi = lo + (hi-lo)/2
		b = body(lo, hi)
		s.stamp(b)
		enc, err = b.AppendBody(nil)
	}
	if err != nil {
		if s.state != StateClosed {
			s.closed(wire.NewError(wire.CodeInternal, "encoding "+b.FrameType().String()+": "+err.Error()), false)
		}
		return hi
	}
	s.sendRaw(b.FrameType(), 0, enc)
	if stamped {
		s.echoed()
	}
	return hi
}

// inChannel finds the channel this side subscribed to that a DATA or SKIP (what) names: nil
// when there is none, after failing the session for a channel never opened or a copy's,
// or, with stale, counting one closed since (the frame was in flight when it closed).
func (s *Session) inChannel(f wire.Frame, id uint32, what string) (ch *inChannel, stale bool) {
	if ch := s.chans.in[id]; ch != nil {
		return ch, false
	}
	if c := s.chans.copyIn; c != nil && c.id == id {
		s.unexpected(f, what+" on copy channel "+strconv.FormatUint(uint64(id), 10))
		return nil, false
	}
	if id > s.chans.lastIn {
		s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, what+" on channel "+strconv.FormatUint(uint64(id), 10)+", which this side never opened"))
		return nil, false
	}
	s.stats.Stale++
	return nil, true
}
