package replica_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// The harness: replicas on in-memory stores, wired by hand on one virtual clock. Messages
// travel per direction in FIFO order; pump delivers every message that is due (instant by
// default) until nothing moves; a held direction keeps its messages queued; advance moves
// the clock in small steps, ticking every replica and pumping after each.

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var testSecret = []byte("replica unit test secret")

// advanceStep is the clock step of advance: small against every timer of the tests (ping
// interval 1 s, liveness 5 s, move delay 2 s).
const advanceStep = 10 * time.Millisecond

type harness struct {
	t      *testing.T
	now    time.Time
	nodes  []*node
	links  []*link
	nonces byte
	frames []sentFrame // the HEADS, SUBSCRIBE, UNSUBSCRIBE, CURSOR, QUIET and MEMBERS frames sent, in order
	// drop, when set, removes the frames it returns true for from the messages sent (the
	// rest of each message is re-encoded and delivered).
	drop func(from, to string, f wire.Decoded) bool
	// alter, when set, sees each message sent after drop and returns what is delivered
	// instead (the message itself when it leaves it alone).
	alter func(from, to string, msg []byte) []byte
}

type node struct {
	h      *harness
	name   string
	origin wire.OriginID
	store  *memstore.Store
	faults *faultStore // when set, the replica runs on it (over store) instead (storage_test.go)
	cfg    replica.Config
	rep    *replica.Replica
	skew   time.Duration // this node's wall clock is the harness clock plus skew
	ends   map[replica.ConnID]*end
	moves  []replica.Move // every move reported since the node was added
	// lockAnswers: the answers to this node's requests taken from Answers so far (answerOf).
	lockAnswers map[replica.RequestID]replica.Answer
}

// end is one side of a connection; queue holds what travels towards it.
type end struct {
	node      *node
	id        replica.ConnID
	peer      *end
	link      *link
	queue     []pending
	closed    bool // this side's connection is gone
	peerClose bool // the peer closed: after the queue, this side is told
}

type pending struct {
	at  time.Time
	msg []byte
}

// link is one connection: dialer dialed listener.
type link struct {
	dialer, listener *end
	hold             bool          // nothing is delivered either way while set
	latency          time.Duration // one-way delay of every message
}

type sentFrame struct {
	from, to string
	body     wire.Body
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, now: epoch}
}

// addNode adds a replica named name on a new memstore; origin ids grow with the order
// nodes are added (byte 0 and byte 15 are the node's 1-based index).
func (h *harness) addNode(name string, cfg replica.Config) *node {
	h.t.Helper()
	var o wire.OriginID
	i := byte(len(h.nodes) + 1)
	o[0], o[15] = i, i
	copy(o[1:15], name)
	if cfg.Secret == nil {
		cfg.Secret = testSecret
	}
	n := &node{h: h, name: name, origin: o, cfg: cfg,
		store: memstore.New(store.Identity{Origin: o, Name: name})}
	n.start()
	h.nodes = append(h.nodes, n)
	return n
}

// start makes the node's replica on its store (again, for a restart: the connections are
// forgotten, as after a process crash).
func (n *node) start() {
	n.h.t.Helper()
	var s store.Store = n.store
	if n.faults != nil {
		s = n.faults
	}
	rep, err := replica.New(n.cfg, s)
	if err != nil {
		n.h.t.Fatalf("%s: replica.New: %v", n.name, err)
	}
	n.rep, n.ends = rep, map[replica.ConnID]*end{}
}

// restart drops the node's connections (the peers are told) and rebuilds its replica with
// replica.New on the same store.
func (n *node) restart() {
	n.h.t.Helper()
	for _, l := range n.h.links {
		if l.dialer.node == n || l.listener.node == n {
			for _, e := range []*end{l.dialer, l.listener} {
				if e.node != n && !e.closed {
					e.closed, e.queue = true, nil
					delete(e.node.ends, e.id)
					n.h.check(e.node, e.node.rep.Disconnected(e.node.clock(), e.id, "peer restarted"))
				}
				e.closed = true
			}
		}
	}
	n.start()
	n.h.pump()
}

func (n *node) clock() time.Time { return n.h.now.Add(n.skew) }

func (h *harness) check(n *node, err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %v", n.name, err)
	}
}

func (h *harness) nonce() []byte {
	h.nonces++
	return bytes.Repeat([]byte{h.nonces}, 16)
}

