package wire

import (
	"bytes"
	"slices"
	"strconv"
)

// Version-2 frame bodies (SPEC.md, "Version 2: per-origin channels"). Channels are numbered
// by the subscriber of a stream, from 1, never reused on a connection; the frame type says
// which way a frame flows, hence whose channel it names. List entries are CBOR arrays of
// fixed length: compact for vectors of thousands of origins, and never extended (a later
// version adds keys to the enclosing map instead).

// SubscribeEntry opens one channel: stream the origin's entries after Seq (whose chain hash
// is Hash) on Channel, with Credit as the channel's first flow-control limit.
type SubscribeEntry struct {
	_       struct{} `cbor:",toarray"`
	Channel uint32
	Origin  OriginID
	Seq     uint64
	Hash    Hash
	Credit  uint64
}

// Subscribe is the SUBSCRIBE body: the subscriber's cursor vector for the origins it takes
// from this peer, whole when it (re)subscribes, one more origin at a time afterwards.
type Subscribe struct {
	Entries []SubscribeEntry `cbor:"1,keyasint"`
	Unknown
}

func (*Subscribe) FrameType() Type { return TypeSubscribe }

func (s *Subscribe) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, s, s.Extra) }

// Validate: at least one entry, channels strictly ascending and above 0, origins distinct,
// positions well formed (a hash exactly when seq > 0).
func (s *Subscribe) Validate() error {
	if len(s.Entries) == 0 {
		return badField("SUBSCRIBE with no entry")
	}
	seen := make(map[OriginID]bool, len(s.Entries))
	var last uint32
	for _, e := range s.Entries {
		if err := nextChannel(&last, e.Channel); err != nil {
			return err
		}
		if err := checkPosition(e.Origin, e.Seq, e.Hash); err != nil {
			return err
		}
		if seen[e.Origin] {
			return badField("origin " + e.Origin.String() + " twice in one SUBSCRIBE")
		}
		seen[e.Origin] = true
	}
	return nil
}

// nextChannel checks the next channel of a list: above 0 and above the previous one.
func nextChannel(last *uint32, ch uint32) error {
	if ch <= *last {
		if ch == 0 {
			return badField("channel 0 in a channel list")
		}
		return badField("channels are not strictly ascending at " + strconv.FormatUint(uint64(ch), 10))
	}
	*last = ch
	return nil
}

func checkPosition(o OriginID, seq uint64, h Hash) error {
	switch {
	case o.IsZero():
		return badField("origin id is all zero")
	case seq == 0 && h != Hash{}:
		return badField("seq 0 with a chain hash")
	case seq > 0 && h == Hash{}:
		return badField("seq " + strconv.FormatUint(seq, 10) + " without its chain hash")
	}
	return nil
}

// Unsubscribe is the UNSUBSCRIBE body: channels the subscriber closes.
type Unsubscribe struct {
	Channels []uint32 `cbor:"1,keyasint"`
	Unknown
}

func (*Unsubscribe) FrameType() Type { return TypeUnsubscribe }

func (u *Unsubscribe) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, u, u.Extra) }

// Validate: at least one channel, strictly ascending, above 0.
func (u *Unsubscribe) Validate() error {
	if len(u.Channels) == 0 {
		return badField("UNSUBSCRIBE with no channel")
	}
	var last uint32
	for _, ch := range u.Channels {
		if err := nextChannel(&last, ch); err != nil {
			return err
		}
	}
	return nil
}

// CursorEntry is a durable position on a channel.
type CursorEntry struct {
	_       struct{} `cbor:",toarray"`
	Channel uint32
	Seq     uint64
	Hash    Hash
}

// Cursor is the CURSOR body: the subscriber made every entry up to Seq durable on each
// channel (a cursor-vector delta; persist before ack).
type Cursor struct {
	Entries []CursorEntry `cbor:"1,keyasint"`
	// Stamp (version 4, key 2): the quiet control plane's send time and echo (quiet.go).
	Stamp *Stamp `cbor:"2,keyasint,omitempty"`
	Unknown
}

func (*Cursor) FrameType() Type { return TypeCursor }

func (c *Cursor) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, c, c.Extra) }

// Validate: at least one entry, channels strictly ascending and above 0, seq >= 1 with its
// hash.
func (c *Cursor) Validate() error {
	if len(c.Entries) == 0 {
		return badField("CURSOR with no entry")
	}
	if err := c.Stamp.Validate(); err != nil {
		return err
	}
	var last uint32
	for _, e := range c.Entries {
		if err := nextChannel(&last, e.Channel); err != nil {
			return err
		}
		if e.Seq == 0 || e.Hash == (Hash{}) {
			return badField("a cursor at seq " + strconv.FormatUint(e.Seq, 10) + " must be above 0 with its chain hash")
		}
	}
	return nil
}

