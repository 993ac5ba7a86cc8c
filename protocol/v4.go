package protocol

import (
	"strconv"

	"plait/protocol/wire"
)

// Version 4 (SPEC.md, "Version 4: the cluster map and requests (draft)"): version 3 and the
// cluster map's frames. The session carries MAP and MEMBERS without holding them (which map
// to keep is the caller's), and keeps of requests only their ids: which this side sent and
// still awaits, which the peer sent and this side still owes, so that every request is
// answered once and the requests in flight stay within Limits.MaxRequestsInFlight each way.
// Deadlines and forwarding are the caller's (protocol/replica).

// v4State is what a version-4 connection adds to version 3's: the requests in flight, both
// ways, by id.
type v4State struct {
	lastOut uint64              // the highest id this side gave a request on the connection
	out     map[uint64]struct{} // requests this side sent, neither answered nor forgotten
	lastIn  uint64              // the highest id the peer gave a request
	in      map[uint64]struct{} // requests the peer sent that this side has not answered
}

// resetV4 forgets every request: a new session, or a closed one, which holds nothing for
// the peer.
func (s *Session) resetV4() {
	s.v4 = v4State{out: map[uint64]struct{}{}, in: map[uint64]struct{}{}}
}

// onMap hands the peer's cluster map to the caller.
func (s *Session) onMap(_ wire.Frame, m *wire.Map) {
	s.emit(Event{Kind: EventMap, Map: m})
}

// onMembers hands the peer's member entries to the caller.
func (s *Session) onMembers(_ wire.Frame, m *wire.Members) {
	s.emit(Event{Kind: EventMembers, Members: m})
}

// onRequest takes in a request: its id above every id the peer used, its path ending at the
// peer. Beyond the bound on requests owed, the session answers it too-many-requests itself.
func (s *Session) onRequest(f wire.Frame, r *wire.Request) {
	switch {
	case r.ID <= s.v4.lastIn:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "request id "+strconv.FormatUint(r.ID, 10)+
			" is not above the last one received, "+strconv.FormatUint(s.v4.lastIn, 10)))
		return
	case r.Path[len(r.Path)-1] != s.info.PeerName:
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "the request's path ends at "+
			quote(r.Path[len(r.Path)-1])+", not at the peer "+quote(s.info.PeerName)))
		return
	}
	s.v4.lastIn = r.ID
	if len(s.v4.in) >= s.limits.MaxRequestsInFlight {
		s.sendControl(&wire.Response{ID: r.ID, Code: wire.CodeTooManyRequests,
			Message: strconv.Itoa(s.limits.MaxRequestsInFlight) + " requests received are not answered yet"})
		s.emit(Event{Kind: EventRequestRefused, Request: r})
		return
	}
	s.v4.in[r.ID] = struct{}{}
	s.emit(Event{Kind: EventRequest, Request: r})
}

// onResponse takes in an answer to a request this side sent: one still awaited, or a late
// one (already answered, or forgotten), which the caller drops and counts.
func (s *Session) onResponse(f wire.Frame, r *wire.Response) {
	if r.ID > s.v4.lastOut {
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "RESPONSE to request "+strconv.FormatUint(r.ID, 10)+
			", which this side never sent"))
		return
	}
	_, awaited := s.v4.out[r.ID]
	delete(s.v4.out, r.ID)
	s.emit(Event{Kind: EventResponse, Response: r, Late: !awaited})
}
