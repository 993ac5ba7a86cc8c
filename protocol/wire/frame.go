package wire

import (
	"encoding/binary"
	"strconv"
)

// Type is a frame type. Its high bit is the ignorable bit: a receiver that does not know an
// ignorable type skips the frame and counts it; an unknown critical type is a protocol error.
type Type uint8

// IgnorableBit marks ignorable frame types.
const IgnorableBit Type = 0x80

// Frame types of this build. Ranges reserved for later versions and features are listed in
// SPEC.md ("Frame registry"); a number, once given, is never reused.
const (
	TypeHello      Type = 0x01 // handshake offer
	TypeAuth       Type = 0x02 // handshake MAC over both HELLOs
	TypeClose      Type = 0x03 // error or orderly close, with code and class
	TypePing       Type = 0x04 // liveness and RTT probe
	TypePong       Type = 0x05 // answer to PING
	TypeOrigin     Type = 0x06 // an origin's human name, sent before its first entry
	TypeSubscribe1 Type = 0x10 // version 1: stream from after this arrival position
	TypeTxn1       Type = 0x11 // version 1: one transaction at an arrival position
	TypeAck1       Type = 0x12 // version 1: durable up to this arrival position

	TypeSubscribe   Type = 0x20 // version 2: open channels, one per origin, at the subscriber's positions
	TypeUnsubscribe Type = 0x21 // version 2: close channels
	TypeCursor      Type = 0x22 // version 2: durable positions on channels (cursor-vector deltas)
	TypeData        Type = 0x23 // version 2: one transaction on a channel
	TypeHeads       Type = 0x24 // version 2: the heads the sender holds, per origin
	TypeCredit      Type = 0x25 // version 2: flow-control limits per channel and for the connection
	TypeResend      Type = 0x26 // version 2: stream a channel again from a seq
	TypeDivergence  Type = 0x27 // version 2: a channel's logs disagree; the channel is closed
)

// Ignorable reports whether an unknown frame of this type may be skipped.
func (t Type) Ignorable() bool { return t&IgnorableBit != 0 }

func (t Type) String() string {
	if info := registry[t]; info.name != "" {
		return info.name
	}
	return "0x" + strconv.FormatUint(uint64(t), 16)
}

// HeaderSize is the size of a frame header: type, flags, channel (u32), body length (u32).
const HeaderSize = 10

// MaxFrameBody is the protocol's absolute bound on a frame body. Configured limits may be
// lower, never higher. A transaction of the contract's largest size (8 MiB) always fits.
const MaxFrameBody = 16 << 20

// Bounds on control bodies, whatever the configured frame limit: a peer cannot make a
// receiver decode a large CBOR body, before or after the handshake. Frame types added later
// state their own bounds.
const (
	MaxHelloBody   = 16 << 10
	MaxControlBody = 64 << 10
)

// Header is a decoded frame header.
type Header struct {
	Type    Type
	Flags   uint8
	Channel uint32
	Length  uint32
}

// AppendHeader appends the 10-byte header h to dst.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, byte(h.Type), h.Flags)
	dst = binary.BigEndian.AppendUint32(dst, h.Channel)
	return binary.BigEndian.AppendUint32(dst, h.Length)
}

// Frame is one frame of a message: its header, its body (aliasing the message) and the
// byte offset of its header in the message.
type Frame struct {
	Header
	Body   []byte
	Offset int
}

// Reader walks the frames of one message without copying. The zero Reader is empty.
type Reader struct {
	msg     []byte
	off     int
	maxBody uint32
}

// NewReader returns a Reader over msg that rejects frame bodies longer than maxBody
// (0 means MaxFrameBody). Message-level limits are the caller's: see CheckMessage.
func NewReader(msg []byte, maxBody uint32) Reader {
	if maxBody == 0 || maxBody > MaxFrameBody {
		maxBody = MaxFrameBody
	}
	return Reader{msg: msg, maxBody: maxBody}
}

// CheckMessage applies the message-level rules: a message is not empty and not longer than
// maxMessage bytes.
func CheckMessage(msg []byte, maxMessage int) *Error {
	if len(msg) == 0 {
		return FrameError(CodeMalformedFrame, 0, 0, "empty message")
	}
	if len(msg) > maxMessage {
		return FrameError(CodeMessageTooLarge, Type(msg[0]), 0,
			"message of "+strconv.Itoa(len(msg))+" bytes exceeds the limit of "+strconv.Itoa(maxMessage))
	}
	return nil
}

