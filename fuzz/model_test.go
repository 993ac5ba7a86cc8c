package fuzz

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"

	"plait/protocol"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// ---- the reference model ----

// FuzzSession (session_test.go) checks the session under test against v2Model after every
// message; sameFailure, sameEvents, sameFrames and sameStats there compare the two.

// v2Model is the session under test as protocol/SPEC.md describes it, from the handshake on: the
// frame rules of "Framing", the receive checks of "Version 2: per-origin channels" (DATA,
// SUBSCRIBE, UNSUBSCRIBE, CURSOR, CREDIT, RESEND, DIVERGENCE, HEADS), ORIGIN, PING and PONG,
// CLOSE and the classes of "Errors". Where protocol/SPEC.md leaves an order open (which of two
// broken rules of one frame is reported), it follows the core's order; the body decoding
// is wire.DecodeBody's, which FuzzDecode checks.
type v2Model struct {
	in        map[uint32]*mIn // the session's open channels (it subscribed)
	lastIn    uint32
	conn      mWindow          // the connection's receive window
	out       map[uint32]*mOut // the peer's open channels (the session sends)
	lastOut   uint32
	connOut   uint64 // the connection credit the peer granted
	named     map[wire.OriginID]bool
	peerHeads map[wire.OriginID]uint64
	pingOut   bool
	pingID    uint64
	cursors   []uint32 // channels acknowledged since the last Ready
	closed    bool
	cmdFrames []wire.Body // CURSOR or CREDIT frames a setup command sends itself
}

// mWindow is a receive window: the absolute limit granted, what was received and released.
type mWindow struct{ window, limit, recv, consumed uint64 }

func (w *mWindow) buffered() uint64 { return w.recv - w.consumed }

// grantDue is protocol/SPEC.md's rule of when a receiver must grant (released + window): at least
// half of the window is free beyond the last grant, or nothing is buffered and less than one
// largest frame of credit is left. It may grant more often: a grant of released + window
// above the last one is always allowed.
func (w *mWindow) grantDue() bool {
	next := w.consumed + w.window
	maxFrame := min(uint64(sessLimits.MaxFrameBody)+wire.HeaderSize, w.window)
	return next >= w.limit+(w.window+1)/2 || w.buffered() == 0 && w.limit-w.recv < maxFrame && next > w.limit
}

type mIn struct {
	id            uint32
	origin        wire.OriginID
	seq           uint64 // the chain position received and checked
	hash          wire.Hash
	acked         uint64
	ackHash       wire.Hash
	pending       []mPending // applied, not acknowledged
	win           mWindow
	resend        bool   // a RESEND is outstanding
	lastDiscarded uint64 // the highest seq dropped since
}

type mPending struct {
	seq  uint64
	hash wire.Hash
	size uint64
}

type mOut struct {
	id          uint32
	origin      wire.OriginID
	next, acked uint64
	limit       uint64
}

func newV2Model() *v2Model {
	w := uint64(sessLimits.MaxSessionBuffer)
	return &v2Model{in: map[uint32]*mIn{}, out: map[uint32]*mOut{}, named: map[wire.OriginID]bool{},
		peerHeads: map[wire.OriginID]uint64{}, conn: mWindow{window: w, limit: w}}
}

func (m *v2Model) clone() *v2Model {
	c := *m
	c.in = make(map[uint32]*mIn, len(m.in))
	for id, ch := range m.in {
		cc := *ch
		cc.pending = slices.Clone(ch.pending)
		c.in[id] = &cc
	}
	c.out = make(map[uint32]*mOut, len(m.out))
	for id, ch := range m.out {
		cc := *ch
		c.out[id] = &cc
	}
	c.named, c.peerHeads = maps.Clone(m.named), maps.Clone(m.peerHeads)
	c.cursors = slices.Clone(m.cursors)
	c.cmdFrames = nil
	return &c
}

// Setup commands of the session under test.

