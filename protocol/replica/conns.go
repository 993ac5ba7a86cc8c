package replica

import (
	"slices"
	"strconv"
	"time"

	"plait/protocol"
	"plait/protocol/vector"
	"plait/protocol/wire"
)

// Connections: one per socket, from Open to drop, and the arbitration that keeps one
// connection per peer.

// ConnID names one connection of a replica, from 1, never reused.
type ConnID uint64

// conn is one connection and what the replica tracks of it.
type conn struct {
	id   ConnID
	sess Session
	// NextDeadline reads these of every connection after every input: kept beside sess,
	// in the struct's first cache line, so that the walk touches one line a connection
	// (advWaiting rather than len(advLater), which would read the map's header).
	advWaiting  bool           // advLater is not empty (advertise keeps it)
	advDue      time.Time      // when the waiting heads go
	headSuspect *headSuspicion // the peer advertised its own origin below the applied seq (rewind.go)
	role        wire.Role
	expect      string
	remote      string                 // the shell's remote address, for the record of refusals
	lastHeard   time.Time              // the last message (or part of one) received: status's last contact
	named       map[wire.OriginID]bool // origins whose names the session was given (nameOrigins)
	established bool
	aeCap       bool // the handshake negotiated anti-entropy (aeCapable)
	version     uint64
	peerName    string
	peerOrigin  wire.OriginID
	// closing: this side closed the session. Entries the peer sent after are not
	// processed (onEvent): nothing of them is applied or acknowledged, and version 1's
	// peer cursor stays where the close left it, before what the close was about.
	closing bool
	// leaf: the peer is a leaf of this hub (hub.go); toHub: this leaf dialed its hub on
	// this connection (leaf.go).
	leaf  bool
	toHub bool
	// copyPassedOver: this connection was counted as a base copy source passed over for its
	// version while locks are on (passOverBelowV4), once.
	copyPassedOver bool

	// version 2
	heads   map[wire.OriginID]wire.Head // advertised by the peer
	adv     map[wire.OriginID]bool      // advertised to the peer
	fullAdv bool                        // advertise every origin at the next settle
	// advLater: origins whose moved heads wait for advDue before they go to the peer
	// (HeadsInterval, advertise).
	advLater map[wire.OriginID]bool
	in       map[wire.OriginID]bool // origins this side subscribed to on this connection
	out      map[wire.OriginID]*outStream
	outList  []*outStream                // out's streams, by origin
	outGen   uint64                      // counts the changes of out (pump walks outList while none comes)
	excluded map[wire.OriginID]time.Time // diverged channels, left out until then
	purged   map[wire.OriginID]bool      // origins withdrawn from the peer: it asked below their floors
	floors   map[wire.OriginID]uint64    // version 3: the floors the peer advertised or answered
	aeAsk    *wire.RangeDigest           // the peer's anti-entropy ask, not answered yet (a full send buffer)
	// skipWait: origins whose runs the peer judged under an older map than this node's,
	// taken from it again once its map catches up (placement.go).
	skipWait map[wire.OriginID]bool
	peerGen  uint64 // the highest map generation the peer sent on this connection (MAP)
	// peerLink: the peer's settings for this link, from its latest LINK (the zero value,
	// both ways and nothing excluded, until one comes: links.go).
	peerLink wire.Link
	// The quiet control plane (quiet.go; a version-4 link between peers). quietHeard: the
	// peer's first QUIET arrived (the first full advertisement waits for it); peerQuiet: the
	// peer's quiet set, the origins it takes from their own node; told: this node's quiet
	// set as told the peer; quietAdd: origins turned quiet here, waiting for the heads
	// round; lateSeq: per origin the peer subscribes here, the last seq sent when its cursor
	// was found below it at a round (the next round sends the head if it still is).
	quietHeard bool
	peerQuiet  map[wire.OriginID]bool
	told       map[wire.OriginID]bool
	quietAdd   map[wire.OriginID]bool
	lateSeq    map[wire.OriginID]uint64
	// shown: per origin, the highest seq the peer showed it applied on this connection (its
	// heads, its subscriptions, its cursors). Its applied positions only rise while a
	// connection lasts, so each is at or below what it holds now (anti-entropy's peerBehind).
	shown map[wire.OriginID]uint64

	// version 1
	v1Subscribed bool
	v1Start      uint64                   // the peer cursor this connection subscribed from
	v1LastPos    map[wire.OriginID]uint64 // per origin, the last position processed here
	v1After      uint64                   // the last arrival position offered (or skipped)
	v1InFlight   []sentPos
	v1Unacked    int
}

