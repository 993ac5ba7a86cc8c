package wire

import (
	"slices"
	"strconv"
)

// Class groups error codes by what the caller must do about them (SPEC.md, "Errors").
type Class string

const (
	// ClassProtocol: the peer broke the protocol. Close with the code; reconnect only
	// after backoff, and surface the error.
	ClassProtocol Class = "protocol"
	// ClassUnsupported: both sides are well-behaved but cannot talk (no common version).
	// Close; retry after a long backoff; an operator has to upgrade one side.
	ClassUnsupported Class = "unsupported"
	// ClassResourceLimit: a configured bound would be exceeded. Close (or, for a
	// command, refuse it); nothing beyond the bound is held.
	ClassResourceLimit Class = "resource-limit"
	// ClassTransient: a condition that reconnecting heals (timeouts, a detected gap, a
	// peer going away). Close and reconnect with backoff, resuming from durable cursors.
	ClassTransient Class = "transient"
	// ClassRefused: the peer is not the one we may talk to (wrong secret, wrong name,
	// ourselves). Close; retry after backoff; an operator has to fix the configuration.
	ClassRefused Class = "refused"
	// ClassLocal: the caller's command was refused by the session; nothing was sent. Never
	// travels on the wire.
	ClassLocal Class = "local"
)

// Code is a stable error code, sent in CLOSE frames and reported in status.
type Code string

// Error codes. SPEC.md lists each with its class and action; a test keeps the two in step.
const (
	CodeMalformedFrame     Code = "malformed-frame"
	CodeBadCBOR            Code = "bad-cbor"
	CodeBadField           Code = "bad-field"
	CodeBadFlags           Code = "bad-flags"
	CodeBadChannel         Code = "bad-channel"
	CodeUnknownFrame       Code = "unknown-frame"
	CodeUnexpectedFrame    Code = "unexpected-frame"
	CodeBadTxn             Code = "bad-txn"
	CodeOutOfOrder         Code = "out-of-order"
	CodeDivergence         Code = "divergence"
	CodeUnsupportedVersion Code = "unsupported-version"
	CodeUnsupportedTxn     Code = "unsupported-txn"
	CodePurged             Code = "purged"
	CodeBadChunk           Code = "bad-chunk"
	CodeCopyBusy           Code = "copy-busy"
	CodeBadRange           Code = "bad-range"
	CodeAuthFailed         Code = "auth-failed"
	CodePeerNameMismatch   Code = "peer-name-mismatch"
	CodeSelfConnect        Code = "self-connect"
	CodeFrameTooLarge      Code = "frame-too-large"
	CodeMessageTooLarge    Code = "message-too-large"
	CodeTooManyOrigins     Code = "too-many-origins"
	CodeTooManyChannels    Code = "too-many-channels"
	CodeCreditOverrun      Code = "credit-overrun"
	CodeNoCredit           Code = "no-credit"
	CodeReceiveBufferFull  Code = "receive-buffer-full"
	CodeSendBufferFull     Code = "send-buffer-full"
	CodeHandshakeTimeout   Code = "handshake-timeout"
	CodeLivenessTimeout    Code = "liveness-timeout"
	CodeGapDetected        Code = "gap-detected"
	CodeGoingAway          Code = "going-away"
	CodeClosed             Code = "closed"
	CodeInvalidState       Code = "invalid-state"
	CodeBadArgument        Code = "bad-argument"
	CodeUnknownCommand     Code = "unknown-command"
	CodeInternal           Code = "internal"
	// CodeClockOffset refuses a local write: most of the node's measured peers see its
	// clock beyond the bound on clock offset (protocol/replica's MaxClockOffset).
	CodeClockOffset Code = "clock-offset"
	// CodeStorageFull and CodeStorageFailed refuse a local write while the node's storage
	// is degraded (protocol/replica's StorageError): its file system is full, or a write
	// or sync of its store failed otherwise. Like clock-offset they are a node's answer to
	// its client, never a session's: a degraded node closes connections with going-away.
	CodeStorageFull   Code = "storage-full"
	CodeStorageFailed Code = "storage-failed"
	// CodeOriginRewound says an origin's own node holds less of its log than a peer
	// applied of it, or a log that forks from it (its data directory was restored from an
	// older copy): the peer that finds it closes the connection with it, and the rewound
	// node refuses local writes with it until an operator reseeds it. Class refused: the
	// node may not be talked to as that origin until an operator acts.
	CodeOriginRewound Code = "origin-rewound"
	// CodeLinkMismatch closes a version-4 connection whose two ends set directions that
	// contradict each other (both receive only, or both send only: LINK).
	CodeLinkMismatch Code = "link-mismatch"
	// CodeLinkNeedsV4 closes a connection below version 4 to a peer this node excludes
	// tables from: only version 4 can leave them out (SKIP).
	CodeLinkNeedsV4 Code = "link-needs-v4"
	// Fan-in hubs (SPEC.md, "Hubs and leaves"): a leaf's connection to its hub refused by
	// the hub (not-a-hub: it takes no leaves; too-many-leaves: it has its bound of them;
	// leaf-is-member: the leaf is named in the hub's cluster map; no-leaf-window: the map
	// has no leaf window, or holds members below version 4 or behind the hub's generation),
	// refused by the leaf (no-leaf-capability: the link is below version 4 or lacks the leaf
	// capability), or closed by the hub for a leaf entry that contradicts what it
	// re-originated of the leaf (leaf-rewound).
	CodeNotAHub          Code = "not-a-hub"
	CodeTooManyLeaves    Code = "too-many-leaves"
	CodeLeafIsMember     Code = "leaf-is-member"
	CodeNoLeafCapability Code = "no-leaf-capability"
	CodeNoLeafWindow     Code = "no-leaf-window"
	CodeLeafRewound      Code = "leaf-rewound"

	// Transport codes: a node records them when it refuses a connection before any frame
	// crossed it (at TLS or at the WebSocket upgrade); they are never sent in a CLOSE.
	CodeTLSRequired    Code = "tls-required"     // a plaintext client on a TLS listener
	CodeTLSNoCert      Code = "tls-no-cert"      // the peer sent no certificate
	CodeTLSUnknownCA   Code = "tls-unknown-ca"   // its certificate chains to no CA of the bundle
	CodeTLSExpired     Code = "tls-expired"      // its certificate expired (or is not valid yet)
	CodeTLSBadName     Code = "tls-bad-name"     // it names no node, another node, or not the dialed host
	CodeTLSBadCert     Code = "tls-bad-cert"     // any other certificate this side refuses
	CodeTLSHandshake   Code = "tls-handshake"    // a TLS handshake that failed otherwise
	CodeBadUpgrade     Code = "bad-upgrade"      // a request that is not a WebSocket upgrade
	CodeTooManyPending Code = "too-many-pending" // past the bound on handshakes in progress
	CodeLeafNoPeers    Code = "leaf-no-peers"    // a leaf's listener: a leaf takes no connection, it dials its hub

	// Request codes (version 4): the answers of a RESPONSE that are not the kind's own. They
	// travel in RESPONSE frames and never in a CLOSE.
	CodeNoRoute         Code = "no-route"          // no route to the target, or only back along the path, or the hop limit
	CodeUnreachable     Code = "unreachable"       // a connection on the way closed
	CodeRequestTimeout  Code = "request-timeout"   // a hop gave up on it at its timeout
	CodeTooManyRequests Code = "too-many-requests" // past the receiver's bound on requests not answered
	CodeForbidden       Code = "forbidden"         // the caller's scope does not cover the kind
	CodeUnknownKind     Code = "unknown-kind"      // a kind the target does not serve
)

