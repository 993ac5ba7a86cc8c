package protocol

import (
	"bytes"
	"slices"
	"strconv"

	"plait/protocol/credit"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// V2Commands are the commands of the per-origin channels, which a connection of version
// 2 or 3 takes (Session.V2); on a version-1 connection they are refused with invalid-state
// (Credit and Credits answer 0 and nil).
type V2Commands interface {
	// Subscribe opens one channel per origin: the peer streams each origin's entries after
	// the given position, relayed origins included. The first call also grants the
	// connection's credit. Each origin may have one open channel at a time.
	Subscribe(cursors []vector.Entry) error
	// Unsubscribe closes the channels of these origins. Entries already in flight are
	// dropped on arrival and counted as stale. An origin with no open channel refuses the
	// call with invalid-state, nothing closed: the session closes a channel on its own
	// (a divergence, PURGED) while it reads a message, before the caller handles the
	// events before that one.
	Unsubscribe(origins []wire.OriginID) error
	// Ack tells the peer that the origin's entries up to seq are durable here: the
	// acknowledgement travels in the next CURSOR and frees their credit. Call it only after
	// the store reported durability.
	Ack(origin wire.OriginID, seq uint64) error
	// Send queues one transaction on the channel of its origin, after the peer subscribed
	// to the origin. Entries go in seq order from the subscriber's position (or from a
	// RESEND's). It is refused with no-credit beyond Credit, send-buffer-full beyond
	// SendBudget and frame-too-large beyond the peer's frame limit, and a transaction of
	// format 2 (a token) on a connection below version 4 with bad-argument; nothing is
	// queued then.
	//
	// The first entry on a channel must extend the subscriber's position. When it does not,
	// the two logs disagree: Send queues a DIVERGENCE report instead of the entry, closes
	// the channel, emits EventDivergence and returns that divergence as its error (class
	// protocol, not local: it is about the logs, and the connection goes on).
	Send(txn []byte) error
	// Credit is how many DATA bytes (header included) Send may queue now for the origin:
	// the least of its channel's and the connection's credit; 0 when the peer has not
	// subscribed.
	Credit(origin wire.OriginID) int
	// Credits lists the credit of every origin the peer subscribed to, sorted by origin.
	Credits() []OriginCredit
	// AdvertiseHeads tells the peer which origins this side holds and how far. Only heads
	// that advanced since the last call are sent; heads never go back. Every origin needs a
	// name (SetOriginName); its ORIGIN frame goes first.
	AdvertiseHeads(heads []wire.Head) error
	// WithdrawHeads tells the peer this side no longer offers these origins. Origins never
	// advertised are skipped.
	WithdrawHeads(origins []wire.OriginID) error
}

// V2 returns the version-2 commands of the session.
func (s *Session) V2() V2Commands { return (*v2Commands)(s) }

// v2Commands is a Session seen through its version-2 commands.
type v2Commands Session

func (s *Session) needV2(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version < 2 {
		return wire.NewError(wire.CodeInvalidState, cmd+" on a version-"+strconv.FormatUint(s.info.Version, 10)+" connection")
	}
	return nil
}

func (c *v2Commands) Subscribe(cursors []vector.Entry) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("Subscribe"); err != nil {
		return err
	}
	if len(cursors) > s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "a vector of "+strconv.Itoa(len(cursors))+" origins exceeds "+strconv.Itoa(s.limits.MaxOrigins))
	}
	if len(s.chans.in)+len(cursors) > s.limits.MaxChannels {
		return wire.NewError(wire.CodeTooManyChannels, strconv.Itoa(len(s.chans.in))+" channels are open; "+strconv.Itoa(len(cursors))+" more exceed "+strconv.Itoa(s.limits.MaxChannels))
	}
	seen := make(map[wire.OriginID]bool, len(cursors))
	for _, c := range cursors {
		if err := c.Check(); err != nil {
			return wire.NewError(wire.CodeBadArgument, err.Error())
		}
		switch {
		case seen[c.Origin] || s.chans.inOrigin[c.Origin] != nil:
			return wire.NewError(wire.CodeBadArgument, "origin "+c.Origin.String()+" is already subscribed")
		case c.Origin == s.cfg.Origin:
			return wire.NewError(wire.CodeBadArgument, "a node never subscribes to its own origin")
		case c.Origin == s.info.PeerOrigin:
			// allowed: the peer's own origin is the usual first channel
		}
		seen[c.Origin] = true
	}
	if !s.chans.connGiven {
		s.chans.connGiven = true
		s.sendControl(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: s.chans.connIn.Limit()}}})
	}
	window, frame := uint64(s.limits.MaxChannelBuffer), uint64(s.limits.MaxFrameBody)+wire.HeaderSize
	es := make([]wire.SubscribeEntry, 0, len(cursors))
	for _, c := range cursors {
		s.chans.lastIn++
		ch := &inChannel{id: s.chans.lastIn, origin: c.Origin, seq: c.Seq, hash: c.Hash, acked: c.Seq, ackHash: c.Hash,
			win: credit.NewReceiver(window, frame)}
		s.chans.in[ch.id] = ch
		s.chans.inOrigin[ch.origin] = ch
		es = append(es, wire.SubscribeEntry{Channel: ch.id, Origin: c.Origin, Seq: c.Seq, Hash: c.Hash, Credit: ch.win.Limit()})
	}
	s.sendChunked(len(es), func(lo, hi int) wire.Body { return &wire.Subscribe{Entries: es[lo:hi]} })
	return nil
}