// Head is one origin a sender holds: its highest seq and that entry's HLC timestamp.
type Head struct {
	_      struct{} `cbor:",toarray"`
	Origin OriginID
	Seq    uint64
	HLC    HLC
}

// Heads is the HEADS body: origins the sender holds (new or advanced heads) and origins it
// no longer offers.
type Heads struct {
	Heads     []Head     `cbor:"1,keyasint,omitempty"`
	Withdrawn []OriginID `cbor:"2,keyasint,omitempty"`
	// Floors (version 3, key 3): the highest entry the sender purged from each origin's log,
	// for origins whose floor is new or moved; a key that earlier builds keep as unknown.
	Floors []Floor `cbor:"3,keyasint,omitempty"`
	// Stamp (version 4, key 4): the quiet control plane's send time and echo (quiet.go).
	Stamp *Stamp `cbor:"4,keyasint,omitempty"`
	Unknown
}

func (*Heads) FrameType() Type { return TypeHeads }

func (h *Heads) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, h, h.Extra) }

// Validate: something to say; each list strictly ascending by origin; no origin both a
// head and withdrawn, nor both withdrawn and given a floor; heads at seq >= 1; floors at
// seq >= 1 with their chain hash.
func (h *Heads) Validate() error {
	if len(h.Heads) == 0 && len(h.Withdrawn) == 0 && len(h.Floors) == 0 {
		return badField("HEADS with no head, nothing withdrawn and no floor")
	}
	if err := h.Stamp.Validate(); err != nil {
		return err
	}
	for i, f := range h.Floors {
		if f.Origin.IsZero() || f.Seq == 0 || f.Hash == (Hash{}) {
			return badField("a floor needs a non-zero origin, seq >= 1 and its chain hash")
		}
		if i > 0 && bytes.Compare(h.Floors[i-1].Origin[:], f.Origin[:]) >= 0 {
			return badField("floors are not strictly ascending by origin")
		}
		if slices.Contains(h.Withdrawn, f.Origin) {
			return badField("origin " + f.Origin.String() + " is both withdrawn and given a floor")
		}
	}
	for i, e := range h.Heads {
		if e.Origin.IsZero() || e.Seq == 0 {
			return badField("a head needs a non-zero origin and seq >= 1")
		}
		if i > 0 && bytes.Compare(h.Heads[i-1].Origin[:], e.Origin[:]) >= 0 {
			return badField("heads are not strictly ascending by origin")
		}
	}
	for i, o := range h.Withdrawn {
		if o.IsZero() {
			return badField("withdrawn origin id is all zero")
		}
		if i > 0 && bytes.Compare(h.Withdrawn[i-1][:], o[:]) >= 0 {
			return badField("withdrawn origins are not strictly ascending")
		}
	}
	i, j := 0, 0
	for i < len(h.Heads) && j < len(h.Withdrawn) {
		switch c := bytes.Compare(h.Heads[i].Origin[:], h.Withdrawn[j][:]); {
		case c == 0:
			return badField("origin " + h.Withdrawn[j].String() + " is both a head and withdrawn")
		case c < 0:
			i++
		default:
			j++
		}
	}
	return nil
}

// CreditEntry raises a flow-control limit: channel 0 is the connection.
type CreditEntry struct {
	_       struct{} `cbor:",toarray"`
	Channel uint32
	Limit   uint64
}

// Credit is the CREDIT body: absolute limits, in DATA bytes (headers included) since the
// channel (or the connection) opened, up to which the sender may send.
type Credit struct {
	Entries []CreditEntry `cbor:"1,keyasint"`
	// Stamp (version 4, key 2): the quiet control plane's send time and echo (quiet.go).
	Stamp *Stamp `cbor:"2,keyasint,omitempty"`
	Unknown
}

func (*Credit) FrameType() Type { return TypeCredit }

func (c *Credit) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, c, c.Extra) }

// Validate: at least one entry, channels strictly ascending (0, the connection, first).
func (c *Credit) Validate() error {
	if len(c.Entries) == 0 {
		return badField("CREDIT with no entry")
	}
	if err := c.Stamp.Validate(); err != nil {
		return err
	}
	for i, e := range c.Entries {
		if i > 0 && c.Entries[i-1].Channel >= e.Channel {
			return badField("credit channels are not strictly ascending at " + strconv.FormatUint(uint64(e.Channel), 10))
		}
	}
	return nil
}

// Resend is the RESEND body: the subscriber detected a gap on the channel and asks for its
// entries again from From (its applied seq + 1).
type Resend struct {
	Channel uint32 `cbor:"1,keyasint"`
	From    uint64 `cbor:"2,keyasint"`
	Unknown
}

