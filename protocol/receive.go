package protocol

import (
	"slices"
	"strconv"
	"time"

	"plait/protocol/handshake"
	"plait/protocol/wire"
)

// Receiving tells the session that bytes of a message are arriving, the message not whole
// yet (a caller that reads messages in parts says so now and then): the peer is alive.
// Why: a message is acted on only once all of it has arrived, and on a slow link one large
// frame takes longer than the liveness timeout (a transaction of 8 MiB at 1 MB/s takes 8
// s); counting whole messages only would close such a link before its frame arrived, and
// again after every redial. Nothing else changes: no event, no output.
func (s *Session) Receiving(now time.Time) {
	if s.state == StateHandshaking || s.state == StateAuthenticating || s.state == StateEstablished {
		s.lastRecv, s.now = now, now
	}
}

// Receive processes one message from the peer. Protocol errors are not returned: they
// close the session and surface as EventClosed, and so does a message received while
// ReadPaused (receive-buffer-full). The returned error is a refused call: before Start, or
// on a closed session.
func (s *Session) Receive(now time.Time, msg []byte) error {
	s.begin()
	switch s.state {
	case StateNew:
		return wire.NewError(wire.CodeInvalidState, "Receive before Start")
	case StateClosed:
		return wire.NewError(wire.CodeClosed, "Receive on a closed session")
	}
	s.lastRecv, s.now = now, now
	s.resumed = false
	s.stats.MessagesIn++
	s.stats.BytesIn += uint64(len(msg))
	if s.ReadPaused() {
		s.fail(wire.NewError(wire.CodeReceiveBufferFull, "a message arrived while reads were paused with "+
			strconv.Itoa(s.v1.unacked.bytes)+" unacknowledged bytes"))
		return nil
	}
	if err := wire.CheckMessage(msg, s.limits.MaxMessage); err != nil {
		s.fail(err)
		return nil
	}
	r := wire.NewReader(msg, s.limits.MaxFrameBody)
	for r.More() && s.state != StateClosed {
		f, err := r.Next()
		if err != nil {
			s.fail(err)
			break
		}
		s.countIn(f.Type)
		s.frame(now, f)
	}
	s.flushIgnored()
	return nil
}

// flushIgnored reports the ignorable frames skipped in the current message as one event:
// a flood of tiny ignorable frames must not turn into a flood of events.
func (s *Session) flushIgnored() {
	if s.ignored > 0 {
		s.emit(Event{Kind: EventIgnoredFrame, Frame: s.ignoredType, Count: s.ignored})
		s.ignored = 0
	}
}

// frame handles one frame whose header the reader has checked: it reaches its handler
// through receivers, the one table of what each frame type goes to.
func (s *Session) frame(now time.Time, f wire.Frame) {
	r := &receivers[f.Type]
	if r.inPlace != nil { // the data paths decode in place
		r.inPlace(s, f)
		return
	}
	if !wire.Known(f.Type) {
		if f.Type.Ignorable() {
			s.stats.IgnoredFrames++
			if s.ignored == 0 {
				s.ignoredType = f.Type
			}
			s.ignored++
			return
		}
		s.fail(wire.FrameError(wire.CodeUnknownFrame, f.Type, f.Offset, "unknown critical frame type"))
		return
	}
	body, err := wire.DecodeBody(f)
	if err != nil {
		s.fail(err)
		return
	}
	if b, ok := body.(*wire.Close); ok { // accepted in every state
		s.closed(&wire.Error{Code: b.Code, Class: wire.PeerClass(b.Code, b.Class), Offset: wire.NoOffset, Message: b.Message}, true)
		return
	}
	want := r.state
	if r.decoded == nil {
		want = StateEstablished // a known frame this build does not handle: refused below
	}
	if s.state != want {
		s.unexpected(f, "in state "+s.state.String())
		return
	}
	if v := wire.Version(f.Type); !frameOfVersion(v, s.info.Version) {
		s.unexpected(f, "a version-"+strconv.FormatUint(v, 10)+" frame on a version-"+strconv.FormatUint(s.info.Version, 10)+" connection")
		return
	}
	if r.decoded == nil {
		s.unexpected(f, "not handled by this build")
		return
	}
	if st := stampOf(body); st != nil && *st != nil && s.info.Version >= 4 {
		// Before the handler, so that what it sends (a PONG) echoes this stamp.
		s.onStamp(now, *st)
	}
	r.decoded(s, now, f, body)
}

