package protocol

import (
	"strconv"

	"plait/protocol/wire"
)

// The commands every version takes. The version-specific ones are in v1_commands.go
// (Session.V1), v2_commands.go (Session.V2) and v3_commands.go (Session.V3).

func (s *Session) needEstablished(cmd string) *wire.Error {
	switch s.state {
	case StateEstablished:
		return nil
	case StateClosed:
		return wire.NewError(wire.CodeClosed, cmd+" on a closed session")
	}
	return wire.NewError(wire.CodeInvalidState, cmd+" before the handshake completed")
}

// SetOriginName records an origin's human name; it is sent in an ORIGIN frame before that
// origin's first entry or head on this connection.
func (s *Session) SetOriginName(origin wire.OriginID, name string) error {
	s.begin()
	if s.state == StateClosed {
		return wire.NewError(wire.CodeClosed, "SetOriginName on a closed session")
	}
	if origin.IsZero() {
		return wire.NewError(wire.CodeBadArgument, "all-zero origin id")
	}
	if !wire.ValidName(name) {
		return wire.NewError(wire.CodeBadArgument, "origin name "+quote(name)+" is not 1-64 bytes of [A-Za-z0-9_.-]")
	}
	if _, known := s.names[origin]; !known && len(s.names) >= s.limits.MaxOrigins {
		return wire.NewError(wire.CodeTooManyOrigins, "the session names "+strconv.Itoa(s.limits.MaxOrigins)+" origins already")
	}
	s.names[origin] = name
	return nil
}

// Close closes the session with code (going-away for an orderly shutdown) and tells the
// peer why.
func (s *Session) Close(code wire.Code, message string) error {
	s.begin()
	if s.state == StateClosed {
		return wire.NewError(wire.CodeClosed, "Close on a closed session")
	}
	if cl, ok := wire.ClassOf(code); !ok || cl == wire.ClassLocal || wire.IsRequestCode(code) {
		return wire.NewError(wire.CodeBadArgument, "close code "+quote(string(code))+" is not a code a CLOSE carries")
	}
	s.fail(wire.NewError(code, message))
	return nil
}

// originFrame returns the ORIGIN frame (header and body) to queue before the origin's first
// mention on this connection, or nil when it was sent already.
func (s *Session) originFrame(o wire.OriginID, name string) ([]byte, error) {
	if s.announced[o] {
		return nil, nil
	}
	f, err := wire.AppendFrame(nil, 0, 0, &wire.Origin{Origin: o, Name: name})
	if err != nil {
		return nil, wire.NewError(wire.CodeInternal, "encoding ORIGIN: "+err.Error())
	}
	return f, nil
}

// queueOrigin queues an ORIGIN frame originFrame returned (nil: nothing to send).
func (s *Session) queueOrigin(o wire.OriginID, frame []byte) {
	if frame == nil {
		return
	}
	s.announced[o] = true
	s.reserve(wire.TypeOrigin, len(frame))
	s.cur = append(s.cur, frame...)
}
