package replica

import (
	"time"

	"plait/protocol"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Session is the public API of one peer connection's protocol core, as the replica uses
// it. *protocol.Session implements it; the WASM host (shells/wasm/host) implements it for
// a build of the core running under wazero, so that the simulator can put frozen builds in
// a cluster. Config.NewSession chooses the implementation.
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
	HeldBytes() int
	ReadPaused() bool
	Err() *wire.Error
	Stats() protocol.Stats
	Limits() protocol.Limits
	Close(code wire.Code, message string) error
	SetOriginName(origin wire.OriginID, name string) error

	// Version 1.
	Subscribe(from uint64, vector []protocol.Cursor) error
	Offer(position uint64, txn []byte) error
	Ack(position uint64) error
	Observe(c protocol.Cursor) error
	SendBudget() int

	// Version 2.
	SubscribeOrigins(cursors []vector.Entry) error
	UnsubscribeOrigins(origins []wire.OriginID) error
	AckOrigin(origin wire.OriginID, seq uint64) error
	Send(txn []byte) error
	Credit(origin wire.OriginID) int
	AdvertiseHeads(heads []wire.Head) error
	WithdrawHeads(origins []wire.OriginID) error
}

var _ Session = (*protocol.Session)(nil)

// NativeSession makes a *protocol.Session: the default Config.NewSession.
func NativeSession(cfg protocol.Config) (Session, error) { return protocol.New(cfg) }
