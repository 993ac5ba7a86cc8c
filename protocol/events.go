package protocol

import (
	"plait/protocol/wire"
)

// EventKind says what an Event reports. The values are explicit because they cross the WASM
// ABI (abi.EventMsg's kind): a new kind takes a new number, and no number is ever reused.
type EventKind uint8

// The kinds. Which fields each one sets is the table in Event's documentation.
const (
	// EventHandshake: the session is established.
	EventHandshake EventKind = 1
	// EventSubscribed: the peer asked to be streamed entries: in version 1, every entry of
	// the arrival order after Position; in version 2, the entries of Origin after (Seq, Hash).
	EventSubscribed EventKind = 2
	// EventOriginNamed: the peer named an origin; its entries and heads may follow.
	EventOriginNamed EventKind = 3
	// EventTxn: a checked transaction extending its origin's chain. Apply it, then
	// acknowledge it (V1().Ack, V2().Ack).
	EventTxn EventKind = 4
	// EventDuplicate: a transaction at or below the receive position was skipped and
	// counted.
	EventDuplicate EventKind = 5
	// EventGap: a transaction beyond the next expected seq arrived. Version 1 closes the
	// session with gap-detected (the caller resumes from its durable cursor); version 2
	// asks the peer to resend the channel from Expected.
	EventGap EventKind = 6
	// EventDivergence: the two logs of an origin disagree: a received transaction does not
	// extend the chain the receiver holds (it is not applied), the sender's log does not
	// extend a subscriber's position, or the peer reports either. Version 1 closes the
	// session; version 2 closes only the channel.
	EventDivergence EventKind = 7
	// EventAcked: the peer made every entry up to Position durable (version 1).
	EventAcked EventKind = 8
	// EventIgnoredFrame: Count unknown ignorable frames of one message were skipped and
	// counted.
	EventIgnoredFrame EventKind = 9
	// EventClosed: the session is closed; always the last event of a session.
	EventClosed EventKind = 10
	// EventUnsubscribed: the peer closed its channel of Origin (version 2, sending side).
	EventUnsubscribed EventKind = 11
	// EventCursor: the peer made Origin's entries up to (Seq, Hash) durable (version 2,
	// sending side).
	EventCursor EventKind = 12
	// EventResend: the peer asks for Origin's entries again from From (version 2, sending
	// side): the next Send of the channel is the entry at From.
	EventResend EventKind = 13
	// EventCredit: the peer raised the credit of Origin's channel, or of the connection
	// when Origin is zero (version 2, sending side).
	EventCredit EventKind = 14
	// EventHeads: the peer advertised or withdrew heads (version 2, receiving side), or
	// advertised floors (version 3).
	EventHeads EventKind = 15
	// EventPurged: the peer cannot serve Origin's channel from the position asked: its log
	// begins above it, after the floor (Seq, Hash). The channel is closed (version 3,
	// receiving side).
	EventPurged EventKind = 16
	// EventCopyRequested: the peer asks for a base copy of this side's records after the
	// point in Copy (version 3, sending side). Answer with V3().BeginCopy and chunks, or
	// V3().AbortCopy.
	EventCopyRequested EventKind = 17
	// EventCopyBegin: the copy this side asked for begins, or goes on, with the part of the
	// snapshot's vector in CopyBegin (version 3, receiving side).
	EventCopyBegin EventKind = 18
	// EventChunk: a checked chunk of the copy (Chunk). Merge it durably, then V3().AckChunk.
	EventChunk EventKind = 19
	// EventCopyEnd: the copy was received whole: Count records (version 3, receiving side).
	EventCopyEnd EventKind = 20
	// EventCopyAborted: a copy stopped early because of Err: the one this side serves when
	// Outgoing, the one it receives otherwise; ByPeer when the peer stopped it.
	EventCopyAborted EventKind = 21
	// EventRangeAsked: the peer asks whether this side's records in a range have the
	// digest in RangeDigest (version 3, anti-entropy). Answer with V3().AnswerRange.
	EventRangeAsked EventKind = 22
	// EventRangeAnswered: the peer answered this side's AskRange: Range is a checked
	// RANGERECORDS, a view into the received message valid until the next call into the
	// session.
	EventRangeAnswered EventKind = 23
	// EventMap: the peer sent its cluster map, Map (version 4). Which map to keep is the
	// caller's (clustermap.Decide).
	EventMap EventKind = 24
	// EventMembers: the peer sent what it knows of nodes' protocol versions, Members
	// (version 4).
	EventMembers EventKind = 25
	// EventRequest: the peer sent Request, for this node or to pass on (version 4). Answer
	// it once with V4().Respond(Request.ID, ...).
	EventRequest EventKind = 26
	// EventResponse: the peer answered a request this side sent: Response (version 4). Late
	// when the request was answered already or given up (V4().Forget): the caller drops
	// and counts it.
	EventResponse EventKind = 27
	// EventRequestRefused: the peer sent Request beyond this side's bound on requests not
	// answered (Limits.MaxRequestsInFlight); the session answered it too-many-requests
	// itself, and the caller answers nothing (version 4).
	EventRequestRefused EventKind = 28
	// EventSkip: a checked run of the origin's entries left out of the channel, Skip
	// (version 4): the channel's position moved to its end (Skip.To, Skip.Hash). Store the
	// run, then acknowledge it (V2().Ack(Origin, Skip.To)) as an entry.
	EventSkip EventKind = 29
	// EventLink: the peer sent its settings for this link, Link (version 4): its direction
	// and the tables it excludes. The latest one received is the peer's.
	EventLink EventKind = 30
	// EventCopyHolds: before the copy this side asked for begins, the peer says how far its
	// snapshot holds one placed table's entries, Holds (version 4): a table it sends none
	// for is held whole through the COPYBEGIN positions. Several arrive for a table whose
	// list of origins is long, ascending.
	EventCopyHolds EventKind = 31
	// EventLeafState: the hub this leaf is connected to sent its state of the leaf,
	// LeafState (version 4 with the capability leaf, on a leaf's connection only).
	EventLeafState EventKind = 32
	// EventQuiet: the peer sent QUIET, Quiet (version 4): the origins it now takes
	// directly from their own node, and those it no longer does. Its first arrives once,
	// possibly empty, as soon as the connection is established.
	EventQuiet EventKind = 33
)