// connect opens a connection from dialer to listener and pumps until it settles.
func (h *harness) connect(dialer, listener *node) *link {
	h.t.Helper()
	l := h.open(dialer, listener)
	h.pump()
	return l
}

// open opens a connection without pumping.
func (h *harness) open(dialer, listener *node) *link {
	h.t.Helper()
	return h.openAs(dialer, listener, listener.name)
}

// openAs opens a connection whose dialer expects the listener to be named expect (a test
// of a peer that names itself otherwise), without pumping.
func (h *harness) openAs(dialer, listener *node, expect string) *link {
	h.t.Helper()
	l := &link{}
	l.dialer = &end{node: dialer, link: l}
	l.listener = &end{node: listener, link: l}
	l.dialer.peer, l.listener.peer = l.listener, l.dialer
	var err error
	l.dialer.id, err = dialer.rep.Open(dialer.clock(), wire.RoleDialer, expect, h.nonce())
	h.check(dialer, err)
	l.listener.id, err = listener.rep.Open(listener.clock(), wire.RoleListener, "", h.nonce())
	h.check(listener, err)
	dialer.ends[l.dialer.id] = l.dialer
	listener.ends[l.listener.id] = l.listener
	h.links = append(h.links, l)
	return l
}

// disconnect tells both ends that the connection is gone, dropping what was in flight.
func (h *harness) disconnect(l *link) {
	h.t.Helper()
	for _, e := range []*end{l.dialer, l.listener} {
		if !e.closed {
			e.closed, e.queue = true, nil
			delete(e.node.ends, e.id)
			h.check(e.node, e.node.rep.Disconnected(e.node.clock(), e.id, "test cut"))
		}
	}
	h.pump()
}

// collect takes every replica's moves and output and queues the messages.
func (h *harness) collect() bool {
	h.t.Helper()
	sent := false
	for _, n := range h.nodes {
		n.moves = append(n.moves, n.rep.Moves()...)
		for _, out := range n.rep.Output() {
			e := n.ends[out.Conn]
			if e == nil {
				continue
			}
			for _, msg := range out.Messages {
				sent = true
				h.record(e, msg)
				if msg = h.filter(e, msg); msg == nil {
					continue
				}
				if !e.peer.closed {
					e.peer.queue = append(e.peer.queue, pending{at: h.now.Add(e.link.latency), msg: bytes.Clone(msg)})
				}
			}
			if out.Closed {
				sent = true
				e.closed = true
				delete(n.ends, out.Conn)
				e.peer.peerClose = true
			}
		}
	}
	return sent
}

// record keeps the routing frames a node sends, for the split-horizon checks, and its
// acknowledgements.
func (h *harness) record(e *end, msg []byte) {
	h.t.Helper()
	frames, derr := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
	if derr != nil {
		h.t.Fatalf("%s -> %s: undecodable message: %v", e.node.name, e.peer.node.name, derr)
	}
	for _, f := range frames {
		switch f.Value.(type) {
		case *wire.Heads, *wire.Subscribe, *wire.Unsubscribe, *wire.Cursor, *wire.Quiet, *wire.Members:
			h.frames = append(h.frames, sentFrame{from: e.node.name, to: e.peer.node.name, body: f.Value})
		}
	}
}

// filter applies h.drop to one message; nil when nothing is left of it.
func (h *harness) filter(e *end, msg []byte) (out []byte) {
	h.t.Helper()
	if h.alter != nil {
		defer func() { out = h.alter(e.node.name, e.peer.node.name, out) }()
	}
	if h.drop == nil {
		return msg
	}
	frames, _ := wire.DecodeMessage(msg, wire.DefaultMaxMessage, wire.MaxFrameBody)
	kept := frames[:0]
	for _, f := range frames {
		if !h.drop(e.node.name, e.peer.node.name, f) {
			kept = append(kept, f)
		}
	}
	if len(kept) == len(frames) {
		return msg
	}
	if len(kept) == 0 {
		return nil
	}
	out, err := wire.EncodeMessage(kept)
	if err != nil {
		h.t.Fatalf("re-encoding a filtered message: %v", err)
	}
	return out
}

