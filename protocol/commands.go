package protocol

import (
	"strconv"

	"plait/protocol/wire"
)

// needV1 refuses a version-1 command on a connection of another version.
func (s *Session) needV1(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version != 1 {
		return wire.Errorf(wire.CodeInvalidState, cmd+" is a version-1 command; this connection runs version "+strconv.FormatUint(s.info.Version, 10))
	}
	return nil
}

func (s *Session) needEstablished(cmd string) *wire.Error {
	switch s.state {
	case StateEstablished:
		return nil
	case StateClosed:
		return wire.Errorf(wire.CodeClosed, cmd+" on a closed session")
	}
	return wire.Errorf(wire.CodeInvalidState, cmd+" before the handshake completed")
}

// Subscribe asks the peer to stream every entry after position from in its arrival
// order, and sets the receive vector the entries are checked against: for each origin the
// highest seq this node applied and its chain hash. Origins not in the vector start at 0.
func (s *Session) Subscribe(from uint64, vector []Cursor) error {
	s.begin()
	if err := s.needV1("Subscribe"); err != nil {
		return err
	}
	if s.subscribed {
		return wire.Errorf(wire.CodeInvalidState, "Subscribe twice on one connection")
	}
	if len(vector) > s.limits.MaxOrigins {
		return wire.Errorf(wire.CodeTooManyOrigins, "vector of "+strconv.Itoa(len(vector))+" origins exceeds "+strconv.Itoa(s.limits.MaxOrigins))
	}
	seen := make(map[wire.OriginID]bool, len(vector))
	for _, c := range vector {
		if err := checkCursor(c); err != nil {
			return err
		}
		if seen[c.Origin] {
			return wire.Errorf(wire.CodeBadArgument, "origin "+c.Origin.String()+" appears twice in the vector")
		}
		seen[c.Origin] = true
	}
	for _, c := range vector {
		if _, known := s.vector[c.Origin]; !known && len(s.vector) >= s.limits.MaxOrigins {
			return wire.Errorf(wire.CodeTooManyOrigins, "the receive vector holds "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
		}
		p := s.vector[c.Origin] // keeps whether the peer named it
		p.seq, p.hash = c.Seq, c.Hash
		s.vector[c.Origin] = p
	}
	s.subscribed = true
	s.lastPos, s.acked = from, from
	s.sendControl(&wire.Subscribe1{Position: from})
	return nil
}

func checkCursor(c Cursor) *wire.Error {
	switch {
	case c.Origin.IsZero():
		return wire.Errorf(wire.CodeBadArgument, "cursor with an all-zero origin id")
	case c.Seq == 0 && c.Hash != wire.Hash{}:
		return wire.Errorf(wire.CodeBadArgument, "cursor at seq 0 with a hash")
	case c.Seq > 0 && c.Hash == wire.Hash{}:
		return wire.Errorf(wire.CodeBadArgument, "cursor at seq "+strconv.FormatUint(c.Seq, 10)+" without its chain hash")
	}
	return nil
}

// Observe raises the receive vector for one origin: this node applied the entry at seq
// (with chain hash) through another connection. Version-1 connections carry every origin,
// so without it an entry already applied elsewhere would look like a gap. A lower seq than
// the vector holds is ignored.
func (s *Session) Observe(c Cursor) error {
	s.begin()
	if s.state == StateClosed {
		return wire.Errorf(wire.CodeClosed, "Observe on a closed session")
	}
	if err := checkCursor(c); err != nil {
		return err
	}
	old, known := s.vector[c.Origin]
	if !known && len(s.vector) >= s.limits.MaxOrigins {
		return wire.Errorf(wire.CodeTooManyOrigins, "the receive vector holds "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
	}
	if c.Seq > old.seq {
		old.seq, old.hash = c.Seq, c.Hash
		s.vector[c.Origin] = old
	}
	return nil
}

// SetOriginName records an origin's human name; it is sent in an ORIGIN frame before that
// origin's first entry on this connection.
func (s *Session) SetOriginName(origin wire.OriginID, name string) error {
	s.begin()
	if s.state == StateClosed {
		return wire.Errorf(wire.CodeClosed, "SetOriginName on a closed session")
	}
	if origin.IsZero() {
		return wire.Errorf(wire.CodeBadArgument, "all-zero origin id")
	}
	if !wire.ValidName(name) {
		return wire.Errorf(wire.CodeBadArgument, "origin name "+quote(name)+" is not 1-64 bytes of [A-Za-z0-9_.-]")
	}
	if _, known := s.names[origin]; !known && len(s.names) >= s.limits.MaxOrigins {
		return wire.Errorf(wire.CodeTooManyOrigins, "the session names "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
	}
	s.names[origin] = name
	return nil
}

// Offer queues one transaction of this node's arrival order at position (version 1),
// after the peer subscribed. Positions must increase; the transaction encoding is checked
// and sent as is. It is refused with send-buffer-full once SendBudget is used up, and with
// frame-too-large when it would not fit the peer's message limit.
func (s *Session) Offer(position uint64, txn []byte) error {
	s.begin()
	if err := s.needV1("Offer"); err != nil {
		return err
	}
	if !s.peerSubscribed {
		return wire.Errorf(wire.CodeInvalidState, "Offer before the peer subscribed")
	}
	if position <= s.lastSent {
		return wire.Errorf(wire.CodeBadArgument, "position "+strconv.FormatUint(position, 10)+" does not advance past "+strconv.FormatUint(s.lastSent, 10))
	}
	v, err := wire.ParseTxn(txn)
	if err != nil {
		return wire.Errorf(wire.CodeBadArgument, "transaction: "+err.Error())
	}
	if v.Origin == s.info.PeerOrigin {
		return wire.Errorf(wire.CodeBadArgument, "the peer's own origin is never sent back to it")
	}
	name, named := s.names[v.Origin]
	if !named {
		return wire.Errorf(wire.CodeBadArgument, "origin "+v.Origin.String()+" has no name: SetOriginName first, its ORIGIN frame precedes its entries")
	}
	body := 8 + len(txn)
	if body > s.peerFrame {
		return wire.Errorf(wire.CodeFrameTooLarge, "a TXN1 body of "+strconv.Itoa(body)+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	}
	size := wire.HeaderSize + body
	origin, err := s.originFrame(v.Origin, name) // when this is the origin's first entry here
	if err != nil {
		return err
	}
	if s.outBytes > 0 && s.outBytes+size+len(origin) > s.limits.MaxSendBuffer {
		return wire.Errorf(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.queueOrigin(v.Origin, origin)
	s.lastSent = position
	s.stats.TxnsSent++
	s.sendTxn1(position, txn)
	return nil
}

// Ack tells the peer that every entry up to position is durable here (applied, or a
// duplicate of something durable). Call it only after the store reported durability.
func (s *Session) Ack(position uint64) error {
	s.begin()
	if err := s.needV1("Ack"); err != nil {
		return err
	}
	switch {
	case !s.subscribed:
		return wire.Errorf(wire.CodeInvalidState, "Ack before Subscribe")
	case position > s.lastPos:
		return wire.Errorf(wire.CodeBadArgument, "Ack of position "+strconv.FormatUint(position, 10)+" beyond the last received "+strconv.FormatUint(s.lastPos, 10))
	case position < s.acked:
		return wire.Errorf(wire.CodeBadArgument, "Ack went back from "+strconv.FormatUint(s.acked, 10)+" to "+strconv.FormatUint(position, 10))
	case position == s.acked:
		return nil
	}
	s.acked = position
	wasPaused := s.ReadPaused()
	for s.unackedHead < len(s.unacked) && s.unacked[s.unackedHead].pos <= position {
		s.unackedBytes -= s.unacked[s.unackedHead].size
		s.unackedHead++
	}
	if s.unackedHead == len(s.unacked) {
		s.unacked, s.unackedHead = s.unacked[:0], 0
	} else if s.unackedHead > len(s.unacked)/2 {
		n := copy(s.unacked, s.unacked[s.unackedHead:])
		s.unacked, s.unackedHead = s.unacked[:n], 0
	}
	if wasPaused && !s.ReadPaused() {
		s.resumed = true
	}
	s.sendControl(&wire.Ack1{Position: position})
	return nil
}

// Close closes the session with code (going-away for an orderly shutdown) and tells the
// peer why.
func (s *Session) Close(code wire.Code, message string) error {
	s.begin()
	if s.state == StateClosed {
		return wire.Errorf(wire.CodeClosed, "Close on a closed session")
	}
	if cl, ok := wire.ClassOf(code); !ok || cl == wire.ClassLocal {
		return wire.Errorf(wire.CodeBadArgument, "close code "+quote(string(code))+" is not a wire code")
	}
	s.fail(wire.Errorf(code, message))
	return nil
}
