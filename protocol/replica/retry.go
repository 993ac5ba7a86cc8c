package replica

import (
	"errors"
	"strconv"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The bounded-retry budget (docs/design.md §21). A received entry can fail to apply for
// two kinds of reason, and they are kept apart:
//
//   - the storage itself failed (a StorageError: a full or failing disk): every entry
//     would fail alike, so the node degrades (storage.go) and no origin is charged;
//   - the entry failed for what it touches (entryFault: a damaged record under one of its
//     keys, a batch the store refuses for its content): it would fail again, while the
//     entries of other origins apply.
//
// The second kind charges the entry's origin. The entry is not applied, nor acknowledged,
// nor passed: the origin's stream stops (its channel is unsubscribed; a version-1
// connection, which has one stream for all origins, is closed, and its redials too until
// the backoff ends) and is taken again from the applied seq after a backoff
// doubling from ApplyRetryDelay up to MaxApplyRetryDelay. After ApplyRetries failures of
// the same entry in a row the origin shows StuckApplyFailed with the error, and the
// retries go on at the backoff: a cause that goes (a record repaired, a restart with a
// fixed store) lets the entry apply, and the origin flows again. Nothing past the entry is
// ever applied while it fails, so no cursor moves past an entry this node did not apply.

// StuckApplyFailed: the origin's next entry failed to apply ApplyRetries times in a row,
// for a reason of its own (OriginStatus.ApplyError); it is retried at the backoff.
const StuckApplyFailed StuckReason = "apply-failed"

// Defaults of the retry budget.
const (
	DefaultApplyRetries    = 5
	DefaultApplyRetryDelay = time.Second
	// MaxApplyRetryDelay bounds the backoff between retries of an entry that keeps failing.
	MaxApplyRetryDelay = time.Minute
)

// entryFault reports whether a failed apply belongs to the entry rather than to the
// storage or the replica: see ErrRecordDamaged and ErrCannotApply.
func entryFault(err error) bool {
	var se *store.StorageError
	if errors.As(err, &se) {
		return false
	}
	return errors.Is(err, store.ErrRecordDamaged) || errors.Is(err, store.ErrCannotApply)
}

// retryState is an origin's failing next entry.
type retryState struct {
	seq      uint64    // the entry that fails (applied seq + 1 when it was tried)
	failures int       // its failed applies in a row
	err      string    // the last failure
	at       time.Time // when it last failed
	retryAt  time.Time // no stream of the origin before it; zero: none waits
}

// applyFailed handles an apply of a received entry that failed for the entry's own
// reason: the origin is charged, its stream stopped until the backoff ends.
func (r *Replica) applyFailed(c *conn, st *originState, seq uint64, err error) {
	rs := &st.retry
	if rs.seq != seq {
		*rs = retryState{seq: seq}
	}
	rs.failures++
	rs.err = "entry " + strconv.FormatUint(seq, 10) + ": " + err.Error()
	rs.at = r.now
	r.counters.ApplyFailures++
	delay := r.cfg.ApplyRetryDelay
	for i := 1; i < rs.failures && delay < MaxApplyRetryDelay; i++ {
		delay *= 2
	}
	rs.retryAt = r.now.Add(min(delay, MaxApplyRetryDelay))
	if rs.failures >= r.cfg.ApplyRetries && st.stuck != StuckClockAhead {
		st.stuck, st.stuckUntil = StuckApplyFailed, rs.retryAt
	}
	why := "origin " + st.id.String() + " " + rs.err
	if c.version == 1 {
		// One stream for every origin: the connection goes. Nothing after the entry was
		// processed on it, so the peer cursor is before the entry, and the redial streams
		// it again.
		r.closeConn(c, wire.CodeGoingAway, why)
		return
	}
	r.unsubscribe(c, st.id)
}

// retryWaiting reports whether the origin's failing entry waits for its backoff now.
func (r *Replica) retryWaiting(st *originState) bool {
	return !st.retry.retryAt.IsZero() && r.now.Before(st.retry.retryAt)
}

// retryDue ends a backoff whose time has come: the origin's source, kept through it, is
// subscribed again from the applied seq, and the failing entry comes again.
func (r *Replica) retryDue(st *originState) {
	st.retry.retryAt = time.Time{}
	if src := r.conns[st.source]; src != nil && !src.in[st.id] && r.usable(src, st.id) {
		r.subscribe(src, st, st.applied.Seq)
	}
}

// retrySucceeded clears an origin's retry state once its failing entry (or any later one)
// applied.
func (st *originState) retrySucceeded() {
	if st.retry.seq != 0 && st.applied.Seq >= st.retry.seq {
		st.retry = retryState{}
		if st.stuck == StuckApplyFailed {
			st.stuck, st.stuckUntil = "", time.Time{}
		}
	}
}
