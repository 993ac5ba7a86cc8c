package abi

import (
	"encoding/binary"
	"errors"
	"strconv"

	"plait/protocol/wire"
)

// The compact records of ABI 4 (shells/wasm/ABI.md, "Compact records"). A session
// configured with ConfigMsg.Compact answers RESULT, EVENT and STATUS in these kinds instead
// of CBOR: under WASM, encoding CBOR records by reflection costs more than the session's
// own work on a received frame (docs/design.md §12). The fields and their
// keys are those of the CBOR messages; only the layout differs: a payload is a sequence of
// fields, each
//
//	key (uvarint) | length (uvarint) | value (length bytes)
//
// in ascending key order, a zero value left out, a list one field per element. A value is an
// unsigned integer as a uvarint, a signed one as a zigzag varint, a bool as an empty value
// (present: true), bytes and strings as they are, an origin or a hash as its 16 or 32 bytes,
// a nested message as its own fields, and the rarely sent nested messages (HEADS, COPY,
// COPYBEGIN content) as their CBOR encoding. A reader skips a key it does not know, so a
// later ABI can add keys as it adds them to the CBOR messages.
const (
	KindResultCompact Kind = 0x06 // compact ResultMsg
	KindEventCompact  Kind = 0x07 // compact EventMsg
	KindStatusCompact Kind = 0x08 // compact StatusMsg; always the last record of a batch
)

// Base is the CBOR kind a compact kind stands for (other kinds are their own base), so
// that a host switches on one set of kinds whatever the encoding.
func (k Kind) Base() Kind {
	switch k {
	case KindResultCompact:
		return KindResult
	case KindEventCompact:
		return KindEvent
	case KindStatusCompact:
		return KindStatus
	}
	return k
}

// ---- writing ----

// cw appends compact fields to b.
type cw struct{ b []byte }

func (w *cw) head(k uint8, n int) {
	w.b = append(w.b, k)
	w.b = binary.AppendUvarint(w.b, uint64(n))
}

