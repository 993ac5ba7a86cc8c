package replica

import (
	"time"

	"plait/protocol"
	"plait/protocol/wire"
)

// Session is the public API of one peer connection's protocol core, as the replica uses
// it. *protocol.Session implements it; the WASM host (shells/wasm/host) implements it for
// a build of the core running under wazero, so that the simulator can put frozen builds in
// a cluster. Config.NewSession chooses the implementation. The commands of one protocol
// version are behind V1, V2 and V3, so that every call site shows the version it needs.
type Session interface {
	Start(now time.Time, nonce []byte) error
	Receive(now time.Time, msg []byte) error
	Tick(now time.Time) error
	Ready() protocol.Ready
	HasReady() bool
	Release(msg []byte)
	NextDeadline() time.Time
	State() protocol.State
	Handshake() protocol.HandshakeInfo
	Connected(now time.Time) bool
	RTT() time.Duration
	// ClockOffset is the peer's clock minus this node's, estimated from PING/PONG, and
	// whether the peer was measured (version 3 only; never by a frozen build that predates it).
	ClockOffset() (time.Duration, bool)
	HeldBytes() int
	ReadPaused() bool
	SendBudget() int
	Err() *wire.Error
	Stats() protocol.Stats
	Limits() protocol.Limits
	Close(code wire.Code, message string) error
	SetOriginName(origin wire.OriginID, name string) error

	V1() protocol.V1Commands
	V2() protocol.V2Commands
	V3() protocol.V3Commands
	V4() protocol.V4Commands
}

var _ Session = (*protocol.Session)(nil)

// PartialReceiver is a Session that can be told that bytes of a message are arriving
// (protocol.Session.Receiving). A session without it (a WASM core: ABI 4 has no such
// call) counts whole messages only.
type PartialReceiver interface {
	Receiving(now time.Time)
}

var _ PartialReceiver = (*protocol.Session)(nil)

// setNow is every input's first step: the replica's time, and its version-4 sessions',
// each ticked at it (a Tick with no timer due only takes the time; one due is handled, as
// the next Tick would). Why: an input on one connection (or a write, a sync, a timer)
// makes the replica send on others, and a session stamps what it sends with the time of
// its latest input (protocol/SPEC.md, "Stamps"): one of its own, up to an idle interval
// before, would read as that much more round trip (rtt_ms, routing's order of peers, the
// clock guard's margin). A Tick, not a call of its own, so that every implementation of
// Session (a WASM core, a wrapper) takes the time the same way. Connections of version 3
// and below see no call.
func (r *Replica) setNow(now time.Time) {
	r.now = now
	for _, c := range r.connList {
		if c.version >= 4 {
			r.check(c.sess.Tick(now)) // refused only before Start (never here) or when closed (tolerated)
		}
	}
}

// NativeSession makes a *protocol.Session: the default Config.NewSession.
func NativeSession(cfg protocol.Config) (Session, error) { return protocol.New(cfg) }
