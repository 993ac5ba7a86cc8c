package protocol

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strconv"

	"plait/protocol/credit"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

func (s *Session) needV2(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version != 2 {
		return wire.Errorf(wire.CodeInvalidState, cmd+" on a version-"+strconv.FormatUint(s.info.Version, 10)+" connection")
	}
	return nil
}

// SubscribeOrigins opens one channel per origin (version 2): the peer streams each origin's
// entries after the given position, relayed origins included. The first call also grants
// the connection's credit. Each origin may have one open channel at a time.
func (s *Session) SubscribeOrigins(cursors []vector.Entry) error {
	s.begin()
	if err := s.needV2("SubscribeOrigins"); err != nil {
		return err
	}
	if len(cursors) > s.limits.MaxOrigins {
		return wire.Errorf(wire.CodeTooManyOrigins, "a vector of "+strconv.Itoa(len(cursors))+" origins exceeds "+strconv.Itoa(s.limits.MaxOrigins))
	}
	if len(s.v2.in)+len(cursors) > s.limits.MaxChannels {
		return wire.Errorf(wire.CodeTooManyChannels, strconv.Itoa(len(s.v2.in))+" channels are open; "+strconv.Itoa(len(cursors))+" more exceed "+strconv.Itoa(s.limits.MaxChannels))
	}
	seen := make(map[wire.OriginID]bool, len(cursors))
	for _, c := range cursors {
		if err := c.Check(); err != nil {
			return wire.Errorf(wire.CodeBadArgument, err.Error())
		}
		switch {
		case seen[c.Origin] || s.v2.inOrigin[c.Origin] != nil:
			return wire.Errorf(wire.CodeBadArgument, "origin "+c.Origin.String()+" is already subscribed")
		case c.Origin == s.cfg.Origin:
			return wire.Errorf(wire.CodeBadArgument, "a node never subscribes to its own origin")
		case c.Origin == s.info.PeerOrigin:
			// allowed: the peer's own origin is the usual first channel
		}
		seen[c.Origin] = true
	}
	if !s.v2.connGiven {
		s.v2.connGiven = true
		s.sendControl(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: s.v2.connIn.Limit()}}})
	}
	window, frame := uint64(s.limits.MaxChannelBuffer), uint64(s.limits.MaxFrameBody)+wire.HeaderSize
	es := make([]wire.SubscribeEntry, 0, len(cursors))
	for _, c := range cursors {
		s.v2.lastIn++
		ch := &inChannel{id: s.v2.lastIn, origin: c.Origin, seq: c.Seq, hash: c.Hash, acked: c.Seq, ackHash: c.Hash,
			win: credit.NewReceiver(window, frame)}
		s.v2.in[ch.id] = ch
		s.v2.inOrigin[ch.origin] = ch
		es = append(es, wire.SubscribeEntry{Channel: ch.id, Origin: c.Origin, Seq: c.Seq, Hash: c.Hash, Credit: ch.win.Limit()})
	}
	s.sendChunked(len(es), func(lo, hi int) wire.Body { return &wire.Subscribe{Entries: es[lo:hi]} })
	return nil
}

// UnsubscribeOrigins closes the channels of these origins (version 2). Entries already in
// flight are dropped on arrival and counted as stale.
func (s *Session) UnsubscribeOrigins(origins []wire.OriginID) error {
	s.begin()
	if err := s.needV2("UnsubscribeOrigins"); err != nil {
		return err
	}
	var ids []uint32
	for _, o := range origins {
		ch := s.v2.inOrigin[o]
		if ch == nil {
			return wire.Errorf(wire.CodeBadArgument, "origin "+o.String()+" has no open channel")
		}
		if !slices.Contains(ids, ch.id) {
			ids = append(ids, ch.id)
		}
	}
	for _, id := range ids {
		s.closeIn(s.v2.in[id])
	}
	slices.Sort(ids)
	s.sendChunked(len(ids), func(lo, hi int) wire.Body { return &wire.Unsubscribe{Channels: ids[lo:hi]} })
	return nil
}