func (w *cw) uint(k uint8, v uint64) {
	if v == 0 {
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(tmp[:], v)
	w.head(k, n)
	w.b = append(w.b, tmp[:n]...)
}

func (w *cw) int(k uint8, v int64) {
	if v != 0 {
		w.signed(k, v)
	}
}

// signed writes v even when it is zero (a present pointer).
func (w *cw) signed(k uint8, v int64) {
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutVarint(tmp[:], v)
	w.head(k, n)
	w.b = append(w.b, tmp[:n]...)
}

func (w *cw) bool(k uint8, v bool) {
	if v {
		w.head(k, 0)
	}
}

func (w *cw) bytes(k uint8, v []byte) {
	if len(v) > 0 {
		w.head(k, len(v))
		w.b = append(w.b, v...)
	}
}

func (w *cw) string(k uint8, v string) {
	if len(v) > 0 {
		w.head(k, len(v))
		w.b = append(w.b, v...)
	}
}

// nested writes key k and the fields fill appends, as one field.
func (w *cw) nested(k uint8, fill func()) {
	w.b = append(w.b, k, 0)
	start := len(w.b)
	fill()
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	var tmp [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(tmp[:], uint64(n))
	w.b = append(w.b, tmp[1:l]...) // room for the longer length
	copy(w.b[start+l-1:], w.b[start:start+n])
	copy(w.b[start-1:], tmp[:l])
}

// cbor writes v's CBOR encoding as key k's value (the rare nested messages).
func (w *cw) cbor(k uint8, v any) {
	p, err := encMode.Marshal(v)
	if err != nil { // every record type encodes by construction (Driver.record)
		panic(err)
	}
	w.bytes(k, p)
}

func (w *cw) errorMsg(k uint8, e *ErrorMsg) {
	if e == nil {
		return
	}
	w.nested(k, func() {
		w.string(1, e.Code)
		w.string(2, e.Class)
		w.string(3, e.Message)
		w.uint(4, uint64(e.Frame))
		w.int(5, e.Offset)
	})
}

func (w *cw) handshake(k uint8, h *HandshakeMsg) {
	if h == nil {
		return
	}
	w.nested(k, func() {
		w.uint(1, h.Version)
		for _, c := range h.Caps {
			w.head(2, len(c))
			w.b = append(w.b, c...)
		}
		w.string(3, h.PeerName)
		if !h.PeerOrigin.IsZero() {
			w.bytes(4, h.PeerOrigin[:])
		}
		w.uint(5, h.PeerMin)
		w.uint(6, h.PeerMax)
		w.bool(7, h.Authenticated)
		w.bool(8, h.Bound)
	})
}

// AppendResultCompact appends m's compact payload to b.
func AppendResultCompact(b []byte, m *ResultMsg) []byte {
	w := cw{b}
	w.uint(1, uint64(m.Op))
	w.uint(2, m.Index)
	w.errorMsg(3, m.Err)
	return w.b
}

// AppendEventCompact appends m's compact payload to b.
func AppendEventCompact(b []byte, m *EventMsg) []byte {
	w := cw{b}
	w.uint(1, uint64(m.Kind))
	w.uint(2, m.Position)
	w.bytes(3, m.Txn)
	w.uint(4, m.Expected)
	if m.Origin != nil {
		w.head(5, len(m.Origin))
		w.b = append(w.b, m.Origin[:]...)
	}
	w.string(6, m.Name)
	w.uint(7, uint64(m.Frame))
	w.handshake(8, m.Handshake)
	w.errorMsg(9, m.Err)
	w.bool(10, m.ByPeer)
	w.uint(11, m.Count)
	w.uint(12, m.Seq)
	if m.Hash != nil {
		w.head(13, len(m.Hash))
		w.b = append(w.b, m.Hash[:]...)
	}
	if m.Heads != nil {
		w.cbor(14, m.Heads)
	}
	w.bool(15, m.Outgoing)
	if m.Copy != nil {
		w.cbor(16, m.Copy)
	}
	if m.CopyBegin != nil {
		w.cbor(17, m.CopyBegin)
	}
	w.bytes(18, m.Chunk)
	w.bytes(19, m.RangeDigest)
	w.bytes(20, m.Range)
	return w.b
}

// AppendStatusCompact appends m's compact payload to b.
func AppendStatusCompact(b []byte, m *StatusMsg) []byte {
	w := cw{b}
	w.bool(1, m.Configured)
	w.uint(2, uint64(m.State))
	w.bool(3, m.Connected)
	w.uint(4, m.HeldBytes)
	w.bool(5, m.ReadPaused)
	w.uint(6, m.SendBudget)
	w.int(7, m.Deadline)
	w.int(8, m.RTT)
	w.uint(9, m.Version)
	if s := &m.Stats; *s != (StatsMsg{}) {
		w.nested(10, func() {
			for i, v := range [...]uint64{s.BytesIn, s.BytesOut, s.MessagesIn, s.MessagesOut, s.TxnsReceived, s.TxnsSent,
				s.Duplicates, s.Gaps, s.Divergences, s.IgnoredFrames, s.ProtocolErrors, s.ResendsRequested,
				s.ResendsReceived, s.Discarded, s.Stale, s.RangeBytesIn, s.RangeBytesOut} {
				w.uint(uint8(i+1), v)
			}
		})
	}
	w.errorMsg(11, m.Err)
	w.int(12, m.LastReceive)
	w.int(13, m.Liveness)
	w.uint(14, m.MinVersion)
	w.uint(15, m.MaxVersion)
	w.handshake(16, m.Handshake)
	if l := m.Limits; l != nil {
		w.nested(17, func() {
			for i, v := range [...]uint64{l.MaxFrameBody, l.MaxMessage, l.MaxSendBuffer, l.MaxUnackedBytes, l.MaxOrigins,
				l.HandshakeTimeout, l.PingInterval, l.LivenessTimeout, l.MaxChannels, l.MaxChannelBuffer, l.MaxSessionBuffer} {
				w.uint(uint8(i+1), v)
			}
		})
	}
	for _, c := range m.Credits {
		w.nested(18, func() {
			w.bytes(1, c.Origin[:])
			w.uint(2, c.Credit)
		})
	}
	w.bool(19, m.HasReady)
	w.bool(20, m.Resumed)
	w.uint(21, m.CopyCredit)
	if m.ClockOffset != nil {
		w.signed(22, *m.ClockOffset)
	}
	w.bool(23, m.RangeAsked)
	return w.b
}

// ---- reading ----

var errCompact = errors.New("abi: malformed compact record")

// cr reads compact fields; the first error sticks.
type cr struct {
	b   []byte
	err error
}

// next returns the next field; false at the end or on an error.
func (r *cr) next() (uint64, []byte, bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, nil, false
	}
	k, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCompact
		return 0, nil, false
	}
	l, m := binary.Uvarint(r.b[n:])
	if m <= 0 || l > uint64(len(r.b)-n-m) {
		r.err = errCompact
		return 0, nil, false
	}
	v := r.b[n+m : n+m+int(l)]
	r.b = r.b[n+m+int(l):]
	return k, v, true
}

