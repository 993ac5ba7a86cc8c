package protocol

import (
	"plait/protocol/wire"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventHandshake: the session is established; Handshake holds the outcome.
	EventHandshake EventKind = iota + 1
	// EventSubscribed: the peer asked to be streamed every entry after Position (version 1).
	EventSubscribed
	// EventOriginNamed: the peer named an origin (Origin, Name).
	EventOriginNamed
	// EventTxn: a checked transaction extending its origin's chain, at Position. Apply it,
	// then Ack. Txn aliases the received message.
	EventTxn
	// EventDuplicate: a transaction at or below the receive vector was skipped and counted.
	EventDuplicate
	// EventGap: a transaction beyond the next expected seq (Expected) arrived; the session
	// closes with gap-detected so that the caller resumes from its durable cursor.
	EventGap
	// EventDivergence: a transaction does not extend the hash chain the receiver holds
	// (Expected is the seq checked); it is not applied and the session closes.
	EventDivergence
	// EventAcked: the peer made every entry up to Position durable.
	EventAcked
	// EventIgnoredFrame: Count unknown ignorable frames of one message were skipped and
	// counted; Frame is the type of the first.
	EventIgnoredFrame
	// EventClosed: the session is closed; Err says why and ByPeer whether the peer said so.
	EventClosed

	// Version 2. On the sending side: the peer opened (EventSubscribed) or closed
	// (EventUnsubscribed) the channel of Origin at its position (Seq, Hash); made entries up
	// to Seq durable (EventCursor); asked for the origin's entries again from Expected
	// (EventResend); raised credit (EventCredit; a zero Origin is the connection's). On the
	// receiving side: the peer advertised heads (EventHeads). EventGap and EventDivergence
	// report on a channel, which the session closes after a divergence (ByPeer when the peer
	// reported it).
	EventUnsubscribed
	EventCursor
	EventResend
	EventCredit
	EventHeads
)

var eventNames = [...]string{
	EventHandshake:    "handshake",
	EventSubscribed:   "subscribed",
	EventOriginNamed:  "origin-named",
	EventTxn:          "txn",
	EventDuplicate:    "duplicate",
	EventGap:          "gap",
	EventDivergence:   "divergence",
	EventAcked:        "acked",
	EventIgnoredFrame: "ignored-frame",
	EventClosed:       "closed",
	EventUnsubscribed: "unsubscribed",
	EventCursor:       "cursor",
	EventResend:       "resend",
	EventCredit:       "credit",
	EventHeads:        "heads",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "event-?"
}

// Event is one output of a session. Which fields are set depends on Kind.
type Event struct {
	Kind      EventKind
	Position  uint64        // EventSubscribed, EventTxn, EventDuplicate, EventGap, EventDivergence, EventAcked
	Txn       wire.TxnView  // EventTxn, EventDuplicate, EventGap, EventDivergence
	Expected  uint64        // EventGap, EventDivergence: the seq the receiver expected or checked
	Origin    wire.OriginID // EventOriginNamed; version 2: the channel's origin
	Seq       uint64        // version 2: a position (EventSubscribed, EventCursor, EventDivergence by the peer)
	Hash      wire.Hash     // its chain hash
	Name      string        // EventOriginNamed
	Frame     wire.Type     // EventIgnoredFrame
	Count     uint64        // EventIgnoredFrame
	Heads     *wire.Heads   // EventHeads
	Handshake *HandshakeInfo
	Err       *wire.Error // EventClosed
	ByPeer    bool        // EventClosed
	// Outgoing: a version-2 EventDivergence closed a channel this side sends on (found by
	// Send, or reported by the subscribing peer); otherwise one it subscribed to.
	Outgoing bool
}

// HandshakeInfo is the outcome of a handshake.
type HandshakeInfo struct {
	Version       uint64
	Caps          []string
	PeerName      string
	PeerOrigin    wire.OriginID
	PeerMin       uint64
	PeerMax       uint64
	Authenticated bool // a non-empty cluster secret keyed the MACs
}

// Ready is what a session produced since the last Ready: messages to send, in order, and
// events. Messages belong to the caller (return them with Release to reuse the memory);
// Events are valid until the next call into the session.
type Ready struct {
	Messages [][]byte
	Events   []Event
}

// Stats are a session's counters since it was created.
type Stats struct {
	BytesIn, BytesOut       uint64
	MessagesIn, MessagesOut uint64
	TxnsReceived, TxnsSent  uint64
	Duplicates              uint64
	Gaps                    uint64
	Divergences             uint64
	IgnoredFrames           uint64
	ProtocolErrors          uint64
	// Version 2.
	ResendsRequested uint64 // RESEND frames sent after a gap
	ResendsReceived  uint64 // RESEND frames served
	Discarded        uint64 // entries dropped while a resend was outstanding
	Stale            uint64 // DATA on a channel this side had closed
}