var eventNames = [...]string{
	EventHandshake:      "handshake",
	EventSubscribed:     "subscribed",
	EventOriginNamed:    "origin-named",
	EventTxn:            "txn",
	EventDuplicate:      "duplicate",
	EventGap:            "gap",
	EventDivergence:     "divergence",
	EventAcked:          "acked",
	EventIgnoredFrame:   "ignored-frame",
	EventClosed:         "closed",
	EventUnsubscribed:   "unsubscribed",
	EventCursor:         "cursor",
	EventResend:         "resend",
	EventCredit:         "credit",
	EventHeads:          "heads",
	EventPurged:         "purged",
	EventCopyRequested:  "copy-requested",
	EventCopyBegin:      "copy-begin",
	EventChunk:          "chunk",
	EventCopyEnd:        "copy-end",
	EventCopyAborted:    "copy-aborted",
	EventRangeAsked:     "range-asked",
	EventRangeAnswered:  "range-answered",
	EventMap:            "map",
	EventMembers:        "members",
	EventRequest:        "request",
	EventResponse:       "response",
	EventRequestRefused: "request-refused",
	EventSkip:           "skip",
	EventLink:           "link",
	EventCopyHolds:      "copy-holds",
	EventLeafState:      "leaf-state",
	EventQuiet:          "quiet",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "event-?"
}