func (r *cr) fail(k uint64) {
	if r.err == nil {
		r.err = errors.New("abi: compact record: bad value of key " + strconv.FormatUint(k, 10))
	}
}

func (r *cr) uint(k uint64, v []byte) uint64 {
	x, n := binary.Uvarint(v)
	if n != len(v) || n <= 0 {
		r.fail(k)
	}
	return x
}

func (r *cr) u8(k uint64, v []byte) uint8 {
	x := r.uint(k, v)
	if x > 0xff {
		r.fail(k)
	}
	return uint8(x)
}

func (r *cr) int(k uint64, v []byte) int64 {
	x, n := binary.Varint(v)
	if n != len(v) || n <= 0 {
		r.fail(k)
	}
	return x
}

func (r *cr) bool(k uint64, v []byte) bool {
	if len(v) != 0 {
		r.fail(k)
	}
	return true
}

func (r *cr) origin(k uint64, v []byte) (o wire.OriginID) {
	if len(v) != len(o) {
		r.fail(k)
	}
	copy(o[:], v)
	return o
}

func (r *cr) hash(k uint64, v []byte) (h wire.Hash) {
	if len(v) != len(h) {
		r.fail(k)
	}
	copy(h[:], v)
	return h
}

func (r *cr) cbor(k uint64, v []byte, into any) {
	if err := decMode.Unmarshal(v, into); err != nil && r.err == nil {
		r.err = errors.New("abi: compact record, key " + strconv.FormatUint(k, 10) + ": " + err.Error())
	}
}

// sub reads a nested message's fields with fill, keeping the first error.
func (r *cr) sub(v []byte, fill func(s *cr)) {
	s := cr{b: v}
	fill(&s)
	if s.err != nil && r.err == nil {
		r.err = s.err
	}
}

func (r *cr) errorMsg(v []byte) *ErrorMsg {
	e := &ErrorMsg{}
	r.sub(v, func(s *cr) {
		for k, v, ok := s.next(); ok; k, v, ok = s.next() {
			switch k {
			case 1:
				e.Code = string(v)
			case 2:
				e.Class = string(v)
			case 3:
				e.Message = string(v)
			case 4:
				e.Frame = s.u8(k, v)
			case 5:
				e.Offset = s.int(k, v)
			}
		}
	})
	return e
}

func (r *cr) handshake(v []byte) *HandshakeMsg {
	h := &HandshakeMsg{}
	r.sub(v, func(s *cr) {
		for k, v, ok := s.next(); ok; k, v, ok = s.next() {
			switch k {
			case 1:
				h.Version = s.uint(k, v)
			case 2:
				h.Caps = append(h.Caps, string(v))
			case 3:
				h.PeerName = string(v)
			case 4:
				h.PeerOrigin = s.origin(k, v)
			case 5:
				h.PeerMin = s.uint(k, v)
			case 6:
				h.PeerMax = s.uint(k, v)
			case 7:
				h.Authenticated = s.bool(k, v)
			case 8:
				h.Bound = s.bool(k, v)
			}
		}
	})
	return h
}

// uints reads a nested message of unsigned fields 1..len(into) (stats, limits).
func (r *cr) uints(v []byte, into []*uint64) {
	r.sub(v, func(s *cr) {
		for k, v, ok := s.next(); ok; k, v, ok = s.next() {
			if k >= 1 && k <= uint64(len(into)) {
				*into[k-1] = s.uint(k, v)
			}
		}
	})
}

