package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"plait/protocol/clustermap"
	"slices"
	"strings"
	"time"

	"plait/protocol"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// maxEventsPerInstant bounds the events at one virtual instant; more is a livelock.
const maxEventsPerInstant = 100000

// Epoch is the virtual clock's start.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options configure a cluster.
type Options struct {
	// Config is every node's replica configuration, as a node's shell gives it (the zero
	// value: the replica's defaults). The cluster sets what a shell sets itself: the
	// secret, MaxVersion and the session of each node, HoldUnsynced (SyncDelay), and a
	// CopyRetry of 300 ms when none is given. Its retention (RetainAge, RetainBytes,
	// RetainHold) is every node's, or, with Retaining, that of the nodes it names.
	replica.Config
	Seed     uint64
	Nodes    int           // Random: the number of nodes (0: 3 to 8, drawn from the seed)
	MinDelay time.Duration // one-way network delay range of a link (default 1–20 ms)
	MaxDelay time.Duration
	Redial   time.Duration // a dialer redials a lost connection after this (default 300 ms)
	// SyncDelay, when set, runs every node with replica.Config.HoldUnsynced: a write is
	// made durable (Replica.Synced) this long after it is applied, as a group commit does,
	// and only then served to peers.
	SyncDelay time.Duration
	// Trace, when set, receives one line per notable event (moves, faults, closes).
	Trace func(string)
	// Inspect, when set, is called with the cluster at the end of a random run.
	Inspect func(*Cluster)
	// Retaining, when set, names the nodes that run with Config's retention; the others
	// keep the replica's defaults (a node standing for a release that purged nothing).
	Retaining map[string]bool
	// Leaves, when set, makes every random run one with fan-in hubs (hubs.go) and this
	// many leaves behind them, instead of the 1 to 20 a hub run draws.
	Leaves int
}

// Cluster is the simulated world.
type Cluster struct {
	opts  Options
	rng   *rand.Rand
	now   time.Time
	queue eventQueue
	seq   uint64

	nodes map[string]*Node
	names []string // in the order added
	links map[[2]string]*Link

	inv             invariants
	maps            mapOracle                // cluster maps and requests (clustermap.go)
	place           placement                // the run's placement (placement.go)
	lk              *linkOracle              // the run's links, once some are set (links.go)
	locks           *lockRun                 // the run's lock workload, when it has one (locks.go)
	feeds           *feedRun                 // the run's consumers of change feeds (feeds.go)
	hubs            *hubRun                  // the run's hubs and leaves, when it has some (hubs.go)
	dropping        string                   // the peer whose connection a node is being told it lost
	droppingSources map[wire.OriginID]string // the node's sources before
	// writes is every local write that returned, per origin and seq: the oracle of what
	// the records must end as (a power loss may give a seq to a later write instead).
	writes map[wire.OriginID]map[uint64]written
	// frames counts, while not nil, the frames delivered on every link by type, and
	// messages the messages (lockcost_test.go).
	frames   map[string]int
	messages int
	// framesOut counts every frame a node's sessions sent (as they put them on the
	// network, before the links' faults), framesIn every frame delivered to one, by type,
	// for the whole run: the run report's traffic (traffic.go).
	framesOut, framesIn protocol.FrameCounts
}

// written is one local write: its version (its token, for a write under a lock) and
// operations.
type written struct {
	hlc wire.HLC
	tok wire.Token
	ops []wire.Op
}

