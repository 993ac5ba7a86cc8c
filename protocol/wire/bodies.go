package wire

import (
	"encoding/binary"
	"strconv"
)

// Body is the decoded body of one frame type.
type Body interface {
	// FrameType is the type of frame the body belongs to.
	FrameType() Type
	// AppendBody appends the body's encoding to dst.
	AppendBody(dst []byte) ([]byte, error)
}

// AppendFrame appends one frame (header and body) to dst.
func AppendFrame(dst []byte, flags uint8, channel uint32, b Body) ([]byte, error) {
	start := len(dst)
	dst = AppendHeader(dst, Header{Type: b.FrameType(), Flags: flags, Channel: channel})
	dst, err := b.AppendBody(dst)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - start - HeaderSize
	if n > MaxFrameBody {
		return dst[:start], NewError(CodeFrameTooLarge, b.FrameType().String()+" body of "+strconv.Itoa(n)+" bytes exceeds the protocol limit")
	}
	binary.BigEndian.PutUint32(dst[start+6:], uint32(n))
	return dst, nil
}

// DecodeBody decodes the body of a frame of a type this build implements.
func DecodeBody(f Frame) (Body, *Error) {
	info := registry[f.Type]
	if info.decode == nil {
		return nil, FrameError(CodeUnknownFrame, f.Type, f.Offset, "frame type not implemented")
	}
	b, err := info.decode(f.Body)
	if err != nil {
		return nil, bodyError(f, err)
	}
	return b, nil
}

// Role says which side of a connection a session is. The MAC transcript orders the two
// HELLOs by role, and two sessions of the same role cannot talk.
type Role uint8

const (
	RoleDialer   Role = 0
	RoleListener Role = 1
)

func (r Role) String() string {
	switch r {
	case RoleDialer:
		return "dialer"
	case RoleListener:
		return "listener"
	}
	return "role-" + strconv.Itoa(int(r))
}

// Handshake field bounds.
const (
	MinNonceLen   = 16
	MaxNonceLen   = 64
	MaxCaps       = 32
	MaxCapLen     = 32
	MinMaxMessage = 64 << 10 // the smallest message limit a HELLO may advertise
	MinMaxFrame   = 1 << 10  // the smallest frame-body limit a HELLO may advertise
	MaxCloseText  = 1024
)

// Hello is the HELLO body: who the sender is, what it speaks, and its nonce.
type Hello struct {
	Role       Role     `cbor:"1,keyasint"`
	Name       string   `cbor:"2,keyasint"`
	Origin     OriginID `cbor:"3,keyasint"`
	MinVersion uint64   `cbor:"4,keyasint"`
	MaxVersion uint64   `cbor:"5,keyasint"`
	Caps       []string `cbor:"6,keyasint,omitempty"` // sorted, unique
	Nonce      []byte   `cbor:"7,keyasint"`
	MaxMessage uint64   `cbor:"8,keyasint,omitempty"` // largest message the sender accepts; 0: DefaultMaxMessage
	MaxFrame   uint64   `cbor:"9,keyasint,omitempty"` // largest frame body the sender accepts; 0: MaxFrameBody
	// Leaf: the sender is a leaf and this connection is to its hub (version 4 with
	// CapLeaf; SPEC.md, "Hubs and leaves"). Absent on every other HELLO.
	Leaf bool `cbor:"10,keyasint,omitempty"`
	Unknown
}

func (*Hello) FrameType() Type { return TypeHello }

func (h *Hello) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, h, h.Extra) }

// Validate checks every field's rule (SPEC.md, "HELLO").
func (h *Hello) Validate() error {
	if h.Role != RoleDialer && h.Role != RoleListener {
		return badField("role " + strconv.Itoa(int(h.Role)) + " is neither dialer (0) nor listener (1)")
	}
	if err := checkName("name", h.Name); err != nil {
		return err
	}
	if h.Origin.IsZero() {
		return badField("origin id is all zero")
	}
	if h.MinVersion == 0 || h.MinVersion > h.MaxVersion {
		return badField("version range " + strconv.FormatUint(h.MinVersion, 10) + ".." + strconv.FormatUint(h.MaxVersion, 10) + " is empty or starts at 0")
	}
	if err := CheckCaps(h.Caps); err != nil {
		return err
	}
	if len(h.Nonce) < MinNonceLen || len(h.Nonce) > MaxNonceLen {
		return badField("nonce of " + strconv.Itoa(len(h.Nonce)) + " bytes is outside 16..64")
	}
	frame, msg := h.Limits()
	if frame < MinMaxFrame || frame > MaxFrameBody {
		return badField("max frame body " + strconv.FormatUint(frame, 10) + " is outside 1024..16777216")
	}
	if msg < MinMaxMessage || msg < frame+HeaderSize {
		return badField("max message " + strconv.FormatUint(msg, 10) + " is below 65536 or cannot hold a frame of the max frame body " + strconv.FormatUint(frame, 10))
	}
	return nil
}