type outStream struct {
	origin wire.OriginID
	st     *originState
	next   uint64    // the seq to send next
	since  time.Time // when the peer subscribed (health.go: a fresh subscription is not stale)
	// blocked is the frame size of entry next when the channel's credit could not take
	// it (0: not known): the stream waits for that much credit without reading the entry
	// again.
	blocked int
	// run: entries left out since the last DATA or SKIP sent (placement.go), sent as one
	// SKIP before the next entry, at the head, or where its tables reach the bound.
	run skipRun
}

type sentPos struct {
	pos  uint64
	size int
}

// Open starts a connection's session: the shell calls it for each socket it dialed
// (RoleDialer, expectPeer the configured name) or accepted (RoleListener, expectPeer
// empty), with a fresh nonce of 16 to 64 bytes. The session's first messages are in the
// next Output.
func (r *Replica) Open(now time.Time, role wire.Role, expectPeer string, nonce []byte) (ConnID, error) {
	return r.OpenConn(now, ConnOptions{Role: role, ExpectPeer: expectPeer, Nonce: nonce})
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
	r.setNow(now)
	r.drain(c)
	if c.sess.State() != protocol.StateClosed && reason != "" {
		err := wire.NewError(wire.CodeClosed, "connection lost: "+reason)
		if c.established {
			r.recordError(c, err)
		}
		r.connEnded(c, err, false)
	}
	r.drop(c)
	delete(r.out, id) // nothing more can be sent on it
	return r.settle()
}

// CloseConn closes one connection with going-away (an orderly stop, or a peer removed).
func (r *Replica) CloseConn(now time.Time, id ConnID, why string) error {
	return r.CloseConnFor(now, id, wire.CodeGoingAway, why)
}

// CloseConnFor closes one connection with code: a bound of the shell's own passed (the
// bytes queued for a peer that does not read: send-buffer-full). The error is the peer's
// last error and a connection error, as every error close is.
func (r *Replica) CloseConnFor(now time.Time, id ConnID, code wire.Code, why string) error {
	c := r.conns[id]
	if c == nil {
		return ErrUnknownConn
	}
	if cl, ok := wire.ClassOf(code); !ok || cl == wire.ClassLocal {
		return errorf("close code %q is not a wire code", code)
	}
	r.setNow(now)
	r.closeConn(c, code, why)
	return r.settle()
}

func (r *Replica) onHandshake(c *conn) {
	info := c.sess.Handshake()
	if info.PeerLeaf && info.Version >= v4 && slices.Contains(info.Caps, wire.CapLeaf) {
		// hub.go: a leaf is no peer. Below version 4 the HELLO's key means nothing (a
		// release that offers at most 3 does not know it): the leaf closes such a link.
		r.greetLeaf(c, info)
		return
	}
	if r.leafHandshakeRefused(c, info) {
		return // leaf.go: a leaf takes no peer but its hub
	}
	if st := r.origins[info.PeerOrigin]; st != nil && st.nameVouched && st.name != info.PeerName {
		// An origin id is one node's, under the name its data directory was made with: a
		// peer that claims the id of a node that named itself to this one, under another
		// name, is refused before it can take that node's connection (one connection per
		// origin). A name only relayed does not count: a peer could plant a wrong one for an
		// id it has seen, and the real node would be refused.
		c.peerName, c.peerOrigin = info.PeerName, info.PeerOrigin
		r.closeConn(c, wire.CodePeerNameMismatch, "origin "+info.PeerOrigin.String()+" is node "+strconv.Quote(st.name)+
			"'s, and this peer is "+strconv.Quote(info.PeerName))
		return
	}
	c.established, c.version, c.peerName, c.peerOrigin = true, info.Version, info.PeerName, info.PeerOrigin
	c.aeCap = negotiatedAE(info)
	r.greetHub(c)
	r.learnName(info.PeerOrigin, info.PeerName)
	if st := r.origins[info.PeerOrigin]; st.name == info.PeerName {
		st.nameVouched = true
	}
	// One connection per peer: when both sides dialed, the one dialed by the lower origin
	// id survives; a second connection of the same dialer replaces the older one.
	for _, d := range r.connList {
		if d == c || !d.established || d.peerOrigin != c.peerOrigin || d.sess.State() == protocol.StateClosed {
			continue
		}
		loser := d
		if r.dialerOf(c) != r.dialerOf(d) && cmpOrigin(r.dialerOf(c), r.dialerOf(d)) > 0 {
			loser = c
		}
		r.closeConn(loser, wire.CodeGoingAway, "duplicate connection to "+c.peerName)
		if loser == c {
			return
		}
	}
	if c.version >= v4 {
		r.greetV4(c)
		if c.quietLink() {
			r.greetQuiet(c)
		}
	} else {
		r.observeVersion(c, info.PeerMax)
	}
	if !r.greetLink(c) {
		return // refused: tables excluded from a link below version 4, or directions that contradict
	}
	if c.version == 1 && r.storage.err != nil {
		return // degraded: not subscribed, so nothing arrives to apply (storage.go)
	}
	if c.version == 1 {
		from, err := r.store.PeerCursor(c.peerOrigin)
		if !r.check(err) {
			return
		}
		var vec []vector.Entry
		for _, o := range r.originOrder {
			if st := r.origins[o]; st.applied.Seq > 0 && o != c.peerOrigin && o != r.id.Origin {
				vec = append(vec, vector.Entry{Origin: o, Seq: st.applied.Seq, Hash: st.applied.Hash})
			}
		}
		if pst := r.origins[c.peerOrigin]; pst.applied.Seq > 0 {
			vec = append(vec, vector.Entry{Origin: c.peerOrigin, Seq: pst.applied.Seq, Hash: pst.applied.Hash})
		}
		c.v1Start, c.v1LastPos = from, map[wire.OriginID]uint64{}
		r.check(c.sess.V1().Subscribe(from, vec))
		return
	}
	c.fullAdv, r.advFull = true, true
	r.routeSome[c.peerOrigin] = true // a direct candidate
}