func (c *v2Commands) Unsubscribe(origins []wire.OriginID) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("Unsubscribe"); err != nil {
		return err
	}
	var ids []uint32
	for _, o := range origins {
		ch := s.chans.inOrigin[o]
		if ch == nil {
			// As Ack: the session may have closed it within the input whose events the
			// caller is handling (a divergence or PURGED further on in the same message),
			// and the event that says so follows.
			return wire.NewError(wire.CodeInvalidState, "origin "+o.String()+" has no open channel (closed by divergence or unsubscribe)")
		}
		if !slices.Contains(ids, ch.id) {
			ids = append(ids, ch.id)
		}
	}
	for _, id := range ids {
		s.closeIn(s.chans.in[id])
	}
	slices.Sort(ids)
	s.sendChunked(len(ids), func(lo, hi int) wire.Body { return &wire.Unsubscribe{Channels: ids[lo:hi]} })
	return nil
}

func (c *v2Commands) Ack(origin wire.OriginID, seq uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("Ack"); err != nil {
		return err
	}
	ch := s.chans.inOrigin[origin]
	switch {
	case ch == nil:
		return wire.NewError(wire.CodeInvalidState, "origin "+origin.String()+" has no open channel (closed by divergence or unsubscribe)")
	case seq > ch.seq:
		return wire.NewError(wire.CodeBadArgument, "ack of seq "+strconv.FormatUint(seq, 10)+" beyond the received "+strconv.FormatUint(ch.seq, 10))
	case seq < ch.acked:
		return wire.NewError(wire.CodeBadArgument, "ack went back from "+strconv.FormatUint(ch.acked, 10)+" to "+strconv.FormatUint(seq, 10))
	case seq == ch.acked:
		return nil
	}
	var freed uint64
	for e, ok := ch.pending.front(); ok && e.seq <= seq; e, ok = ch.pending.front() {
		freed += uint64(ch.pending.pop())
		ch.ackHash = e.hash
	}
	ch.pending.compact()
	ch.acked = seq
	s.releaseIn(ch, freed)
	if !ch.cursorQueued {
		ch.cursorQueued = true
		s.chans.cursors = append(s.chans.cursors, ch.id)
	}
	return nil
}

func (c *v2Commands) Credit(origin wire.OriginID) int { return (*Session)(c).credit(origin) }

// credit is V2().Credit.
func (s *Session) credit(origin wire.OriginID) int {
	ch := s.chans.outOrigin[origin]
	if ch == nil || !s.hasChannels() {
		return 0
	}
	return int(min(ch.win.Available(), s.chans.connOut.Available()))
}

// OriginCredit is the credit Send has for one origin.
type OriginCredit struct {
	Origin wire.OriginID
	Credit int
}