func (*Resend) FrameType() Type { return TypeResend }

func (r *Resend) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, r, r.Extra) }

// Validate: a channel above 0, from >= 1.
func (r *Resend) Validate() error {
	if r.Channel == 0 || r.From == 0 {
		return badField("RESEND needs a channel above 0 and from >= 1")
	}
	return nil
}

// Divergence sides: who reports.
const (
	SideSubscriber uint8 = 0 // the reporter subscribes to the channel
	SideSender     uint8 = 1 // the reporter sends on the channel
)

// Divergence is the DIVERGENCE body: on Channel, the reporter's position in the origin's
// chain (Seq and its Hash) is not one the peer's log extends or agrees with. The channel is
// closed; both sides raise the alarm.
type Divergence struct {
	Channel uint32 `cbor:"1,keyasint"`
	Seq     uint64 `cbor:"2,keyasint"`
	Hash    Hash   `cbor:"3,keyasint"`
	Side    uint8  `cbor:"4,keyasint"`
	Unknown
}

func (*Divergence) FrameType() Type { return TypeDivergence }

func (d *Divergence) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, d, d.Extra) }

// Validate: a channel above 0, a well-formed position, a known side.
func (d *Divergence) Validate() error {
	if d.Channel == 0 {
		return badField("DIVERGENCE on channel 0")
	}
	if d.Side > SideSender {
		return badField("DIVERGENCE side " + strconv.Itoa(int(d.Side)) + " is neither 0 (subscriber) nor 1 (sender)")
	}
	if (d.Seq == 0) != (d.Hash == Hash{}) {
		return badField("DIVERGENCE position: a hash exactly when seq > 0")
	}
	return nil
}

// DataHeader is the fixed part of a DATA body: the chain hash the sender holds for the
// entry, which the receiver compares with the SHA-256 of the encoding it received.
const DataHeader = 32

// Data is the DATA body: the entry's chain hash, then its transaction encoding. The
// channel is in the frame header.
type Data struct {
	Hash Hash
	Txn  Txn
}

func (*Data) FrameType() Type { return TypeData }

func (d *Data) AppendBody(dst []byte) ([]byte, error) {
	dst = append(dst, d.Hash[:]...)
	return d.Txn.AppendEncoding(dst)
}

// ParseData parses a DATA body without copying: the claimed chain hash and a checked view
// of the transaction (which aliases body). Whether the claimed hash is the encoding's is
// the receiver's check.
func ParseData(body []byte) (Hash, TxnView, error) { return ParseDataUpTo(body, TxnFormat3) }

// ParseDataUpTo is ParseData taking transaction formats up to max only (ParseTxnUpTo).
func ParseDataUpTo(body []byte, max byte) (Hash, TxnView, error) {
	var h Hash
	if len(body) < DataHeader {
		return h, TxnView{}, badTxn("DATA body of " + strconv.Itoa(len(body)) + " bytes has no room for the chain hash")
	}
	copy(h[:], body[:DataHeader])
	v, err := ParseTxnUpTo(body[DataHeader:], max)
	return h, v, err
}

func init() {
	control := func(name string) typeInfo { return typeInfo{name: name, maxBody: MaxControlBody, version: 2} }
	withDecode := func(info typeInfo, decode func([]byte) (Body, error)) typeInfo {
		info.decode = decode
		return info
	}
	register(TypeSubscribe, withDecode(control("SUBSCRIBE"), decodeControl[Subscribe](1, (*Subscribe).Validate, 1)))
	register(TypeUnsubscribe, withDecode(control("UNSUBSCRIBE"), decodeControl[Unsubscribe](1, (*Unsubscribe).Validate, 1)))
	register(TypeCursor, withDecode(control("CURSOR"), decodeControl[Cursor](2, (*Cursor).Validate, 1)))
	register(TypeHeads, withDecode(control("HEADS"), decodeControl[Heads](4, (*Heads).Validate)))
	register(TypeCredit, withDecode(control("CREDIT"), decodeControl[Credit](2, (*Credit).Validate, 1)))
	register(TypeResend, withDecode(control("RESEND"), decodeControl[Resend](2, (*Resend).Validate, 1, 2)))
	register(TypeDivergence, withDecode(control("DIVERGENCE"), decodeControl[Divergence](4, (*Divergence).Validate, 1, 2, 3, 4)))
	register(TypeData, typeInfo{name: "DATA", channel: true, version: 2,
		decode: func(b []byte) (Body, error) {
			h, v, err := ParseData(b)
			if err != nil {
				return nil, err
			}
			return &Data{Hash: h, Txn: v.Txn()}, nil
		}})
}