// ParseResult decodes a RESULT record of either encoding.
func ParseResult(rec Record) (ResultMsg, error) {
	var m ResultMsg
	switch rec.Kind {
	case KindResult:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindResultCompact:
		r := cr{b: rec.Payload}
		for k, v, ok := r.next(); ok; k, v, ok = r.next() {
			switch k {
			case 1:
				m.Op = r.u8(k, v)
			case 2:
				m.Index = r.uint(k, v)
			case 3:
				m.Err = r.errorMsg(v)
			}
		}
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not a RESULT")
}

// ParseEvent decodes an EVENT record of either encoding. Byte fields alias the payload.
func ParseEvent(rec Record) (EventMsg, error) {
	var m EventMsg
	switch rec.Kind {
	case KindEvent:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindEventCompact:
		r := cr{b: rec.Payload}
		for k, v, ok := r.next(); ok; k, v, ok = r.next() {
			switch k {
			case 1:
				m.Kind = r.u8(k, v)
			case 2:
				m.Position = r.uint(k, v)
			case 3:
				m.Txn = v
			case 4:
				m.Expected = r.uint(k, v)
			case 5:
				o := r.origin(k, v)
				m.Origin = &o
			case 6:
				m.Name = string(v)
			case 7:
				m.Frame = r.u8(k, v)
			case 8:
				m.Handshake = r.handshake(v)
			case 9:
				m.Err = r.errorMsg(v)
			case 10:
				m.ByPeer = r.bool(k, v)
			case 11:
				m.Count = r.uint(k, v)
			case 12:
				m.Seq = r.uint(k, v)
			case 13:
				h := r.hash(k, v)
				m.Hash = &h
			case 14:
				m.Heads = &HeadsMsg{}
				r.cbor(k, v, m.Heads)
			case 15:
				m.Outgoing = r.bool(k, v)
			case 16:
				m.Copy = &CopyMsg{}
				r.cbor(k, v, m.Copy)
			case 17:
				m.CopyBegin = &CopyBeginMsg{}
				r.cbor(k, v, m.CopyBegin)
			case 18:
				m.Chunk = v
			case 19:
				m.RangeDigest = v
			case 20:
				m.Range = v
			}
		}
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not an EVENT")
}

// ParseStatus decodes a STATUS record of either encoding.
func ParseStatus(rec Record) (StatusMsg, error) {
	var m StatusMsg
	switch rec.Kind {
	case KindStatus:
		err := Unmarshal(rec.Payload, &m)
		return m, err
	case KindStatusCompact:
		r := cr{b: rec.Payload}
		for k, v, ok := r.next(); ok; k, v, ok = r.next() {
			switch k {
			case 1:
				m.Configured = r.bool(k, v)
			case 2:
				m.State = r.u8(k, v)
			case 3:
				m.Connected = r.bool(k, v)
			case 4:
				m.HeldBytes = r.uint(k, v)
			case 5:
				m.ReadPaused = r.bool(k, v)
			case 6:
				m.SendBudget = r.uint(k, v)
			case 7:
				m.Deadline = r.int(k, v)
			case 8:
				m.RTT = r.int(k, v)
			case 9:
				m.Version = r.uint(k, v)
			case 10:
				s := &m.Stats
				r.uints(v, []*uint64{&s.BytesIn, &s.BytesOut, &s.MessagesIn, &s.MessagesOut, &s.TxnsReceived, &s.TxnsSent,
					&s.Duplicates, &s.Gaps, &s.Divergences, &s.IgnoredFrames, &s.ProtocolErrors, &s.ResendsRequested,
					&s.ResendsReceived, &s.Discarded, &s.Stale, &s.RangeBytesIn, &s.RangeBytesOut})
			case 11:
				m.Err = r.errorMsg(v)
			case 12:
				m.LastReceive = r.int(k, v)
			case 13:
				m.Liveness = r.int(k, v)
			case 14:
				m.MinVersion = r.uint(k, v)
			case 15:
				m.MaxVersion = r.uint(k, v)
			case 16:
				m.Handshake = r.handshake(v)
			case 17:
				l := &LimitsMsg{}
				r.uints(v, []*uint64{&l.MaxFrameBody, &l.MaxMessage, &l.MaxSendBuffer, &l.MaxUnackedBytes, &l.MaxOrigins,
					&l.HandshakeTimeout, &l.PingInterval, &l.LivenessTimeout, &l.MaxChannels, &l.MaxChannelBuffer, &l.MaxSessionBuffer})
				m.Limits = l
			case 18:
				var c CreditMsg
				r.sub(v, func(s *cr) {
					for k, v, ok := s.next(); ok; k, v, ok = s.next() {
						switch k {
						case 1:
							c.Origin = s.origin(k, v)
						case 2:
							c.Credit = s.uint(k, v)
						}
					}
				})
				m.Credits = append(m.Credits, c)
			case 19:
				m.HasReady = r.bool(k, v)
			case 20:
				m.Resumed = r.bool(k, v)
			case 21:
				m.CopyCredit = r.uint(k, v)
			case 22:
				o := r.int(k, v)
				m.ClockOffset = &o
			case 23:
				m.RangeAsked = r.bool(k, v)
			}
		}
		return m, r.err
	}
	return m, errors.New("abi: record kind " + strconv.Itoa(int(rec.Kind)) + " is not a STATUS")
}