// deliver hands e the messages due for it; it reports whether anything happened.
func (h *harness) deliver(e *end) bool {
	h.t.Helper()
	if e.closed || e.link.hold {
		return false
	}
	did := false
	for len(e.queue) > 0 && !e.queue[0].at.After(h.now) && !e.node.rep.ReadPaused(e.id) {
		msg := e.queue[0].msg
		e.queue = e.queue[1:]
		h.check(e.node, e.node.rep.Receive(e.node.clock(), e.id, msg))
		did = true
		if e.closed || e.node.ends[e.id] == nil || e.node.rep.Session(e.id) == nil {
			return true // the session closed on it (its output, collected next, says so)
		}
	}
	if len(e.queue) == 0 && e.peerClose && !e.closed {
		e.closed = true
		delete(e.node.ends, e.id)
		h.check(e.node, e.node.rep.Disconnected(e.node.clock(), e.id, "closed by peer"))
		did = true
	}
	return did
}

// pump moves messages until nothing is due.
func (h *harness) pump() {
	h.t.Helper()
	for range 100000 {
		moved := h.collect()
		for _, l := range h.links {
			for _, e := range []*end{l.dialer, l.listener} {
				if h.deliver(e) {
					moved = true
				}
			}
		}
		if !moved {
			return
		}
	}
	h.t.Fatal("pump: no quiescence after 100000 rounds")
}

// advance moves the clock by d in steps of advanceStep, ticking every replica and pumping
// after each step.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	for d > 0 {
		s := min(d, advanceStep)
		d -= s
		h.now = h.now.Add(s)
		for _, n := range h.nodes {
			h.check(n, n.rep.Tick(n.clock()))
		}
		h.pump()
	}
}

// tickDeadlines runs the shell's loop on the virtual clock up to until, ticking nothing in
// between deadlines: the clock jumps to the earliest NextDeadline of any node, the nodes
// due then are ticked and the messages pumped, until no deadline is left before until.
func (h *harness) tickDeadlines(until time.Time) {
	h.t.Helper()
	for range 10000 {
		var next time.Time
		for _, n := range h.nodes {
			if d := n.rep.NextDeadline(); !d.IsZero() && (next.IsZero() || d.Add(-n.skew).Before(next)) {
				next = d.Add(-n.skew)
			}
		}
		if next.IsZero() || next.After(until) {
			h.now = until
			return
		}
		h.now = maxTime(h.now, next)
		for _, n := range h.nodes {
			if d := n.rep.NextDeadline(); !d.IsZero() && !n.clock().Before(d) {
				h.check(n, n.rep.Tick(n.clock()))
			}
		}
		h.pump()
	}
	h.t.Fatal("tickDeadlines: still due after 10000 deadlines")
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// takeMoves returns the node's moves since the last call.
func (n *node) takeMoves() []replica.Move {
	n.h.collect()
	m := n.moves
	n.moves = nil
	return m
}

func put(table, key, value string) wire.Op {
	return wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key), Value: []byte(value)}
}

func del(table, key string) wire.Op {
	return wire.Op{Kind: wire.OpDelete, Table: []byte(table), Key: []byte(key)}
}

// write applies a local write at the node's clock; it fails the test on an error.
func (n *node) write(ops ...wire.Op) uint64 {
	n.h.t.Helper()
	seq, err := n.rep.Write(n.clock(), ops)
	if err != nil {
		n.h.t.Fatalf("%s: write: %v", n.name, err)
	}
	return seq
}

// logBytes is the bytes of of's log in n's store.
func (n *node) logBytes(of *node) uint64 {
	n.h.t.Helper()
	logs, err := n.store.Logs()
	if err != nil {
		n.h.t.Fatal(err)
	}
	return logs[of.origin].Bytes
}

// originStatus is what n reports of origin of.
func (n *node) originStatus(of *node) replica.OriginStatus {
	n.h.t.Helper()
	for _, o := range n.rep.Status(n.clock()).Origins {
		if o.Origin == of.origin {
			return o
		}
	}
	n.h.t.Fatalf("%s: no status of origin %s", n.name, of.name)
	return replica.OriginStatus{}
}

// peerStatus is what n reports of its open connection to peer.
func (n *node) peerStatus(peer string) replica.PeerStatus {
	n.h.t.Helper()
	for _, p := range n.rep.Status(n.clock()).Peers {
		if p.Name == peer {
			return p
		}
	}
	n.h.t.Fatalf("%s: no open connection to %s", n.name, peer)
	return replica.PeerStatus{}
}

// entry reads and parses the node's log entry (origin, seq).
func (n *node) entry(of *node, seq uint64) ([]byte, wire.TxnView) {
	n.h.t.Helper()
	raw, err := n.store.Entry(of.origin, seq)
	if err != nil {
		n.h.t.Fatalf("%s: entry %s/%d: %v", n.name, of.name, seq, err)
	}
	v, err := wire.ParseTxn(raw)
	if err != nil {
		n.h.t.Fatalf("%s: entry %s/%d: %v", n.name, of.name, seq, err)
	}
	return raw, v
}

