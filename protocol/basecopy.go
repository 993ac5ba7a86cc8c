package protocol

import (
	"bytes"
	"errors"
	"strconv"

	"plait/protocol/credit"
	"plait/protocol/wire"
)

// The base copy (SPEC.md, "The base copy"): a copy channel in the subscriber's numbering,
// at most one per direction. The session checks what crosses the wire — order, the
// vector, credit, counts — and hands the records to its caller, which merges them; it holds
// no record itself.

// copyIn is the copy this side asked for: it receives the peer's records.
type copyIn struct {
	id  uint32
	win credit.Receiver
	// begun: a COPYBEGIN arrived; chunked: a CHUNK arrived, so the vector is whole.
	begun, chunked bool
	vector         map[wire.OriginID]wire.HLC // the snapshot's HLC per origin
	lastOrigin     wire.OriginID              // the vector's highest origin so far
	// table and key end the range covered so far (nil: nothing yet, or the resume point).
	table, key  []byte
	records     uint64
	pending     ackQueue[struct{}] // chunks handed to the caller and not yet acknowledged
	grantQueued bool
	holds       holdsEnd // where the HOLDS received so far end (version 4)
}

// copyOut is the copy the peer asked of this side.
type copyOut struct {
	id         uint32
	win        credit.Sender
	begun      bool
	table, key []byte // the last record sent (nil: the resume point or the start)
	records    uint64
	holds      holdsEnd // where the HOLDS sent so far end (version 4)
}

// ---- receiving ----

// onCopy opens the copy the peer asks for (the sender's side).
func (s *Session) onCopy(f wire.Frame, b *wire.Copy) {
	v := &s.chans
	switch {
	case b.Channel <= v.lastOut:
		s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "copy channel "+strconv.FormatUint(uint64(b.Channel), 10)+
			" is not above the last opened, "+strconv.FormatUint(uint64(v.lastOut), 10)))
		return
	case v.copyOut != nil:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "a second copy while copy channel "+strconv.FormatUint(uint64(v.copyOut.id), 10)+" is open"))
		return
	case len(v.out)+1 > s.limits.MaxChannels:
		s.fail(wire.FrameError(wire.CodeTooManyChannels, f.Type, f.Offset, "the peer would have "+strconv.Itoa(len(v.out)+1)+
			" channels open; the bound is "+strconv.Itoa(s.limits.MaxChannels)))
		return
	}
	v.lastOut = b.Channel
	c := &copyOut{id: b.Channel, table: bytes.Clone(b.Table), key: bytes.Clone(b.Key)}
	c.win.Update(b.Credit)
	v.copyOut = c
	s.emit(Event{Kind: EventCopyRequested, Copy: b})
}

// inCopy returns the copy this side receives on channel id, or handles a frame for a
// channel that is not it: a channel never opened fails the session (bad-channel); one
// closed since is ignored (it raced the close).
func (s *Session) inCopy(f wire.Frame, id uint32) *copyIn {
	if c := s.chans.copyIn; c != nil && c.id == id {
		return c
	}
	if id > s.chans.lastIn {
		s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "channel "+strconv.FormatUint(uint64(id), 10)+" was never opened"))
	}
	return nil
}

func (s *Session) onCopyBegin(f wire.Frame, b *wire.CopyBegin) {
	c := s.inCopy(f, b.Channel)
	if c == nil {
		return
	}
	if c.chunked {
		s.unexpected(f, "COPYBEGIN after the copy's first CHUNK")
		return
	}
	// Positions are of named origins, distinct and ascending: the vector is bounded by the
	// origins the peer may name (MaxOrigins).
	for i, p := range b.Positions {
		if !s.peerOrigins[p.Origin].named {
			s.unexpected(f, "a copy position of origin "+p.Origin.String()+" before its ORIGIN frame")
			return
		}
		if i == 0 && c.begun && len(c.vector) > 0 && bytes.Compare(c.lastOrigin[:], p.Origin[:]) >= 0 {
			s.fail(wire.FrameError(wire.CodeOutOfOrder, f.Type, f.Offset, "copy positions are not ascending across COPYBEGIN frames"))
			return
		}
	}
	c.begun = true
	for _, p := range b.Positions {
		c.vector[p.Origin] = p.HLC
		c.lastOrigin = p.Origin
	}
	s.emit(Event{Kind: EventCopyBegin, CopyBegin: b})
}