// AckOrigin tells the peer that the origin's entries up to seq are durable here (version
// 2): the acknowledgement travels in the next CURSOR and frees their credit. Call it only
// after the store reported durability.
func (s *Session) AckOrigin(origin wire.OriginID, seq uint64) error {
	s.begin()
	if err := s.needV2("AckOrigin"); err != nil {
		return err
	}
	ch := s.v2.inOrigin[origin]
	switch {
	case ch == nil:
		return wire.Errorf(wire.CodeInvalidState, "origin "+origin.String()+" has no open channel (closed by divergence or unsubscribe)")
	case seq > ch.seq:
		return wire.Errorf(wire.CodeBadArgument, "ack of seq "+strconv.FormatUint(seq, 10)+" beyond the received "+strconv.FormatUint(ch.seq, 10))
	case seq < ch.acked:
		return wire.Errorf(wire.CodeBadArgument, "ack went back from "+strconv.FormatUint(ch.acked, 10)+" to "+strconv.FormatUint(seq, 10))
	case seq == ch.acked:
		return nil
	}
	var freed uint64
	for ch.head < len(ch.pending) && ch.pending[ch.head].seq <= seq {
		freed += ch.pending[ch.head].size
		ch.ackHash = ch.pending[ch.head].hash
		ch.head++
	}
	if ch.head == len(ch.pending) { // reuse the queue's memory; compact when half is spent
		ch.pending, ch.head = ch.pending[:0], 0
	} else if ch.head > len(ch.pending)/2 {
		ch.pending, ch.head = ch.pending[:copy(ch.pending, ch.pending[ch.head:])], 0
	}
	ch.acked = seq
	s.releaseIn(ch, freed)
	if !ch.cursorQueued {
		ch.cursorQueued = true
		s.v2.cursors = append(s.v2.cursors, ch.id)
	}
	return nil
}

// Credit is how many DATA bytes (header included) Send may queue now for the origin: the
// least of its channel's and the connection's credit; 0 when the peer has not subscribed.
func (s *Session) Credit(origin wire.OriginID) int {
	ch := s.v2.outOrigin[origin]
	if ch == nil || !s.isV2() {
		return 0
	}
	return int(min(ch.win.Available(), s.v2.connOut.Available()))
}

// OriginCredit is the credit Send has for one origin.
type OriginCredit struct {
	Origin wire.OriginID
	Credit int
}

// Credits lists the credit of every origin the peer subscribed to, sorted by origin.
func (s *Session) Credits() []OriginCredit {
	if !s.isV2() || len(s.v2.outOrigin) == 0 {
		return nil
	}
	out := make([]OriginCredit, 0, len(s.v2.outOrigin))
	for o := range s.v2.outOrigin {
		out = append(out, OriginCredit{Origin: o, Credit: s.Credit(o)})
	}
	slices.SortFunc(out, func(a, b OriginCredit) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	return out
}

// DataFrameSize is the size of the DATA frame that carries a transaction encoding of n
// bytes: what Send takes from the credit.
func DataFrameSize(n int) int { return wire.HeaderSize + wire.DataHeader + n }

// Send queues one transaction on the channel of its origin (version 2), after the peer
// subscribed to the origin. Entries go in seq order from the subscriber's position (or from
// a RESEND's). It is refused with no-credit beyond Credit, send-buffer-full beyond
// SendBudget and frame-too-large beyond the peer's frame limit; nothing is queued then.
//
// The first entry on a channel must extend the subscriber's position. When it does not, the
// two logs disagree: Send queues a DIVERGENCE report instead of the entry, closes the
// channel, emits EventDivergence and returns that divergence as its error (class protocol,
// not local: it is about the logs, and the connection goes on).
func (s *Session) Send(txn []byte) error {
	s.begin()
	if err := s.needV2("Send"); err != nil {
		return err
	}
	v, err := wire.ParseTxn(txn)
	if err != nil {
		return wire.Errorf(wire.CodeBadArgument, "transaction: "+err.Error())
	}
	ch := s.v2.outOrigin[v.Origin]
	if ch == nil {
		return wire.Errorf(wire.CodeInvalidState, "the peer has not subscribed to origin "+v.Origin.String())
	}
	if v.Seq != ch.next {
		return wire.Errorf(wire.CodeBadArgument, "seq "+strconv.FormatUint(v.Seq, 10)+" where the channel of origin "+
			v.Origin.String()+" needs "+strconv.FormatUint(ch.next, 10))
	}
	name, named := s.names[v.Origin]
	if !named {
		return wire.Errorf(wire.CodeBadArgument, "origin "+v.Origin.String()+" has no name: SetOriginName first, its ORIGIN frame precedes its entries")
	}
	if ch.first && v.Prev != ch.chain {
		// This side's log does not extend the subscriber's position: both logs cannot be
		// right. Report it on the channel and close it.
		s.stats.Divergences++
		s.sendControl(&wire.Divergence{Channel: ch.id, Seq: v.Seq - 1, Hash: v.Prev, Side: wire.SideSender})
		s.closeOut(ch)
		err := wire.Errorf(wire.CodeDivergence, "origin "+v.Origin.String()+": the entry at seq "+strconv.FormatUint(v.Seq, 10)+
			" does not extend the subscriber's position; the channel is closed")
		s.emit(Event{Kind: EventDivergence, Origin: v.Origin, Seq: v.Seq - 1, Hash: v.Prev, Err: err, Outgoing: true})
		return err
	}
	size := DataFrameSize(len(txn))
	if size-wire.HeaderSize > s.peerFrame {
		return wire.Errorf(wire.CodeFrameTooLarge, "a DATA body of "+strconv.Itoa(size-wire.HeaderSize)+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	}
	if uint64(size) > min(ch.win.Available(), s.v2.connOut.Available()) {
		return wire.Errorf(wire.CodeNoCredit, "a DATA frame of "+strconv.Itoa(size)+" bytes exceeds the credit of "+strconv.Itoa(s.Credit(v.Origin)))
	}
	origin, err := s.originFrame(v.Origin, name)
	if err != nil {
		return err
	}
	if s.outBytes > 0 && s.outBytes+size+len(origin) > s.limits.MaxSendBuffer {
		return wire.Errorf(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.queueOrigin(v.Origin, origin)
	ch.win.Send(uint64(size))
	s.v2.connOut.Send(uint64(size))
	ch.next++
	ch.first = false
	s.stats.TxnsSent++
	s.reserve(size)
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: wire.TypeData, Channel: ch.id, Length: uint32(size - wire.HeaderSize)})
	h := sha256.Sum256(txn)
	s.cur = append(s.cur, h[:]...)
	s.cur = append(s.cur, txn...)
	return nil
}

// originFrame returns the ORIGIN frame (header and body) to queue before the origin's first
// mention on this connection, or nil when it was sent already.
func (s *Session) originFrame(o wire.OriginID, name string) ([]byte, error) {
	if s.announced[o] {
		return nil, nil
	}
	f, err := wire.AppendFrame(nil, 0, 0, &wire.Origin{Origin: o, Name: name})
	if err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "encoding ORIGIN: "+err.Error())
	}
	return f, nil
}

