package credit

import "strconv"

// Receiver is the receiving side of a window: how much it allowed, received and released.
type Receiver struct {
	window   uint64 // the most it lets the sender have outstanding
	maxFrame uint64 // the largest frame it accepts, at most window
	limit    uint64 // the absolute offset granted so far
	received uint64
	consumed uint64
}

// NewReceiver starts a window of the given size, granting it whole; maxFrame is the largest
// frame the receiver accepts (capped at the window: a larger frame could never be sent).
func NewReceiver(window, maxFrame uint64) Receiver {
	return Receiver{window: window, maxFrame: min(maxFrame, window), limit: window}
}

// Limit is the absolute offset granted so far.
func (r *Receiver) Limit() uint64 { return r.limit }

// Buffered is what was received and not yet released: never more than the window.
func (r *Receiver) Buffered() uint64 { return r.received - r.consumed }

// Received is the total received.
func (r *Receiver) Received() uint64 { return r.received }

// OverrunError is a sender passing the granted limit.
type OverrunError struct{ Limit, Offset uint64 }

func (e *OverrunError) Error() string {
	return "data up to offset " + strconv.FormatUint(e.Offset, 10) + " passes the granted " + strconv.FormatUint(e.Limit, 10)
}

// Receive accounts n received bytes; past the granted limit it fails and accounts nothing.
func (r *Receiver) Receive(n uint64) error {
	if n > r.limit-r.received {
		return &OverrunError{Limit: r.limit, Offset: r.received + n}
	}
	r.received += n
	return nil
}

// Release frees n buffered bytes (applied and durable, or dropped). It releases at most
// what is buffered.
func (r *Receiver) Release(n uint64) {
	r.consumed += min(n, r.Buffered())
}

// Grant returns a new limit, consumed + window, when it is above the current one and the
// sender has used at least half of what it could be allowed now (its remaining credit is at
// most half of window - buffered), or less than one largest frame of credit remains. The
// limit only grows.
func (r *Receiver) Grant() (uint64, bool) {
	next := r.consumed + r.window
	if next <= r.limit {
		return r.limit, false
	}
	remaining := r.limit - r.received // what the sender may still send
	potential := next - r.received    // what it would be allowed after this grant
	if 2*remaining > potential && remaining >= r.maxFrame {
		return r.limit, false
	}
	r.limit = next
	return next, true
}

// Sender is the sending side of a window.
type Sender struct {
	limit uint64
	sent  uint64
}

// Available is how many more bytes may be sent.
func (s *Sender) Available() uint64 { return s.limit - s.sent }

// Sent is the total sent.
func (s *Sender) Sent() uint64 { return s.sent }

// Limit is the highest grant received.
func (s *Sender) Limit() uint64 { return s.limit }

// Send accounts n bytes; it refuses (and accounts nothing) beyond the credit.
func (s *Sender) Send(n uint64) bool {
	if n > s.Available() {
		return false
	}
	s.sent += n
	return true
}

// Update applies a grant. A grant at or below the current limit changes nothing (grants are
// idempotent and may arrive reordered); it reports whether the limit rose.
func (s *Sender) Update(limit uint64) bool {
	if limit <= s.limit {
		return false
	}
	s.limit = limit
	return true
}