func (r *Replica) dialerOf(c *conn) wire.OriginID {
	if c.role == wire.RoleDialer {
		return r.id.Origin
	}
	return c.peerOrigin
}

// drop forgets a connection: the origins it was the source of lose their source, and its
// streams and advertised heads are gone.
func (r *Replica) drop(c *conn) {
	r.requestsDropped(c)
	r.dropLeaf(c)
	if t := r.cp.take; t != nil && t.conn == c.id {
		r.stopTaking(wire.NewError(wire.CodeClosed, "the connection to "+c.peerName+" ended"))
	}
	r.stopServing(c.id)
	if r.conns[c.id] == c {
		r.endTraffic(c) // once per connection, as the exclusions below
		r.excludedN -= len(c.excluded)
	}
	delete(r.conns, c.id)
	if i := slices.Index(r.connOrder, c.id); i >= 0 {
		r.connOrder = slices.Delete(r.connOrder, i, i+1)
		r.connList = slices.Delete(r.connList, i, i+1)
	}
	for _, o := range r.originOrder {
		st := r.origins[o]
		if st.source == c.id {
			r.loseSource(st, ReasonDisconnected)
		} else if src := r.conns[st.source]; r.cfg.Mutations.BreakFailoverIsolation && src != nil {
			r.subscribe(src, st, st.applied.Seq) // test-only: a failover that resets every origin
		}
		if st.legacySource == c.peerName && c.version == 1 {
			st.legacySource = ""
		}
	}
}

// nameOrigins gives c's session the names of origins, before a command that sends them
// (entries, heads, floors, copy positions). Lazily: a session holds the names of the
// origins it carries, never every name the node learned, so a peer that names thousands of
// origins it never sends cannot push every other connection past its bound on origins.
func (r *Replica) nameOrigins(c *conn, origins ...wire.OriginID) bool {
	for _, o := range origins {
		if c.named[o] {
			continue
		}
		if st := r.origins[o]; st != nil && st.name != "" {
			if !r.checkConn(c, c.sess.SetOriginName(o, st.name)) {
				return false
			}
			c.named[o] = true
		}
	}
	return true
}

// addOut starts (or restarts) the stream of origin o, keeping outList sorted: by a binary
// search, since a SUBSCRIBE may open thousands of channels in one message and a sort per
// channel would hold the loop for seconds.
func (c *conn) addOut(o wire.OriginID, s *outStream) {
	s.origin = o
	c.outGen++
	i, found := slices.BinarySearchFunc(c.outList, o, cmpStream)
	if found {
		c.outList[i] = s
	} else {
		c.outList = slices.Insert(c.outList, i, s)
	}
	c.out[o] = s
}

// showed notes that the peer applied origin o up to seq (a head, a subscription, a cursor).
func (c *conn) showed(o wire.OriginID, seq uint64) { c.shown[o] = max(c.shown[o], seq) }

func (c *conn) dropOut(o wire.OriginID) {
	if c.out[o] != nil {
		delete(c.out, o)
		c.outGen++
		if i, found := slices.BinarySearchFunc(c.outList, o, cmpStream); found {
			c.outList = slices.Delete(c.outList, i, i+1)
		}
	}
}

func cmpStream(s *outStream, o wire.OriginID) int { return cmpOrigin(s.origin, o) }

// ReadPaused reports whether the shell must stop reading the connection (version 1).
func (r *Replica) ReadPaused(id ConnID) bool {
	c := r.conns[id]
	return c != nil && c.sess.ReadPaused()
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

func cmpConn(a, b ConnID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