// codeClasses is the registry of every code this build defines and its class.
var codeClasses = map[Code]Class{
	CodeMalformedFrame:     ClassProtocol,
	CodeBadCBOR:            ClassProtocol,
	CodeBadField:           ClassProtocol,
	CodeBadFlags:           ClassProtocol,
	CodeBadChannel:         ClassProtocol,
	CodeUnknownFrame:       ClassProtocol,
	CodeUnexpectedFrame:    ClassProtocol,
	CodeBadTxn:             ClassProtocol,
	CodeOutOfOrder:         ClassProtocol,
	CodeDivergence:         ClassProtocol,
	CodeUnsupportedVersion: ClassUnsupported,
	CodeUnsupportedTxn:     ClassUnsupported,
	CodePurged:             ClassUnsupported,
	CodeBadChunk:           ClassProtocol,
	CodeCopyBusy:           ClassTransient,
	CodeBadRange:           ClassProtocol,
	CodeAuthFailed:         ClassRefused,
	CodePeerNameMismatch:   ClassRefused,
	CodeSelfConnect:        ClassRefused,
	CodeFrameTooLarge:      ClassResourceLimit,
	CodeMessageTooLarge:    ClassResourceLimit,
	CodeTooManyOrigins:     ClassResourceLimit,
	CodeTooManyChannels:    ClassResourceLimit,
	CodeCreditOverrun:      ClassResourceLimit,
	CodeNoCredit:           ClassLocal,
	CodeReceiveBufferFull:  ClassResourceLimit,
	CodeSendBufferFull:     ClassResourceLimit,
	CodeHandshakeTimeout:   ClassTransient,
	CodeLivenessTimeout:    ClassTransient,
	CodeGapDetected:        ClassTransient,
	CodeGoingAway:          ClassTransient,
	CodeClosed:             ClassLocal,
	CodeInvalidState:       ClassLocal,
	CodeBadArgument:        ClassLocal,
	CodeClockOffset:        ClassLocal,
	CodeStorageFull:        ClassLocal,
	CodeStorageFailed:      ClassLocal,
	CodeOriginRewound:      ClassRefused,
	CodeLinkMismatch:       ClassRefused,
	CodeLinkNeedsV4:        ClassRefused,
	CodeNotAHub:            ClassRefused,
	CodeTooManyLeaves:      ClassResourceLimit,
	CodeLeafIsMember:       ClassRefused,
	CodeNoLeafCapability:   ClassUnsupported,
	CodeNoLeafWindow:       ClassRefused,
	CodeLeafRewound:        ClassRefused,
	CodeUnknownCommand:     ClassLocal,
	CodeInternal:           ClassLocal,
}