// Node is one simulated plait node.
type Node struct {
	Name       string
	Store      *recordingStore
	Rep        *replica.Replica // nil while crashed
	MaxVersion uint64
	// NewSession, when set, makes this node's sessions (a build of the core other than
	// Options.NewSession's): the version matrix mixes builds in one cluster.
	NewSession func(protocol.Config) (replica.Session, error)
	// Versions is the protocol version the node spoke at each start, in order.
	Versions []uint64
	// Skew is how far the node's wall clock is from the simulation's (positive: ahead):
	// every time the node's replica is given is the simulation's plus Skew.
	Skew time.Duration
	// From OffFrom until OffUntil the node's clock is further off by Off plus Rate of the
	// time since OffFrom (Rate 0.01: it runs 1% fast; above -1): a clock beyond the bounds
	// for a while, which is put right at OffUntil (a step, as NTP makes one). Zero for
	// every node but a lock run's one beyond the bounds (locks.go).
	Off               time.Duration
	Rate              float64
	OffFrom, OffUntil time.Time
	// Recoveries counts the node's recoveries from degraded storage (FillDisk).
	Recoveries int
	origin     wire.OriginID
	ends       map[replica.ConnID]*end
	tickGen    uint64
	starts     int
	failed     bool // stopped by a replica failure: never restarted
	tickAt     time.Time
	tickArmed  bool
	syncArmed  bool
	moves      []replica.Move
	restored   bool // started from a backup (RestoreBackup) and not reseeded since
	// Links are the node's settings for its links, by peer (SetPeerLink): its
	// configuration's, so that a restart starts with the settings it last ran with.
	Links map[string]replica.LinkSettings
	// Hub makes the node a leaf of the node of that name (replica.Config.Hub), MaxLeaves a
	// hub that accepts that many leaves (hubs.go): its configuration's, as Links, so that a
	// leaf that moves restarts with its new hub.
	Hub       string
	MaxLeaves int
	// counted: the hub counters of the node's replicas before its last start, summed (a
	// crash loses a replica's counters; the hub oracle needs the run's).
	counted hubCounts
}

// Link is an edge of the topology: From dials To while both are up and the link is not
// partitioned.
type Link struct {
	From, To    string
	Up          bool
	MinDelay    time.Duration
	MaxDelay    time.Duration
	conn        *connPair
	redialAt    time.Time
	faults      []*fault // pending faults on this link's directions
	Connections int      // connections made
}

type connPair struct {
	dialer, listener *end
	link             *Link
}

// end is one side of a connection: what its node sends travels to the other end.
type end struct {
	node   *Node
	id     replica.ConnID
	peer   *end
	pair   *connPair
	queue  []delivery // in flight towards this end, in order
	armed  bool
	closed bool
	drops  []*injection // entries dropped on the way here, until a later one shows whether it was seen
	// peerLink: the peer's settings for the link, from the last LINK delivered here (both
	// ways, nothing excluded, until one is): what this end's node knows of them.
	peerLink wire.Link
}

type delivery struct {
	at    time.Time
	msg   []byte
	close bool // after the messages: the sender closed
	check *injection
}

// New makes an empty cluster.
func New(opts Options) *Cluster {
	if opts.MinDelay == 0 && opts.MaxDelay == 0 {
		opts.MinDelay, opts.MaxDelay = time.Millisecond, 20*time.Millisecond
	}
	if opts.Redial == 0 {
		opts.Redial = 300 * time.Millisecond
	}
	c := &Cluster{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)), now: Epoch,
		nodes: map[string]*Node{}, links: map[[2]string]*Link{}, writes: map[wire.OriginID]map[uint64]written{}}
	return c
}

// Now is the virtual time.
func (c *Cluster) Now() time.Time { return c.now }

// Rand is the cluster's seeded generator.
func (c *Cluster) Rand() *rand.Rand { return c.rng }

// Node returns a node by name (nil when unknown).
func (c *Cluster) Node(name string) *Node { return c.nodes[name] }

// Names lists the nodes in the order added.
func (c *Cluster) Names() []string { return slices.Clone(c.names) }

func (c *Cluster) trace(format string, args ...any) {
	if c.opts.Trace != nil {
		c.opts.Trace(fmt.Sprintf("%8.3fs ", c.now.Sub(Epoch).Seconds()) + fmt.Sprintf(format, args...))
	}
}