// onChunk checks one CHUNK: the session-level rules first (credit, channel, order of
// frames), then the content, whose failure closes only the copy (bad-chunk).
func (s *Session) onChunk(f wire.Frame) {
	if !s.hasChannels() || s.info.Version < 3 {
		s.unexpected(f, "CHUNK on a connection that is not an established version-3 one")
		return
	}
	size, ok := s.receiveOnConnection(f)
	if !ok {
		return
	}
	c := s.chans.copyIn
	if c == nil || c.id != f.Channel {
		if s.chans.in[f.Channel] != nil {
			s.unexpected(f, "CHUNK on channel "+strconv.FormatUint(uint64(f.Channel), 10)+", which carries an origin's entries")
			return
		}
		if f.Channel > s.chans.lastIn {
			s.fail(wire.FrameError(wire.CodeBadChannel, f.Type, f.Offset, "CHUNK on channel "+strconv.FormatUint(uint64(f.Channel), 10)+", which this side never opened"))
			return
		}
		s.stats.Stale++
		s.releaseConn(size)
		return
	}
	if !c.begun {
		s.unexpected(f, "CHUNK before the copy's COPYBEGIN")
		return
	}
	if err := c.win.Receive(size); err != nil {
		s.fail(wire.FrameError(wire.CodeCreditOverrun, f.Type, f.Offset, "copy channel "+strconv.FormatUint(uint64(c.id), 10)+": "+err.Error()))
		return
	}
	c.chunked = true
	v, err := wire.ParseChunk(f.Body)
	if len(f.Body) > 0 {
		if why := s.formatNotCarried("chunk", f.Body[0]); why != "" {
			err = errors.New(why) // what a build without tokens says, whatever follows
		}
	}
	if err != nil {
		s.releaseCopy(c, size)
		s.abortIn(c, wire.FrameError(wire.CodeBadChunk, f.Type, f.Offset, err.Error()))
		return
	}
	if why := c.checkChunk(&v); why != "" {
		s.releaseCopy(c, size)
		s.abortIn(c, wire.FrameError(wire.CodeBadChunk, f.Type, f.Offset, why))
		return
	}
	c.table, c.key = append(c.table[:0], v.Table...), append(c.key[:0], v.Last...)
	c.records += uint64(v.Count)
	c.pending.push(struct{}{}, int(size))
	s.emit(Event{Kind: EventChunk, Chunk: &v})
}

// checkChunk says why a well-formed chunk breaks the copy's rules ("" when it does not):
// it must begin above the range covered so far, and hold only versions the vector covers,
// by the entry that wrote each: its delivering identity (the via block of a leaf write a
// hub re-originated, docs/design.md §27.1), whose origin is in the vector and whose HLC is
// at most that origin's there. The leaf's origin is in no vector: a hub's leaves are not
// origins downstream of it.
func (c *copyIn) checkChunk(v *wire.ChunkView) string {
	if c.table != nil {
		switch t := bytes.Compare(v.Table, c.table); {
		case t < 0, t == 0 && bytes.Compare(v.First, c.key) <= 0:
			return "the chunk's first record is not above the range already copied"
		}
	}
	it := v.Records()
	for {
		r, ok, _ := it.Next() // ParseChunk checked every record
		if !ok {
			return ""
		}
		o, at := r.Origin, r.HLC
		if !r.Via.IsZero() {
			o, at = r.Via, r.ViaHLC
		}
		hlc, known := c.vector[o]
		switch {
		case !known:
			return "a record version of origin " + o.String() + ", which the copy's vector does not hold"
		case at > hlc:
			return "a record version of origin " + o.String() + " newer than the copy's vector covers"
		}
	}
}

