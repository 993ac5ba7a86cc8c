package replica

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"time"

	"plait/internal/mutate"
	"plait/protocol"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Config is what a replica needs besides its store.
type Config struct {
	// MinVersion and MaxVersion bound the protocol versions its sessions offer (0: the
	// oldest and the newest implemented). A node run with MaxVersion 1 is a legacy peer.
	MinVersion, MaxVersion uint64
	Secret                 []byte
	Capabilities           []string
	Limits                 protocol.Limits // every session's limits
	Write                  WriteLimits

	// MoveDelay is how long another candidate's advertised head must stay ahead of an
	// origin's source before the origin moves to it (CONTRACT.md, routing rule; default 2 s).
	MoveDelay time.Duration
	// StallTimeout is how long an origin's source may advertise a head above the applied
	// seq without an entry being applied before the replica treats it as a gap: the
	// [T, head] hole of an entry lost at the tail of a stream, which no later entry would
	// reveal. It resumes the channel from the applied seq and counts a gap and a resend
	// request (default 3 s).
	StallTimeout time.Duration
	// DivergenceRetry is how long a (peer, origin) pair whose channel diverged is left out
	// of the candidates, unless the connection is made again (default 10 s).
	DivergenceRetry time.Duration

	// HoldUnsynced keeps entries that are not yet durable against power loss from peers:
	// the local origin's entries beyond the last Synced, and, for version-1 peers, arrival
	// positions beyond it (so a power loss cannot renumber positions a peer holds). Without
	// it everything applied is served at once (a process crash loses nothing applied).
	HoldUnsynced bool

	// NewSession makes the protocol core of one connection (default NativeSession).
	NewSession func(protocol.Config) (Session, error)
}

// WriteLimits bound a local write (CONTRACT.md, HTTP API). Zero fields take the defaults.
type WriteLimits struct {
	MaxKey   int // default 1024 bytes
	MaxValue int // default 1 MiB
	MaxTxn   int // default 8 MiB of transaction encoding
}

// Default bounds and delays.
const (
	DefaultMaxKey          = 1024
	DefaultMaxValue        = 1 << 20
	DefaultMaxTxn          = 8 << 20
	DefaultMoveDelay       = 2 * time.Second
	DefaultDivergenceRetry = 10 * time.Second
	DefaultStallTimeout    = 3 * time.Second
	maxTableName           = 64
	arrivalBatch           = 64
	maxMoves               = 1024
)