func (c *v2Commands) Credits() []OriginCredit {
	s := (*Session)(c)
	if !s.hasChannels() || len(s.chans.outOrigin) == 0 {
		return nil
	}
	out := make([]OriginCredit, 0, len(s.chans.outOrigin))
	for o := range s.chans.outOrigin {
		out = append(out, OriginCredit{Origin: o, Credit: s.credit(o)})
	}
	slices.SortFunc(out, func(a, b OriginCredit) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	return out
}

// DataFrameSize is the size of the DATA frame that carries a transaction encoding of n
// bytes: what Send takes from the credit.
func DataFrameSize(n int) int { return wire.HeaderSize + wire.DataHeader + n }

func (c *v2Commands) Send(txn []byte) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("Send"); err != nil {
		return err
	}
	v, err := wire.ParseTxnUpTo(txn, s.txnFormats())
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "transaction: "+err.Error())
	}
	ch := s.chans.outOrigin[v.Origin]
	if ch == nil {
		return wire.NewError(wire.CodeInvalidState, "the peer has not subscribed to origin "+v.Origin.String())
	}
	if v.Seq != ch.next {
		return wire.NewError(wire.CodeBadArgument, "seq "+strconv.FormatUint(v.Seq, 10)+" where the channel of origin "+
			v.Origin.String()+" needs "+strconv.FormatUint(ch.next, 10))
	}
	name, named := s.names[v.Origin]
	if !named {
		return wire.NewError(wire.CodeBadArgument, "origin "+v.Origin.String()+" has no name: SetOriginName first, its ORIGIN frame precedes its entries")
	}
	if ch.first && v.Prev != ch.chain {
		// This side's log does not extend the subscriber's position: both logs cannot be
		// right. Report it on the channel and close it.
		s.stats.Divergences++
		s.sendControl(&wire.Divergence{Channel: ch.id, Seq: v.Seq - 1, Hash: v.Prev, Side: wire.SideSender})
		s.closeOut(ch)
		err := wire.NewError(wire.CodeDivergence, "origin "+v.Origin.String()+": the entry at seq "+strconv.FormatUint(v.Seq, 10)+
			" does not extend the subscriber's position; the channel is closed")
		s.emit(Event{Kind: EventDivergence, Origin: v.Origin, Seq: v.Seq - 1, Hash: v.Prev, DivergedAt: v.Seq - 1, Err: err, Outgoing: true})
		return err
	}
	size := DataFrameSize(len(txn))
	if size-wire.HeaderSize > s.peerFrame {
		return wire.NewError(wire.CodeFrameTooLarge, "a DATA body of "+strconv.Itoa(size-wire.HeaderSize)+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	}
	if uint64(size) > min(ch.win.Available(), s.chans.connOut.Available()) {
		return wire.NewError(wire.CodeNoCredit, "a DATA frame of "+strconv.Itoa(size)+" bytes exceeds the credit of "+strconv.Itoa(s.credit(v.Origin)))
	}
	origin, err := s.originFrame(v.Origin, name)
	if err != nil {
		return err
	}
	if s.outBytes > 0 && s.outBytes+size+len(origin) > s.limits.MaxSendBuffer {
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.queueOrigin(v.Origin, origin)
	ch.win.Send(uint64(size))
	s.chans.connOut.Send(uint64(size))
	h := wire.Sum256(txn)
	ch.sent(v.Seq, h, s.info.Version >= 4)
	ch.first = false
	s.stats.TxnsSent++
	s.reserve(wire.TypeData, size)
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: wire.TypeData, Channel: ch.id, Length: uint32(size - wire.HeaderSize)})
	s.cur = append(s.cur, h[:]...)
	s.cur = append(s.cur, txn...)
	return nil
}

func (c *v2Commands) AdvertiseHeads(heads []wire.Head) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("AdvertiseHeads"); err != nil {
		return err
	}
	var fresh []wire.Head
	added := 0
	seen := make(map[wire.OriginID]bool, len(heads))
	for _, h := range heads {
		old, known := s.chans.advertised[h.Origin]
		switch {
		case h.Origin.IsZero() || h.Seq == 0:
			return wire.NewError(wire.CodeBadArgument, "a head needs a non-zero origin and seq >= 1")
		case seen[h.Origin]:
			return wire.NewError(wire.CodeBadArgument, "origin "+h.Origin.String()+" twice in one call")
		case h.Seq < old:
			return wire.NewError(wire.CodeBadArgument, "the head of origin "+h.Origin.String()+" would go back")
		case s.names[h.Origin] == "":
			return wire.NewError(wire.CodeBadArgument, "origin "+h.Origin.String()+" has no name: SetOriginName first")
		case h.Seq == old:
			continue
		case !known:
			added++
		}
		seen[h.Origin] = true
		fresh = append(fresh, h)
	}
	if len(s.chans.advertised)+added > s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "advertising more than "+strconv.Itoa(s.limits.MaxOrigins)+" origins")
	}
	slices.SortFunc(fresh, func(a, b wire.Head) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	for _, h := range fresh {
		frame, err := s.originFrame(h.Origin, s.names[h.Origin])
		if err != nil {
			return err
		}
		s.queueOrigin(h.Origin, frame)
		s.chans.advertised[h.Origin] = h.Seq
	}
	s.sendChunked(len(fresh), func(lo, hi int) wire.Body { return &wire.Heads{Heads: fresh[lo:hi]} })
	return nil
}

func (c *v2Commands) WithdrawHeads(origins []wire.OriginID) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV2("WithdrawHeads"); err != nil {
		return err
	}
	var gone []wire.OriginID
	for _, o := range origins {
		if _, ok := s.chans.advertised[o]; ok && !slices.Contains(gone, o) {
			delete(s.chans.advertised, o)
			gone = append(gone, o)
		}
	}
	slices.SortFunc(gone, func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) })
	s.sendChunked(len(gone), func(lo, hi int) wire.Body { return &wire.Heads{Withdrawn: gone[lo:hi]} })
	return nil
}