func (s *Session) onCopyEnd(f wire.Frame, b *wire.CopyEnd) {
	c := s.inCopy(f, b.Channel)
	if c == nil {
		return
	}
	if !c.begun {
		s.unexpected(f, "COPYEND before the copy's COPYBEGIN")
		return
	}
	if b.Records != c.records {
		s.abortIn(c, wire.FrameError(wire.CodeBadChunk, f.Type, f.Offset, "the copy ends after "+strconv.FormatUint(b.Records, 10)+
			" records; "+strconv.FormatUint(c.records, 10)+" arrived"))
		return
	}
	s.closeCopyIn(c)
	s.emit(Event{Kind: EventCopyEnd, Count: b.Records})
}

func (s *Session) onCopyAbort(f wire.Frame, b *wire.CopyAbort) {
	err := &wire.Error{Code: b.Code, Class: wire.PeerClass(b.Code, b.Class), Offset: wire.NoOffset, Message: b.Message}
	if b.Side == wire.SideSubscriber { // about the copy this side serves
		if !s.knownOut(f, b.Channel) {
			return
		}
		if c := s.chans.copyOut; c != nil && c.id == b.Channel {
			s.chans.copyOut = nil
			s.emit(Event{Kind: EventCopyAborted, Err: err, ByPeer: true, Outgoing: true})
		}
		return
	}
	if c := s.inCopy(f, b.Channel); c != nil {
		s.closeCopyIn(c)
		s.emit(Event{Kind: EventCopyAborted, Err: err, ByPeer: true})
	}
}

// abortIn closes the copy this side receives, telling the peer why (COPYABORT, side
// subscriber), and reports it.
func (s *Session) abortIn(c *copyIn, err *wire.Error) {
	if err.Class == wire.ClassProtocol {
		s.stats.ProtocolErrors++
	}
	s.sendControl(&wire.CopyAbort{Channel: c.id, Side: wire.SideSubscriber, Code: err.Code, Class: err.Class,
		Message: truncateText(err.Detail(), wire.MaxCloseText)})
	s.closeCopyIn(c)
	s.emit(Event{Kind: EventCopyAborted, Err: err})
}

// closeCopyIn forgets the copy this side receives, releasing what it held of the
// connection window.
func (s *Session) closeCopyIn(c *copyIn) {
	s.releaseConn(c.win.Buffered())
	s.chans.copyIn = nil
}

// releaseCopy frees bytes of the copy channel and of the connection, to be granted again at
// Ready.
func (s *Session) releaseCopy(c *copyIn, n uint64) {
	c.win.Release(n)
	s.releaseConn(n)
	if !c.grantQueued {
		c.grantQueued = true
		s.chans.grants = append(s.chans.grants, c.id)
	}
}

// copyGrant is flushV2's grant for the copy channel id, if it is the one this side receives.
func (s *Session) copyGrant(id uint32) (wire.CreditEntry, bool) {
	c := s.chans.copyIn
	if c == nil || c.id != id {
		return wire.CreditEntry{}, false
	}
	c.grantQueued = false
	limit, ok := c.win.Grant()
	return wire.CreditEntry{Channel: id, Limit: limit}, ok
}

// ---- commands ----

