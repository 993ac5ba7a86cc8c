package protocol

import (
	"strconv"
	"time"

	"plait/protocol/wire"
)

// Limits are a session's named bounds. The zero value of a field means its default.
type Limits struct {
	// MaxFrameBody bounds a received frame's body (default and ceiling: wire.MaxFrameBody,
	// at least wire.MinMaxFrame). It is advertised in HELLO: the peer refuses to queue a
	// larger frame (Offer answers frame-too-large) rather than send it.
	MaxFrameBody uint32
	// MaxMessage bounds a received message; it is advertised in HELLO so the peer packs
	// its messages within it (default wire.DefaultMaxMessage, at least wire.MinMaxMessage
	// and room for one frame of MaxFrameBody).
	MaxMessage int
	// MaxSendBuffer bounds the bytes queued for sending (data and control frames) beyond
	// which Offer refuses, until the caller takes them with Ready (default 4 MiB). Offer
	// always accepts one frame into an empty buffer.
	MaxSendBuffer int
	// MaxUnackedBytes is the version-1 receive window: ReadPaused reports true while the
	// received but unacknowledged data bytes reach it (default 8 MiB).
	MaxUnackedBytes int
	// MaxOrigins bounds the per-origin tables: the origins the peer names (in version 1
	// with the receive vector; in version 2 they bound the heads it can advertise), the
	// names given to the session, the heads it advertises and the vector of one
	// SubscribeOrigins (default 4096). Channels the peer opens are bounded by MaxChannels.
	MaxOrigins int
	// MaxChannels bounds the open channels of each direction of a version-2 session
	// (default 4096).
	MaxChannels int
	// MaxChannelBuffer is a version-2 channel's receive window: the data bytes received and
	// not yet acknowledged on one channel (default wire.DefaultMaxMessage; at least one frame
	// of MaxFrameBody).
	MaxChannelBuffer int
	// MaxSessionBuffer is the version-2 connection's receive window, over all channels
	// (default 64 MiB; at least MaxChannelBuffer). A channel the caller stops acknowledging
	// holds at most MaxChannelBuffer of it, so the others keep flowing.
	MaxSessionBuffer int
	// MaxOutMessage is the size at which an outgoing message is closed and the next begun
	// (default 256 KiB, within the peer's MaxMessage; a frame larger than it goes in a
	// message of its own). Why: the peer acts on a message only once the whole of it has
	// arrived, so a control frame (PING, credit, acknowledgement) or the next entry queued
	// behind data waits for the message before it. On a slow link a message of the whole
	// send buffer (4 MiB) takes seconds; its entries count as not arriving and its PINGs
	// as late (over 1 MB/s such a message outlasts the stall timeout, so its stream would be
	// asked again before it arrived, and nothing would ever be applied).
	MaxOutMessage int
	// MaxRequestsInFlight bounds the requests of version 4 in flight on the connection,
	// each way (default 64): the requests this side sent that are neither answered nor
	// forgotten (V4().Request refuses one more with too-many-requests), and those the peer
	// sent that this side has not answered (the session answers one more too-many-requests
	// itself, EventRequestRefused).
	MaxRequestsInFlight int
	// HandshakeTimeout bounds the time from Start to an authenticated session (default 10 s).
	HandshakeTimeout time.Duration
	// PingInterval is the time between PINGs on a connection of version 3 or below, each
	// side sending its own (default 1 s). Version 4 uses IdlePingInterval and
	// SampleInterval instead.
	PingInterval time.Duration
	// IdlePingInterval is, on a version-4 connection, how long the link may go without a
	// message received, or without one sent, before the dialer sends a PING (the listener
	// never does; it answers). Default 2 s, or a third of LivenessTimeout when 2 s is not
	// below half of it; it must be above 0 and below half of LivenessTimeout, so that a live peer is
	// heard from at least twice within it. Why: the stamps of the frames that travel anyway
	// measure the round trip and the clock (clock.go), so a PING is needed only where
	// nothing travels, and an idle link carries at most one PING and one PONG per interval.
	IdlePingInterval time.Duration
	// SampleInterval is, on a version-4 connection, how old the dialer's latest round-trip
	// sample may grow before it sends a PING for one (default 5 s; above 0): a link busy
	// one way carries stamps that echo nothing (DATA has none), and its round trip and
	// clock offset must not go stale.
	SampleInterval time.Duration
	// LivenessTimeout closes a session that received no byte for this long (default 5 s).
	LivenessTimeout time.Duration
}