// transportCodes are the transport codes and their classes: known to ClassOf, but not
// among Codes, which are the codes a CLOSE frame may carry.
var transportCodes = map[Code]Class{
	CodeTLSRequired:    ClassRefused,
	CodeTLSNoCert:      ClassRefused,
	CodeTLSUnknownCA:   ClassRefused,
	CodeTLSExpired:     ClassRefused,
	CodeTLSBadName:     ClassRefused,
	CodeTLSBadCert:     ClassRefused,
	CodeTLSHandshake:   ClassRefused,
	CodeBadUpgrade:     ClassProtocol,
	CodeTooManyPending: ClassResourceLimit,
	CodeLeafNoPeers:    ClassRefused,
}

// TransportCodes returns the transport codes, sorted.
func TransportCodes() []Code { return sortedCodes(transportCodes) }

// requestCodes are the request codes and their classes, what a caller of a request does
// about each: known to ClassOf, but not among Codes, since no CLOSE frame carries them.
var requestCodes = map[Code]Class{
	CodeNoRoute:         ClassTransient,
	CodeUnreachable:     ClassTransient,
	CodeRequestTimeout:  ClassTransient,
	CodeTooManyRequests: ClassResourceLimit,
	CodeForbidden:       ClassRefused,
	CodeUnknownKind:     ClassUnsupported,
}

// RequestCodes returns the request codes, sorted.
func RequestCodes() []Code { return sortedCodes(requestCodes) }

// IsRequestCode reports whether c is a request code, one a CLOSE never carries.
func IsRequestCode(c Code) bool {
	_, ok := requestCodes[c]
	return ok
}

// ClassOf returns the class of a code this build defines, and false for any other code
// (a newer peer's code: its CLOSE frame carries the class too).
func ClassOf(c Code) (Class, bool) {
	if cl, ok := codeClasses[c]; ok {
		return cl, ok
	}
	if cl, ok := requestCodes[c]; ok {
		return cl, ok
	}
	cl, ok := transportCodes[c]
	return cl, ok
}

// PeerClass is the class a receiver acts on for a CLOSE naming code and class: this build's
// class for a code it defines, the peer's class for a newer code, and protocol when the
// class is not one that travels on the wire (local, or a class this build does not know).
func PeerClass(code Code, sent Class) Class {
	cl, known := codeClasses[code]
	if !known {
		cl = sent
	}
	switch cl {
	case ClassProtocol, ClassUnsupported, ClassResourceLimit, ClassTransient, ClassRefused:
		return cl
	}
	return ClassProtocol
}

// Codes returns every defined code, sorted.
func Codes() []Code { return sortedCodes(codeClasses) }

func sortedCodes(m map[Code]Class) []Code {
	out := make([]Code, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// NoOffset marks an Error that is not about a particular frame.
const NoOffset = -1

// Error is every rejection the protocol core reports: a code with its class and, when it
// is about a received frame, that frame's type and the byte offset of its header in the
// message.
type Error struct {
	Code    Code
	Class   Class
	Frame   Type // meaningful only when Offset != NoOffset
	Offset  int  // byte offset of the frame header in its message, or NoOffset
	Message string
}

// NewError builds an Error of a defined code that is not about a frame. The message is
// plain text (not a format): the code and class say what kind of error it is.
func NewError(code Code, msg string) *Error {
	cl, ok := codeClasses[code]
	if !ok {
		cl, ok = requestCodes[code] // too-many-requests refuses a command too
	}
	if !ok {
		cl = ClassLocal
	}
	return &Error{Code: code, Class: cl, Offset: NoOffset, Message: msg}
}

// FrameError builds an Error about the frame of type t at offset off.
func FrameError(code Code, t Type, off int, msg string) *Error {
	e := NewError(code, msg)
	e.Frame = t
	e.Offset = off
	return e
}

func (e *Error) Error() string {
	return string(e.Code) + " (" + string(e.Class) + ")" + e.where() + e.colonMessage()
}

// Detail is the error without its code and class: the message and, for a frame, where it
// was. It is what a CLOSE frame's message carries beside the code and class.
func (e *Error) Detail() string {
	if e.Offset == NoOffset {
		return e.Message
	}
	return e.Frame.String() + " frame at offset " + strconv.Itoa(e.Offset) + e.colonMessage()
}

func (e *Error) where() string {
	if e.Offset == NoOffset {
		return ""
	}
	return " in " + e.Frame.String() + " frame at offset " + strconv.Itoa(e.Offset)
}

func (e *Error) colonMessage() string {
	if e.Message == "" {
		return ""
	}
	return ": " + e.Message
}

// Is lets errors.Is match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