func (m *v2Model) subscribe(cursors []vector.Entry) {
	if m.lastIn == 0 {
		m.cmdFrames = append(m.cmdFrames, &wire.Credit{Entries: []wire.CreditEntry{{Channel: 0, Limit: m.conn.limit}}})
	}
	w := uint64(sessLimits.MaxChannelBuffer)
	for _, c := range cursors {
		m.lastIn++
		m.in[m.lastIn] = &mIn{id: m.lastIn, origin: c.Origin, seq: c.Seq, hash: c.Hash, acked: c.Seq, ackHash: c.Hash,
			win: mWindow{window: w, limit: w}}
	}
}

func (m *v2Model) sent(origin wire.OriginID, n uint64) {
	for _, ch := range m.out {
		if ch.origin == origin {
			ch.next += n
		}
	}
}

func (m *v2Model) ack(origin wire.OriginID, seq uint64) {
	for _, ch := range m.in {
		if ch.origin != origin || seq <= ch.acked {
			continue
		}
		var freed uint64
		n := 0
		for n < len(ch.pending) && ch.pending[n].seq <= seq {
			freed += ch.pending[n].size
			ch.ackHash = ch.pending[n].hash
			n++
		}
		ch.pending = slices.Delete(ch.pending, 0, n)
		ch.acked = seq
		m.release(ch, freed)
		if !slices.Contains(m.cursors, ch.id) {
			m.cursors = append(m.cursors, ch.id)
		}
	}
}

// sameSent checks the frames the session sent: first want (the frames of the input or the
// command), then what Ready adds: one CURSOR of the channels acknowledged since the last
// Ready, still open, then one CREDIT (if any grant) of grants of released + window above the
// last grant, connection first, channels ascending, including every grant due.
func (m *v2Model) sameSent(want []wire.Body, got []wire.Decoded) error {
	if len(got) < len(want) {
		return sameFrames(want, got)
	}
	if err := sameFrames(want, got[:len(want)]); err != nil {
		return err
	}
	got = got[len(want):]
	if m.closed {
		return sameFrames(nil, got)
	}
	slices.Sort(m.cursors)
	var cs []wire.CursorEntry
	for _, id := range m.cursors {
		if ch := m.in[id]; ch != nil {
			cs = append(cs, wire.CursorEntry{Channel: id, Seq: ch.acked, Hash: ch.ackHash})
		}
	}
	m.cursors = m.cursors[:0]
	if len(cs) > 0 {
		if err := sameFrames([]wire.Body{&wire.Cursor{Entries: cs}}, got[:min(1, len(got))]); err != nil {
			return err
		}
		got = got[1:]
	}
	var grants []wire.CreditEntry
	if len(got) > 0 {
		c, ok := got[0].Value.(*wire.Credit)
		if !ok || len(got) > 1 || got[0].Channel != 0 || got[0].Flags != 0 {
			return fmt.Errorf("after the CURSOR, the session sends %d frames, the first %s (flags %d, channel %d); at most one CREDIT may follow",
				len(got), got[0].Type, got[0].Flags, got[0].Channel)
		}
		grants = c.Entries
	}
	type window struct {
		ch uint32
		w  *mWindow
	}
	ws := []window{{0, &m.conn}}
	for _, id := range slices.Sorted(maps.Keys(m.in)) {
		ws = append(ws, window{id, &m.in[id].win})
	}
	for _, w := range ws {
		next := w.w.consumed + w.w.window
		if len(grants) > 0 && grants[0].Channel == w.ch {
			if g := grants[0].Limit; g != next || g <= w.w.limit {
				return fmt.Errorf("CREDIT of channel %d at %d: the model grants released + window = %d above the last grant %d", w.ch, g, next, w.w.limit)
			}
			w.w.limit = next
			grants = grants[1:]
			continue
		}
		if w.w.grantDue() {
			return fmt.Errorf("no CREDIT of channel %d: a grant of %d is due (last %d; received %d, released %d)", w.ch, next, w.w.limit, w.w.recv, w.w.consumed)
		}
	}
	if len(grants) > 0 {
		return fmt.Errorf("CREDIT of channel %d at %d: not an open channel of the session, or out of order", grants[0].Channel, grants[0].Limit)
	}
	return nil
}