func (c *v3Commands) RequestCopy(table, key []byte) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("RequestCopy"); err != nil {
		return err
	}
	v := &s.chans
	switch {
	case v.copyIn != nil:
		return wire.NewError(wire.CodeInvalidState, "a copy is open already, on channel "+strconv.FormatUint(uint64(v.copyIn.id), 10))
	case len(v.in)+1 > s.limits.MaxChannels:
		return wire.NewError(wire.CodeTooManyChannels, strconv.Itoa(len(v.in))+" channels are open; one more exceeds "+strconv.Itoa(s.limits.MaxChannels))
	}
	if len(key) > wire.MaxCopyKey {
		key = key[:wire.MaxCopyKey] // resume after the prefix: what lies between is copied again
	}
	req := &wire.Copy{Table: table, Key: key}
	req.Channel = v.lastIn + 1
	if err := req.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, err.Error())
	}
	if !v.connGiven {
		v.connGiven = true
		s.sendControl(&wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: v.connIn.Limit()}}})
	}
	v.lastIn++
	in := &copyIn{id: v.lastIn, vector: map[wire.OriginID]wire.HLC{},
		win: credit.NewReceiver(uint64(s.limits.MaxChannelBuffer), uint64(s.limits.MaxFrameBody)+wire.HeaderSize)}
	if len(table) > 0 {
		in.table, in.key = bytes.Clone(table), bytes.Clone(key)
	}
	v.copyIn = in
	req.Credit = in.win.Limit()
	s.sendControl(req)
	return nil
}

func (c *v3Commands) AckChunk() error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("AckChunk"); err != nil {
		return err
	}
	in := s.chans.copyIn
	if in == nil {
		return wire.NewError(wire.CodeInvalidState, "no copy is open (it ended or was aborted)")
	}
	if _, ok := in.pending.front(); !ok {
		return wire.NewError(wire.CodeBadArgument, "no chunk is waiting for its acknowledgement")
	}
	n := in.pending.pop()
	in.pending.compact()
	s.releaseCopy(in, uint64(n))
	return nil
}

func (c *v3Commands) AbortCopy(outgoing bool, code wire.Code, msg string) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("AbortCopy"); err != nil {
		return err
	}
	cl, known := wire.ClassOf(code)
	if !known || cl == wire.ClassLocal {
		return wire.NewError(wire.CodeBadArgument, "code "+string(code)+" does not travel on the wire")
	}
	msg = truncateText(msg, wire.MaxCloseText)
	if outgoing {
		out := s.chans.copyOut
		if out == nil {
			return wire.NewError(wire.CodeInvalidState, "this side serves no copy")
		}
		s.chans.copyOut = nil
		s.sendControl(&wire.CopyAbort{Channel: out.id, Side: wire.SideSender, Code: code, Class: cl, Message: msg})
		return nil
	}
	in := s.chans.copyIn
	if in == nil {
		return wire.NewError(wire.CodeInvalidState, "this side receives no copy")
	}
	s.sendControl(&wire.CopyAbort{Channel: in.id, Side: wire.SideSubscriber, Code: code, Class: cl, Message: msg})
	s.closeCopyIn(in)
	return nil
}

func (c *v3Commands) BeginCopy(positions []wire.CopyPosition, tables, records, size uint64) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("BeginCopy"); err != nil {
		return err
	}
	out := s.chans.copyOut
	switch {
	case out == nil:
		return wire.NewError(wire.CodeInvalidState, "the peer asked for no copy")
	case out.begun:
		return wire.NewError(wire.CodeInvalidState, "the copy has begun already")
	case len(positions) > s.limits.MaxOrigins:
		return wire.NewError(wire.CodeTooManyOrigins, "a vector of "+strconv.Itoa(len(positions))+" origins exceeds "+strconv.Itoa(s.limits.MaxOrigins))
	}
	for i, p := range positions {
		switch {
		case p.Origin.IsZero() || p.Seq == 0 || p.Hash == (wire.Hash{}):
			return wire.NewError(wire.CodeBadArgument, "a copy position needs a non-zero origin, seq >= 1 and its chain hash")
		case i > 0 && bytes.Compare(positions[i-1].Origin[:], p.Origin[:]) >= 0:
			return wire.NewError(wire.CodeBadArgument, "copy positions are not strictly ascending by origin")
		case s.names[p.Origin] == "":
			return wire.NewError(wire.CodeBadArgument, "origin "+p.Origin.String()+" has no name: SetOriginName first")
		}
	}
	for _, p := range positions {
		frame, err := s.originFrame(p.Origin, s.names[p.Origin])
		if err != nil {
			return err
		}
		s.queueOrigin(p.Origin, frame)
	}
	out.begun = true
	begin := func(lo, hi int) wire.Body {
		b := &wire.CopyBegin{Channel: out.id, Positions: positions[lo:hi]}
		if lo == 0 {
			b.Tables, b.Records, b.Bytes = tables, records, size
		}
		return b
	}
	for lo := 0; lo == 0 || lo < len(positions); {
		lo = max(s.sendFitting(lo, min(len(positions), lo+maxListEntries), begin), 1)
	}
	return nil
}