// Default limits.
const (
	DefaultMaxSendBuffer       = 4 << 20
	DefaultMaxUnackedBytes     = 8 << 20
	DefaultMaxOrigins          = 4096
	DefaultMaxChannels         = 4096
	DefaultMaxSessionBuffer    = 64 << 20
	DefaultMaxOutMessage       = 256 << 10
	DefaultMaxRequestsInFlight = 64
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultPingInterval        = time.Second
	DefaultIdlePingInterval    = 2 * time.Second
	DefaultSampleInterval      = 5 * time.Second
	DefaultLivenessTimeout     = 5 * time.Second
	maxMessageCeiling          = 1 << 30
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrameBody == 0 {
		l.MaxFrameBody = wire.MaxFrameBody
	}
	if l.MaxMessage == 0 {
		l.MaxMessage = wire.DefaultMaxMessage
	}
	if l.MaxSendBuffer == 0 {
		l.MaxSendBuffer = DefaultMaxSendBuffer
	}
	if l.MaxUnackedBytes == 0 {
		l.MaxUnackedBytes = DefaultMaxUnackedBytes
	}
	if l.MaxOrigins == 0 {
		l.MaxOrigins = DefaultMaxOrigins
	}
	if l.MaxChannels == 0 {
		l.MaxChannels = DefaultMaxChannels
	}
	if l.MaxChannelBuffer == 0 {
		l.MaxChannelBuffer = max(wire.DefaultMaxMessage, int(l.MaxFrameBody)+wire.HeaderSize)
	}
	if l.MaxSessionBuffer == 0 {
		l.MaxSessionBuffer = max(DefaultMaxSessionBuffer, l.MaxChannelBuffer)
	}
	if l.MaxOutMessage == 0 {
		l.MaxOutMessage = DefaultMaxOutMessage
	}
	if l.MaxRequestsInFlight == 0 {
		l.MaxRequestsInFlight = DefaultMaxRequestsInFlight
	}
	if l.HandshakeTimeout == 0 {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if l.PingInterval == 0 {
		l.PingInterval = DefaultPingInterval
	}
	if l.LivenessTimeout == 0 {
		l.LivenessTimeout = DefaultLivenessTimeout
	}
	if l.IdlePingInterval == 0 {
		l.IdlePingInterval = DefaultIdlePingInterval
		if 2*l.IdlePingInterval >= l.LivenessTimeout {
			// A third of a shorter liveness timeout, so that setting that alone stays valid.
			l.IdlePingInterval = l.LivenessTimeout / 3
		}
	}
	if l.SampleInterval == 0 {
		l.SampleInterval = DefaultSampleInterval
	}
	return l
}

// Validate checks limits that have their defaults applied.
func (l Limits) Validate() *wire.Error {
	bad := func(msg string) *wire.Error { return wire.NewError(wire.CodeBadArgument, "limits: "+msg) }
	switch {
	case l.MaxFrameBody > wire.MaxFrameBody || l.MaxFrameBody < wire.MinMaxFrame:
		return bad("MaxFrameBody " + strconv.FormatUint(uint64(l.MaxFrameBody), 10) + " is outside 1 KiB..16 MiB")
	case l.MaxMessage < wire.MinMaxMessage || l.MaxMessage > maxMessageCeiling:
		return bad("MaxMessage " + strconv.Itoa(l.MaxMessage) + " is outside 64 KiB..1 GiB")
	case l.MaxMessage < int(l.MaxFrameBody)+wire.HeaderSize:
		return bad("MaxMessage " + strconv.Itoa(l.MaxMessage) + " cannot hold a frame of MaxFrameBody " + strconv.FormatUint(uint64(l.MaxFrameBody), 10))
	case l.MaxSendBuffer < 0 || l.MaxUnackedBytes < 0 || l.MaxOrigins < 0 || l.MaxChannels < 0 || l.MaxOutMessage < 0 ||
		l.MaxRequestsInFlight < 0:
		return bad("negative bound")
	case l.MaxChannelBuffer < int(l.MaxFrameBody)+wire.HeaderSize:
		return bad("MaxChannelBuffer " + strconv.Itoa(l.MaxChannelBuffer) + " cannot hold a frame of MaxFrameBody " + strconv.FormatUint(uint64(l.MaxFrameBody), 10))
	case l.MaxSessionBuffer < l.MaxChannelBuffer:
		return bad("MaxSessionBuffer " + strconv.Itoa(l.MaxSessionBuffer) + " is below MaxChannelBuffer " + strconv.Itoa(l.MaxChannelBuffer))
	case l.HandshakeTimeout < 0 || l.PingInterval < 0 || l.LivenessTimeout < 0 || l.SampleInterval < 0:
		return bad("negative duration")
	case l.LivenessTimeout <= l.PingInterval:
		return bad("LivenessTimeout must exceed PingInterval")
	case l.IdlePingInterval <= 0 || 2*l.IdlePingInterval >= l.LivenessTimeout:
		return bad("IdlePingInterval " + l.IdlePingInterval.String() + " must be above 0 and below half of LivenessTimeout " +
			l.LivenessTimeout.String())
	}
	return nil
}