// Limits returns the largest frame body and message the HELLO's sender accepts, with the
// defaults for absent fields.
func (h *Hello) Limits() (frameBody, message uint64) {
	frameBody, message = h.MaxFrame, h.MaxMessage
	if frameBody == 0 {
		frameBody = MaxFrameBody
	}
	if message == 0 {
		message = DefaultMaxMessage
	}
	return frameBody, message
}

// CheckCaps checks a capability list: at most 32 names of 1-32 bytes of [a-z0-9.-],
// strictly ascending.
func CheckCaps(caps []string) error {
	if len(caps) > MaxCaps {
		return badField(strconv.Itoa(len(caps)) + " capabilities exceed the limit of 32")
	}
	for i, c := range caps {
		if len(c) == 0 || len(c) > MaxCapLen {
			return badField("capability " + strconv.Quote(c) + " is not 1-32 bytes")
		}
		for j := 0; j < len(c); j++ {
			b := c[j]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '.') {
				return badField("capability " + strconv.Quote(c) + " is not [a-z0-9.-]")
			}
		}
		if i > 0 && caps[i-1] >= c {
			return badField("capabilities are not strictly ascending at " + strconv.Quote(c))
		}
	}
	return nil
}

// DefaultMaxMessage is the message limit of a peer whose HELLO does not state one.
const DefaultMaxMessage = MaxFrameBody + 64<<10

// MAC is an HMAC-SHA256 value.
type MAC [32]byte

// MarshalCBOR encodes the MAC as a 32-byte CBOR byte string.
func (m MAC) MarshalCBOR() ([]byte, error) { return encMode.Marshal(m[:]) }

// UnmarshalCBOR accepts exactly a 32-byte CBOR byte string.
func (m *MAC) UnmarshalCBOR(b []byte) error { return fixedBytes(b, m[:], "mac") }

// Auth is the AUTH body: the sender's MAC over both HELLOs.
type Auth struct {
	MAC MAC `cbor:"1,keyasint"`
	Unknown
}

func (*Auth) FrameType() Type { return TypeAuth }

func (a *Auth) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, a, a.Extra) }

// Close is the CLOSE body: why the sender is closing the connection.
type Close struct {
	Code    Code   `cbor:"1,keyasint"`
	Class   Class  `cbor:"2,keyasint"`
	Message string `cbor:"3,keyasint,omitempty"`
	Unknown
}

func (*Close) FrameType() Type { return TypeClose }

func (c *Close) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, c, c.Extra) }

// Validate checks the CLOSE fields: code and class are 1-64 bytes of [a-z0-9-], the
// message at most 1024 bytes.
func (c *Close) Validate() error {
	if !token(string(c.Code)) {
		return badField("close code " + strconv.Quote(string(c.Code)) + " is not 1-64 bytes of [a-z0-9-]")
	}
	if !token(string(c.Class)) {
		return badField("close class " + strconv.Quote(string(c.Class)) + " is not 1-64 bytes of [a-z0-9-]")
	}
	if len(c.Message) > MaxCloseText {
		return badField("close message of " + strconv.Itoa(len(c.Message)) + " bytes exceeds 1024")
	}
	return nil
}

func token(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
			return false
		}
	}
	return true
}

// Ping is the PING body; the peer answers with a PONG carrying the same id.
type Ping struct {
	ID uint64 `cbor:"1,keyasint"`
	// Stamp (version 4, key 2): the quiet control plane's send time and echo (quiet.go).
	Stamp *Stamp `cbor:"2,keyasint,omitempty"`
	Unknown
}

func (*Ping) FrameType() Type { return TypePing }

func (p *Ping) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, p, p.Extra) }

// Pong is the PONG body.
type Pong struct {
	ID uint64 `cbor:"1,keyasint"`
	// Time is the sender's wall clock when it answered, in microseconds since the Unix
	// epoch (optional; sent on version-3 connections, absent at or before the epoch). The
	// PING's sender estimates the clock offset between the two nodes from it and the round
	// trip (SPEC.md, "Liveness").
	Time uint64 `cbor:"2,keyasint,omitempty"`
	// Stamp (version 4, key 3): the quiet control plane's send time and echo (quiet.go).
	Stamp *Stamp `cbor:"3,keyasint,omitempty"`
	Unknown
}

func (*Pong) FrameType() Type { return TypePong }

func (p *Pong) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, p, p.Extra) }

// Origin is the ORIGIN body: the human name of an origin, sent before the first entry of
// that origin on a connection, so that nodes which never met the origin can name it.
type Origin struct {
	Origin OriginID `cbor:"1,keyasint"`
	Name   string   `cbor:"2,keyasint"`
	Unknown
}

func (*Origin) FrameType() Type { return TypeOrigin }

func (o *Origin) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, o, o.Extra) }

// Subscribe1 is the version-1 SUBSCRIBE body: stream every entry after this position of
// the sender's arrival order (0: from the beginning).
type Subscribe1 struct {
	Position uint64 `cbor:"1,keyasint"`
	Unknown
}