func (c Config) withDefaults() Config {
	if c.Write.MaxKey == 0 {
		c.Write.MaxKey = DefaultMaxKey
	}
	if c.Write.MaxValue == 0 {
		c.Write.MaxValue = DefaultMaxValue
	}
	if c.Write.MaxTxn == 0 {
		c.Write.MaxTxn = DefaultMaxTxn
	}
	if c.MoveDelay == 0 {
		c.MoveDelay = DefaultMoveDelay
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.DivergenceRetry == 0 {
		c.DivergenceRetry = DefaultDivergenceRetry
	}
	if c.NewSession == nil {
		c.NewSession = NativeSession
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// ConnID names one connection of a replica, from 1, never reused.
type ConnID uint64

// Output is what one connection has to send, in order; Closed says that its session is
// over: the shell sends Messages, then closes the socket, and forgets the ConnID.
type Output struct {
	Conn     ConnID
	Messages [][]byte
	Closed   bool
	Err      *wire.Error // why it closed (going-away for an orderly close)
}

// Move is one change of an origin's source, recorded for the status and for the
// simulator's invariants.
type Move struct {
	At       time.Time
	Origin   wire.OriginID
	From, To string // peer names; From is empty for the first source after start
	Reason   MoveReason
	LostAt   time.Time // when the previous source was lost (zero when it was not)
}

// MoveReason says why an origin's source changed (CONTRACT.md, routing rule).
type MoveReason string

// The reasons of the routing rule. ReasonFirst is not a move (source_changes does not
// count it): the first source chosen since start, or the same peer again after it was lost.
const (
	ReasonFirst        MoveReason = "first"
	ReasonDisconnected MoveReason = "disconnected" // the source's connection closed
	ReasonWithdrawn    MoveReason = "withdrawn"    // the source stopped advertising the origin
	ReasonBehind       MoveReason = "behind"       // the source advertises less than this node applied
	ReasonDiverged     MoveReason = "diverged"     // the source's channel diverged
	ReasonDirect       MoveReason = "direct"       // the origin itself connected
	ReasonAhead        MoveReason = "ahead"        // another head stayed ahead for MoveDelay
)

// Replica is one plait node's decisions: see the package documentation. It is not safe for
// concurrent use.
type Replica struct {
	cfg   Config
	store Store
	id    Identity
	now   time.Time

	origins     map[wire.OriginID]*originState
	originOrder []wire.OriginID // sorted
	conns       map[ConnID]*conn
	connOrder   []ConnID // ascending
	lastConn    ConnID
	out         map[ConnID]*Output

	hlc          wire.HLC
	storedHLC    wire.HLC       // no stored record version is newer (Store.RecordHLC and later applies)
	lwwIdx       map[string]int // lww's scratch: record index by table and key
	lwwKey       []byte         // lww's scratch: a table and key
	arrivals     uint64         // the last arrival position
	synced       uint64         // local seq durable against power loss (HoldUnsynced)
	syncedHLC    wire.HLC       // its timestamp
	syncedArrive uint64         // arrival position durable against power loss (HoldUnsynced)

	routeAll   bool                   // re-evaluate every origin's source (timers)
	routeSome  map[wire.OriginID]bool // re-evaluate these (heads, lost sources, direct peers)
	headsDirty map[wire.OriginID]bool
	counters   Counters
	moves      []Move
	lastErrors map[string]PeerError
	evbuf      []protocol.Event
	fatal      error
}

// originState is what the replica knows of one origin.
type originState struct {
	id            wire.OriginID
	name          string
	namePersisted bool
	applied       vector.Entry
	appliedHLC    wire.HLC
	headSeq       uint64 // highest seq known (applied or advertised)
	headHLC       wire.HLC
	source        ConnID // version-2 source; 0: none
	lastSource    string // the peer of the last source, kept after it is lost
	changes       uint64
	aheadSince    time.Time  // when another candidate's head got ahead of the source's
	lostReason    MoveReason // why the last source was lost, until the next is chosen
	lostAt        time.Time
	progressAt    time.Time // the last apply, or the last (re)subscription
	diverged      bool
	divergedAt    uint64
	legacySource  string // the version-1 peer that delivered the last applied entry
}

// conn is one connection and what the replica tracks of it.
type conn struct {
	id          ConnID
	sess        Session
	role        wire.Role
	expect      string
	established bool
	version     uint64
	peerName    string
	peerOrigin  wire.OriginID

	// version 2
	heads    map[wire.OriginID]wire.Head // advertised by the peer
	adv      map[wire.OriginID]bool      // advertised to the peer
	fullAdv  bool                        // advertise every origin at the next settle
	in       map[wire.OriginID]bool      // origins this side subscribed to on this connection
	out      map[wire.OriginID]*outStream
	outOrder []wire.OriginID
	excluded map[wire.OriginID]time.Time // diverged channels, left out until then

	// version 1
	v1Subscribed bool
	v1Start      uint64                   // the peer cursor this connection subscribed from
	v1LastPos    map[wire.OriginID]uint64 // per origin, the last position processed here
	v1After      uint64                   // the last arrival position offered (or skipped)
	v1InFlight   []sentPos
	v1Unacked    int
}

type outStream struct {
	next uint64 // the seq to send next
	// blocked is the frame size of entry next when the channel's credit could not take
	// it (0: not known): the stream waits for that much credit without reading the entry
	// again.
	blocked int
}

type sentPos struct {
	pos  uint64
	size int
}

// Errors of the replica's API.
var (
	ErrUnknownConn = errors.New("replica: unknown connection")
	ErrStopped     = errors.New("replica: stopped")
)

// New opens a replica on its store: it reads the identity, the cursor vector and the
// origin names, so that a restart resumes exactly where the data ends.
func New(cfg Config, store Store) (*Replica, error) {
	cfg = cfg.withDefaults()
	if mutate.ServeUnsynced {
		cfg.HoldUnsynced = false // test-only: serve what a power loss can take back
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	id, err := store.Identity()
	if err != nil {
		return nil, err
	}
	if id.Origin.IsZero() || !wire.ValidName(id.Name) {
		return nil, errors.New("replica: the store's identity needs a non-zero origin and a valid name")
	}
	r := &Replica{cfg: cfg, store: store, id: id,
		origins: map[wire.OriginID]*originState{}, conns: map[ConnID]*conn{}, out: map[ConnID]*Output{},
		headsDirty: map[wire.OriginID]bool{}, routeSome: map[wire.OriginID]bool{}, lastErrors: map[string]PeerError{}}
	names, err := store.Names()
	if err != nil {
		return nil, err
	}
	r.origin(id.Origin).name = id.Name
	r.origin(id.Origin).namePersisted = true
	for o, n := range names {
		st := r.origin(o)
		if o != id.Origin {
			st.name, st.namePersisted = n, true
		}
	}
	vec, err := store.Vector()
	if err != nil {
		return nil, err
	}
	for _, e := range vec.Entries() {
		st := r.origin(e.Origin)
		st.applied, st.headSeq = e, e.Seq
		if e.Seq == 0 {
			continue
		}
		raw, err := store.Entry(e.Origin, e.Seq)
		if err != nil {
			return nil, err
		}
		v, err := wire.ParseTxn(raw)
		if err != nil {
			return nil, errors.New("replica: log entry " + e.Origin.String() + "/" + strconv.FormatUint(e.Seq, 10) + ": " + err.Error())
		}
		st.appliedHLC, st.headHLC = v.HLC, v.HLC
		r.hlc = max(r.hlc, v.HLC)
	}
	if r.storedHLC, err = store.RecordHLC(); err != nil {
		return nil, err
	}
	if r.arrivals, err = store.LastArrival(); err != nil {
		return nil, err
	}
	if cfg.HoldUnsynced {
		// A process crash keeps writes that were applied but never synced: sync them now,
		// before any of them is served.
		if err := store.Sync(); err != nil {
			return nil, err
		}
	}
	own := r.origin(id.Origin)
	r.synced, r.syncedHLC, r.syncedArrive = own.applied.Seq, own.appliedHLC, r.arrivals
	return r, nil
}

// Identity is the node's identity.
func (r *Replica) Identity() Identity { return r.id }

func (r *Replica) origin(o wire.OriginID) *originState {
	st := r.origins[o]
	if st == nil {
		st = &originState{id: o}
		r.origins[o] = st
		i, _ := slices.BinarySearchFunc(r.originOrder, o, cmpOrigin)
		r.originOrder = slices.Insert(r.originOrder, i, o)
	}
	return st
}

func cmpOrigin(a, b wire.OriginID) int { return bytes.Compare(a[:], b[:]) }

// Open starts a connection's session: the shell calls it for each socket it dialed
// (RoleDialer, expectPeer the configured name) or accepted (RoleListener, expectPeer
// empty), with a fresh nonce of 16 to 64 bytes. The session's first messages are in the
// next Output.
func (r *Replica) Open(now time.Time, role wire.Role, expectPeer string, nonce []byte) (ConnID, error) {
	if r.fatal != nil {
		return 0, r.fatal
	}
	r.now = now
	s, err := r.cfg.NewSession(protocol.Config{Role: role, Name: r.id.Name, Origin: r.id.Origin, Secret: r.cfg.Secret,
		MinVersion: r.cfg.MinVersion, MaxVersion: r.cfg.MaxVersion, Capabilities: r.cfg.Capabilities,
		ExpectedPeer: expectPeer, Limits: r.cfg.Limits})
	if err != nil {
		return 0, err
	}
	if err := s.Start(now, nonce); err != nil {
		return 0, err
	}
	r.lastConn++
	c := &conn{id: r.lastConn, sess: s, role: role, expect: expectPeer,
		heads: map[wire.OriginID]wire.Head{}, adv: map[wire.OriginID]bool{}, in: map[wire.OriginID]bool{},
		out: map[wire.OriginID]*outStream{}, excluded: map[wire.OriginID]time.Time{}}
	r.conns[c.id] = c
	r.connOrder = append(r.connOrder, c.id)
	return c.id, r.settle()
}

// Receive feeds one message the connection received. The shell must not call it while
// ReadPaused(id) is true (version 1's flow control).
func (r *Replica) Receive(now time.Time, id ConnID, msg []byte) error {
	if r.fatal != nil {
		return r.fatal
	}
	c := r.conns[id]
	if c == nil {
		return ErrUnknownConn
	}
	r.now = now
	if err := c.sess.Receive(now, msg); err != nil {
		return err
	}
	return r.settle()
}

// Tick advances the timers of every session and of routing (the move delay, divergence
// retries). Call it at NextDeadline.
func (r *Replica) Tick(now time.Time) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.now = now
	for _, id := range r.connOrder {
		c := r.conns[id]
		if d := c.sess.NextDeadline(); !d.IsZero() && !now.Before(d) {
			_ = c.sess.Tick(now) // refused only on a closed session, which settle drops
		}
	}
	r.routeAll = true // move delays, stalls and divergence retries are timers
	return r.settle()
}

// NextDeadline is when Tick must next be called; zero when no timer is pending.
func (r *Replica) NextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, id := range r.connOrder {
		c := r.conns[id]
		earlier(c.sess.NextDeadline())
		for _, t := range c.excluded {
			earlier(t)
		}
	}
	for _, o := range r.originOrder {
		st := r.origins[o]
		if !st.aheadSince.IsZero() {
			earlier(st.aheadSince.Add(r.cfg.MoveDelay))
		}
		if r.stalling(st) {
			earlier(st.progressAt.Add(r.cfg.StallTimeout))
		}
	}
	return next
}

// Disconnected tells the replica that a connection's socket is gone (read or write
// failed, or the shell closed it). Its session is dropped; the origins it carried move.
func (r *Replica) Disconnected(now time.Time, id ConnID, reason string) error {
	if r.fatal != nil {
		return r.fatal
	}
	c := r.conns[id]
	if c == nil {
		return nil
	}
	r.now = now
	r.drain(c)
	if c.sess.State() != protocol.StateClosed && c.established && reason != "" {
		r.recordError(c, wire.Errorf(wire.CodeClosed, "connection lost: "+reason))
	}
	r.drop(c)
	delete(r.out, id) // nothing more can be sent on it
	return r.settle()
}

// CloseConn closes one connection with going-away (an orderly stop, or a peer removed).
func (r *Replica) CloseConn(now time.Time, id ConnID, why string) error {
	c := r.conns[id]
	if c == nil {
		return ErrUnknownConn
	}
	r.now = now
	_ = c.sess.Close(wire.CodeGoingAway, why)
	return r.settle()
}

// ReadPaused reports whether the shell must stop reading the connection (version 1).
func (r *Replica) ReadPaused(id ConnID) bool {
	c := r.conns[id]
	return c != nil && c.sess.ReadPaused()
}

// Output hands over what every connection has to send, by ConnID.
func (r *Replica) Output() []Output {
	if len(r.out) == 0 {
		return nil
	}
	outs := make([]Output, 0, len(r.out))
	for _, o := range r.out {
		outs = append(outs, *o)
	}
	clear(r.out)
	slices.SortFunc(outs, func(a, b Output) int { return cmpConn(a.Conn, b.Conn) })
	return outs
}

func cmpConn(a, b ConnID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Release gives a sent message of a connection back for reuse (optional).
func (r *Replica) Release(id ConnID, msg []byte) {
	if c := r.conns[id]; c != nil {
		c.sess.Release(msg)
	}
}

// Moves hands over the source changes since the last call (for the simulator and logs).
// The replica keeps at most maxMoves of them between calls, the latest.
func (r *Replica) Moves() []Move {
	m := r.moves
	r.moves = nil
	return m
}

// Session returns a connection's session, for inspection (held bytes, stats); nil when
// unknown.
func (r *Replica) Session(id ConnID) Session {
	if c := r.conns[id]; c != nil {
		return c.sess
	}
	return nil
}

// Conns lists the open connections, ascending.
func (r *Replica) Conns() []ConnID { return slices.Clone(r.connOrder) }

// settle drains every session until none has anything ready, acting on its events and
// re-evaluating routing, advertised heads and sending in between.
func (r *Replica) settle() error {
	for {
		busy := false
		for i := 0; i < len(r.connOrder); i++ {
			c := r.conns[r.connOrder[i]]
			if c.sess.HasReady() {
				busy = true
				r.drain(c)
				if r.fatal != nil {
					return r.fatal
				}
				if r.conns[c.id] == nil {
					i-- // dropped: connOrder shrank
				}
			}
		}
		if r.routeAll || len(r.routeSome) > 0 {
			r.route()
		}
		r.advertise()
		r.pump()
		if r.fatal != nil {
			return r.fatal
		}
		if !busy && !r.anyReady() {
			return nil
		}
	}
}

func (r *Replica) anyReady() bool {
	for _, id := range r.connOrder {
		if r.conns[id].sess.HasReady() {
			return true
		}
	}
	return false
}

// drain takes one session's output and acts on its events.
func (r *Replica) drain(c *conn) {
	rd := c.sess.Ready()
	if len(rd.Messages) > 0 {
		o := r.output(c.id)
		o.Messages = append(o.Messages, rd.Messages...)
	}
	// Commands issued while handling the events reuse the session's event buffer: copy.
	evs := append(r.evbuf[:0], rd.Events...)
	r.evbuf = evs[:0]
	for i := range evs {
		if r.conns[c.id] == nil || r.fatal != nil {
			return
		}
		r.onEvent(c, &evs[i])
	}
}

func (r *Replica) output(id ConnID) *Output {
	o := r.out[id]
	if o == nil {
		o = &Output{Conn: id}
		r.out[id] = o
	}
	return o
}

func (r *Replica) onEvent(c *conn, ev *protocol.Event) {
	switch ev.Kind {
	case protocol.EventHandshake:
		r.onHandshake(c)
	case protocol.EventOriginNamed:
		r.learnName(ev.Origin, ev.Name)
	case protocol.EventSubscribed:
		if c.version == 1 {
			c.v1Subscribed, c.v1After = true, ev.Position
		} else {
			r.origin(ev.Origin) // an origin this node may not hold (yet): nothing to send
			c.out[ev.Origin] = &outStream{next: ev.Seq + 1}
			c.sortOut()
		}
	case protocol.EventUnsubscribed:
		c.dropOut(ev.Origin)
	case protocol.EventResend:
		if s := c.out[ev.Origin]; s != nil {
			s.next, s.blocked = ev.Expected, 0
		}
	case protocol.EventAcked:
		n := 0
		for _, p := range c.v1InFlight {
			if p.pos > ev.Position {
				break
			}
			c.v1Unacked -= p.size
			n++
		}
		c.v1InFlight = c.v1InFlight[:copy(c.v1InFlight, c.v1InFlight[n:])]
	case protocol.EventHeads:
		r.onHeads(c, ev.Heads)
	case protocol.EventTxn:
		r.receive(c, ev.Txn, ev.Position)
	case protocol.EventDuplicate:
		r.counters.DuplicatesReceived++
		if c.version == 1 {
			c.v1LastPos[ev.Txn.Origin] = ev.Position
			r.check(c.sess.Ack(ev.Position))
			r.check(r.store.SetPeerCursor(c.peerOrigin, ev.Position))
		}
	case protocol.EventGap:
		r.counters.GapsDetected++
		if c.version == 2 {
			r.counters.ResendsRequested++
		} else {
			r.rewindV1(c, ev.Txn.Origin)
		}
	case protocol.EventDivergence:
		r.onDivergence(c, ev)
	case protocol.EventClosed:
		r.onClosed(c, ev)
	case protocol.EventCursor, protocol.EventCredit, protocol.EventIgnoredFrame:
		// Credit and acknowledgements are acted on by pump; ignored frames are counted by
		// the session (Stats).
	}
}

func (c *conn) sortOut() {
	c.outOrder = c.outOrder[:0]
	for o := range c.out {
		c.outOrder = append(c.outOrder, o)
	}
	slices.SortFunc(c.outOrder, cmpOrigin)
}

func (c *conn) dropOut(o wire.OriginID) {
	if c.out[o] != nil {
		delete(c.out, o)
		c.sortOut()
	}
}

func (r *Replica) onHandshake(c *conn) {
	info := c.sess.Handshake()
	c.established, c.version, c.peerName, c.peerOrigin = true, info.Version, info.PeerName, info.PeerOrigin
	r.learnName(info.PeerOrigin, info.PeerName)
	// One connection per peer: when both sides dialed, the one dialed by the lower origin
	// id survives; a second connection of the same dialer replaces the older one.
	for _, id := range r.connOrder {
		d := r.conns[id]
		if d == c || !d.established || d.peerOrigin != c.peerOrigin || d.sess.State() == protocol.StateClosed {
			continue
		}
		loser := d
		if r.dialerOf(c) != r.dialerOf(d) && cmpOrigin(r.dialerOf(c), r.dialerOf(d)) > 0 {
			loser = c
		}
		_ = loser.sess.Close(wire.CodeGoingAway, "duplicate connection to "+c.peerName)
		if loser == c {
			return
		}
	}
	for _, o := range r.originOrder {
		if st := r.origins[o]; st.name != "" && !r.checkConn(c, c.sess.SetOriginName(o, st.name)) {
			return
		}
	}
	if c.version == 1 {
		from, err := r.store.PeerCursor(c.peerOrigin)
		if !r.check(err) {
			return
		}
		var vec []protocol.Cursor
		for _, o := range r.originOrder {
			if st := r.origins[o]; st.applied.Seq > 0 && o != c.peerOrigin && o != r.id.Origin {
				vec = append(vec, protocol.Cursor{Origin: o, Seq: st.applied.Seq, Hash: st.applied.Hash})
			}
		}
		if pst := r.origins[c.peerOrigin]; pst.applied.Seq > 0 {
			vec = append(vec, protocol.Cursor{Origin: c.peerOrigin, Seq: pst.applied.Seq, Hash: pst.applied.Hash})
		}
		c.v1Start, c.v1LastPos = from, map[wire.OriginID]uint64{}
		r.check(c.sess.Subscribe(from, vec))
		return
	}
	c.fullAdv = true
	r.routeSome[c.peerOrigin] = true // a direct candidate
}

// rewindV1 moves a version-1 peer cursor back before an entry that never arrived: a gap
// in origin o shows that the missing entry lies after the last entry of o processed on
// this connection, and the scalar cursor may have passed it since. Without such an entry
// it could lie anywhere: the peer's whole log is asked for again (its entries are then
// duplicates, the price of version 1).
func (r *Replica) rewindV1(c *conn, o wire.OriginID) {
	pos := c.v1LastPos[o]
	r.check(r.store.SetPeerCursor(c.peerOrigin, pos))
}

func (r *Replica) dialerOf(c *conn) wire.OriginID {
	if c.role == wire.RoleDialer {
		return r.id.Origin
	}
	return c.peerOrigin
}

func (r *Replica) learnName(o wire.OriginID, name string) {
	st := r.origin(o)
	if st.name != "" || o == r.id.Origin {
		return
	}
	st.name = name
	for _, id := range r.connOrder {
		if c := r.conns[id]; c.established {
			r.checkConn(c, c.sess.SetOriginName(o, name))
		}
	}
}

func (r *Replica) onHeads(c *conn, h *wire.Heads) {
	for _, hd := range h.Heads {
		c.heads[hd.Origin] = hd
		st := r.origin(hd.Origin)
		if hd.Seq > st.headSeq {
			st.headSeq, st.headHLC = hd.Seq, hd.HLC
		}
	}
	for _, hd := range h.Heads {
		r.routeSome[hd.Origin] = true
	}
	for _, o := range h.Withdrawn {
		delete(c.heads, o)
		r.routeSome[o] = true
	}
}

func (r *Replica) onDivergence(c *conn, ev *protocol.Event) {
	st := r.origin(ev.Origin)
	if !(ev.Outgoing && ev.ByPeer) {
		// Found here: in an entry received, or (sending) a subscriber's position that is not
		// in this node's log. What a peer found in an entry this node sent is the peer's
		// to count; and this node's own origin is authoritative, never flagged here.
		r.counters.Divergences++
		if ev.Origin != r.id.Origin {
			st.diverged, st.divergedAt = true, max(ev.Seq, ev.Expected)
		}
	}
	switch {
	case c.version != 2:
		// Version 1 closes the session; the connection is made again.
	case ev.Outgoing:
		c.dropOut(ev.Origin)
	default: // a channel this side subscribed to, closed by the session
		delete(c.in, ev.Origin)
		c.excluded[ev.Origin] = r.now.Add(r.cfg.DivergenceRetry)
		if st.source == c.id {
			r.loseSource(st, ReasonDiverged)
		}
	}
}

func (r *Replica) onClosed(c *conn, ev *protocol.Event) {
	if ev.Err != nil {
		if ev.Err.Class == wire.ClassProtocol && ev.Err.Code != wire.CodeDivergence && ev.Err.Code != wire.CodeGapDetected {
			r.counters.ProtocolErrors++
		}
		if ev.Err.Code != wire.CodeGoingAway || ev.ByPeer {
			r.recordError(c, ev.Err)
		}
	}
	o := r.output(c.id)
	o.Closed, o.Err = true, ev.Err
	r.drop(c)
}

func (r *Replica) recordError(c *conn, err *wire.Error) {
	name := c.peerName
	if name == "" {
		name = c.expect
	}
	if name == "" {
		return // a connection that never named itself: counted only
	}
	r.lastErrors[name] = PeerError{Err: err, At: r.now}
}

// drop forgets a connection: the origins it was the source of lose their source, and its
// streams and advertised heads are gone.
func (r *Replica) drop(c *conn) {
	delete(r.conns, c.id)
	if i := slices.Index(r.connOrder, c.id); i >= 0 {
		r.connOrder = slices.Delete(r.connOrder, i, i+1)
	}
	for _, o := range r.originOrder {
		st := r.origins[o]
		if st.source == c.id {
			r.loseSource(st, ReasonDisconnected)
		} else if src := r.conns[st.source]; mutate.BreakFailoverIsolation && src != nil {
			r.subscribe(src, st, st.applied.Seq) // test-only: a failover that resets every origin
		}
		if st.legacySource == c.peerName && c.version == 1 {
			st.legacySource = ""
		}
	}
}

// loseSource records that an origin has no source any more; route chooses the next one
// and counts the move, giving the first reason the source was lost for.
func (r *Replica) loseSource(st *originState, why MoveReason) {
	st.source = 0
	st.aheadSince = time.Time{}
	if st.lostReason == "" {
		st.lostReason, st.lostAt = why, r.now
	}
	r.routeSome[st.id] = true
	r.headsDirty[st.id] = true // split horizon no longer hides it from the old source
}

// checkConn is check for a command on one connection: a refusal for a resource limit
// (the session names or is advertised more origins than its bound) ends that connection
// with the error, not the node.
func (r *Replica) checkConn(c *conn, err error) bool {
	var we *wire.Error
	if errors.As(err, &we) && we.Class == wire.ClassResourceLimit {
		_ = c.sess.Close(we.Code, we.Message)
		return false
	}
	return r.check(err)
}

// check records a failure that must stop the replica (a store error, or a command the
// replica should never have issued); it reports whether err was nil. Commands refused
// because the session is closing or full are not failures: the session's own events say
// what happens next.
func (r *Replica) check(err error) bool {
	if err == nil {
		return true
	}
	var we *wire.Error
	if errors.As(err, &we) {
		switch we.Code {
		case wire.CodeInvalidState, wire.CodeClosed, wire.CodeSendBufferFull, wire.CodeNoCredit:
			return false
		}
	}
	if r.fatal == nil {
		r.fatal = errors.Join(ErrStopped, err)
	}
	return false
}