// AddNode adds and starts a node speaking protocol versions up to maxVersion (0: newest).
// Its origin id derives from its name, so scripts are reproducible.
func (c *Cluster) AddNode(name string, maxVersion uint64) error {
	return c.AddNodeBuild(name, maxVersion, nil)
}

// AddNodeBuild is AddNode for a node whose sessions newSession makes (nil: the cluster's).
func (c *Cluster) AddNodeBuild(name string, maxVersion uint64, newSession func(protocol.Config) (replica.Session, error)) error {
	return c.addNode(name, maxVersion, newSession, nil)
}

// addNode is AddNodeBuild, with set called on the node before it starts (its hub, its
// leaves: hubs.go).
func (c *Cluster) addNode(name string, maxVersion uint64, newSession func(protocol.Config) (replica.Session, error), set func(*Node)) error {
	if c.nodes[name] != nil {
		return fmt.Errorf("node %s exists", name)
	}
	var o wire.OriginID
	copy(o[:], fmt.Sprintf("%-15s", name))
	o[15] = byte(len(c.names) + 1)
	n := &Node{Name: name, MaxVersion: maxVersion, origin: o, NewSession: newSession}
	if set != nil {
		set(n)
	}
	n.Store = newRecordingStore(memstore.New(store.Identity{Origin: o, Name: name}), &c.inv, name, c.Now)
	c.nodes[name] = n
	c.names = append(c.names, name)
	return c.start(n)
}

func (c *Cluster) start(n *Node) error {
	cfg := c.opts.Config
	cfg.MaxVersion, cfg.Secret = n.MaxVersion, []byte("simulated cluster secret")
	cfg.NewSession, cfg.HoldUnsynced = c.newSession(n), c.opts.SyncDelay > 0
	if cfg.CopyRetry == 0 {
		cfg.CopyRetry = 300 * time.Millisecond
	}
	if n.Links != nil {
		cfg.Links = maps.Clone(n.Links)
	}
	cfg.Hub = n.Hub
	if n.MaxLeaves > 0 {
		cfg.MaxLeaves = n.MaxLeaves
	}
	if c.opts.Retaining != nil && !c.opts.Retaining[n.Name] {
		cfg.RetainAge, cfg.RetainBytes, cfg.RetainHold = 0, 0, 0
	}
	rep, err := replica.New(cfg, n.Store)
	if err != nil {
		return err
	}
	n.Rep, n.ends = rep, map[replica.ConnID]*end{}
	n.starts++
	n.Versions = append(n.Versions, speaks(n.MaxVersion))
	c.after(n)
	for _, l := range c.sortedLinks() {
		if l.From == n.Name || l.To == n.Name {
			c.maybeDial(l)
		}
	}
	return nil
}

// Connect adds a link: from dials to (and redials after every loss while the link is up).
func (c *Cluster) Connect(from, to string) error {
	if c.nodes[from] == nil || c.nodes[to] == nil || from == to {
		return fmt.Errorf("connect %s-%s: unknown node", from, to)
	}
	k := [2]string{from, to}
	if c.links[k] != nil {
		return fmt.Errorf("link %s-%s exists", from, to)
	}
	l := &Link{From: from, To: to, Up: true, MinDelay: c.opts.MinDelay, MaxDelay: c.opts.MaxDelay}
	c.links[k] = l
	c.maybeDial(l)
	return nil
}

// Link returns the link between two nodes: the one a dials, else the one b dials. Both
// may exist: then both nodes dial, and the replicas keep one connection.
func (c *Cluster) Link(a, b string) *Link {
	if l := c.links[[2]string{a, b}]; l != nil {
		return l
	}
	return c.links[[2]string{b, a}]
}