// receiver is what a received frame of one type goes to.
type receiver struct {
	// inPlace handles the frame from its body in place, checking the session's state and
	// version itself: the data paths (TXN1, DATA, CHUNK, RANGERECORDS), which never copy
	// or decode a body into a value.
	inPlace func(s *Session, f wire.Frame)
	// decoded handles the frame's decoded and checked body, once the frame is known to
	// belong in the session's state (state) and on the connection's version (its
	// version in wire's registry). CLOSE is accepted in every state before this.
	decoded func(s *Session, now time.Time, f wire.Frame, body wire.Body)
	state   State
}

// receivers is every frame type's receiver, indexed by type: the one dispatch of a
// received frame, whatever its version. A type without a receiver that wire knows is
// refused as not handled by this build; one wire does not know is skipped when
// ignorable, else refused.
var receivers [256]receiver

func init() {
	established := func(t wire.Type, h func(s *Session, now time.Time, f wire.Frame, b wire.Body)) {
		receivers[t] = receiver{decoded: h, state: StateEstablished}
	}
	// The handshake.
	receivers[wire.TypeHello] = receiver{decoded: body((*Session).onHello), state: StateHandshaking}
	receivers[wire.TypeAuth] = receiver{decoded: (*Session).onAuthFrame, state: StateAuthenticating}
	// Every version.
	established(wire.TypePing, (*Session).onPing)
	established(wire.TypePong, (*Session).onPong)
	established(wire.TypeOrigin, body((*Session).onOrigin))
	// Version 1 (v1.go).
	established(wire.TypeSubscribe1, body((*Session).onSubscribe1))
	established(wire.TypeAck1, body((*Session).onAck1))
	receivers[wire.TypeTxn1] = receiver{inPlace: (*Session).onTxn1}
	// Version 2, and 3 on its channels (v2.go).
	established(wire.TypeSubscribe, body((*Session).onSubscribe))
	established(wire.TypeUnsubscribe, body((*Session).onUnsubscribe))
	established(wire.TypeCursor, body((*Session).onCursor))
	receivers[wire.TypeData] = receiver{inPlace: (*Session).onData}
	established(wire.TypeHeads, body((*Session).onHeads))
	established(wire.TypeCredit, body((*Session).onCredit))
	established(wire.TypeResend, body((*Session).onResend))
	established(wire.TypeDivergence, body((*Session).onDivergence))
	// Version 3: floors, the base copy (basecopy.go) and anti-entropy (antientropy.go).
	established(wire.TypePurged, body((*Session).onPurged))
	established(wire.TypeCopy, body((*Session).onCopy))
	established(wire.TypeCopyBegin, body((*Session).onCopyBegin))
	receivers[wire.TypeChunk] = receiver{inPlace: (*Session).onChunk}
	established(wire.TypeCopyEnd, body((*Session).onCopyEnd))
	established(wire.TypeCopyAbort, body((*Session).onCopyAbort))
	established(wire.TypeRangeDigest, body((*Session).onRangeDigest))
	receivers[wire.TypeRangeRecords] = receiver{inPlace: (*Session).onRangeRecords}
	// Version 4: the cluster map, member entries and requests (v4.go).
	established(wire.TypeMap, body((*Session).onMap))
	established(wire.TypeMembers, body((*Session).onMembers))
	established(wire.TypeRequest, body((*Session).onRequest))
	established(wire.TypeResponse, body((*Session).onResponse))
	established(wire.TypeSkip, body((*Session).onSkip))
	established(wire.TypeLink, body((*Session).onLink))
	established(wire.TypeHolds, body((*Session).onCopyHolds))
	established(wire.TypeLeafState, body((*Session).onLeafState))
	// Version 4: the quiet control plane (v4.go).
	established(wire.TypeQuiet, body((*Session).onQuiet))
}

