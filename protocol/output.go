package protocol

import (
	"encoding/binary"
	"unicode/utf8"

	"plait/protocol/wire"
)

// initialMessageCap is the capacity a new outgoing message buffer starts with: room for
// the control frames of one step; a message of data grows by append (a caller that
// returns messages with Release reuses the grown buffer).
const initialMessageCap = 4 << 10

// reserve makes room for a frame of size bytes (header included) in the message being
// built, starting a new message when the frame would not fit the peer's limit or this
// side's MaxOutMessage, and counts it (every frame sent passes here, once).
func (s *Session) reserve(t wire.Type, size int) {
	s.countOut(t)
	if len(s.cur) > 0 && len(s.cur)+size > min(s.peerMaxMsg, s.limits.MaxOutMessage) {
		s.flush()
	}
	if s.cur == nil {
		if s.spare != nil {
			s.cur, s.spare = s.spare, nil
		} else {
			s.cur = make([]byte, 0, min(max(size, initialMessageCap), s.peerMaxMsg))
		}
	}
	s.outBytes += size
	s.stamps.sent = s.now
}

// flush closes the message being built.
func (s *Session) flush() {
	if len(s.cur) == 0 {
		return
	}
	s.stats.MessagesOut++
	s.stats.BytesOut += uint64(len(s.cur))
	s.msgs = append(s.msgs, s.cur)
	s.cur = nil
}

// sendRaw queues a frame whose body is already encoded.
func (s *Session) sendRaw(t wire.Type, channel uint32, body []byte) {
	s.reserve(t, wire.HeaderSize+len(body))
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: t, Channel: channel, Length: uint32(len(body))})
	s.cur = append(s.cur, body...)
}

// sendControl queues a control frame. Its body is encoded by this build from valid
// values, so an encoding error is an internal defect; it closes the session rather than
// disappearing.
//
// On a version-4 connection a body with a stamp field (stampOf) is stamped here, so that
// every PING, PONG, CURSOR, CREDIT, HEADS and QUIET carries one, whoever builds it.
func (s *Session) sendControl(b wire.Body) {
	stamped := s.stamp(b)
	body, err := b.AppendBody(nil)
	if err != nil {
		if s.state != StateClosed {
			s.closed(wire.NewError(wire.CodeInternal, "encoding "+b.FrameType().String()+": "+err.Error()), false)
		}
		return
	}
	s.sendRaw(b.FrameType(), 0, body)
	if stamped {
		s.echoed()
	}
}

// sendTxn1 queues a version-1 TXN frame without an intermediate copy.
func (s *Session) sendTxn1(pos uint64, txn []byte) {
	n := 8 + len(txn)
	s.reserve(wire.TypeTxn1, wire.HeaderSize+n)
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: wire.TypeTxn1, Length: uint32(n)})
	s.cur = binary.BigEndian.AppendUint64(s.cur, pos)
	s.cur = append(s.cur, txn...)
}

// truncateText shortens s to at most n bytes on a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