func (m *v2Model) release(ch *mIn, n uint64) {
	ch.win.consumed += n
	m.conn.consumed += n
}

func (m *v2Model) closeIn(ch *mIn) {
	m.conn.consumed += ch.win.buffered()
	delete(m.in, ch.id)
}

// mPred is what the model predicts for one message.
type mPred struct {
	events      []protocol.Event
	frames      []wire.Body // sent while processing it
	fail        *wire.Error // the error the session closes with, or the peer's CLOSE
	byPeer      bool
	codes       []wire.Code    // fail's acceptable codes: every rule the failing frame breaks
	failType    wire.Type      // the failing frame's type
	failEvents  int            // events[:failEvents] come from the frames before it
	stats       protocol.Stats // deltas
	ignored     uint64
	ignoredType wire.Type
}

func (m *v2Model) receive(msg []byte) *mPred {
	p := &mPred{}
	p.stats.MessagesIn, p.stats.BytesIn = 1, uint64(len(msg))
	if err := wire.CheckMessage(msg, sessLimits.MaxMessage); err != nil {
		m.fail(p, err)
		return p
	}
	r := wire.NewReader(msg, sessLimits.MaxFrameBody)
	for r.More() && !m.closed {
		f, err := r.Next()
		if err != nil {
			m.fail(p, err)
			break
		}
		m.frame(p, f)
	}
	m.flushIgnored(p)
	return p
}

func (m *v2Model) flushIgnored(p *mPred) {
	if p.ignored > 0 {
		p.events = append(p.events, protocol.Event{Kind: protocol.EventIgnoredFrame, Frame: p.ignoredType, Count: p.ignored})
		p.ignored = 0
	}
}

// fail closes with err, whose code may be any of codes (default: err's).
func (m *v2Model) fail(p *mPred, err *wire.Error, codes ...wire.Code) {
	if len(codes) == 0 {
		codes = []wire.Code{err.Code}
	}
	p.codes, p.failType, p.failEvents = codes, err.Frame, len(p.events)
	if err.Class == wire.ClassProtocol {
		p.stats.ProtocolErrors++
	}
	p.frames = append(p.frames, &wire.Close{Code: err.Code, Class: err.Class})
	m.close(p, err, false)
}

func (m *v2Model) close(p *mPred, err *wire.Error, byPeer bool) {
	if byPeer {
		p.failEvents = len(p.events)
	}
	m.flushIgnored(p)
	m.closed = true
	p.fail, p.byPeer = err, byPeer
	p.events = append(p.events, protocol.Event{Kind: protocol.EventClosed, Err: err, ByPeer: byPeer})
}

// failAt closes because frame f breaks the rules of codes (in no particular order: protocol/SPEC.md
// does not say which of two broken rules a receiver reports).
func (m *v2Model) failAt(p *mPred, f wire.Frame, codes ...wire.Code) {
	m.fail(p, wire.FrameError(codes[0], f.Type, f.Offset, "predicted by the model"), codes...)
}

// settle makes the prediction's error the session's, once sameFailure accepted it.
func (p *mPred) settle(serr *wire.Error) {
	if p.fail == nil || serr == nil || p.byPeer {
		return
	}
	p.fail.Code, p.fail.Class = serr.Code, serr.Class
	p.frames[len(p.frames)-1] = &wire.Close{Code: serr.Code, Class: serr.Class}
}

// violations collects the codes of the rules a frame breaks.
type violations []wire.Code

func (v *violations) add(c wire.Code) {
	if !slices.Contains(*v, c) {
		*v = append(*v, c)
	}
}

