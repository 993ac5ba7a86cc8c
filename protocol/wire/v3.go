package wire

import "strconv"

// Version 3 (SPEC.md, "Version 3: floors and the purged answer"): version 2 and what bounded
// history adds to it: the floors in HEADS (key 3) and PURGED.

// TypePurged is version 3's answer to a subscription or resend below the sender's floor.
const TypePurged Type = 0x30

// Floor is the highest entry a sender purged from an origin's log: its seq and chain hash.
// The sender's log holds the entries above it; a subscriber below it cannot be served.
type Floor struct {
	_      struct{} `cbor:",toarray"`
	Origin OriginID
	Seq    uint64
	Hash   Hash
}

// Purged is the PURGED body: the subscriber's channel asked for entries at or below the
// sender's floor (Seq, Hash), which the sender no longer holds. The channel is closed on
// both sides.
type Purged struct {
	Channel uint32 `cbor:"1,keyasint"`
	Seq     uint64 `cbor:"2,keyasint"`
	Hash    Hash   `cbor:"3,keyasint"`
	Unknown
}

func (*Purged) FrameType() Type { return TypePurged }

func (p *Purged) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, p, p.Extra) }

// Validate: a channel above 0 and a floor at seq >= 1 with its chain hash.
func (p *Purged) Validate() error {
	switch {
	case p.Channel == 0:
		return badField("PURGED on channel 0")
	case p.Seq == 0 || p.Hash == (Hash{}):
		return badField("PURGED floor at seq " + strconv.FormatUint(p.Seq, 10) + ": a floor is at seq >= 1 with its chain hash")
	}
	return nil
}

func init() {
	register(TypePurged, typeInfo{name: "PURGED", maxBody: MaxControlBody, version: 3,
		decode: decodeControl[Purged](3, (*Purged).Validate, 1, 2, 3)})
}
