package protocol

import (
	"bytes"
	"errors"
	"strconv"

	"plait/protocol/wire"
)

// Anti-entropy (SPEC.md, "Anti-entropy"): on a version-3 connection that negotiated
// wire.CapAntiEntropy, each side may have one range asked (RANGEDIGEST) and not yet
// answered (RANGERECORDS). The session checks that answers match the ask — an equal answer
// ends at the ask's through, records lie in the ask's range and the answer's through is not
// beyond it — and hands the rest to its caller, which reads and compares records; it holds
// no record itself.

// rangeAsk is a range this side or the peer asked about and that is not answered yet.
type rangeAsk struct {
	after, through wire.RangePoint
}

func askOf(d *wire.RangeDigest) *rangeAsk {
	return &rangeAsk{after: wire.RangePoint{Table: bytes.Clone(d.AfterTable), Key: bytes.Clone(d.AfterKey)},
		through: wire.RangePoint{Table: bytes.Clone(d.ThroughTable), Key: bytes.Clone(d.ThroughKey)}}
}

// antiEntropy reports whether the connection negotiated anti-entropy.
func (s *Session) antiEntropy() bool {
	if s.info.Version < 3 {
		return false
	}
	for _, c := range s.info.Caps {
		if c == wire.CapAntiEntropy {
			return true
		}
	}
	return false
}

// onRangeDigest takes in the peer's ask (the answering side).
func (s *Session) onRangeDigest(f wire.Frame, d *wire.RangeDigest) {
	switch {
	case !s.antiEntropy():
		s.unexpected(f, "RANGEDIGEST on a connection that did not negotiate "+wire.CapAntiEntropy)
		return
	case s.chans.rangeIn != nil:
		s.fail(wire.FrameError(wire.CodeBadRange, f.Type, f.Offset, "a second RANGEDIGEST before the first was answered"))
		return
	}
	s.stats.RangeBytesIn += uint64(wire.HeaderSize + len(f.Body))
	s.chans.rangeIn = askOf(d)
	s.emit(Event{Kind: EventRangeAsked, RangeDigest: d})
}

// onRangeRecords checks the peer's answer to this side's ask.
func (s *Session) onRangeRecords(f wire.Frame) {
	if !s.hasChannels() || !s.antiEntropy() {
		s.unexpected(f, "RANGERECORDS on a connection that did not negotiate "+wire.CapAntiEntropy)
		return
	}
	ask := s.chans.rangeOut
	if ask == nil {
		s.fail(wire.FrameError(wire.CodeBadRange, f.Type, f.Offset, "RANGERECORDS answers no RANGEDIGEST"))
		return
	}
	v, err := wire.ParseRangeRecords(f.Body)
	if len(f.Body) > 0 {
		if why := s.formatNotCarried("range", f.Body[0]); why != "" {
			err = errors.New(why) // what a build without tokens says, whatever follows
		}
	}
	if err != nil {
		s.fail(wire.FrameError(wire.CodeBadRange, f.Type, f.Offset, err.Error()))
		return
	}
	if why := ask.check(&v); why != "" {
		s.fail(wire.FrameError(wire.CodeBadRange, f.Type, f.Offset, why))
		return
	}
	s.stats.RangeBytesIn += uint64(wire.HeaderSize + len(f.Body))
	s.chans.rangeOut = nil
	s.emit(Event{Kind: EventRangeAnswered, Range: &v})
}

// check says why an answer does not fit the ask ("" when it does).
func (a *rangeAsk) check(v *wire.RangeView) string {
	switch {
	case v.Equal && !v.Through.Equal(a.through):
		return "an equal answer that does not end at the ask's through"
	case !v.Through.IsZero() && !a.after.IsZero() && v.Through.Compare(a.after) <= 0:
		return "the answer's through is not above the ask's after"
	case !a.through.IsZero() && (v.Through.IsZero() || v.Through.Compare(a.through) > 0):
		return "the answer's through is beyond the ask's"
	}
	for i := range v.Records {
		if r := &v.Records[i]; !wire.InRange(r.Table, r.Key, a.after, a.through) {
			return "a record outside the range asked"
		}
	}
	return ""
}

// RangeFrameSize is the size of the RANGERECORDS frame of a body of n bytes.
func RangeFrameSize(n int) int { return wire.HeaderSize + n }

func (c *v3Commands) needAntiEntropy(op string) *wire.Error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3(op); err != nil {
		return err
	}
	if !s.antiEntropy() {
		return wire.NewError(wire.CodeInvalidState, op+" on a connection that did not negotiate "+wire.CapAntiEntropy)
	}
	return nil
}

func (c *v3Commands) AskRange(d *wire.RangeDigest) error {
	s := (*Session)(c)
	if err := c.needAntiEntropy("AskRange"); err != nil {
		return err
	}
	if s.chans.rangeOut != nil {
		return wire.NewError(wire.CodeInvalidState, "a range is asked and not answered yet")
	}
	if err := d.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "RANGEDIGEST: "+err.Error())
	}
	body, err := d.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "RANGEDIGEST: "+err.Error())
	}
	if s.outBytes > 0 && s.outBytes+wire.HeaderSize+len(body) > s.limits.MaxSendBuffer {
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.chans.rangeOut = askOf(d)
	s.stats.RangeBytesOut += uint64(wire.HeaderSize + len(body))
	s.sendRaw(wire.TypeRangeDigest, 0, body)
	return nil
}

func (c *v3Commands) RangeAsked() bool { return (*Session)(c).chans.rangeOut != nil }

func (c *v3Commands) AnswerRange(body []byte) error {
	s := (*Session)(c)
	if err := c.needAntiEntropy("AnswerRange"); err != nil {
		return err
	}
	ask := s.chans.rangeIn
	if ask == nil {
		return wire.NewError(wire.CodeInvalidState, "the peer asked for no range")
	}
	v, err := wire.ParseRangeRecords(body)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "RANGERECORDS: "+err.Error())
	}
	if why := s.formatNotCarried("range", v.Format); why != "" {
		return wire.NewError(wire.CodeBadArgument, "RANGERECORDS: "+why)
	}
	if why := ask.check(&v); why != "" {
		return wire.NewError(wire.CodeBadArgument, "RANGERECORDS: "+why)
	}
	size := RangeFrameSize(len(body))
	switch {
	case len(body) > s.peerFrame:
		return wire.NewError(wire.CodeFrameTooLarge, "a RANGERECORDS body of "+strconv.Itoa(len(body))+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	case s.outBytes > 0 && s.outBytes+size > s.limits.MaxSendBuffer:
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	s.chans.rangeIn = nil
	s.stats.RangeBytesOut += uint64(size)
	s.reserve(wire.TypeRangeRecords, size)
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: wire.TypeRangeRecords, Length: uint32(len(body))})
	s.cur = append(s.cur, body...)
	return nil
}