func (s *Session) queueOrigin(o wire.OriginID, frame []byte) {
	if frame == nil {
		return
	}
	s.announced[o] = true
	s.reserve(len(frame))
	s.cur = append(s.cur, frame...)
}

// AdvertiseHeads tells the peer which origins this side holds and how far (version 2).
// Only heads that advanced since the last call are sent; heads never go back. Every origin
// needs a name (SetOriginName); its ORIGIN frame goes first.
func (s *Session) AdvertiseHeads(heads []wire.Head) error {
	s.begin()
	if err := s.needV2("AdvertiseHeads"); err != nil {
		return err
	}
	var fresh []wire.Head
	added := 0
	seen := make(map[wire.OriginID]bool, len(heads))
	for _, h := range heads {
		old, known := s.v2.advertised[h.Origin]
		switch {
		case h.Origin.IsZero() || h.Seq == 0:
			return wire.Errorf(wire.CodeBadArgument, "a head needs a non-zero origin and seq >= 1")
		case seen[h.Origin]:
			return wire.Errorf(wire.CodeBadArgument, "origin "+h.Origin.String()+" twice in one call")
		case h.Seq < old:
			return wire.Errorf(wire.CodeBadArgument, "the head of origin "+h.Origin.String()+" would go back")
		case s.names[h.Origin] == "":
			return wire.Errorf(wire.CodeBadArgument, "origin "+h.Origin.String()+" has no name: SetOriginName first")
		case h.Seq == old:
			continue
		case !known:
			added++
		}
		seen[h.Origin] = true
		fresh = append(fresh, h)
	}
	if len(s.v2.advertised)+added > s.limits.MaxOrigins {
		return wire.Errorf(wire.CodeTooManyOrigins, "advertising more than "+strconv.Itoa(s.limits.MaxOrigins)+" origins")
	}
	slices.SortFunc(fresh, func(a, b wire.Head) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	for _, h := range fresh {
		frame, err := s.originFrame(h.Origin, s.names[h.Origin])
		if err != nil {
			return err
		}
		s.queueOrigin(h.Origin, frame)
		s.v2.advertised[h.Origin] = h.Seq
	}
	s.sendChunked(len(fresh), func(lo, hi int) wire.Body { return &wire.Heads{Heads: fresh[lo:hi]} })
	return nil
}

// WithdrawHeads tells the peer this side no longer offers these origins (version 2).
// Origins never advertised are skipped.
func (s *Session) WithdrawHeads(origins []wire.OriginID) error {
	s.begin()
	if err := s.needV2("WithdrawHeads"); err != nil {
		return err
	}
	var gone []wire.OriginID
	for _, o := range origins {
		if _, ok := s.v2.advertised[o]; ok && !slices.Contains(gone, o) {
			delete(s.v2.advertised, o)
			gone = append(gone, o)
		}
	}
	slices.SortFunc(gone, func(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) })
	s.sendChunked(len(gone), func(lo, hi int) wire.Body { return &wire.Heads{Withdrawn: gone[lo:hi]} })
	return nil
}