func (c *Cluster) sortedLinks() []*Link {
	ks := make([][2]string, 0, len(c.links))
	for k := range c.links {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	ls := make([]*Link, len(ks))
	for i, k := range ks {
		ls[i] = c.links[k]
	}
	return ls
}

// SetLink raises or cuts a link (a partition cuts several). Cutting drops its connection.
func (c *Cluster) SetLink(a, b string, up bool) error {
	l := c.Link(a, b)
	if l == nil {
		return fmt.Errorf("no link %s-%s", a, b)
	}
	l.Up = up
	if !up {
		c.cut(l, "partitioned")
	} else {
		c.maybeDial(l)
	}
	return nil
}

// RemoveLink takes a link away: its connection drops and it is never dialed again (a
// leaf that moves to another hub: hubs.go). A later Connect of the two nodes makes a new
// link.
func (c *Cluster) RemoveLink(a, b string) error {
	l := c.Link(a, b)
	if l == nil {
		return fmt.Errorf("no link %s-%s", a, b)
	}
	l.Up = false
	c.cut(l, "removed")
	l.faults = nil
	delete(c.links, [2]string{l.From, l.To})
	return nil
}

// Disconnect drops a link's connection now; the dialer redials after the redial delay.
func (c *Cluster) Disconnect(a, b string) error {
	l := c.Link(a, b)
	if l == nil {
		return fmt.Errorf("no link %s-%s", a, b)
	}
	c.cut(l, "disconnected")
	return nil
}

// cut drops a link's connection on both sides at once, as a reset socket does.
func (c *Cluster) cut(l *Link, why string) {
	p := l.conn
	if p == nil {
		return
	}
	l.conn = nil
	c.trace("%s-%s %s", l.From, l.To, why)
	for _, e := range []*end{p.dialer, p.listener} {
		if !e.closed {
			e.closed = true
			c.lost(e, why)
		}
	}
	l.redialAt = c.now.Add(c.opts.Redial)
	c.schedule(l.redialAt, func() { c.maybeDial(l) })
}

// lost tells e's node that its connection is gone.
func (c *Cluster) lost(e *end, why string) {
	c.dropping, c.droppingSources = e.peer.node.Name, map[wire.OriginID]string{}
	for _, o := range e.node.Rep.Status(e.node.clock(c)).Origins {
		c.droppingSources[o.Origin] = o.SourcePeer
	}
	c.call(e.node, func(r *replica.Replica) error { return r.Disconnected(e.node.clock(c), e.id, why) })
	c.dropping, c.droppingSources = "", nil
}

// maybeDial makes the link's connection when both nodes are up, the link is, and none
// exists.
func (c *Cluster) maybeDial(l *Link) {
	a, b := c.nodes[l.From], c.nodes[l.To]
	if !l.Up || l.conn != nil || a.Rep == nil || b.Rep == nil || c.now.Before(l.redialAt) {
		return
	}
	if r := c.links[[2]string{l.To, l.From}]; r != nil && r.conn != nil && r.Up && l.Connections > 0 {
		// The peer dialed too and its connection is up: a shell does not redial a peer it
		// is connected to (the first dials may cross). Look again after the redial delay.
		l.redialAt = c.now.Add(c.opts.Redial)
		c.schedule(l.redialAt, func() { c.maybeDial(l) })
		return
	}
	p := &connPair{link: l}
	p.dialer = &end{node: a, pair: p}
	p.listener = &end{node: b, pair: p}
	p.dialer.peer, p.listener.peer = p.listener, p.dialer
	l.conn = p
	l.Connections++
	for _, e := range []*end{p.dialer, p.listener} {
		role, expect := wire.RoleListener, ""
		if e == p.dialer {
			role, expect = wire.RoleDialer, b.Name
		}
		nonce := make([]byte, 16)
		for i := range nonce {
			nonce[i] = byte(c.rng.Uint32())
		}
		id, err := e.node.Rep.Open(e.node.clock(c), role, expect, nonce)
		if err != nil {
			c.inv.fail(c.now, "%s: open: %v", e.node.Name, err)
			return
		}
		e.id = id
		e.node.ends[id] = e
	}
	for _, n := range []*Node{a, b} {
		c.flush(n)
		c.after(n)
	}
}

// Write applies a local write on a node; it reports the seq, or 0 when the node is down.
func (c *Cluster) Write(node string, ops []wire.Op) (uint64, error) {
	n := c.nodes[node]
	if n == nil {
		return 0, fmt.Errorf("unknown node %s", node)
	}
	if n.Rep == nil {
		return 0, nil
	}
	var seq uint64
	ops = c.placeOps(node, ops)
	err := c.callErr(n, func(r *replica.Replica) error {
		var err error
		seq, err = r.Write(n.clock(c), ops)
		return err
	})
	if err == nil && seq > 0 {
		c.noteWrite(n, seq, ops)
	}
	return seq, err
}

// noteWrite keeps a local write that returned seq in the oracle of what the records must
// end as.
func (c *Cluster) noteWrite(n *Node, seq uint64, ops []wire.Op) {
	// The in-memory store holds the entry it just applied.
	raw, _ := n.Store.Entry(n.origin, seq)
	if v, perr := wire.ParseTxn(raw); perr == nil {
		if c.writes[n.origin] == nil {
			c.writes[n.origin] = map[uint64]written{}
		}
		if _, held := c.writes[n.origin][seq]; !held || !n.restored {
			// A node restored from a backup issues held seqs again: the oracle keeps the
			// first timeline's, which its peers hold; the fork's reach them re-issued
			// under the new origin once the node is reseeded (Reseed).
			c.writes[n.origin][seq] = written{hlc: v.HLC, tok: v.Token, ops: slices.Clone(ops)}
		}
	}
}

// Crash stops a node at once: its connections reset, its replica's memory is lost, its
// store keeps exactly what Apply wrote.
func (c *Cluster) Crash(node string) error { return c.crash(node, false) }

// PowerLoss stops a node like Crash, and its store loses every write since its last Sync:
// what a power loss does to a store that fsyncs only at Sync. Only nodes that hold
// unsynced writes from peers (Options.SyncDelay) may lose power: the others served
// entries that it would make them reissue.
func (c *Cluster) PowerLoss(node string) error {
	if c.opts.SyncDelay == 0 {
		return fmt.Errorf("power loss of %s: the cluster runs without SyncDelay", node)
	}
	return c.crash(node, true)
}

func (c *Cluster) crash(node string, power bool) error {
	n := c.nodes[node]
	if n == nil || n.Rep == nil {
		return fmt.Errorf("crash %s: not running", node)
	}
	if power {
		c.trace("%s loses power", node)
	} else {
		c.trace("%s crashes", node)
	}
	for _, l := range c.sortedLinks() {
		if p := l.conn; p != nil && (l.From == node || l.To == node) {
			l.conn = nil
			for _, e := range []*end{p.dialer, p.listener} {
				e.closed = true
				if e.node != n {
					c.lost(e, "peer crashed")
				}
			}
			l.redialAt = c.now
		}
	}
	c.inv.crashed(n)
	n.keepCounters()
	if power {
		n.Store = n.Store.lostPower()
		// The copy merged since the last sync is gone with it, and is merged again.
		delete(c.inv.copied, n.Name)
	}
	n.Rep, n.ends = nil, nil
	n.syncArmed = false
	n.tickGen++
	n.tickArmed = false
	return nil
}

// Restart starts a crashed node from its store, speaking versions up to maxVersion
// (0: newest): a rolling upgrade when it differs from before.
func (c *Cluster) Restart(node string, maxVersion uint64) error {
	n := c.nodes[node]
	if n == nil || n.Rep != nil {
		return fmt.Errorf("restart %s: not crashed", node)
	}
	n.MaxVersion = maxVersion
	c.trace("%s restarts (protocol max %d)", node, maxVersion)
	return c.start(n)
}

// call runs one replica call on a node and delivers what it produced; a replica error is
// an invariant failure.
func (c *Cluster) call(n *Node, f func(*replica.Replica) error) {
	if err := c.callErr(n, f); err != nil {
		c.inv.fail(c.now, "%s: %v", n.Name, err)
	}
}

func (c *Cluster) callErr(n *Node, f func(*replica.Replica) error) error {
	if n.Rep == nil {
		return nil
	}
	err := f(n.Rep)
	if errors.Is(err, replica.ErrStopped) {
		// The replica refuses to go on (a store failure or a command it should never
		// have issued): a failed run. The node stays down so the run can end.
		c.inv.fail(c.now, "%s: %v", n.Name, err)
		_ = c.Crash(n.Name)
		n.failed = true
		return err
	}
	var we *wire.Error
	var se *store.StorageError
	var ce *clustermap.Error
	// A write refused for the node's clock (clock-offset), on a rewound origin
	// (origin-rewound), for its degraded storage, or for its map's placement (a map the run
	// changed, which the node holds a generation before or after the run's latest), or
	// before it knows every member speaks version 4 (a map that turns locks on, a write
	// under a lock: cluster-not-v4), or without a token in a fenced table (lock-required:
	// a lock run's client tries it) is the replica doing its job.
	if err != nil && !(asWire(err, &we) && (we.Code == wire.CodeBadArgument || we.Code == wire.CodeClockOffset ||
		we.Code == wire.CodeOriginRewound)) &&
		!errors.As(err, &se) && err != replica.ErrUnknownConn &&
		!(errors.As(err, &ce) && (ce.Code == clustermap.CodeNotCarried || ce.Code == clustermap.CodeMixedPlacement) && c.place.changed) &&
		!(errors.As(err, &ce) && (ce.Code == clustermap.CodeClusterNotV4 || ce.Code == clustermap.CodeLockRequired) && c.locks != nil) {
		c.inv.fail(c.now, "%s: %v", n.Name, err)
	}
	c.checkPurges(n)
	c.flush(n)
	c.after(n)
	c.syncLater(n)
	return err
}

// syncLater makes what a node applied durable after the sync delay, as a group commit
// does, when the replica waits for it.
func (c *Cluster) syncLater(n *Node) {
	if n.Rep == nil || n.syncArmed || !n.Rep.NeedsSync() {
		return
	}
	n.syncArmed = true
	rep := n.Rep
	c.schedule(c.now.Add(c.opts.SyncDelay), func() {
		if n.Rep == rep { // not crashed since
			n.syncArmed = false
			c.call(n, func(r *replica.Replica) error {
				p := r.SyncPoint()
				if err := n.Store.Sync(); err != nil {
					return r.StorageFailed(n.clock(c), err) // a full disk degrades the node
				}
				return r.Synced(n.clock(c), p)
			})
		}
	})
}

// flush takes a node's output and puts it on the network.
func (c *Cluster) flush(n *Node) {
	if n.Rep == nil {
		return
	}
	for _, m := range n.Rep.Moves() {
		n.moves = append(n.moves, m)
		c.inv.move(c, n, m)
		if m.Reason != replica.ReasonFirst {
			c.trace("%s: origin %s moves %s -> %s (%s)", n.Name, c.originName(m.Origin), m.From, m.To, m.Reason)
		}
	}
	for _, e := range n.Rep.CopyEvents() {
		c.trace("%s: base copy %s with %s (%d records)%s", n.Name, e.Kind, e.Peer, e.Records, copyErr(e.Err))
	}
	for _, out := range n.Rep.Output() {
		e := n.ends[out.Conn]
		if e == nil {
			continue // a connection the network already dropped
		}
		for _, msg := range out.Messages {
			countFrames(&c.framesOut, msg)
			c.send(e, msg)
			n.Rep.Release(out.Conn, msg)
		}
		if out.Closed {
			if out.Err != nil && out.Err.Code != wire.CodeGapDetected {
				c.trace("%s: connection to %s closed: %s", n.Name, e.peer.node.Name, out.Err.Code)
			}
			delete(n.ends, out.Conn)
			if !e.closed {
				e.closed = true
				c.push(e.peer, delivery{close: true})
			}
			if l := e.pair.link; l.conn == e.pair {
				l.conn = nil
				l.redialAt = c.now.Add(c.opts.Redial)
				c.schedule(l.redialAt, func() { c.maybeDial(l) })
			}
		}
	}
	c.observeMap(n)
	c.inv.afterStep(c, n)
}

func (c *Cluster) originName(o wire.OriginID) string {
	for _, name := range c.names {
		if c.nodes[name].origin == o {
			return name
		}
	}
	return o.String()
}

// send puts one message on the way to e's peer, through the link's faults.
func (c *Cluster) send(e *end, msg []byte) {
	if e.closed || e.peer.closed {
		return
	}
	msg = slices.Clone(msg)
	if c.lk != nil {
		c.checkSent(e, msg) // as sent: a fault below may drop or damage it on the way
	}
	d := delivery{msg: msg}
	c.applyFaults(e, &d)
	if d.msg == nil {
		return
	}
	c.push(e.peer, d)
}

// push queues a delivery to e after the link's delay, never overtaking what is queued.
func (c *Cluster) push(e *end, d delivery) {
	l := e.pair.link
	at := c.now.Add(l.MinDelay)
	if l.MaxDelay > l.MinDelay {
		at = at.Add(time.Duration(c.rng.Int64N(int64(l.MaxDelay - l.MinDelay))))
	}
	if n := len(e.queue); n > 0 && at.Before(e.queue[n-1].at) {
		at = e.queue[n-1].at
	}
	d.at = at
	e.queue = append(e.queue, d)
	c.arm(e)
}

func (c *Cluster) arm(e *end) {
	if e.armed || len(e.queue) == 0 {
		return
	}
	e.armed = true
	c.schedule(e.queue[0].at, func() { c.deliver(e) })
}

// deliver hands the next message to e's node, unless its reads are paused.
func (c *Cluster) deliver(e *end) {
	e.armed = false
	if e.closed || e.node.Rep == nil || len(e.queue) == 0 || e.node.ends[e.id] != e {
		// The last test: an end its node no longer has (a crash after the peer closed the
		// connection, which the crash then did not see on the link): what was in flight to
		// it is lost with the process, never delivered to the restarted replica.
		return
	}
	if e.node.Rep.ReadPaused(e.id) {
		e.queue[0].at = c.now.Add(5 * time.Millisecond)
		c.arm(e)
		return
	}
	d := e.queue[0]
	e.queue = e.queue[1:]
	if d.close {
		e.closed = true
		c.lost(e, "closed by peer")
	} else {
		c.messages++
		countFrames(&c.framesIn, d.msg)
		before := c.inv.beforeDelivery(e, d)
		if c.lk != nil {
			c.noteLinks(e, d.msg)
		}
		if c.frames != nil {
			c.countFrames(d.msg)
		}
		c.call(e.node, func(r *replica.Replica) error { return r.Receive(e.node.clock(c), e.id, d.msg) })
		c.inv.arriving = nil
		c.inv.afterDelivery(c, e, d, before)
	}
	c.arm(e)
}

// countFrames counts a delivered message's frames by type.
func (c *Cluster) countFrames(msg []byte) {
	r := wire.NewReader(msg, 0)
	for r.More() {
		f, err := r.Next()
		if err != nil {
			return
		}
		c.frames[fmt.Sprint(f.Type)]++
	}
}

// clock is the node's wall clock: the simulation's time plus its skew, and its drift
// while it has one.
func (n *Node) clock(c *Cluster) time.Time { return n.clockAt(c.now) }

func (n *Node) clockAt(t time.Time) time.Time {
	w := t.Add(n.Skew)
	if n.drifting(t) {
		w = w.Add(n.Off + time.Duration(n.Rate*float64(t.Sub(n.OffFrom))))
	}
	return w
}

func (n *Node) drifting(t time.Time) bool {
	return (n.Off != 0 || n.Rate != 0) && !t.Before(n.OffFrom) && t.Before(n.OffUntil)
}

// simTime is the simulation's earliest time from now on at which the node's clock reads
// at or later (the inverse of clockAt, which is monotonic but for its two steps).
func (n *Node) simTime(now, at time.Time) time.Time {
	if n.Off == 0 && n.Rate == 0 || !now.Before(n.OffUntil) {
		return latest(now, at.Add(-n.Skew))
	}
	if now.Before(n.OffFrom) {
		if t := at.Add(-n.Skew); t.Before(n.OffFrom) {
			return latest(now, t)
		}
		now = n.OffFrom
	}
	if !n.clockAt(now).Before(at) {
		return now
	}
	t := n.OffFrom.Add(time.Duration(float64(at.Add(-n.Skew-n.Off).Sub(n.OffFrom)) / (1 + n.Rate)))
	t = latest(now, t)
	for t.Before(n.OffUntil) && n.clockAt(t).Before(at) {
		t = t.Add(time.Nanosecond) // rounded down: a deadline is due at its instant, not before
	}
	if t.Before(n.OffUntil) {
		return t
	}
	return latest(n.OffUntil, at.Add(-n.Skew))
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// driftNode makes n's clock beyond the bounds from now until until (Node.Off, Rate), and
// sets its timer again at both steps of its clock.
func (c *Cluster) driftNode(n *Node, off time.Duration, rate float64, until time.Time) {
	n.Off, n.Rate, n.OffFrom, n.OffUntil = off, rate, c.now, until
	rearm := func() {
		if n.Rep != nil {
			n.tickArmed = false
			c.after(n)
		}
	}
	rearm()
	c.At(until, rearm)
}

// after schedules the node's next timer.
func (c *Cluster) after(n *Node) {
	if n.Rep == nil {
		return
	}
	d := n.Rep.NextDeadline()
	if d.IsZero() {
		return
	}
	if n.tickArmed && d.Equal(n.tickAt) {
		return // that timer is set already
	}
	n.tickGen++
	gen := n.tickGen
	n.tickAt, n.tickArmed = d, true
	c.schedule(n.simTime(c.now, d), func() { // the node's deadline is on its own clock
		if n.tickGen == gen && n.Rep != nil {
			n.tickArmed = false
			c.call(n, func(r *replica.Replica) error { return r.Tick(n.clock(c)) })
		}
	})
}

// schedule runs f at virtual time at (or now, if at is past).
func (c *Cluster) schedule(at time.Time, f func()) {
	if at.Before(c.now) {
		at = c.now
	}
	c.seq++
	heap.Push(&c.queue, &event{at: at, seq: c.seq, f: f})
}

// At schedules a caller's action.
func (c *Cluster) At(at time.Time, f func()) { c.schedule(at, f) }

// RunUntil processes events up to virtual time t (inclusive) and sets the clock to t.
func (c *Cluster) RunUntil(t time.Time) {
	same := 0
	for c.queue.Len() > 0 && !c.queue[0].at.After(t) {
		ev := heap.Pop(&c.queue).(*event)
		if ev.at.Equal(c.now) {
			same++
		} else {
			same = 0
		}
		if same > maxEventsPerInstant {
			// Timers due at once forever: a livelock. Fail the run and end it.
			c.inv.fail(c.now, "livelock: more than %d events at one virtual instant", maxEventsPerInstant)
			c.queue = nil
			return
		}
		c.now = ev.at
		ev.f()
	}
	if t.After(c.now) {
		c.now = t
	}
}

// Run advances the clock by d.
func (c *Cluster) Run(d time.Duration) { c.RunUntil(c.now.Add(d)) }

type event struct {
	at  time.Time
	seq uint64
	f   func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// copyErr is a copy event's error for the trace ("" for none).
func copyErr(err *wire.Error) string {
	if err == nil {
		return ""
	}
	return ": " + string(err.Code) + " " + err.Message
}
