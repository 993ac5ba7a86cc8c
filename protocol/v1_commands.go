package protocol

import (
	"strconv"

	"plait/protocol/vector"
	"plait/protocol/wire"
)

// V1Commands are the commands only a version-1 connection takes (Session.V1). Observe is
// taken before the handshake too, so that the receive vector is current when the stream
// starts; the others are refused with invalid-state on a connection of another version.
type V1Commands interface {
	// Subscribe asks the peer to stream every entry after position from in its arrival
	// order, and sets the receive vector the entries are checked against: for each origin
	// the highest seq this node applied and its chain hash. Origins not in the vector start
	// at 0.
	Subscribe(from uint64, vector []vector.Entry) error
	// Offer queues one transaction of this node's arrival order at position, after the peer
	// subscribed. Positions must increase; the transaction encoding is checked and sent as
	// is. It is refused with send-buffer-full once SendBudget is used up, and with
	// frame-too-large when it would not fit the peer's frame limit; a transaction of format 2
	// (a token), which only version 4 carries, is refused with bad-argument.
	Offer(position uint64, txn []byte) error
	// Ack tells the peer that every entry up to position is durable here (applied, or a
	// duplicate of something durable). Call it only after the store reported durability.
	Ack(position uint64) error
	// Observe raises the receive vector for one origin: this node applied the entry at
	// c.Seq (with chain hash c.Hash) through another connection. Version-1 connections
	// carry every origin, so without it an entry applied elsewhere would look like a gap. A
	// lower seq than the vector holds is ignored.
	Observe(c vector.Entry) error
}

// V1 returns the version-1 commands of the session.
func (s *Session) V1() V1Commands { return (*v1Commands)(s) }

// v1Commands is a Session seen through its version-1 commands.
type v1Commands Session

// needV1 refuses a version-1 command on a connection of another version.
func (s *Session) needV1(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version != 1 {
		return wire.NewError(wire.CodeInvalidState, cmd+" is a version-1 command; this connection runs version "+strconv.FormatUint(s.info.Version, 10))
	}
	return nil
}

func (c *v1Commands) Subscribe(from uint64, vec []vector.Entry) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV1("Subscribe"); err != nil {
		return err
	}
	if s.v1.subscribed {
		return wire.NewError(wire.CodeInvalidState, "Subscribe twice on one connection")
	}
	if len(vec) > s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "vector of "+strconv.Itoa(len(vec))+" origins exceeds "+strconv.Itoa(s.limits.MaxOrigins))
	}
	seen := make(map[wire.OriginID]bool, len(vec))
	for _, e := range vec {
		if err := e.Check(); err != nil {
			return wire.NewError(wire.CodeBadArgument, err.Error())
		}
		if seen[e.Origin] {
			return wire.NewError(wire.CodeBadArgument, "origin "+e.Origin.String()+" appears twice in the vector")
		}
		seen[e.Origin] = true
	}
	for _, e := range vec {
		if _, known := s.peerOrigins[e.Origin]; !known && len(s.peerOrigins) >= s.limits.MaxOrigins {
			return wire.NewError(wire.CodeTooManyOrigins, "the receive vector holds "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
		}
		p := s.peerOrigins[e.Origin] // keeps whether the peer named it
		p.seq, p.hash = e.Seq, e.Hash
		s.peerOrigins[e.Origin] = p
	}
	s.v1.subscribed = true
	s.v1.lastPos, s.v1.acked = from, from
	s.sendControl(&wire.Subscribe1{Position: from})
	return nil
}

func (c *v1Commands) Observe(e vector.Entry) error {
	s := (*Session)(c)
	s.begin()
	if s.state == StateClosed {
		return wire.NewError(wire.CodeClosed, "Observe on a closed session")
	}
	if err := e.Check(); err != nil {
		return wire.NewError(wire.CodeBadArgument, err.Error())
	}
	old, known := s.peerOrigins[e.Origin]
	if !known && len(s.peerOrigins) >= s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "the receive vector holds "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
	}
	if e.Seq > old.seq {
		old.seq, old.hash = e.Seq, e.Hash
		s.peerOrigins[e.Origin] = old
	}
	return nil
}

func (c *v1Commands) Offer(position uint64, txn []byte) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV1("Offer"); err != nil {
		return err
	}
	if !s.v1.peerSubscribed {
		return wire.NewError(wire.CodeInvalidState, "Offer before the peer subscribed")
	}
	if position <= s.v1.lastSent {
		return wire.NewError(wire.CodeBadArgument, "position "+strconv.FormatUint(position, 10)+" does not advance past "+strconv.FormatUint(s.v1.lastSent, 10))
	}
	v, err := wire.ParseTxnUpTo(txn, s.txnFormats())
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "transaction: "+err.Error())
	}
	if v.Origin == s.info.PeerOrigin {
		return wire.NewError(wire.CodeBadArgument, "the peer's own origin is never sent back to it")
	}
	name, named := s.names[v.Origin]
	if !named {
		return wire.NewError(wire.CodeBadArgument, "origin "+v.Origin.String()+" has no name: SetOriginName first, its ORIGIN frame precedes its entries")
	}
	body := 8 + len(txn)
	if body > s.peerFrame {
		return wire.NewError(wire.CodeFrameTooLarge, "a TXN1 body of "+strconv.Itoa(body)+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	}
	size := wire.HeaderSize + body
	origin, err := s.originFrame(v.Origin, name) // when this is the origin's first entry here
	if err != nil {
		return err
	}
	if s.outBytes > 0 && s.outBytes+size+len(origin) > s.limits.MaxSendBuffer {
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.queueOrigin(v.Origin, origin)
	s.v1.lastSent = position
	s.stats.TxnsSent++
	s.sendTxn1(position, txn)
	return nil
}

func (c *v1Commands) Ack(position uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV1("Ack"); err != nil {
		return err
	}
	v := &s.v1
	switch {
	case !v.subscribed:
		return wire.NewError(wire.CodeInvalidState, "Ack before Subscribe")
	case position > v.lastPos:
		return wire.NewError(wire.CodeBadArgument, "Ack of position "+strconv.FormatUint(position, 10)+" beyond the last received "+strconv.FormatUint(v.lastPos, 10))
	case position < v.acked:
		return wire.NewError(wire.CodeBadArgument, "Ack went back from "+strconv.FormatUint(v.acked, 10)+" to "+strconv.FormatUint(position, 10))
	case position == v.acked:
		return nil
	}
	v.acked = position
	wasPaused := s.ReadPaused()
	for pos, ok := v.unacked.front(); ok && pos <= position; pos, ok = v.unacked.front() {
		v.unacked.pop()
	}
	v.unacked.compact()
	if wasPaused && !s.ReadPaused() {
		s.resumed = true
	}
	s.sendControl(&wire.Ack1{Position: position})
	return nil
}