func (n *node) get(table, key string) (store.Record, bool) {
	n.h.t.Helper()
	r, ok, err := n.store.Get([]byte(table), []byte(key))
	if err != nil {
		n.h.t.Fatal(err)
	}
	return r, ok
}

func (n *node) digest(table string) (int, string) {
	n.h.t.Helper()
	c, s, err := store.Digest(n.store, []byte(table))
	if err != nil {
		n.h.t.Fatal(err)
	}
	return c, s
}

// applied is the node's cursor of every origin, from its store.
func (n *node) applied() map[wire.OriginID]uint64 {
	n.h.t.Helper()
	vec, err := n.store.Vector()
	if err != nil {
		n.h.t.Fatal(err)
	}
	out := map[wire.OriginID]uint64{}
	for _, e := range vec.Entries() {
		out[e.Origin] = e.Seq
	}
	return out
}

// headsSent replays the HEADS frames from -> to and reports whether origin o is
// advertised at the end, and whether it ever was.
func (h *harness) headsSent(from, to string, o wire.OriginID) (now, ever bool) {
	for _, f := range h.frames {
		if f.from != from || f.to != to {
			continue
		}
		if hd, ok := f.body.(*wire.Heads); ok {
			for _, x := range hd.Heads {
				if x.Origin == o {
					now, ever = true, true
				}
			}
			if slices.Contains(hd.Withdrawn, o) {
				now = false
			}
		}
	}
	return now, ever
}

// subscribed reports whether from ever sent to a SUBSCRIBE naming origin o.
func (h *harness) subscribed(from, to string, o wire.OriginID) bool {
	for _, f := range h.frames {
		if s, ok := f.body.(*wire.Subscribe); ok && f.from == from && f.to == to {
			for _, e := range s.Entries {
				if e.Origin == o {
					return true
				}
			}
		}
	}
	return false
}

// acked is the highest seq from acknowledged (CURSOR) on a channel of origin o it
// subscribed to on to; channel numbers are per connection, so from and to must have had
// one connection.
func (h *harness) acked(from, to string, o wire.OriginID) uint64 {
	channels := map[uint32]bool{}
	var seq uint64
	for _, f := range h.frames {
		if f.from != from || f.to != to {
			continue
		}
		switch b := f.body.(type) {
		case *wire.Subscribe:
			for _, e := range b.Entries {
				if e.Origin == o {
					channels[e.Channel] = true
				}
			}
		case *wire.Cursor:
			for _, e := range b.Entries {
				if channels[e.Channel] {
					seq = max(seq, e.Seq)
				}
			}
		}
	}
	return seq
}

// wantCounters compares every counter but anti-entropy's, which move with the harness's
// clock whatever a test replicates (antientropy_test.go checks them).
func wantCounters(t *testing.T, n *node, want replica.Counters) {
	t.Helper()
	got := n.rep.Counters()
	got.AntiEntropyRangesCompared, got.AntiEntropyRangesDiffering, got.AntiEntropyRecordsRepaired = 0, 0, 0
	got.AntiEntropyInFlight, got.AntiEntropyBelowHorizon, got.AntiEntropyConflicts, got.AntiEntropyPasses = 0, 0, 0, 0
	got.AntiEntropyPeerBehind = 0
	if got != want {
		t.Errorf("%s counters = %+v, want %+v", n.name, got, want)
	}
}

func wireCode(err error) wire.Code {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return ""
}

// dataSeq reports the origin and seq of a DATA or TXN1 frame.
func dataSeq(f wire.Decoded) (wire.OriginID, uint64, bool) {
	switch b := f.Value.(type) {
	case *wire.Data:
		return b.Txn.Origin, b.Txn.Seq, true
	case *wire.Txn1:
		return b.Txn.Origin, b.Txn.Seq, true
	}
	return wire.OriginID{}, 0, false
}

// dropOnce drops the first DATA frame from -> to carrying (origin, seq).
func (h *harness) dropOnce(from, to *node, origin *node, seq uint64) *bool {
	dropped := new(bool)
	h.drop = func(f, t string, d wire.Decoded) bool {
		if o, s, ok := dataSeq(d); ok && !*dropped && f == from.name && t == to.name && o == origin.origin && s == seq {
			*dropped = true
			return true
		}
		return false
	}
	return dropped
}