// body adapts a handler of one decoded body type to a receiver's decoded: DecodeBody gives
// a frame type's own body type, so the assertion holds.
func body[B wire.Body](h func(s *Session, f wire.Frame, b B)) func(*Session, time.Time, wire.Frame, wire.Body) {
	return func(s *Session, _ time.Time, f wire.Frame, b wire.Body) { h(s, f, b.(B)) }
}

func (s *Session) onAuthFrame(now time.Time, f wire.Frame, b wire.Body) {
	s.onAuth(now, f, b.(*wire.Auth))
}

func (s *Session) onPing(now time.Time, _ wire.Frame, b wire.Body) {
	s.sendControl(&wire.Pong{ID: b.(*wire.Ping).ID, Time: s.pongTime(now)})
}

func (s *Session) onPong(now time.Time, f wire.Frame, b wire.Body) {
	p := b.(*wire.Pong)
	if !s.pingOut || p.ID != s.pingID {
		s.unexpected(f, "answers no outstanding PING")
		return
	}
	s.pingOut = false
	if s.info.Version >= 4 {
		return // its stamp, which echoes the PING's, was sampled before this (onStamp)
	}
	s.rtt = now.Sub(s.pingSent)
	s.onPongTime(p)
}

// frameOfVersion reports whether a frame of version v (0: every version) belongs on a
// connection of version conn: its own version's, and from version 3 on those of every
// version from 2 up to it (version 4 is version 3 and more, which is version 2 and more).
func frameOfVersion(v, conn uint64) bool {
	return v == 0 || v == conn || (v >= 2 && conn > v)
}

func (s *Session) unexpected(f wire.Frame, why string) {
	s.fail(wire.FrameError(wire.CodeUnexpectedFrame, f.Type, f.Offset, why))
}

func (s *Session) onHello(f wire.Frame, h *wire.Hello) {
	if h.Role == s.cfg.Role {
		s.fail(wire.FrameError(wire.CodeBadField, f.Type, f.Offset, "both sides are "+h.Role.String()+"s"))
		return
	}
	peer := handshake.Range{Min: h.MinVersion, Max: h.MaxVersion}
	version, caps, err := handshake.Negotiate(s.rng, peer, s.cfg.Capabilities, h.Caps)
	if err != nil {
		err.Frame, err.Offset = f.Type, f.Offset
		s.fail(err)
		return
	}
	if len(s.cfg.ChannelBinding) > 0 && !slices.Contains(caps, handshake.CapTLSExporter) {
		// Over TLS both sides bind; a peer that does not is not on this channel's other end
		// (a relay in between), or had its offer altered.
		s.fail(wire.FrameError(wire.CodeAuthFailed, f.Type, f.Offset,
			"the connection is TLS and the peer does not bind its handshake to it (capability "+handshake.CapTLSExporter+")"))
		return
	}
	s.peerHello = append([]byte(nil), f.Body...)
	s.peerRole = h.Role
	frame, msg := h.Limits()
	s.peerFrame, s.peerMaxMsg = int(frame), int(min(msg, maxMessageCeiling))
	s.pending = HandshakeInfo{
		Version:       version,
		Caps:          caps,
		PeerName:      h.Name,
		PeerOrigin:    h.Origin,
		PeerMin:       h.MinVersion,
		PeerMax:       h.MaxVersion,
		Authenticated: len(s.cfg.Secret) > 0,
		Bound:         slices.Contains(caps, handshake.CapTLSExporter),
		PeerLeaf:      h.Leaf,
	}
	d, l := s.transcript()
	s.state = StateAuthenticating
	s.sendControl(&wire.Auth{MAC: handshake.BoundMAC(s.cfg.Secret, s.cfg.Role, d, l, s.binding())})
}

// binding is the channel binding the MACs cover: the exporter value when both sides
// negotiated CapTLSExporter, else none.
func (s *Session) binding() []byte {
	if slices.Contains(s.pending.Caps, handshake.CapTLSExporter) {
		return s.cfg.ChannelBinding
	}
	return nil
}

