package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is an answer of the API other than a success: its HTTP status, the API's code and
// message (docs/contract.md §6.3), and the class the client puts the status in. Match it
// with errors.Is and the sentinels below (errors.Is(err, client.ErrNotFound)), or take it
// with errors.As for the message and the status.
type Error struct {
	Method, Path string // the call: "PUT", "/v1/tables/t/records/k"
	StatusCode   int    // 409
	Status       string // as the answer said it: "409 Conflict"
	Code         string // the API's code, "lock-held"; "" when the body is not the API's error
	Class        Class
	Message      string        // for humans; the code is the contract
	RetryAfter   time.Duration // the answer's Retry-After, 0 when it had none
	Body         []byte        // the refusal's body, at most 64 KiB: its fields besides code and message
}

func (e *Error) Error() string {
	s := e.Method + " " + e.Path + ": " + e.Status
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches the sentinel of e's code (client.ErrLockHeld is the code lock-held).
func (e *Error) Is(target error) bool {
	c, ok := target.(*codeError)
	return ok && e.Code != "" && c.code == e.Code
}

// codeError is a sentinel: one code of the API.
type codeError struct{ code string }

func (c *codeError) Error() string { return "plait: " + c.code }

// Code is the API's code a sentinel stands for: client.Code(client.ErrNotFound) is
// "not-found"; "" for an error that is not a sentinel.
func Code(sentinel error) string {
	if c, ok := sentinel.(*codeError); ok {
		return c.code
	}
	return ""
}

func code(s string) error {
	c := &codeError{s}
	codes[s] = c
	return c
}

var codes = map[string]error{}

// Sentinel returns the sentinel error of an API code, and whether the client knows it.
func Sentinel(code string) (error, bool) {
	c, ok := codes[code]
	return c, ok
}

// A sentinel for every code of docs/contract.md §6.3's table, and of the change feeds'
// (§24); TestEveryContractCodeHasASentinel holds the list to the contract's table.
var (
	ErrBadTable         = code("bad-table")
	ErrBadKey           = code("bad-key")
	ErrBadJSON          = code("bad-json")
	ErrBadOp            = code("bad-op")
	ErrBadLimit         = code("bad-limit")
	ErrBadPeer          = code("bad-peer")
	ErrBadMode          = code("bad-mode")
	ErrBadArgument      = code("bad-argument")
	ErrUnknownField     = code("unknown-field")
	ErrBadGeneration    = code("bad-generation")
	ErrBadURL           = code("bad-url")
	ErrDuplicateNode    = code("duplicate-node")
	ErrTooManyNodes     = code("too-many-nodes")
	ErrBadPlacement     = code("bad-placement")
	ErrTooManyTables    = code("too-many-tables")
	ErrBadLockHomes     = code("bad-lock-homes")
	ErrBadFencedTables  = code("bad-fenced-tables")
	ErrBadName          = code("bad-name")
	ErrMapTooLarge      = code("map-too-large")
	ErrNotFound         = code("not-found")
	ErrUnauthorized     = code("unauthorized")
	ErrForbidden        = code("forbidden")
	ErrBadMethod        = code("bad-method")
	ErrPeerExists       = code("peer-exists")
	ErrStaleGeneration  = code("stale-generation")
	ErrUnfenced         = code("unfenced")
	ErrClusterNotV4     = code("cluster-not-v4")
	ErrMixedPlacement   = code("mixed-placement")
	ErrNotCarried       = code("not-carried")
	ErrNoCarrier        = code("no-carrier")
	ErrNoRoute          = code("no-route")
	ErrUnreachable      = code("unreachable")
	ErrUnknownKind      = code("unknown-kind")
	ErrBadAnswer        = code("bad-answer")
	ErrRequestTimeout   = code("request-timeout")
	ErrTooManyRequests  = code("too-many-requests")
	ErrTooLarge         = code("too-large")
	ErrStorageFull      = code("storage-full")
	ErrStorageFailed    = code("storage-failed")
	ErrClockOffset      = code("clock-offset")
	ErrOriginRewound    = code("origin-rewound")
	ErrUnavailable      = code("unavailable")
	ErrBadTTL           = code("bad-ttl")
	ErrBadWait          = code("bad-wait")
	ErrBadToken         = code("bad-token")
	ErrLockScope        = code("lock-scope")
	ErrLockHeld         = code("lock-held")
	ErrLockLost         = code("lock-lost")
	ErrLockRequired     = code("lock-required")
	ErrNoLockHomes      = code("no-lock-homes")
	ErrQuarantined      = code("quarantined")
	ErrMovePending      = code("move-pending")
	ErrTooManyLeases    = code("too-many-leases")
	ErrTooManyWaiters   = code("too-many-waiters")
	ErrTooManyConfirms  = code("too-many-confirms")
	ErrNotHome          = code("not-home")
	ErrLockHomeOff      = code("lock-home-off")
	ErrFenceTimeout     = code("fence-timeout")
	ErrFenceUnreachable = code("fence-unreachable")
	ErrInternal         = code("internal")

	// The change feeds' and pinned listings' codes (docs/contract.md §25.2).
	ErrBehind           = code("behind")
	ErrPurged           = code("purged")
	ErrBadPosition      = code("bad-position")
	ErrTooManyFeeds     = code("too-many-feeds")
	ErrTooManySnapshots = code("too-many-snapshots")
	ErrSnapshotExpired  = code("snapshot-expired")
	ErrBadSnapshot      = code("bad-snapshot")
	ErrAhead            = code("ahead")
	// The named feeds' codes (docs/contract.md §24.6).
	ErrFeedExists        = code("feed-exists")
	ErrTooManyNamedFeeds = code("too-many-named-feeds")
	// The cluster map's leaf window (docs/contract.md §22.11).
	ErrBadLeafWindow     = code("bad-leaf-window")
	ErrLeafWindowLowered = code("leaf-window-lowered")
	// A leaf's refusal of locks (docs/contract.md §26.4).
	ErrLeafNoLocks = code("leaf-no-locks")
)

// Class is what an answer's status says to its caller: whether sending the same request
// again can help. The code says more; the class is for callers that handle families.
type Class string

const (
	ClassInvalid      Class = "invalid"      // 400, 405, 413, 414, 431: the request itself is refused; sent again it is refused again
	ClassUnauthorized Class = "unauthorized" // 401, 403: the token is missing, unknown or of too small a scope
	ClassNotFound     Class = "not-found"    // 404
	ClassConflict     Class = "conflict"     // 409, 410: the node's state refuses it (a lock, a generation, a placement, a position)
	ClassUnavailable  Class = "unavailable"  // 503, 507: the node cannot serve it now; later it may
	ClassUpstream     Class = "upstream"     // 502, 504: a request to another node failed on the way
	ClassInternal     Class = "internal"     // 500 and any other status
)

// classOf is the class of an HTTP status.
func classOf(status int) Class {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge,
		http.StatusRequestURITooLong, http.StatusRequestHeaderFieldsTooLarge:
		return ClassInvalid
	case http.StatusUnauthorized, http.StatusForbidden:
		return ClassUnauthorized
	case http.StatusNotFound:
		return ClassNotFound
	case http.StatusConflict, http.StatusGone:
		return ClassConflict
	case http.StatusServiceUnavailable, http.StatusInsufficientStorage:
		return ClassUnavailable
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return ClassUpstream
	}
	return ClassInternal
}

// retryAfter reads a Retry-After header in seconds (the API sends no dates).
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// TransportError is a call that got no answer: the connection could not be made, or broke,
// or the call's time ran out. Sent says whether the request had been written whole before:
// a write that was sent may have applied on the node, and the client does not send it
// again (docs/contract.md §25).
type TransportError struct {
	Method, Path string
	Sent         bool
	Err          error
}

func (e *TransportError) Error() string {
	sent := "not sent"
	if e.Sent {
		sent = "sent, no answer"
	}
	return fmt.Sprintf("%s %s: %s: %v", e.Method, e.Path, sent, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// errTooLarge is an answer larger than the client takes for its call.
var errTooLarge = errors.New("the answer is larger than the client takes for this call")