// ChunkFrameSize is the size of the CHUNK frame of a body of n bytes: what SendChunk takes
// from the credit.
func ChunkFrameSize(n int) int { return wire.HeaderSize + n }

func (c *v3Commands) CopyCredit() int { return (*Session)(c).copyCredit() }

func (s *Session) copyCredit() int {
	out := s.chans.copyOut
	if out == nil || !s.hasChannels() {
		return 0
	}
	return int(min(out.win.Available(), s.chans.connOut.Available()))
}

// begunCopyOut starts command op on the copy this side serves, which BeginCopy began.
func (s *Session) begunCopyOut(op string) (*copyOut, error) {
	s.begin()
	if err := s.needV3(op); err != nil {
		return nil, err
	}
	out := s.chans.copyOut
	switch {
	case out == nil:
		return nil, wire.NewError(wire.CodeInvalidState, "the peer asked for no copy")
	case !out.begun:
		return nil, wire.NewError(wire.CodeInvalidState, op+" before BeginCopy")
	}
	return out, nil
}

func (c *v3Commands) SendChunk(body []byte) error {
	s := (*Session)(c)
	out, err := s.begunCopyOut("SendChunk")
	if err != nil {
		return err
	}
	v, err := wire.ParseChunk(body)
	if err != nil {
		return wire.NewError(wire.CodeBadArgument, "chunk: "+err.Error())
	}
	if why := s.formatNotCarried("chunk", v.Format); why != "" {
		return wire.NewError(wire.CodeBadArgument, "chunk: "+why)
	}
	if out.table != nil {
		if t := bytes.Compare(v.Table, out.table); t < 0 || t == 0 && bytes.Compare(v.First, out.key) <= 0 {
			return wire.NewError(wire.CodeBadArgument, "the chunk's first record is not above the last one sent")
		}
	}
	size := ChunkFrameSize(len(body))
	switch {
	case len(body) > s.peerFrame:
		return wire.NewError(wire.CodeFrameTooLarge, "a CHUNK body of "+strconv.Itoa(len(body))+" bytes exceeds the peer's frame limit of "+strconv.Itoa(s.peerFrame))
	case uint64(size) > min(out.win.Available(), s.chans.connOut.Available()):
		return wire.NewError(wire.CodeNoCredit, "a CHUNK frame of "+strconv.Itoa(size)+" bytes exceeds the credit of "+strconv.Itoa(s.copyCredit()))
	case s.outBytes > 0 && s.outBytes+size > s.limits.MaxSendBuffer:
		return wire.NewError(wire.CodeSendBufferFull, strconv.Itoa(s.outBytes)+" bytes are queued; take them with Ready first")
	}
	out.table, out.key = append(out.table[:0], v.Table...), append(out.key[:0], v.Last...)
	out.records += uint64(v.Count)
	out.win.Send(uint64(size))
	s.chans.connOut.Send(uint64(size))
	s.reserve(wire.TypeChunk, size)
	s.cur = wire.AppendHeader(s.cur, wire.Header{Type: wire.TypeChunk, Channel: out.id, Length: uint32(len(body))})
	s.cur = append(s.cur, body...)
	return nil
}

func (c *v3Commands) EndCopy() error {
	s := (*Session)(c)
	out, err := s.begunCopyOut("EndCopy")
	if err != nil {
		return err
	}
	s.chans.copyOut = nil
	s.sendControl(&wire.CopyEnd{Channel: out.id, Records: out.records})
	return nil
}