// transcript returns the two HELLO bodies, dialer's first.
func (s *Session) transcript() (dialer, listener []byte) {
	if s.cfg.Role == wire.RoleDialer {
		return s.localHello, s.peerHello
	}
	return s.peerHello, s.localHello
}

func (s *Session) onAuth(now time.Time, f wire.Frame, a *wire.Auth) {
	d, l := s.transcript()
	if !handshake.VerifyBound(s.cfg.Secret, s.peerRole, d, l, s.binding(), a.MAC) {
		why := "the peer's handshake MAC does not verify: a different cluster secret, or a HELLO altered in transit"
		if s.binding() != nil {
			why += ", or a handshake relayed from another TLS channel"
		}
		s.fail(wire.FrameError(wire.CodeAuthFailed, f.Type, f.Offset, why))
		return
	}
	// Identity checks come after the MAC, so that nobody on the path can make a node refuse
	// a genuine peer.
	if s.pending.PeerOrigin == s.cfg.Origin {
		s.fail(wire.FrameError(wire.CodeSelfConnect, f.Type, f.Offset, "the peer has this node's own origin id"))
		return
	}
	if s.cfg.ExpectedPeer != "" && s.pending.PeerName != s.cfg.ExpectedPeer {
		s.fail(wire.FrameError(wire.CodePeerNameMismatch, f.Type, f.Offset,
			"expected peer "+quote(s.cfg.ExpectedPeer)+", the peer is "+quote(s.pending.PeerName)))
		return
	}
	s.state = StateEstablished
	s.info = s.pending
	s.peerHello, s.localHello = nil, nil
	s.nextPing = now.Add(s.limits.PingInterval)
	// Version 4: no sample yet either way, so the dialer's first PING goes at once and
	// its second as soon as the first is answered, echoing the PONG's stamp (pingDue):
	// both sides measure the round trip and the clock from the start, whatever else travels.
	s.stamps = stampState{sent: now}
	info := s.info
	s.emit(Event{Kind: EventHandshake, Handshake: &info})
}

// onOrigin records that the peer named an origin; its entries may follow.
func (s *Session) onOrigin(f wire.Frame, o *wire.Origin) {
	c, known := s.peerOrigins[o.Origin]
	if !known && len(s.peerOrigins) >= s.limits.MaxOrigins {
		s.fail(wire.FrameError(wire.CodeTooManyOrigins, f.Type, f.Offset, "the receive vector holds "+
			strconv.Itoa(s.limits.MaxOrigins)+" origins already"))
		return
	}
	c.named = true
	s.peerOrigins[o.Origin] = c
	s.emit(Event{Kind: EventOriginNamed, Origin: o.Origin, Name: o.Name})
}

// entryVerdict is what a received entry is to the chain position it is checked against.
type entryVerdict uint8

const (
	entryExtends   entryVerdict = iota // seq == position + 1 and prev == the position's hash
	entryDuplicate                     // at or below the position (and the same entry at it)
	entryDiverges                      // not the entry the position holds, or not extending it
	entryGap                           // beyond position + 1
)

// checkEntry classifies an entry, whose chain hash is h, against a chain position (seq,
// hash): the receive check of both versions (SPEC.md, the tables of "Version 1" and
// "Version 2"). For a divergence it also says why.
func (s *Session) checkEntry(seq uint64, hash wire.Hash, v *wire.TxnView, h wire.Hash) (entryVerdict, string) {
	switch {
	case v.Seq < seq, v.Seq == seq && h == hash:
		return entryDuplicate, ""
	case v.Seq == seq:
		return entryDiverges, "entry " + strconv.FormatUint(v.Seq, 10) + " differs from the one applied"
	case v.Seq == seq+1 && v.Prev != hash:
		return entryDiverges, "entry " + strconv.FormatUint(v.Seq, 10) + " does not extend the chain held at " + strconv.FormatUint(seq, 10)
	case v.Seq == seq+1:
		return entryExtends, ""
	case s.cfg.Mutations.BreakGapDetection:
		return entryExtends, "" // test-only: a receiver blind to gaps
	}
	return entryGap, ""
}