// Event is one output of a session. Each field has one meaning, whatever the kind; a kind
// sets the fields of its row and leaves the others zero:
//
//	kind            version 1                        version 2
//	handshake       Handshake                        Handshake
//	subscribed      Position                         Origin, Seq, Hash
//	origin-named    Origin, Name                     Origin, Name
//	txn             Position, Txn                    Origin, Txn
//	duplicate       Position, Txn                    Origin, Txn
//	gap             Position, Txn, Expected          Origin, Txn, Expected
//	divergence      Position, Txn, DivergedAt        Origin, DivergedAt, Seq, Hash, Err,
//	                                                 and Txn (an entry received), ByPeer
//	                                                 (reported by the peer), Outgoing
//	acked           Position                         -
//	ignored-frame   Frame, Count                     Frame, Count
//	closed          Err, ByPeer                      Err, ByPeer
//	unsubscribed    -                                Origin
//	cursor          -                                Origin, Seq, Hash
//	resend          -                                Origin, From
//	credit          -                                Origin (zero: the connection's or the copy's)
//	heads           -                                Heads
//	purged          -                                Origin, Seq, Hash (version 3)
//	copy-requested  -                                Copy (version 3)
//	copy-begin      -                                CopyBegin (version 3)
//	chunk           -                                Chunk (version 3)
//	copy-end        -                                Count (version 3)
//	copy-aborted    -                                Err, ByPeer, Outgoing (version 3)
//	range-asked     -                                RangeDigest (version 3)
//	range-answered  -                                Range (version 3)
//	map             -                                Map (version 4)
//	members         -                                Members (version 4)
//	request         -                                Request (version 4)
//	response        -                                Response, Late (version 4)
//	request-refused -                                Request (version 4)
//	skip            -                                Origin, Skip (version 4)
//	link            -                                Link (version 4)
//	copy-holds      -                                Holds (version 4)
//	leaf-state      -                                LeafState (version 4, leaf)
//	quiet           -                                Quiet (version 4)
//
// A duplicate, gap or divergence about a received run (version 4's SKIP) sets Skip where
// one about an entry sets Txn.
type Event struct {
	Kind EventKind
	// Position is a position in the version-1 sender's arrival order: the one the peer
	// subscribed after, the received entry's, or the one the peer acknowledged.
	Position uint64
	// Txn is the received transaction the event is about. It is a view into the received
	// message, valid until the next call into the session.
	Txn wire.TxnView
	// Origin is the origin the event is about (version 2: the origin of the channel).
	Origin wire.OriginID
	// Name is the name the peer gave Origin.
	Name string
	// Seq and Hash are a chain position of Origin that the peer sent or that this side
	// sends: the subscriber's position (subscribed), the acknowledged position (cursor), the
	// position a DIVERGENCE frame names (divergence: this side's when it found the
	// divergence, the peer's when ByPeer), or the peer's floor (purged).
	Seq  uint64
	Hash wire.Hash
	// Expected is the seq the receiver expected next: its position + 1 (gap). Version 2
	// asks the peer to resend from it.
	Expected uint64
	// From is the seq the peer asks to be sent again from (resend).
	From uint64
	// DivergedAt is the seq of Origin the divergence is about: the received entry's seq, or
	// the position's when no entry was received (found by Send, or reported by the peer).
	DivergedAt uint64
	// Frame is the type of the first ignored frame of the message; Count how many were
	// ignored (ignored-frame), or how many records a copy carried (copy-end).
	Frame wire.Type
	Count uint64
	// Heads is the HEADS frame the peer sent.
	Heads *wire.Heads
	// Copy is the peer's copy request; CopyBegin a COPYBEGIN frame it sent; Chunk a chunk
	// of the copy, a view into the received message valid until the next call into the
	// session.
	Copy      *wire.Copy
	CopyBegin *wire.CopyBegin
	Chunk     *wire.ChunkView
	// RangeDigest is the peer's anti-entropy ask; Range the peer's answer to this side's.
	RangeDigest *wire.RangeDigest
	Range       *wire.RangeView
	// Map is the peer's cluster map; Members the peer's member entries.
	Map     *wire.Map
	Members *wire.Members
	// Request is a request the peer sent (request, request-refused); Response the peer's
	// answer to one this side sent (response).
	Request  *wire.Request
	Response *wire.Response
	// Skip is a run of left-out entries the peer sent (skip; and duplicate, gap or
	// divergence when the run is what they are about).
	Skip *wire.Skip
	// Link is the peer's settings for this link (link).
	Link *wire.Link
	// Holds is how far the snapshot of the copy this side receives holds one placed
	// table's entries, as the peer sent it (copy-holds).
	Holds *wire.Holds
	// LeafState is the hub's state of this leaf, as the hub sent it (leaf-state).
	LeafState *wire.LeafState
	// Quiet is the peer's QUIET, as it sent it (quiet).
	Quiet *wire.Quiet
	// Handshake is the handshake's outcome.
	Handshake *HandshakeInfo
	// Err is why what the event reports closed: the session (closed), a version-2 channel
	// (divergence), or a copy (copy-aborted).
	Err *wire.Error
	// ByPeer says the peer reported it: it sent the CLOSE (closed), the DIVERGENCE
	// (divergence) or the COPYABORT (copy-aborted).
	ByPeer bool
	// Outgoing says the version-2 channel that diverged is one this side sends on (found by
	// Send, or reported by the subscribing peer), or the copy aborted is the one this side
	// serves; otherwise it is one this side subscribed to, or the copy it receives.
	Outgoing bool
	// Late says the response answers a request already answered or given up (V4().Forget):
	// the two race, and the answer is dropped and counted, never an error.
	Late bool
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
	Bound         bool // the MACs covered the TLS channel's exporter value (handshake.CapTLSExporter)
	// PeerLeaf: the peer's HELLO said it is a leaf dialing this side as its hub (key 10).
	PeerLeaf bool
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
	// Version 2 only.
	ResendsRequested uint64 // RESEND frames sent after a gap
	ResendsReceived  uint64 // RESEND frames served
	Discarded        uint64 // entries dropped while a resend was outstanding
	Stale            uint64 // DATA on a channel this side had closed
	// Version 3: the bytes of anti-entropy frames (RANGEDIGEST, RANGERECORDS), headers
	// included.
	RangeBytesIn, RangeBytesOut uint64
	// Every version: the frames read from the peer's messages (each that passed the
	// header checks, known or not, whether or not its body was then refused) and the frames queued for
	// the peer, in total and by type (FrameCounts: FramesInByType.Of(wire.TypeHeads)).
	FramesIn, FramesOut             uint64
	FramesInByType, FramesOutByType FrameCounts
}