// More reports whether unread bytes remain.
func (r *Reader) More() bool { return r.off < len(r.msg) }

// Next returns the next frame. It checks the header only: the length fits the message and
// the limit, the flags and channel are those the type allows. The body is decoded by the
// caller (DecodeBody, or the session's own fast path for data frames).
func (r *Reader) Next() (Frame, *Error) {
	off := r.off
	rest := r.msg[off:]
	if len(rest) < HeaderSize {
		var t Type
		if len(rest) > 0 {
			t = Type(rest[0])
		}
		r.off = len(r.msg)
		return Frame{}, FrameError(CodeMalformedFrame, t, off,
			"truncated header: "+strconv.Itoa(len(rest))+" of "+strconv.Itoa(HeaderSize)+" bytes")
	}
	h := Header{
		Type:    Type(rest[0]),
		Flags:   rest[1],
		Channel: binary.BigEndian.Uint32(rest[2:6]),
		Length:  binary.BigEndian.Uint32(rest[6:10]),
	}
	if h.Length > r.maxBody {
		r.off = len(r.msg)
		return Frame{}, FrameError(CodeFrameTooLarge, h.Type, off,
			"body of "+strconv.FormatUint(uint64(h.Length), 10)+" bytes exceeds the limit of "+strconv.FormatUint(uint64(r.maxBody), 10))
	}
	if uint64(h.Length) > uint64(len(rest)-HeaderSize) {
		r.off = len(r.msg)
		return Frame{}, FrameError(CodeMalformedFrame, h.Type, off,
			"body of "+strconv.FormatUint(uint64(h.Length), 10)+" bytes runs past the end of the message ("+strconv.Itoa(len(rest)-HeaderSize)+" left)")
	}
	end := HeaderSize + int(h.Length)
	f := Frame{Header: h, Body: rest[HeaderSize:end:end], Offset: off}
	r.off = off + end
	if info := registry[h.Type]; info.name != "" {
		if info.maxBody != 0 && h.Length > info.maxBody {
			return f, FrameError(CodeFrameTooLarge, h.Type, off, "body of "+strconv.FormatUint(uint64(h.Length), 10)+
				" bytes exceeds the "+strconv.FormatUint(uint64(info.maxBody), 10)+" bytes a "+info.name+" body may have")
		}
		if h.Flags&^info.flags != 0 {
			return f, FrameError(CodeBadFlags, h.Type, off, "flags 0x"+strconv.FormatUint(uint64(h.Flags), 16)+" not defined for this type")
		}
		if h.Channel != 0 && !info.channel {
			return f, FrameError(CodeBadChannel, h.Type, off, "channel "+strconv.FormatUint(uint64(h.Channel), 10)+" on a connection-level frame")
		}
		if h.Channel == 0 && info.channel {
			return f, FrameError(CodeBadChannel, h.Type, off, "channel 0 on a channel frame")
		}
	}
	return f, nil
}

// typeInfo is what the registry knows of a frame type.
type typeInfo struct {
	name    string
	flags   uint8  // flag bits defined for the type; others must be zero
	channel bool   // the frame names a channel (never 0); other frames use channel 0
	maxBody uint32 // bound on the body; 0: only the frame limit
	version uint64 // the protocol version the frame belongs to; 0: every version
	decode  func(body []byte) (Body, error)
}

// registry holds every frame type this build implements, indexed by type.
var registry [256]typeInfo

func register(t Type, info typeInfo) {
	if registry[t].name != "" {
		panic("wire: frame type registered twice: " + info.name)
	}
	registry[t] = info
}

// Known reports whether this build implements frame type t.
func Known(t Type) bool { return registry[t].name != "" }

// Version is the protocol version frame type t belongs to; 0 for frames of every version.
func Version(t Type) uint64 { return registry[t].version }

// Registered returns every frame type this build implements, in numeric order.
func Registered() []Type {
	var out []Type
	for t := range registry {
		if registry[t].name != "" {
			out = append(out, Type(t))
		}
	}
	return out
}

// TypeByName returns the type registered under a name (such as "HELLO").
func TypeByName(name string) (Type, bool) {
	for t := range registry {
		if registry[t].name == name {
			return Type(t), true
		}
	}
	return 0, false
}
