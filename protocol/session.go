package protocol

import (
	"strconv"
	"strings"
	"time"

	"plait/internal/mutate"
	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// State is where a session is in its life (SPEC.md, "Session states").
type State uint8

// The states. The values are explicit because they cross the WASM ABI (abi.StatusMsg's
// state): they never change.
const (
	StateNew            State = 0 // created, not started
	StateHandshaking    State = 1 // HELLO sent, waiting for the peer's HELLO
	StateAuthenticating State = 2 // AUTH sent, waiting for the peer's AUTH
	StateEstablished    State = 3 // authenticated; streams may flow
	StateClosed         State = 4 // closed; no further input is processed
)

var stateNames = [...]string{"new", "handshaking", "authenticating", "established", "closed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state-?"
}

// Config is what a session needs to know about its node.
type Config struct {
	Role         wire.Role
	Name         string        // this node's name
	Origin       wire.OriginID // this node's origin id
	Secret       []byte        // cluster secret keying the handshake MAC; may be empty
	MinVersion   uint64        // 0: the oldest version implemented
	MaxVersion   uint64        // 0: the newest version implemented; clamped to it
	Capabilities []string      // sorted, unique
	ExpectedPeer string        // when set, a peer of another name is refused
	// ChannelBinding is the TLS exporter value of the connection's channel (1 to 64 bytes;
	// empty: not over TLS). With it the session offers handshake.CapTLSExporter, requires
	// the peer to offer it too, and binds the handshake MAC to the channel.
	ChannelBinding []byte
	// Leaf: this side is a leaf and the connection is to its hub (SPEC.md, "Hubs and
	// leaves"): its HELLO says so (key 10), and it takes the hub's LEAFSTATE.
	Leaf   bool
	Limits Limits
	// Mutations break a decision on purpose, for the mutation check's tests only; the zero
	// value (every build's) breaks nothing. It does not cross the WASM ABI.
	Mutations mutate.Set
}

// peerOrigin is what a session knows of one origin the peer may send: whether the peer
// named it (both versions), and in version 1 the receive position its entries are checked
// against. One table holds both so that MaxOrigins bounds them together.
type peerOrigin struct {
	named bool      // the peer sent ORIGIN for it on this connection
	seq   uint64    // version 1: the highest seq received or observed
	hash  wire.Hash // its chain hash
}

// Session is one side of one connection. It is not safe for concurrent use.
type Session struct {
	cfg    Config
	limits Limits
	rng    handshake.Range
	state  State

	start    time.Time
	lastRecv time.Time
	// now is the time of the latest input (Start, Receive, Receiving, Tick): a session
	// reads no clock, so a frame queued by a command between inputs is stamped with it.
	now time.Time

	localHello []byte
	peerHello  []byte
	pending    HandshakeInfo // negotiated from the peer's HELLO, not yet authenticated
	info       HandshakeInfo // the outcome, once established
	peerRole   wire.Role
	peerMaxMsg int // the peer's advertised limits (until its HELLO: the smallest allowed)
	peerFrame  int

	// outputs
	msgs     [][]byte
	cur      []byte
	spare    []byte
	outBytes int
	events   []Event
	evTaken  bool
	closeErr *wire.Error

	// liveness
	nextPing time.Time
	pingID   uint64
	pingSent time.Time
	pingOut  bool
	rtt      time.Duration
	clock    clockFilter // the peer's clock offset, from PONGs with a time and from stamps (clock.go)
	stamps   stampState  // version 4: the peer's stamp to echo, and when this side last sent and sampled (clock.go)
	// resumed: reads resumed after a version-1 pause; the liveness clock restarts at the
	// next Tick (while reads are paused, the peer's silence proves nothing)
	resumed bool

	// ignored frames of the current Receive, reported as one event
	ignored     uint64
	ignoredType wire.Type

	// both versions: origin names given by SetOriginName, the origins whose ORIGIN frame
	// was sent, and what the peer told of its origins
	names       map[wire.OriginID]string
	announced   map[wire.OriginID]bool
	peerOrigins map[wire.OriginID]peerOrigin

	v1    v1State      // the version-1 stream, both directions (v1.go)
	chans channelState // the per-origin channels of version 2 and later, both directions, with version 3's state of them (v2.go)
	v4    v4State      // version 4's requests in flight, both directions (v4.go)

	stats Stats
}

// New checks cfg and returns a session in StateNew.
func New(cfg Config) (*Session, error) {
	if cfg.Role != wire.RoleDialer && cfg.Role != wire.RoleListener {
		return nil, wire.NewError(wire.CodeBadArgument, "role must be dialer or listener")
	}
	if !wire.ValidName(cfg.Name) {
		return nil, wire.NewError(wire.CodeBadArgument, "name "+quote(cfg.Name)+" is not 1-64 bytes of [A-Za-z0-9_.-]")
	}
	if cfg.Origin.IsZero() {
		return nil, wire.NewError(wire.CodeBadArgument, "origin id is all zero")
	}
	if cfg.ExpectedPeer != "" && !wire.ValidName(cfg.ExpectedPeer) {
		return nil, wire.NewError(wire.CodeBadArgument, "expected peer name "+quote(cfg.ExpectedPeer)+" is not valid")
	}
	if err := wire.CheckCaps(cfg.Capabilities); err != nil {
		return nil, wire.NewError(wire.CodeBadArgument, "capabilities: "+err.Error())
	}
	rng, werr := handshake.Clamp(cfg.MinVersion, cfg.MaxVersion)
	if werr != nil {
		return nil, werr
	}
	limits := cfg.Limits.WithDefaults()
	if werr := limits.Validate(); werr != nil {
		return nil, werr
	}
	if len(cfg.ChannelBinding) > handshake.MaxChannelBinding {
		return nil, wire.NewError(wire.CodeBadArgument, "channel binding of "+strconv.Itoa(len(cfg.ChannelBinding))+
			" bytes: at most "+strconv.Itoa(handshake.MaxChannelBinding))
	}
	cfg.Secret = append([]byte(nil), cfg.Secret...)
	cfg.ChannelBinding = append([]byte(nil), cfg.ChannelBinding...)
	cfg.Capabilities = append([]string(nil), cfg.Capabilities...)
	if len(cfg.ChannelBinding) > 0 {
		cfg.Capabilities = handshake.WithCap(cfg.Capabilities, handshake.CapTLSExporter)
	}
	if cfg.MaxVersion == 0 || cfg.MaxVersion >= 3 {
		// This build answers RANGEDIGEST on every version-3 connection (antientropy.go).
		cfg.Capabilities = handshake.WithCap(cfg.Capabilities, wire.CapAntiEntropy)
	}
	if rng.Max >= 4 {
		// This build knows the leaf role (SPEC.md, "Hubs and leaves") on every version-4
		// connection, whether it takes leaves or not: a hub that takes none says so with
		// not-a-hub, which a leaf tells apart from a peer that does not know the role.
		cfg.Capabilities = handshake.WithCap(cfg.Capabilities, wire.CapLeaf)
	}
	s := &Session{
		cfg:         cfg,
		limits:      limits,
		rng:         rng,
		names:       map[wire.OriginID]string{},
		announced:   map[wire.OriginID]bool{},
		peerOrigins: map[wire.OriginID]peerOrigin{},
	}
	s.initChannels()
	s.resetV4()
	return s, nil
}

// Advertised is the version range this session offers in its HELLO.
func (s *Session) Advertised() (min, max uint64) { return s.rng.Min, s.rng.Max }

// Start sends HELLO. The nonce (16 to 64 bytes, fresh per connection) makes the handshake
// MACs unique to this connection.
func (s *Session) Start(now time.Time, nonce []byte) error {
	s.begin()
	if s.state != StateNew {
		return wire.NewError(wire.CodeInvalidState, "Start on a session in state "+s.state.String())
	}
	h := wire.Hello{
		Role:       s.cfg.Role,
		Name:       s.cfg.Name,
		Origin:     s.cfg.Origin,
		MinVersion: s.rng.Min,
		MaxVersion: s.rng.Max,
		Caps:       s.cfg.Capabilities,
		Nonce:      nonce,
		MaxMessage: uint64(s.limits.MaxMessage),
		MaxFrame:   uint64(s.limits.MaxFrameBody),
		Leaf:       s.cfg.Leaf,
	}
	if err := h.Validate(); err != nil {
		return wire.NewError(wire.CodeBadArgument, "hello: "+err.Error())
	}
	body, err := h.AppendBody(nil)
	if err != nil {
		return wire.NewError(wire.CodeInternal, "encoding hello: "+err.Error())
	}
	s.localHello = body
	s.start, s.lastRecv, s.now = now, now, now
	s.peerMaxMsg, s.peerFrame = wire.MinMaxMessage, wire.MinMaxFrame // until the peer's HELLO says more
	s.state = StateHandshaking
	s.sendRaw(wire.TypeHello, 0, body)
	return nil
}

// begin marks the start of a call: events taken by the last Ready are released.
func (s *Session) begin() {
	if s.evTaken {
		s.events = s.events[:0]
		s.evTaken = false
	}
}

// Ready returns and hands over everything produced since the last call.
func (s *Session) Ready() Ready {
	s.begin()
	if s.hasChannels() {
		s.flushV2()
	}
	s.flush()
	rd := Ready{Messages: s.msgs, Events: s.events}
	s.msgs = nil
	s.outBytes = 0
	s.evTaken = true
	return rd
}

// HasReady reports whether Ready may return anything: messages, events, or (version 2)
// the acknowledgements and credit that calls since the last Ready released. A caller that
// drains a session only while HasReady holds sends every acknowledgement in the same step.
func (s *Session) HasReady() bool {
	return len(s.msgs) > 0 || len(s.cur) > 0 || (!s.evTaken && len(s.events) > 0) ||
		(s.hasChannels() && s.chans.flushPending())
}

// Release gives a sent message's memory back for reuse. Optional.
func (s *Session) Release(msg []byte) {
	if cap(msg) > cap(s.spare) && cap(msg) <= s.peerMaxMsg {
		s.spare = msg[:0]
	}
}

// State returns the session's state.
func (s *Session) State() State { return s.state }

// Connected is the one source of truth for "connected": established, and some byte came
// from the peer within the liveness timeout, or this side's reads are paused (its own
// silence proves nothing about the peer).
func (s *Session) Connected(now time.Time) bool {
	return s.state == StateEstablished &&
		(s.ReadPaused() || s.resumed || now.Sub(s.lastRecv) < s.limits.LivenessTimeout)
}

// ReadsResumed reports whether reads resumed after a pause and the liveness clock has not
// restarted yet (at the next Tick): Connected holds meanwhile whatever the time.
func (s *Session) ReadsResumed() bool { return s.resumed }

// LastReceive is when the session last received a message (Start's time before the first).
func (s *Session) LastReceive() time.Time { return s.lastRecv }

// Limits returns the session's limits, defaults applied.
func (s *Session) Limits() Limits { return s.limits }

// Handshake returns the handshake's outcome once established (the zero value before).
func (s *Session) Handshake() HandshakeInfo { return s.info }

// RTT is the round-trip time of the latest sample (0 before the first): the last answered
// PING's on a connection of version 3 or below, the latest stamp's that echoed one of this
// side's on version 4 (clock.go).
func (s *Session) RTT() time.Duration { return s.rtt }

// Stats returns the session's counters.
func (s *Session) Stats() Stats { return s.stats }

// Err returns why the session closed, or nil.
func (s *Session) Err() *wire.Error { return s.closeErr }

// HeldBytes is what the session holds on the caller's behalf: queued output not yet taken
// by Ready, received data not yet acknowledged (version 1's window, or version 2's
// connection window), and the peer's HELLO during the handshake. It stays below
// MaxSendBuffer + MaxUnackedBytes (version 1) or MaxSessionBuffer (version 2) + MaxMessage
// plus the control frames of one input.
func (s *Session) HeldBytes() int {
	return s.outBytes + s.v1.unacked.bytes + len(s.peerHello) + int(s.chans.connIn.Buffered())
}

// ReadPaused is the version-1 "stop reading" signal: the caller must not call Receive
// while it is true, and resumes after Ack brings the unacknowledged bytes below the
// window. A Receive while paused closes the session with receive-buffer-full.
func (s *Session) ReadPaused() bool { return s.v1.unacked.bytes >= s.limits.MaxUnackedBytes }

// SendBudget is how many more data bytes V1().Offer or V2().Send accepts now.
func (s *Session) SendBudget() int {
	if s.outBytes == 0 {
		return max(s.limits.MaxSendBuffer, s.peerMaxMsg)
	}
	return max(0, s.limits.MaxSendBuffer-s.outBytes)
}

// NextDeadline is when Tick must next be called; zero when no timer is needed.
func (s *Session) NextDeadline() time.Time {
	switch s.state {
	case StateHandshaking, StateAuthenticating:
		return s.start.Add(s.limits.HandshakeTimeout)
	case StateEstablished:
		if s.resumed {
			return s.lastRecv // due at once: the next Tick restarts the liveness clock
		}
		d := s.lastRecv.Add(s.limits.LivenessTimeout)
		if p, ok := s.pingDue(); ok && p.Before(d) {
			d = p
		}
		return d
	}
	return time.Time{}
}

// Tick advances the session's timers: the handshake timeout, PINGs and liveness. It also
// gives the session the time: a frame that a command queues before the next input carries
// it in its stamp (version 4, clock.go), so a caller that drives several sessions from one
// clock ticks each version-4 one at every input, timers due or not, so that what one
// connection's input makes another send is stamped when it is sent: a stamp of an earlier
// time lengthens the peer's round-trip sample by as much.
func (s *Session) Tick(now time.Time) error {
	s.begin()
	if s.state != StateNew {
		s.now = now
	}
	switch s.state {
	case StateNew:
		return wire.NewError(wire.CodeInvalidState, "Tick before Start")
	case StateHandshaking, StateAuthenticating:
		if !now.Before(s.start.Add(s.limits.HandshakeTimeout)) {
			s.fail(wire.NewError(wire.CodeHandshakeTimeout, "no authenticated handshake within "+s.limits.HandshakeTimeout.String()))
		}
	case StateEstablished:
		if s.ReadPaused() || s.resumed {
			// The caller is not reading, so silence proves nothing about the peer: the
			// liveness clock restarts at the first Tick after reads resume.
			s.lastRecv = now
			s.resumed = false
		}
		if !now.Before(s.lastRecv.Add(s.limits.LivenessTimeout)) {
			s.fail(wire.NewError(wire.CodeLivenessTimeout, "no byte received for "+now.Sub(s.lastRecv).String()))
			return nil
		}
		if p, ok := s.pingDue(); ok && !now.Before(p) {
			s.pingID++
			s.pingOut = true
			s.pingSent = now
			s.nextPing = now.Add(s.limits.PingInterval)
			s.sendControl(&wire.Ping{ID: s.pingID})
		}
	}
	return nil
}

// pingDue is when the next PING is due, and whether one is due at all: never while one is
// outstanding. On a connection of version 3 or below each side sends one every
// PingInterval. On version 4 only the dialer does: when the link has been idle (nothing
// received, or nothing sent) for IdlePingInterval, or when a side's latest sample may be
// SampleInterval old: its own, or the listener's, which the dialer gave it with its last
// stamp that echoed one. The listener answers and never asks, so an idle link carries one
// PING and one PONG per IdlePingInterval. Liveness is the same on both sides whatever the
// version: a live dialer is heard from within IdlePingInterval, below half the liveness
// timeout.
func (s *Session) pingDue() (time.Time, bool) {
	switch {
	case s.pingOut:
		return time.Time{}, false
	case s.info.Version < 4:
		return s.nextPing, true
	case s.cfg.Role != wire.RoleDialer:
		return time.Time{}, false
	}
	st := &s.stamps
	peer := st.echoSent.Add(s.limits.SampleInterval)
	if st.peer != 0 && !st.echoSent.IsZero() {
		// A stamp of the listener waits to be echoed (a PONG's, most often): whatever this
		// side sends next gives the listener its sample, so a PING for it waits for the
		// idle interval. Without it a PING for this side's own sample (echoing nothing, on
		// a link where only this side's DATA goes out) would be followed at once by another
		// for the listener's. Before the listener's first sample it goes at once.
		peer = latest(peer, st.peerAt.Add(s.limits.IdlePingInterval))
	}
	due := st.sampled.Add(s.limits.SampleInterval)
	for _, t := range [...]time.Time{peer, s.lastRecv.Add(s.limits.IdlePingInterval), st.sent.Add(s.limits.IdlePingInterval)} {
		if t.Before(due) {
			due = t
		}
	}
	return due, true
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// emit appends an event.
func (s *Session) emit(e Event) { s.events = append(s.events, e) }

// fail closes the session because of err: a CLOSE frame names it to the peer and an
// EventClosed surfaces it.
func (s *Session) fail(err *wire.Error) {
	if s.state == StateClosed {
		return
	}
	if err.Class == wire.ClassProtocol {
		s.stats.ProtocolErrors++
	}
	if s.state != StateNew {
		s.sendControl(&wire.Close{Code: err.Code, Class: err.Class, Message: truncateText(strings.ToValidUTF8(err.Detail(), "?"), wire.MaxCloseText)})
	}
	s.closed(err, false)
}

func (s *Session) closed(err *wire.Error, byPeer bool) {
	s.flushIgnored() // EventClosed is always the last event
	s.state = StateClosed
	s.closeErr = err
	s.peerHello, s.localHello = nil, nil
	s.v1.unacked = ackQueue[uint64]{} // nothing received is held any more
	s.initChannels()                  // a closed session holds nothing for the peer's channels
	s.resetV4()                       // nor requests in flight
	s.emit(Event{Kind: EventClosed, Err: err, ByPeer: byPeer})
}

func quote(s string) string {
	if t := truncateText(s, 80); t != s {
		s = t + "..."
	}
	return strconv.Quote(s)
}
