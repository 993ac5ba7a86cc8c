package protocol

import (
	"strconv"

	"plait/protocol/wire"
)

// Version 1 (SPEC.md, "Version 1: shared cursor"): one stream per connection and
// direction, all origins interleaved in the sender's arrival order and positioned by one
// scalar cursor. The receiver checks every entry against its receive vector (what it
// applied of each origin, raised by Observe). Memory is bounded by the caller not reading
// while ReadPaused, since version 1 has no credits.

// v1State is what a session holds for a version-1 stream.
type v1State struct {
	// sending side: the peer subscribed, the last position offered and the last one the
	// peer acknowledged
	peerSubscribed bool
	lastSent       uint64
	peerAcked      uint64

	// receiving side: this side subscribed, the last position received and the last one
	// acknowledged, and the frames received and not yet acknowledged
	subscribed bool
	lastPos    uint64
	acked      uint64
	unacked    ackQueue[uint64] // by position
}

// onSubscribe1 starts the sending side: the peer asks for every entry after a position.
func (s *Session) onSubscribe1(f wire.Frame, b *wire.Subscribe1) {
	if s.v1.peerSubscribed {
		s.unexpected(f, "a second SUBSCRIBE1 on one connection")
		return
	}
	s.v1.peerSubscribed = true
	s.v1.lastSent, s.v1.peerAcked = b.Position, b.Position
	s.emit(Event{Kind: EventSubscribed, Position: b.Position})
}

func (s *Session) onAck1(f wire.Frame, a *wire.Ack1) {
	v := &s.v1
	switch {
	case !v.peerSubscribed:
		s.unexpected(f, "ACK1 before SUBSCRIBE1")
	case a.Position > v.lastSent:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "acknowledges position "+
			strconv.FormatUint(a.Position, 10)+" beyond the last sent "+strconv.FormatUint(v.lastSent, 10)))
	case a.Position < v.peerAcked:
		s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "acknowledgement went back from "+
			strconv.FormatUint(v.peerAcked, 10)+" to "+strconv.FormatUint(a.Position, 10)))
	case a.Position > v.peerAcked:
		v.peerAcked = a.Position
		s.emit(Event{Kind: EventAcked, Position: a.Position})
	}
}

// onTxn1 checks one version-1 entry: its position advances the stream, and it extends,
// repeats or skips past the origin's chain as the receive vector knows it.
func (s *Session) onTxn1(f wire.Frame) {
	pos, v, err := wire.ParseTxn1(f.Body)
	if err != nil {
		s.fail(wire.FrameError(wire.TxnErrorCode(err), f.Type, f.Offset, err.Error()))
		return
	}
	if s.state != StateEstablished || s.info.Version != 1 || !s.v1.subscribed {
		s.unexpected(f, "TXN1 on a connection that is not a version-1 one this side subscribed to")
		return
	}
	if v.Origin == s.cfg.Origin {
		s.unexpected(f, "a transaction of this node's own origin sent back to it")
		return
	}
	if pos <= s.v1.lastPos {
		s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "position "+strconv.FormatUint(pos, 10)+
			" does not advance past "+strconv.FormatUint(s.v1.lastPos, 10)))
		return
	}
	s.v1.lastPos = pos
	s.stats.TxnsReceived++
	s.v1.unacked.push(pos, wire.HeaderSize+len(f.Body))

	c := s.peerOrigins[v.Origin]
	if !c.named {
		s.unexpected(f, "TXN1 of origin "+v.Origin.String()+" before its ORIGIN frame")
		return
	}
	h := v.Hash()
	switch verdict, why := s.checkEntry(c.seq, c.hash, &v, h); verdict {
	case entryDuplicate:
		s.stats.Duplicates++
		s.emit(Event{Kind: EventDuplicate, Position: pos, Txn: v})
	case entryDiverges:
		s.stats.Divergences++
		s.emit(Event{Kind: EventDivergence, Position: pos, Txn: v, DivergedAt: v.Seq})
		s.fail(wire.FrameError(wire.CodeDivergence, f.Type, f.Offset, "origin "+v.Origin.String()+": "+why))
	case entryExtends:
		s.peerOrigins[v.Origin] = peerOrigin{seq: v.Seq, hash: h, named: true}
		s.emit(Event{Kind: EventTxn, Position: pos, Txn: v})
	default:
		s.stats.Gaps++
		s.emit(Event{Kind: EventGap, Position: pos, Txn: v, Expected: c.seq + 1})
		s.fail(wire.FrameError(wire.CodeGapDetected, f.Type, f.Offset, "origin "+v.Origin.String()+" seq "+
			strconv.FormatUint(v.Seq, 10)+" arrived where "+strconv.FormatUint(c.seq+1, 10)+" was expected"))
	}
}
