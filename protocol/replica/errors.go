package replica

import (
	"errors"
	"fmt"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Error policy: which failures stop the replica, which end one connection, and which
// refusals of a session are part of normal operation. Errors the replica makes are
// errorf's, prefixed "replica: "; a write it refuses is a *wire.Error (bad-argument) that
// the HTTP API answers as a bad request, or a *clustermap.Error (mixed-placement: tables
// not placed alike) that it answers as a conflict.

// Errors of the replica's API.
var (
	ErrUnknownConn = errors.New("replica: unknown connection")
	ErrStopped     = errors.New("replica: stopped")
)

// errorf makes an error of this package: fmt.Errorf with the package's prefix, so %w wraps.
func errorf(format string, args ...any) error {
	return fmt.Errorf("replica: "+format, args...)
}

// toleratedRefusals are the refusals of a session command that are part of normal
// operation, by code, each with why nothing is lost when check passes over it. Any other
// refusal means the replica issued a command it should not have: it stops.
var toleratedRefusals = map[wire.Code]string{
	wire.CodeInvalidState: "the connection is not established, or no longer: the command waits for the " +
		"handshake (onHandshake issues it again) or is moot (the session's closing events follow)",
	wire.CodeClosed: "the session closed within this input; its EventClosed drops the connection and " +
		"re-chooses the sources it carried",
	wire.CodeSendBufferFull: "the connection's send buffer is full; pump resumes from the same entry once " +
		"the shell has taken the messages",
	wire.CodeNoCredit: "the peer has not granted the credit yet; pump resumes when its CREDIT arrives",
}

// checkConn is check for a command on one connection: a refusal for a resource limit
// (the session names or is advertised more origins than its bound) ends that connection
// with the error, not the node.
func (r *Replica) checkConn(c *conn, err error) bool {
	var we *wire.Error
	if errors.As(err, &we) && we.Class == wire.ClassResourceLimit {
		r.closeConn(c, we.Code, we.Message)
		return false
	}
	return r.check(err)
}

// check reports whether err is nil. A refusal in toleratedRefusals is passed over; a
// StorageError degrades the replica (storage.go) instead of stopping it: the storage, not
// the replica's state, is at fault, and reopening the store heals it. Any other error (a
// store that refused or found its data damaged, or a command the replica should never
// have issued) stops the replica: every later input answers it, wrapped in ErrStopped.
func (r *Replica) check(err error) bool {
	if err == nil {
		return true
	}
	var we *wire.Error
	if errors.As(err, &we) {
		if _, ok := toleratedRefusals[we.Code]; ok {
			return false
		}
	}
	var se *store.StorageError
	if errors.As(err, &se) {
		r.degrade(se)
		return false
	}
	if r.fatal == nil {
		r.fatal = errors.Join(ErrStopped, err)
	}
	return false
}

// closeConn closes a connection's session with code. A session that is closed already
// refuses with closed, which cannot matter: its EventClosed is on its way (or handled), and
// the connection is dropped with it.
func (r *Replica) closeConn(c *conn, code wire.Code, why string) {
	c.closing = true
	if err := c.sess.Close(code, why); err != nil {
		r.check(err) // closed is tolerated; a bad code would be the replica's own defect
	}
}
