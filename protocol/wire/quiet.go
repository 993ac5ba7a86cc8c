package wire

import (
	"bytes"
	"strconv"
)

// The quiet control plane (SPEC.md, "Version 4", "The quiet control plane"; docs/design.md
// §28): on a version-4 connection, frames that travel anyway carry a stamp from which both
// sides sample the round trip and the clock offset without a PING, and each side tells the
// other with QUIET which origins it takes directly from their own node, so that the peer
// does not advertise those to it. 0x5D-0x5F are the quiet control plane's and routing's
// sub-range; QUIET is 0x5D.

// Stamp is a version-4 frame's send time and its echo of the peer's latest stamp, all in
// microseconds. Time is the sender's wall clock when it sent the frame (since the Unix
// epoch, at least 1). Echo is the Time of the latest stamp the sender received from the
// peer and had not echoed yet (0: none); Held how long the sender held that stamp between
// receiving it and sending this frame. The peer, receiving at t3 its own clock, samples
// the round trip t3 - Echo - Held and its offset Time - (Echo + Held + rtt/2): NTP's, with
// the receive time Time - Held, wrong by at most half the round trip.
type Stamp struct {
	_    struct{} `cbor:",toarray"`
	Time uint64
	Echo uint64
	Held uint64
}

// Validate: a send time; a hold only with an echo, and an echo not after the send time
// less the hold is not checked (the two are of different clocks).
func (s *Stamp) Validate() error {
	switch {
	case s == nil:
		return nil
	case s.Time == 0:
		return badField("a stamp needs a send time")
	case s.Echo == 0 && s.Held != 0:
		return badField("a stamp holds for " + strconv.FormatUint(s.Held, 10) + " µs with no echo")
	}
	return nil
}

// TypeQuiet tells the peer which origins this side takes directly from their own node.
const TypeQuiet Type = 0x5D

// Quiet is the QUIET body, version 4: Quiet lists the origins the sender now takes
// directly from the origin's own node (the peer advertises them to it no more), Loud the
// origins it no longer does (the peer advertises them again, at once). Each side sends one
// QUIET first on a version-4 connection, possibly empty, and the peer's first full
// advertisement waits for it. The set the peer keeps is bounded by its MaxOrigins
// (too-many-origins).
type Quiet struct {
	Quiet []OriginID `cbor:"1,keyasint,omitempty"`
	Loud  []OriginID `cbor:"2,keyasint,omitempty"`
	Stamp *Stamp     `cbor:"3,keyasint,omitempty"`
	Unknown
}

func (*Quiet) FrameType() Type { return TypeQuiet }

func (q *Quiet) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, q, q.Extra) }

// Validate: each list strictly ascending, of non-zero origins, none in both; the stamp's
// own checks. An empty QUIET is valid: it is each side's first.
func (q *Quiet) Validate() error {
	for _, l := range [...]struct {
		what string
		ids  []OriginID
	}{{"quiet", q.Quiet}, {"loud", q.Loud}} {
		for i, o := range l.ids {
			if o.IsZero() {
				return badField("QUIET " + l.what + " origin id is all zero")
			}
			if i > 0 && bytes.Compare(l.ids[i-1][:], o[:]) >= 0 {
				return badField("QUIET " + l.what + " origins are not strictly ascending")
			}
		}
	}
	i, j := 0, 0
	for i < len(q.Quiet) && j < len(q.Loud) {
		switch c := bytes.Compare(q.Quiet[i][:], q.Loud[j][:]); {
		case c == 0:
			return badField("QUIET origin " + q.Loud[j].String() + " is both quiet and loud")
		case c < 0:
			i++
		default:
			j++
		}
	}
	return q.Stamp.Validate()
}

func init() {
	register(TypeQuiet, typeInfo{name: "QUIET", maxBody: MaxControlBody, version: 4,
		decode: decodeControl[Quiet](3, (*Quiet).Validate)})
}

// DecodeQuiet decodes and checks a QUIET body, as a received frame's is.
func DecodeQuiet(b []byte) (*Quiet, error) { return decodeAs[*Quiet](TypeQuiet, b) }