func (*Subscribe1) FrameType() Type { return TypeSubscribe1 }

func (s *Subscribe1) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, s, s.Extra) }

// Ack1 is the version-1 ACK body: every entry up to this arrival position is durable on
// the receiver.
type Ack1 struct {
	Position uint64 `cbor:"1,keyasint"`
	Unknown
}

func (*Ack1) FrameType() Type { return TypeAck1 }

func (a *Ack1) AppendBody(dst []byte) ([]byte, error) { return appendMap(dst, a, a.Extra) }

// Txn1 is the version-1 TXN body: an arrival position (u64, big-endian) followed by the
// transaction encoding.
type Txn1 struct {
	Position uint64
	Txn      Txn
}

func (*Txn1) FrameType() Type { return TypeTxn1 }

func (t *Txn1) AppendBody(dst []byte) ([]byte, error) {
	if !t.Txn.Token.IsZero() {
		return dst, badTxn("a TXN1 carries transaction format 1 only: no token")
	}
	dst = binary.BigEndian.AppendUint64(dst, t.Position)
	return t.Txn.AppendEncoding(dst)
}

// ParseTxn1 parses a TXN body without copying: the returned view aliases body.
// Version 1 carries transaction format 1 only: a later format is unsupported-txn in a TXN1
// whatever connection it arrives on.
func ParseTxn1(body []byte) (position uint64, v TxnView, err error) {
	if len(body) < 8 {
		return 0, TxnView{}, badTxn("body of " + strconv.Itoa(len(body)) + " bytes has no room for the position")
	}
	position = binary.BigEndian.Uint64(body)
	if position == 0 {
		return 0, TxnView{}, badTxn("position 0 is not a valid arrival position")
	}
	v, err = ParseTxnUpTo(body[8:], TxnFormat1)
	return position, v, err
}

func appendMap(dst []byte, v any, extra Extra) ([]byte, error) {
	b, err := encodeMap(v, extra)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// decodeControl decodes a CBOR control body into a fresh value and runs its validation.
func decodeControl[T any, P interface {
	*T
	Body
}](known uint64, validate func(P) error, required ...uint64) func([]byte) (Body, error) {
	return func(b []byte) (Body, error) {
		v := P(new(T))
		extra, err := decodeMap(b, v, known, required...)
		if err != nil {
			return nil, err
		}
		if h, ok := any(v).(interface{ setExtra(Extra) }); ok {
			h.setExtra(extra)
		}
		if validate != nil {
			if err := validate(v); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
}

// Unknown carries the keys of a control body this build does not know (see Extra).
type Unknown struct {
	Extra Extra `cbor:"-"`
}

func (u *Unknown) setExtra(x Extra) { u.Extra = x }

func nonZeroPosition(what string, p uint64) error {
	if p == 0 {
		return badField(what + " position 0 acknowledges nothing")
	}
	return nil
}

func init() {
	register(TypeHello, typeInfo{name: "HELLO", maxBody: MaxHelloBody,
		decode: decodeControl[Hello](10, (*Hello).Validate, 1, 2, 3, 4, 5, 7)})
	register(TypeAuth, typeInfo{name: "AUTH", maxBody: MaxControlBody,
		decode: decodeControl[Auth](1, nil, 1)})
	register(TypeClose, typeInfo{name: "CLOSE", maxBody: MaxControlBody,
		decode: decodeControl[Close](3, (*Close).Validate, 1, 2)})
	register(TypePing, typeInfo{name: "PING", maxBody: MaxControlBody,
		decode: decodeControl[Ping](2, func(p *Ping) error { return p.Stamp.Validate() }, 1)})
	register(TypePong, typeInfo{name: "PONG", maxBody: MaxControlBody,
		decode: decodeControl[Pong](3, func(p *Pong) error { return p.Stamp.Validate() }, 1)})
	register(TypeOrigin, typeInfo{name: "ORIGIN", maxBody: MaxControlBody,
		decode: decodeControl[Origin](2, func(o *Origin) error {
			if o.Origin.IsZero() {
				return badField("origin id is all zero")
			}
			return checkName("origin name", o.Name)
		}, 1, 2)})
	register(TypeSubscribe1, typeInfo{name: "SUBSCRIBE1", maxBody: MaxControlBody, version: 1,
		decode: decodeControl[Subscribe1](1, nil, 1)})
	register(TypeAck1, typeInfo{name: "ACK1", maxBody: MaxControlBody, version: 1,
		decode: decodeControl[Ack1](1, func(a *Ack1) error { return nonZeroPosition("ack", a.Position) }, 1)})
	register(TypeTxn1, typeInfo{name: "TXN1", version: 1,
		decode: func(b []byte) (Body, error) {
			pos, v, err := ParseTxn1(b)
			if err != nil {
				return nil, err
			}
			return &Txn1{Position: pos, Txn: v.Txn()}, nil
		}})
}
