package protocol

import (
	"bytes"
	"slices"
	"strconv"

	"plait/protocol/wire"
)

// V3Commands are the commands only a version-3 connection takes (Session.V3): what bounded
// history adds to version 2. On an older connection they are refused with invalid-state.
type V3Commands interface {
	// AdvertiseFloors tells the peer how far this side purged each origin's log: its floor
	// (the highest seq purged and its chain hash), in a HEADS frame's key 3. Only floors
	// that moved since the last call are sent; floors never go back. Every origin needs a
	// name (SetOriginName); its ORIGIN frame goes first.
	AdvertiseFloors(floors []wire.Floor) error
	// Purged answers the peer's channel of origin: it asks for entries at or below this
	// side's floor (seq, hash), which this side no longer holds. It sends PURGED and
	// closes the channel.
	Purged(origin wire.OriginID, seq uint64, hash wire.Hash) error

	// RequestCopy asks the peer for a base copy of its records after (table, key), or of
	// all of them when both are nil (SPEC.md, "The base copy"). The copy's records arrive as
	// EventCopyBegin, EventChunk and EventCopyEnd, or it stops with EventCopyAborted. One copy
	// is received at a time; the first call grants the connection's credit, as Subscribe's.
	RequestCopy(table, key []byte) error
	// AckChunk tells the session that the oldest chunk it handed over (EventChunk) is
	// durable here: its bytes are released to the peer as credit.
	AckChunk() error
	// AbortCopy stops the copy this side serves (outgoing) or receives, telling the peer
	// with code (one that travels on the wire: copy-busy, going-away, bad-chunk...).
	AbortCopy(outgoing bool, code wire.Code, msg string) error

	// BeginCopy answers the peer's copy request (EventCopyRequested): the cursor vector of
	// the snapshot the copy streams, ascending by origin, with how large it is (tables, and
	// estimates of records and bytes; 0 when unknown). Every origin needs a name.
	BeginCopy(positions []wire.CopyPosition, tables, records, size uint64) error
	// SendChunk queues one CHUNK body (wire.AppendChunk) on the copy: its first record
	// above the last one sent. It is refused with no-credit beyond CopyCredit,
	// send-buffer-full beyond the send buffer and frame-too-large beyond the peer's frame
	// limit, and a chunk of format 2 (tokens) below version 4 with bad-argument; nothing is
	// queued then.
	SendChunk(body []byte) error
	// CopyCredit is how many CHUNK bytes (header included, ChunkFrameSize) SendChunk may
	// queue now; 0 when no copy is served.
	CopyCredit() int
	// EndCopy tells the peer that the snapshot was copied whole, and closes the copy.
	EndCopy() error

	// AskRange sends an anti-entropy ask (RANGEDIGEST): this side's digest of its records
	// in a range (SPEC.md, "Anti-entropy"). Only on a connection that negotiated
	// wire.CapAntiEntropy, and one at a time: the answer arrives as EventRangeAnswered.
	AskRange(d *wire.RangeDigest) error
	// RangeAsked reports whether this side asked a range that is not answered yet.
	RangeAsked() bool
	// AnswerRange answers the peer's ask (EventRangeAsked) with a RANGERECORDS body
	// (wire.AppendRangeRecords) that fits it. It is refused with frame-too-large beyond
	// the peer's frame limit, send-buffer-full beyond the send buffer, and an answer of
	// format 2 (tokens) below version 4 with bad-argument; nothing is queued then.
	AnswerRange(body []byte) error
}

// V3 returns the version-3 commands of the session.
func (s *Session) V3() V3Commands { return (*v3Commands)(s) }

// v3Commands is a Session seen through its version-3 commands.
type v3Commands Session

func (s *Session) needV3(cmd string) *wire.Error {
	if err := s.needEstablished(cmd); err != nil {
		return err
	}
	if s.info.Version < 3 {
		return wire.NewError(wire.CodeInvalidState, cmd+" on a version-"+strconv.FormatUint(s.info.Version, 10)+" connection")
	}
	return nil
}

func (c *v3Commands) AdvertiseFloors(floors []wire.Floor) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("AdvertiseFloors"); err != nil {
		return err
	}
	var fresh []wire.Floor
	seen := make(map[wire.OriginID]bool, len(floors))
	for _, f := range floors {
		old := s.chans.advFloors[f.Origin]
		switch {
		case f.Origin.IsZero() || f.Seq == 0 || f.Hash == (wire.Hash{}):
			return wire.NewError(wire.CodeBadArgument, "a floor needs a non-zero origin, seq >= 1 and its chain hash")
		case seen[f.Origin]:
			return wire.NewError(wire.CodeBadArgument, "origin "+f.Origin.String()+" twice in one call")
		case f.Seq < old:
			return wire.NewError(wire.CodeBadArgument, "the floor of origin "+f.Origin.String()+" would go back")
		case s.names[f.Origin] == "":
			return wire.NewError(wire.CodeBadArgument, "origin "+f.Origin.String()+" has no name: SetOriginName first")
		case f.Seq == old:
			continue
		}
		seen[f.Origin] = true
		fresh = append(fresh, f)
	}
	if len(s.chans.advFloors)+len(fresh) > s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "advertising floors of more than "+strconv.Itoa(s.limits.MaxOrigins)+" origins")
	}
	slices.SortFunc(fresh, func(a, b wire.Floor) int { return bytes.Compare(a.Origin[:], b.Origin[:]) })
	for _, f := range fresh {
		frame, err := s.originFrame(f.Origin, s.names[f.Origin])
		if err != nil {
			return err
		}
		s.queueOrigin(f.Origin, frame)
		s.chans.advFloors[f.Origin] = f.Seq
	}
	s.sendChunked(len(fresh), func(lo, hi int) wire.Body { return &wire.Heads{Floors: fresh[lo:hi]} })
	return nil
}

func (c *v3Commands) Purged(origin wire.OriginID, seq uint64, hash wire.Hash) error {
	s := (*Session)(c)
	s.begin()
	if err := s.needV3("Purged"); err != nil {
		return err
	}
	ch := s.chans.outOrigin[origin]
	switch {
	case ch == nil:
		return wire.NewError(wire.CodeInvalidState, "the peer has not subscribed to origin "+origin.String())
	case seq == 0 || hash == (wire.Hash{}):
		return wire.NewError(wire.CodeBadArgument, "a floor is at seq >= 1 with its chain hash")
	case seq < ch.next:
		return wire.NewError(wire.CodeBadArgument, "the channel of origin "+origin.String()+" asks from "+
			strconv.FormatUint(ch.next, 10)+", above the floor "+strconv.FormatUint(seq, 10))
	}
	s.sendControl(&wire.Purged{Channel: ch.id, Seq: seq, Hash: hash})
	s.closeOut(ch)
	return nil
}