func (m *v2Model) frame(p *mPred, f wire.Frame) {
	switch f.Type {
	case wire.TypeTxn1:
		if _, _, err := wire.ParseTxn1(f.Body); err != nil {
			m.failAt(p, f, wire.TxnErrorCode(err))
			return
		}
		m.failAt(p, f, wire.CodeUnexpectedFrame)
		return
	case wire.TypeData:
		m.data(p, f)
		return
	case wire.TypeChunk:
		// A CHUNK is read only on the channel of a copy taken over version 3; this model's
		// version-2 session refuses it by its type before its body.
		m.failAt(p, f, wire.CodeUnexpectedFrame)
		return
	case wire.TypeRangeRecords:
		// RANGERECORDS is read only on a connection that negotiated anti-entropy (version 3
		// and its capability), which this model's version-2 session did not: refused by its
		// type before its body, like CHUNK.
		m.failAt(p, f, wire.CodeUnexpectedFrame)
		return
	}
	if !wire.Known(f.Type) {
		if !f.Type.Ignorable() {
			m.failAt(p, f, wire.CodeUnknownFrame)
			return
		}
		p.stats.IgnoredFrames++
		if p.ignored == 0 {
			p.ignoredType = f.Type
		}
		p.ignored++
		return
	}
	body, err := wire.DecodeBody(f)
	if err != nil {
		m.fail(p, err)
		return
	}
	if c, ok := body.(*wire.Close); ok {
		m.close(p, &wire.Error{Code: c.Code, Class: wire.PeerClass(c.Code, c.Class), Offset: wire.NoOffset}, true)
		return
	}
	if f.Type == wire.TypeHello || f.Type == wire.TypeAuth || wire.Version(f.Type) == 1 {
		m.failAt(p, f, wire.CodeUnexpectedFrame)
		return
	}
	// A frame that lists entries takes effect whole or not at all; a broken rule closes
	// the session, which emits what it emits of the frame before (sameEvents allows it).
	var bad violations
	switch b := body.(type) {
	case *wire.Ping:
		p.frames = append(p.frames, &wire.Pong{ID: b.ID})
	case *wire.Pong:
		if !m.pingOut || b.ID != m.pingID {
			m.failAt(p, f, wire.CodeUnexpectedFrame)
			return
		}
		m.pingOut = false
	case *wire.Origin:
		if !m.named[b.Origin] && len(m.named) >= sessLimits.MaxOrigins {
			m.failAt(p, f, wire.CodeTooManyOrigins)
			return
		}
		m.named[b.Origin] = true
		p.events = append(p.events, protocol.Event{Kind: protocol.EventOriginNamed, Origin: b.Origin, Name: b.Name})
	case *wire.Heads:
		// Heads only of named origins, so they are bounded by MaxOrigins as names are.
		for _, h := range b.Heads {
			if !m.named[h.Origin] {
				bad.add(wire.CodeUnexpectedFrame)
			} else if h.Seq < m.peerHeads[h.Origin] {
				bad.add(wire.CodeOutOfOrder)
			}
		}
		if len(bad) > 0 {
			m.failAt(p, f, bad...)
			return
		}
		for _, h := range b.Heads {
			m.peerHeads[h.Origin] = h.Seq
		}
		for _, o := range b.Withdrawn {
			delete(m.peerHeads, o)
		}
		p.events = append(p.events, protocol.Event{Kind: protocol.EventHeads, Heads: b})
	case *wire.Subscribe:
		if len(m.out)+len(b.Entries) > sessLimits.MaxChannels {
			bad.add(wire.CodeTooManyChannels)
		}
		for _, e := range b.Entries {
			if e.Channel <= m.lastOut {
				bad.add(wire.CodeBadChannel)
			}
			if m.outOrigin(e.Origin) != nil || e.Origin == pOrigin {
				bad.add(wire.CodeBadField)
			}
		}
		if len(bad) > 0 {
			m.failAt(p, f, bad...)
			return
		}
		for _, e := range b.Entries {
			m.lastOut = e.Channel
			m.out[e.Channel] = &mOut{id: e.Channel, origin: e.Origin, next: e.Seq + 1, acked: e.Seq, limit: e.Credit}
			p.events = append(p.events, protocol.Event{Kind: protocol.EventSubscribed, Origin: e.Origin, Seq: e.Seq, Hash: e.Hash})
		}
	case *wire.Unsubscribe:
		for _, id := range b.Channels {
			if id > m.lastOut {
				bad.add(wire.CodeBadChannel)
			}
		}
		if len(bad) > 0 {
			m.failAt(p, f, bad...)
			return
		}
		for _, id := range b.Channels {
			if ch := m.out[id]; ch != nil {
				delete(m.out, id)
				p.events = append(p.events, protocol.Event{Kind: protocol.EventUnsubscribed, Origin: ch.origin})
			}
		}
	case *wire.Cursor:
		for _, e := range b.Entries {
			switch ch := m.out[e.Channel]; {
			case e.Channel > m.lastOut:
				bad.add(wire.CodeBadChannel)
			case ch == nil: // closed since: ignored
			case e.Seq >= ch.next: // passes what was sent
				bad.add(wire.CodeBadField)
			case e.Seq < ch.acked:
				bad.add(wire.CodeOutOfOrder)
			}
		}
		if len(bad) > 0 {
			m.failAt(p, f, bad...)
			return
		}
		for _, e := range b.Entries {
			if ch := m.out[e.Channel]; ch != nil && e.Seq > ch.acked {
				ch.acked = e.Seq
				p.events = append(p.events, protocol.Event{Kind: protocol.EventCursor, Origin: ch.origin, Seq: e.Seq, Hash: e.Hash})
			}
		}
	case *wire.Credit:
		for _, e := range b.Entries {
			if e.Channel > m.lastOut {
				bad.add(wire.CodeBadChannel)
			}
		}
		if len(bad) > 0 {
			m.failAt(p, f, bad...)
			return
		}
		for _, e := range b.Entries {
			if e.Channel == 0 {
				if e.Limit > m.connOut {
					m.connOut = e.Limit
					p.events = append(p.events, protocol.Event{Kind: protocol.EventCredit})
				}
			} else if ch := m.out[e.Channel]; ch != nil && e.Limit > ch.limit {
				ch.limit = e.Limit
				p.events = append(p.events, protocol.Event{Kind: protocol.EventCredit, Origin: ch.origin})
			}
		}
	case *wire.Resend:
		ch, ok := m.outChannel(p, f, b.Channel)
		if !ok || ch == nil {
			return
		}
		if b.From <= ch.acked || b.From > ch.next {
			m.failAt(p, f, wire.CodeBadField)
			return
		}
		ch.next = b.From
		p.stats.ResendsReceived++
		p.events = append(p.events, protocol.Event{Kind: protocol.EventResend, Origin: ch.origin, From: b.From})
	case *wire.Divergence:
		var origin wire.OriginID
		if b.Side == wire.SideSubscriber { // the peer subscribes: a channel the session sends on
			ch, ok := m.outChannel(p, f, b.Channel)
			if !ok || ch == nil {
				return
			}
			origin = ch.origin
			delete(m.out, ch.id)
		} else {
			ch := m.in[b.Channel]
			if ch == nil {
				if b.Channel > m.lastIn {
					m.failAt(p, f, wire.CodeBadChannel)
				}
				return
			}
			origin = ch.origin
			m.closeIn(ch)
		}
		p.stats.Divergences++
		p.events = append(p.events, protocol.Event{Kind: protocol.EventDivergence, Origin: origin, Seq: b.Seq, Hash: b.Hash, DivergedAt: b.Seq, ByPeer: true,
			Err: wire.NewError(wire.CodeDivergence, "")})
	default:
		m.failAt(p, f, wire.CodeUnexpectedFrame)
	}
}

func (m *v2Model) outOrigin(o wire.OriginID) *mOut {
	for _, ch := range m.out {
		if ch.origin == o {
			return ch
		}
	}
	return nil
}

// outChannel is protocol/SPEC.md's rule for a channel the peer names: open, closed since (the frame
// raced the close: ignored), or never opened (bad-channel).
func (m *v2Model) outChannel(p *mPred, f wire.Frame, id uint32) (*mOut, bool) {
	if ch := m.out[id]; ch != nil {
		return ch, true
	}
	if id > m.lastOut {
		m.failAt(p, f, wire.CodeBadChannel)
		return nil, false
	}
	return nil, true
}

// data is protocol/SPEC.md's receive checks on DATA: the body decodes, then the connection's and the
// channel's credit, a channel that was opened, of the entry's origin (in no particular
// order), then the chain.
func (m *v2Model) data(p *mPred, f wire.Frame) {
	claimed, v, err := wire.ParseDataUpTo(f.Body, wire.TxnFormat1) // version 2 carries format 1 only
	if err != nil {
		m.failAt(p, f, wire.TxnErrorCode(err))
		return
	}
	size := uint64(wire.HeaderSize + len(f.Body))
	ch := m.in[f.Channel]
	var bad violations
	if size > m.conn.limit-m.conn.recv {
		bad.add(wire.CodeCreditOverrun)
	}
	switch {
	case ch == nil && f.Channel > m.lastIn:
		bad.add(wire.CodeBadChannel)
	case ch != nil:
		if size > ch.win.limit-ch.win.recv {
			bad.add(wire.CodeCreditOverrun)
		}
		if v.Origin != ch.origin || !m.named[v.Origin] {
			bad.add(wire.CodeUnexpectedFrame)
		}
	}
	if len(bad) > 0 {
		m.failAt(p, f, bad...)
		return
	}
	m.conn.recv += size
	if ch == nil {
		p.stats.Stale++ // the channel was closed: in flight, dropped
		m.conn.consumed += size
		return
	}
	ch.win.recv += size
	p.stats.TxnsReceived++
	h := sha256.Sum256(v.Raw())
	switch {
	case h != claimed:
		m.diverged(p, ch, v, size)
	case v.Seq < ch.seq, v.Seq == ch.seq && h == ch.hash:
		p.stats.Duplicates++
		m.release(ch, size)
		p.events = append(p.events, protocol.Event{Kind: protocol.EventDuplicate, Origin: ch.origin, Txn: v})
	case v.Seq == ch.seq, v.Seq == ch.seq+1 && v.Prev != ch.hash:
		m.diverged(p, ch, v, size)
	case v.Seq == ch.seq+1:
		ch.seq, ch.hash = v.Seq, h
		ch.resend, ch.lastDiscarded = false, 0
		ch.pending = append(ch.pending, mPending{seq: v.Seq, hash: h, size: size})
		p.events = append(p.events, protocol.Event{Kind: protocol.EventTxn, Origin: ch.origin, Txn: v})
	default: // a gap
		m.release(ch, size)
		if ch.resend && v.Seq > ch.lastDiscarded {
			ch.lastDiscarded = v.Seq
			p.stats.Discarded++
			return
		}
		p.stats.Gaps++
		p.stats.ResendsRequested++
		ch.resend, ch.lastDiscarded = true, v.Seq
		p.frames = append(p.frames, &wire.Resend{Channel: ch.id, From: ch.seq + 1})
		p.events = append(p.events, protocol.Event{Kind: protocol.EventGap, Origin: ch.origin, Txn: v, Expected: ch.seq + 1})
	}
}

func (m *v2Model) diverged(p *mPred, ch *mIn, v wire.TxnView, size uint64) {
	p.stats.Divergences++
	m.release(ch, size)
	p.events = append(p.events, protocol.Event{Kind: protocol.EventDivergence, Origin: ch.origin, Txn: v, DivergedAt: v.Seq,
		Seq: ch.seq, Hash: ch.hash, Err: wire.NewError(wire.CodeDivergence, "")})
	p.frames = append(p.frames, &wire.Divergence{Channel: ch.id, Seq: ch.seq, Hash: ch.hash, Side: wire.SideSubscriber})
	m.closeIn(ch)
}
