package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/rocksstore"
	"plait/shells/native/tlsfiles"
)

// SyncMode is --sync (docs/contract.md §3).
type SyncMode string

// The sync modes.
const (
	SyncOrigin SyncMode = "origin" // local writes answered after an fsync (group commit)
	SyncAll    SyncMode = "all"    // every apply fsynced
	SyncNone   SyncMode = "none"   // no fsync (benchmarks)
)

// Peer is a peer this node dials.
type Peer struct {
	Name string
	URL  string // ws://HOST[:PORT] (ParsePeerURL); an empty path means /v1/replicate
}

// Config is a node's configuration: the replica's (embedded: every replica setting is
// declared once, there, with its default), and what the shell adds: its name and data
// directory, sockets, peers, durability, TLS, the storage guard.
type Config struct {
	// The replica's settings: the protocol versions (MaxVersion: --protocol-max), the
	// secret, the sessions' limits, the write limits, routing, retention, copies,
	// anti-entropy, the clock bound, the retry budget. The node sets HoldUnsynced (from
	// Sync), TLSAuthenticated (from TLS) and leaves NewSession native.
	replica.Config
	Name     string
	DataDir  string
	Listener net.Listener // the replication listener (serve closes it)
	Peers    []Peer
	Sync     SyncMode
	Logger   *slog.Logger
	// RedialMin and RedialMax bound the dialers' exponential backoff (defaults 100 ms, 5 s).
	RedialMin, RedialMax time.Duration
	// MaxPendingHandshakes bounds the accepted connections whose handshake has not
	// completed; an upgrade request beyond it is refused at once with 503 (default 64).
	MaxPendingHandshakes int
	// TLS, when set, is the peer certificate set: the listener takes wss:// with mutual
	// TLS 1.3 (and, with AcceptPlaintext, ws:// beside it), and wss:// peers are dialed with
	// it. Without it the node takes and dials ws:// only.
	TLS             *tlsfiles.Source
	AcceptPlaintext bool
	// CertPoll is how often the certificate files are looked at for a change (default 1 s;
	// a reload also comes by ReloadTLS, on SIGHUP).
	CertPoll time.Duration
	// MaxQueued bounds the bytes queued on one connection for its writer: a peer that does
	// not read (and floods PINGs, or grants credit it never uses) is closed with
	// send-buffer-full past it. Default: the session window plus the send buffer, what a
	// conforming peer's credit and one step's frames can hold.
	MaxQueued int

	// StorageReserve is --storage-reserve: the free bytes below which the node degrades
	// (storage-full) before RocksDB meets a full file system, and the size of the ballast
	// file kept in the data directory (0: DefaultStorageReserve, or an eighth of a smaller
	// file system; negative: no guard, no ballast).
	StorageReserve int64
	// FreeSpaceEvery and FreeSpaceBytes bound how long, and how many bytes written by the
	// store, the free-space guard goes on the free space it last measured before it asks
	// the file system again (defaults DefaultFreeSpaceEvery, DefaultFreeSpaceBytes):
	// other processes and RocksDB's own compactions use space too (storage.go).
	FreeSpaceEvery time.Duration
	FreeSpaceBytes uint64

	// MaxSnapshots bounds the listing's pinned snapshots open at once (--max-snapshots;
	// 0: DefaultMaxSnapshots; negative: none), and SnapshotTTL is how long one is kept
	// after its last page (--snapshot-ttl; 0: DefaultSnapshotTTL). snapshots.go.
	MaxSnapshots int
	SnapshotTTL  time.Duration

	beforeSync       func()        // rocksstore.Options.BeforeSync, for this package's tests (export_test.go)
	backgroundErrors func() uint64 // rocksstore.Options.BackgroundErrors, likewise
	// statfs stands for the data directory's file system (free and size in bytes), and
	// storageClock for the clock of the storage recovery's schedule, for the same tests:
	// nil is the real file system and time.Now.
	statfs       func() (avail, size uint64, err error)
	storageClock func() time.Time
}

// storeOptions is how the node opens its store, at start and when it recovers.
func (cfg *Config) storeOptions() rocksstore.Options {
	return rocksstore.Options{SyncEveryApply: cfg.Sync == SyncAll, BeforeSync: cfg.beforeSync, BackgroundErrors: cfg.backgroundErrors}
}

// Node is a running node.
type Node struct {
	cfg   Config
	log   *slog.Logger
	store *rocksstore.Store
	rep   *replica.Replica

	in      chan input
	conns   map[replica.ConnID]*wsConn                // owned by the loop
	waiters []waiter                                  // local writes waiting for their sync
	asks    map[replica.RequestID]chan replica.Answer // requests between nodes waiting for their answer (clustermap.go)
	syncing bool                                      // a sync runs (loop only)
	syncWG  sync.WaitGroup                            // the running sync and compaction, which Stop waits for
	// compaction of purged log ranges, off the loop: running, and the purges it covered
	compacting bool
	compacted  uint64
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	srv        *http.Server
	err        error // why the loop stopped
	stopped    chan struct{}
	stopOnce   sync.Once
	report     StopReport // what Stop did (Stopped)
	snaps      snapshots  // the listing's pinned snapshots (loop only; snapshots.go)

	peerMu sync.Mutex // serializes AddPeer and RemovePeer

	mu    sync.Mutex           // guards dials and peers
	dials map[string]dialState // per configured peer
	peers map[string]*peerDial // the peers this node dials, by name
	order []string             // their names, in the order added

	pending atomic.Int64 // accepted connections not yet through their handshake

	tlsl      *tlsListener // the TLS listener (nil without TLS)
	tlsClient *http.Client // the wss:// dialers' client, built once (nil without TLS)

	storage      storageState // degraded storage (storage.go; loop only)
	space        freeSpace    // the free-space guard's last measure (storage.go; loop only)
	bgCheckedAt  time.Time    // when the guard last asked RocksDB for background errors
	degradedCode atomic.Value // string: the code while degraded, "" otherwise

	// The cluster map the replica holds, kept after every input that may change it, so
	// that the API asks whether this node carries a table without a turn of the loop; and
	// the API's server of requests of kind api (forward.go).
	cmap       atomic.Pointer[clustermap.Map]
	filling    atomic.Pointer[fillingTables] // keepMap's
	apiHandler atomic.Pointer[APIHandler]

	origin wire.OriginID // this node's own origin id, fixed by its data directory

	// The feeds' broadcast (feed.go): the channel the loop closes after its next step that
	// moved, nil while no feed waits.
	feedMu sync.Mutex
	feedCh chan struct{}
}

// peerDial is one peer's dialer.
type peerDial struct {
	Peer
	cancel context.CancelFunc
}

// dialState is what a dialer reports of its peer.
type dialState struct {
	state      replica.PeerState  // PeerConnecting or PeerBackoff while there is no connection
	reconnects uint64             // dials after the first, successful or not
	lastErr    *replica.DialError // why the last dial that opened no connection failed
}

type waiter struct {
	seq   uint64
	reply chan writeResult
}

type writeResult struct {
	seq uint64
	err error
}

// Start opens the data directory and starts serving and dialing.
func Start(cfg Config) (*Node, error) {
	if cfg.Sync == "" {
		cfg.Sync = SyncOrigin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RedialMin == 0 {
		cfg.RedialMin = 100 * time.Millisecond
	}
	if cfg.RedialMax == 0 {
		cfg.RedialMax = 5 * time.Second
	}
	if cfg.MaxPendingHandshakes == 0 {
		cfg.MaxPendingHandshakes = 64
	}
	if w := cfg.Write; w.MaxKey < 0 || w.MaxValue < 0 || w.MaxTxn < 0 {
		return nil, fmt.Errorf("node: write limits %+v: a limit is not negative", w)
	}
	// The defaults are filled here, not left to the replica, so that WriteLimits reports
	// exactly the bounds the replica was given.
	if cfg.Write.MaxKey == 0 {
		cfg.Write.MaxKey = replica.DefaultMaxKey
	}
	if cfg.Write.MaxValue == 0 {
		cfg.Write.MaxValue = replica.DefaultMaxValue
	}
	if cfg.Write.MaxTxn == 0 {
		cfg.Write.MaxTxn = replica.DefaultMaxTxn
	}
	if cfg.CertPoll == 0 {
		cfg.CertPoll = time.Second
	}
	if cfg.FreeSpaceEvery == 0 {
		cfg.FreeSpaceEvery = DefaultFreeSpaceEvery
	}
	if cfg.FreeSpaceBytes == 0 {
		cfg.FreeSpaceBytes = DefaultFreeSpaceBytes
	}
	if cfg.SnapshotTTL < 0 {
		return nil, fmt.Errorf("node: SnapshotTTL %v is negative", cfg.SnapshotTTL)
	}
	if cfg.FreeSpaceEvery < 0 {
		return nil, fmt.Errorf("node: FreeSpaceEvery %v is negative", cfg.FreeSpaceEvery)
	}
	if cfg.MaxQueued < 0 {
		return nil, fmt.Errorf("node: MaxQueued %d is negative", cfg.MaxQueued)
	}
	if cfg.MaxQueued == 0 {
		l := cfg.Limits.WithDefaults()
		cfg.MaxQueued = l.MaxSessionBuffer + l.MaxSendBuffer
	}
	if cfg.AcceptPlaintext && cfg.TLS == nil {
		return nil, errors.New("node: serving plaintext beside TLS needs TLS")
	}
	for _, p := range cfg.Peers {
		if err := cfg.CheckPeerURL(p.URL); err != nil {
			return nil, fmt.Errorf("node: peer %s: %w", p.Name, err)
		}
	}
	if cfg.Hub != "" && (len(cfg.Peers) != 1 || cfg.Peers[0].Name != cfg.Hub || cfg.MaxLeaves > 0) {
		return nil, fmt.Errorf("node: a leaf of %s dials its hub and nothing else, and is no hub itself: peers %v, MaxLeaves %d", cfg.Hub, cfg.Peers, cfg.MaxLeaves)
	}
	var origin wire.OriginID
	if _, err := rand.Read(origin[:]); err != nil {
		return nil, err
	}
	store, err := rocksstore.Open(cfg.DataDir, store.Identity{Origin: origin, Name: cfg.Name}, cfg.storeOptions())
	if err != nil {
		return nil, err
	}
	id, _ := store.Identity()
	if id.Name != cfg.Name {
		store.Close()
		return nil, fmt.Errorf("node: the data directory %s belongs to node %q, not %q", cfg.DataDir, id.Name, cfg.Name)
	}
	saved, err := store.DialPeers()
	if err != nil {
		store.Close()
		return nil, err
	}
	cfg.Links = keptLinks(cfg.Links, saved)
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.Name), store: store, in: make(chan input, 256),
		conns: map[replica.ConnID]*wsConn{}, stopped: make(chan struct{}), dials: map[string]dialState{},
		peers: map[string]*peerDial{}, origin: id.Origin}
	n.degradedCode.Store("")
	rep, err := replica.New(n.replicaConfig(), store)
	if err != nil {
		store.Close()
		return nil, err
	}
	n.rep = rep
	n.keepMap()
	n.placeBallast()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.loop()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/replicate", n.accept)
	n.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if cfg.TLS != nil {
		n.tlsClient = newTLSClient(cfg.TLS)
		n.wg.Add(1)
		go n.pollCerts()
	}
	if cfg.Listener != nil {
		l := cfg.Listener
		if cfg.TLS != nil {
			n.tlsl = newTLSListener(l, n, cfg.TLS, cfg.AcceptPlaintext)
			l = n.tlsl
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("replication listener", "err", err)
			}
		}()
	}
	for _, p := range cfg.Peers {
		n.dial(p)
	}
	for _, p := range saved { // merged with the flags; a flag's URL wins
		if cfg.Hub != "" { // a leaf dials only its hub; the kept peers wait for a start without --hub
			n.log.Warn("a leaf dials only its hub: the peer kept in the data directory is not dialed", "peer", p.Name, "hub", cfg.Hub)
			continue
		}
		if n.peers[p.Name] == nil {
			n.dial(Peer{Name: p.Name, URL: p.URL})
		}
	}
	return n, nil
}

// keptLinks is the link settings a node starts with: those of the configuration (the
// flags), and for every other peer kept in the data directory, the settings kept with it
// (PUT /v1/peers). The configuration's settings of a peer win whole over the kept ones, as
// its URL does.
func keptLinks(cfg map[string]replica.LinkSettings, saved []rocksstore.DialPeer) map[string]replica.LinkSettings {
	links := maps.Clone(cfg)
	for _, p := range saved {
		if _, given := cfg[p.Name]; given || p.Link.Mode == wire.LinkBoth && len(p.Link.Tables) == 0 {
			continue
		}
		if links == nil {
			links = map[string]replica.LinkSettings{}
		}
		links[p.Name] = replica.LinkSettings{Mode: p.Link.Mode, Exclude: p.Link.Tables}
	}
	return links
}

// replicaConfig is the replica's configuration, for Start and for a rebuild after
// degraded storage: the links are the ones the node holds now (SetPeer keeps them).
// replicaConfig is the replica's settings as given, with what the shell decides: which
// entries wait for their sync (Sync), and whether TLS authenticates every peer link.
func (n *Node) replicaConfig() replica.Config {
	c := n.cfg.Config
	c.HoldUnsynced = n.cfg.Sync != SyncNone
	c.TLSAuthenticated = n.cfg.TLS != nil && !n.cfg.AcceptPlaintext
	return c
}

// Stop closes every connection, stops the loop and closes the store. It may be called
// more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		n.cancel()
		_ = n.srv.Close() // fails only with the listener's close error: the loop and the store stop next
		if n.tlsl != nil {
			n.tlsl.wait()
		}
		n.wg.Wait()
		<-n.stopped
		n.syncWG.Wait()     // a sync still running uses the store
		if n.store != nil { // nil after a recovery that could not reopen it
			// The loop has ended: the replica and the store are this goroutine's now.
			st := n.rep.Status(time.Now())
			for _, o := range st.Origins {
				if o.Origin == st.Node.Origin {
					n.report.OwnSeq = o.AppliedSeq
				}
			}
			// A last sync, so that a clean stop leaves everything applied durable whatever
			// --sync said (none answers writes before their sync). Not on degraded storage
			// or a stopped replica, whose store may not take one.
			if !n.storage.active && n.err == nil {
				n.report.SyncErr = n.store.Sync()
				n.report.Synced = n.report.SyncErr == nil
			}
			n.releaseSnapshots()
			n.store.Close()
		}
	})
	return n.err
}

// StopReport is what Stop did, for its log line: the connections it closed, the local
// writes it answered unavailable (they may or may not have applied, as when a client's
// answer is lost), whether its last sync of the store succeeded (then everything applied,
// every answered write included, is durable) or why not, and this node's own origin seq.
type StopReport struct {
	Connections      int
	WritesUnanswered int
	Synced           bool
	SyncErr          error // nil when Synced, or when no sync was tried (degraded storage, a stopped replica)
	OwnSeq           uint64
}

// Stopped is the report of Stop, once it returned.
func (n *Node) Stopped() StopReport { return n.report }

// WriteLimits are the bounds this node's replica checks every local write against: the
// configured ones, with the replica's defaults for the zero fields.
func (n *Node) WriteLimits() replica.WriteLimits { return n.cfg.Write }

// Serving reports whether the node still runs: false once it stopped, by Stop or because
// the replica refused to go on (a store failure).
func (n *Node) Serving() bool {
	select {
	case <-n.stopped:
		return false
	default:
		return true
	}
}

// input is one closure the loop runs: read, when it only reads (the store's records, the
// status) and so moves nothing the loop's bookkeeping after an input looks at.
type input struct {
	f    func()
	read bool
}

// do runs f on the loop and waits for it; it fails once the node is stopping.
func (n *Node) do(f func()) error { return n.run(input{f: f}) }

// read is do for a closure that only reads: the loop runs it without the free-space guard
// and, when every input of a batch is one, without the bookkeeping after inputs (the group
// commit, the output, the lag sample, the timer): an API read does not pay for it.
func (n *Node) read(f func()) error { return n.run(input{f: f, read: true}) }

func (n *Node) run(in input) error {
	done := make(chan struct{})
	f := in.f
	in.f = func() { f(); close(done) }
	select {
	case n.in <- in:
	case <-n.stopped:
		return errStopped
	}
	select {
	case <-done:
		return nil
	case <-n.stopped:
		return errStopped
	}
}

var errStopped = errors.New("node: stopped")

// closeGrace is how long a connection the replica closed in order may take to send its
// last messages before the socket is dropped; errorCloseGrace is the same for a close for
// an error, whose CLOSE frame is all there is to send: a peer that never answers it must
// not hold the socket (and a slot of pending handshakes) for long.
const (
	closeGrace      = 2 * time.Second
	errorCloseGrace = 500 * time.Millisecond
)

// loop owns the replica: it runs closures, fires its timer and hands output to sockets.
func (n *Node) loop() {
	defer close(n.stopped)
	// The first Tick comes at once, before any input: the replica's timers start from a
	// Tick (retention's first step, after which it asks for one about every second), and a
	// node that no peer connects to would otherwise never tick. (A timer of 0 is not
	// enough: an input handled first resets it.)
	n.check(n.rep.Tick(time.Now()))
	timer := time.NewTimer(n.untilDeadline())
	defer timer.Stop()
	for {
		select {
		case in := <-n.in:
			moved := n.input(in)
		drain:
			for range 64 { // a batch of inputs before the group commit
				select {
				case in := <-n.in:
					moved = n.input(in) || moved
				default:
					break drain
				}
			}
			if !moved {
				continue // reads only: the timer keeps its deadline, there is nothing to flush
			}
		case <-timer.C:
			n.guard() // a tick may write too (a retention step)
			n.check(n.rep.Tick(time.Now()))
		case <-n.ctx.Done():
			n.stopLoop()
			return
		}
		n.watchStorage()
		if n.store == nil {
			n.stopLoop() // the store did not reopen (recoverStorage)
			return
		}
		n.groupCommit()
		n.compact()
		n.logCopies()
		n.deliverAnswers()
		n.keepMap()
		n.serveRequests()
		n.flush()
		n.wakeFeeds()
		// After every input and tick that is no read: a sample at most every
		// LagSampleEvery (a time compared otherwise), and an idle node still ticks about
		// once a second (retention, PINGs).
		now := time.Now()
		n.rep.SampleLag(now)
		timer.Reset(n.untilDeadlineAt(now))
	}
}

// input runs one input, guarded when it may write: before each input, not only a batch's
// first, since 65 writes of a few hundred kB each outrun a small reserve (storage.go). It
// reports whether the input may have moved anything (every input but a read).
func (n *Node) input(in input) bool {
	if !in.read {
		n.guard() // below the reserve: degraded before f can write
	}
	in.f()
	return !in.read
}

// stopLoop drops every connection and answers the waiting writes, as the loop ends.
func (n *Node) stopLoop() {
	n.report.Connections, n.report.WritesUnanswered = len(n.conns), len(n.waiters)
	for id, c := range n.conns {
		c.close()
		delete(n.conns, id)
	}
	for _, w := range n.waiters {
		w.reply <- writeResult{err: errStopped}
	}
	n.waiters = nil
	for id, a := range n.asks {
		a <- replica.Answer{ID: id, Code: wire.CodeInternal, Message: errStopped.Error()}
		delete(n.asks, id)
	}
}

func (n *Node) untilDeadline() time.Duration { return n.untilDeadlineAt(time.Now()) }

// untilDeadlineAt is how long after now the loop's timer must fire.
func (n *Node) untilDeadlineAt(now time.Time) time.Duration {
	if n.storage.active { // the next recovery attempt is a deadline too
		return max(min(n.storage.next.Sub(n.storageNow()), n.untilReplica(now)), 0)
	}
	return n.untilReplica(now)
}

func (n *Node) untilReplica(now time.Time) time.Duration {
	d := n.rep.NextDeadline()
	if d.IsZero() {
		return time.Hour
	}
	return max(d.Sub(now), 0)
}

// check stops the node when the replica refuses to go on.
func (n *Node) check(err error) {
	if errors.Is(err, replica.ErrStopped) && n.err == nil {
		n.err = err
		n.log.Error("replica stopped", "err", err)
		n.cancel()
	}
}

// groupCommit starts a sync of the store when the replica waits for one and none runs,
// and answers the local writes the last sync covered. The fsync runs off the loop, which
// goes on applying, answering and sending meanwhile; everything applied while it runs
// waits for the next one (the SyncPoint taken before it says what it covers).
func (n *Node) groupCommit() {
	if !n.syncing && n.rep.NeedsSync() && n.guard() {
		p := n.rep.SyncPoint()
		n.syncing = true
		n.syncWG.Add(1)
		go func() {
			defer n.syncWG.Done()
			err := n.store.Sync()
			done := func() {
				n.syncing = false
				if err != nil {
					// A StorageError degrades the replica; any other error stops it.
					n.check(n.rep.StorageFailed(time.Now(), err))
					return
				}
				n.check(n.rep.Synced(time.Now(), p))
			}
			select {
			case n.in <- input{f: done}:
			case <-n.stopped:
			}
		}()
	}
	// The replica says what is durable: its syncs and the ones it made itself (before it
	// serves a copy), after which it may need no sync with writes still waiting here.
	synced := n.rep.SyncedSeq()
	kept := n.waiters[:0]
	for _, w := range n.waiters {
		if n.cfg.Sync == SyncNone || w.seq <= synced {
			w.reply <- writeResult{seq: w.seq}
			continue
		}
		kept = append(kept, w)
	}
	n.waiters = kept
}

// compact lets the store compact the log ranges that retention purged, off the loop (a
// manual compaction may take seconds): the disk space comes back, where range deletions
// alone would only hide the entries. One runs at a time.
func (n *Node) compact() {
	purged := n.rep.Counters().EntriesPurged
	if n.compacting || purged == n.compacted || n.rep.Degraded() != nil {
		return
	}
	n.compacting, n.compacted = true, purged
	n.syncWG.Add(1)
	go func() {
		defer n.syncWG.Done()
		n.store.CompactLogs()
		select {
		case n.in <- input{f: func() { n.compacting = false }}:
		case <-n.stopped:
		}
	}()
}

// logCopies writes a line for each copy that started, resumed, ended or stopped.
func (n *Node) logCopies() {
	for _, e := range n.rep.CopyEvents() {
		args := []any{"peer", e.Peer, "records", e.Records, "bytes", e.Bytes}
		if e.Err != nil {
			args = append(args, "code", e.Err.Code, "msg", e.Err.Message)
		}
		switch e.Kind {
		case replica.CopyStarted:
			n.log.Info("base copy started", args...)
		case replica.CopyResumed:
			n.log.Info("base copy resumed", args...)
		case replica.CopyCompleted:
			n.log.Info("base copy completed", args...)
		case replica.CopyStopped:
			n.log.Warn("base copy stopped; it resumes from its last chunk", args...)
		case replica.CopyServed:
			n.log.Info("serving a base copy", args...)
		case replica.CopyRefused:
			n.log.Error("base copy refused", args...)
		}
	}
}

// flush hands every connection its messages, closes the ones whose session ended or
// whose queue passed MaxQueued, and lets paused readers go on.
func (n *Node) flush() {
	n.flushOutput()
	over := false
	for id, c := range n.conns {
		if q := c.queuedBytes(); q > n.cfg.MaxQueued {
			over = true
			n.check(n.rep.CloseConnFor(time.Now(), id, wire.CodeSendBufferFull,
				fmt.Sprintf("%d bytes queued for a peer that does not read (bound %d)", q, n.cfg.MaxQueued)))
		}
	}
	if over {
		n.flushOutput() // the closes
	}
	for id, c := range n.conns {
		if c.paused && !n.rep.ReadPaused(id) {
			c.paused = false
			c.resume <- struct{}{}
		}
	}
}

func (n *Node) flushOutput() {
	for _, out := range n.rep.Output() {
		c := n.conns[out.Conn]
		if c == nil {
			continue
		}
		abrupt := out.Err != nil && out.Err.Code != wire.CodeGoingAway
		for _, m := range c.send(out.Messages, out.Closed, abrupt) {
			n.rep.Release(out.Conn, m)
		}
		if out.Closed {
			// The writer sends the CLOSE frame if the peer still reads; a peer that does not
			// (stopped, or its buffers full) must not pin the socket, its queue and both
			// goroutines: the socket is dropped after a grace period either way.
			grace := closeGrace
			if abrupt {
				grace = errorCloseGrace // the writer drops it after the CLOSE; this bounds a writer stuck in Write
			}
			time.AfterFunc(grace, c.close)
			delete(n.conns, out.Conn)
			if out.Err != nil {
				n.log.Info("connection closed", "peer", c.peer, "code", out.Err.Code, "msg", out.Err.Message)
			}
		}
	}
}

// Write applies a local transaction and answers once it is durable as the sync mode says.
func (n *Node) Write(ctx context.Context, ops []wire.Op) (uint64, error) {
	reply := make(chan writeResult, 1)
	err := n.do(func() {
		seq, err := n.rep.Write(time.Now(), ops)
		if err != nil {
			reply <- writeResult{err: err}
			return
		}
		n.waiters = append(n.waiters, waiter{seq: seq, reply: reply})
	})
	if err != nil {
		return 0, err
	}
	select {
	case r := <-reply:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.stopped:
		return 0, errStopped
	}
}

// Status is the replica's status now, with every configured peer: its URL, reconnects
// and, while it has no connection, its dialing state (connecting or backoff).
func (n *Node) Status() (replica.Status, error) {
	var st replica.Status
	err := n.read(func() {
		st = n.rep.Status(time.Now())
		st.Node.Storage.Retries = n.storage.retries
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, name := range n.order {
			p, d := n.peers[name], n.dials[name]
			i := slices.IndexFunc(st.Peers, func(ps replica.PeerStatus) bool { return ps.Name == p.Name })
			if i < 0 {
				ps := replica.PeerStatus{Name: p.Name, State: d.state, LastError: n.rep.LastError(p.Name)}
				ps.RetentionHeldEntries, ps.RetentionHeldBytes = n.rep.RetentionHeld(p.Name)
				ps.RetentionHoldAge = n.rep.RetentionHoldAge(p.Name, time.Now())
				ps.Behind = n.rep.PeerBehindOf(p.Name, time.Now())
				ps.Health = replica.PeerHealth(ps, st.Origins) // dialing: stalled
				ps.Link = n.rep.Link(p.Name)
				ps.Link.Exclude = slices.Clone(ps.Link.Exclude) // the status leaves the loop
				st.Peers = append(st.Peers, ps)
				i = len(st.Peers) - 1
			}
			st.Peers[i].URL, st.Peers[i].Reconnects, st.Peers[i].LastDialError = p.URL, d.reconnects, d.lastErr
		}
	})
	return st, err
}

// LagHistory is every remote origin's lag history (replica.LagHistory), sampled by the
// loop about once a second.
func (n *Node) LagHistory() ([]replica.OriginLag, error) {
	var h []replica.OriginLag
	err := n.read(func() { h = n.rep.LagHistory() })
	return h, err
}

// PeerLagHistory is every peer's lag history behind this node's own origin
// (replica.PeerLagHistory).
func (n *Node) PeerLagHistory() ([]replica.PeerLag, error) {
	var h []replica.PeerLag
	err := n.read(func() { h = n.rep.PeerLagHistory() })
	return h, err
}

// Digest is a table's digest (store.Digest).
func (n *Node) Digest(table string) (count int, sum string, err error) {
	if derr := n.read(func() { count, sum, err = store.Digest(n.store, []byte(table)) }); derr != nil {
		return 0, "", derr
	}
	return count, sum, err
}

// nonce is a fresh handshake nonce.
func nonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return b
}

// Get returns a record's current version (tombstones included).
func (n *Node) Get(table, key []byte) (rec store.Record, found bool, err error) {
	if derr := n.read(func() { rec, found, err = n.store.Get(table, key) }); derr != nil {
		return store.Record{}, false, derr
	}
	return rec, found, err
}

// List returns up to limit live records of table whose keys start with prefix, after key
// after (exclusive; nil: from the first), in key order, and whether more follow. Keys
// before the prefix are skipped on the way (the Store scans from a key, not a prefix).
func (n *Node) List(table, prefix, after []byte, limit int) (recs []store.Record, more bool, err error) {
	derr := n.read(func() {
		recs, more, err = listPage(func(fn func(store.Record) bool) error { return n.store.Scan(table, after, fn) }, prefix, limit)
	})
	if derr != nil {
		return nil, false, derr
	}
	return recs, more, err
}

// dial starts a peer's dialer.
func (n *Node) dial(p Peer) {
	ctx, cancel := context.WithCancel(n.ctx)
	n.mu.Lock()
	n.peers[p.Name] = &peerDial{Peer: p, cancel: cancel}
	n.order = append(n.order, p.Name)
	n.dials[p.Name] = dialState{state: replica.PeerConnecting}
	n.mu.Unlock()
	n.wg.Add(1)
	go n.dialLoop(ctx, p)
}

// Errors of AddPeer, SetPeer and RemovePeer.
var (
	ErrPeerExists  = errors.New("node: a peer of that name is configured")
	ErrPeerUnknown = errors.New("node: no peer of that name is configured")
	// ErrLeafPeers refuses a peer added to or changed on a leaf, which dials its hub and
	// nothing else (Config.Hub).
	ErrLeafPeers = errors.New("node: this node is a leaf: it dials only its hub")
)

// AddPeer starts dialing a peer and keeps it in the data directory (POST /v1/peers). A
// URL ParsePeerURL refuses is refused with its *PeerURLError.
func (n *Node) AddPeer(p Peer) error {
	if !wire.ValidName(p.Name) {
		return fmt.Errorf("node: peer name %q is not 1 to 64 of [A-Za-z0-9_.-]", p.Name)
	}
	if err := n.cfg.CheckPeerURL(p.URL); err != nil {
		return err
	}
	if n.cfg.Hub != "" {
		return ErrLeafPeers
	}
	n.peerMu.Lock() // two additions of one name: one wins, the other gets ErrPeerExists
	defer n.peerMu.Unlock()
	n.mu.Lock()
	exists := n.peers[p.Name] != nil
	n.mu.Unlock()
	if exists {
		return ErrPeerExists
	}
	var err error
	if derr := n.do(func() { err = n.store.PutDialPeer(rocksstore.DialPeer{Name: p.Name, URL: p.URL}) }); derr != nil {
		return derr
	}
	if err != nil {
		return err
	}
	n.dial(p)
	return nil
}

// ErrPeerURLNeeded refuses SetPeer of a peer not configured, without a URL to dial it at.
var ErrPeerURLNeeded = errors.New("node: a peer not configured needs a URL")

// SetPeer adds a peer, or changes a configured one, with this node's settings for the
// link to it (PUT /v1/peers/{name}, docs/design.md §24.6): the settings apply at once to
// the peer's connection (replica.SetLink) and are kept in the data directory with the
// peer, which is dialed from then on. An empty URL keeps a configured peer's; a new URL
// is dialed from the peer's next dial (a connection up now stays). It returns the peer as
// it is dialed now and reports whether it was added. Settings CheckLink refuses are refused with its error (class
// bad-argument), a URL ParsePeerURL refuses with its *PeerURLError.
func (n *Node) SetPeer(p Peer, ls replica.LinkSettings) (dialed Peer, added bool, err error) {
	if !wire.ValidName(p.Name) {
		return Peer{}, false, fmt.Errorf("node: peer name %q is not 1 to 64 of [A-Za-z0-9_.-]", p.Name)
	}
	if ls, err = replica.CheckLink(ls); err != nil {
		return Peer{}, false, err
	}
	if n.cfg.Hub != "" {
		return Peer{}, false, ErrLeafPeers
	}
	if p.URL != "" {
		if err := n.cfg.CheckPeerURL(p.URL); err != nil {
			return Peer{}, false, err
		}
	}
	n.peerMu.Lock()
	defer n.peerMu.Unlock()
	n.mu.Lock()
	old := n.peers[p.Name]
	n.mu.Unlock()
	switch {
	case old == nil && p.URL == "":
		return Peer{}, false, ErrPeerURLNeeded
	case p.URL == "":
		p.URL = old.URL
	}
	derr := n.do(func() {
		if err = n.store.PutDialPeer(rocksstore.DialPeer{Name: p.Name, URL: p.URL, Link: wire.Link{Mode: ls.Mode, Tables: ls.Exclude}}); err != nil {
			return
		}
		err = n.rep.SetLink(time.Now(), p.Name, ls)
		n.check(err)
		n.keepLink(p.Name, ls)
	})
	if derr != nil {
		return Peer{}, false, derr
	}
	if err != nil {
		return Peer{}, false, err
	}
	switch {
	case old == nil:
		n.dial(p)
	case old.URL != p.URL:
		n.redial(old, p)
	}
	return p, old == nil, nil
}

// keepLink keeps a link's settings in the node's configuration (on the loop), so that a
// replica rebuilt after degraded storage starts with them.
func (n *Node) keepLink(peer string, ls replica.LinkSettings) {
	links := maps.Clone(n.cfg.Links) // the map Start was given is the caller's
	if ls.Mode == wire.LinkBoth && len(ls.Exclude) == 0 {
		delete(links, peer)
	} else {
		if links == nil {
			links = map[string]replica.LinkSettings{}
		}
		links[peer] = ls
	}
	n.cfg.Links = links
}

// redial replaces a peer's dialer by one of its new URL, in the same place among the
// peers. The old one ends once its connection, if it has one, does.
func (n *Node) redial(old *peerDial, p Peer) {
	old.cancel()
	ctx, cancel := context.WithCancel(n.ctx)
	n.mu.Lock()
	n.peers[p.Name] = &peerDial{Peer: p, cancel: cancel}
	n.mu.Unlock()
	n.wg.Add(1)
	go n.dialLoop(ctx, p)
}

// RemovePeer stops dialing a peer, forgets it and closes its connection (DELETE
// /v1/peers/{name}); its link's settings go with it, so a connection it makes to this
// node later is linked both ways.
func (n *Node) RemovePeer(name string) error {
	n.peerMu.Lock()
	defer n.peerMu.Unlock()
	n.mu.Lock()
	p := n.peers[name]
	if p != nil {
		delete(n.peers, name)
		n.order = slices.DeleteFunc(n.order, func(s string) bool { return s == name })
		delete(n.dials, name)
	}
	n.mu.Unlock()
	if p == nil {
		return ErrPeerUnknown
	}
	p.cancel()
	var err error
	derr := n.do(func() {
		err = errors.Join(n.store.DeleteDialPeer(name), n.rep.ReleaseHolds(name))
		if _, has := n.cfg.Links[name]; has {
			lerr := n.rep.SetLink(time.Now(), name, replica.LinkSettings{})
			n.check(lerr)
			n.keepLink(name, replica.LinkSettings{})
			err = errors.Join(err, lerr)
		}
		for _, ps := range n.rep.Status(time.Now()).Peers {
			if ps.Name == name {
				n.check(n.rep.CloseConn(time.Now(), ps.Conn, "peer removed"))
			}
		}
	})
	if derr != nil {
		return derr
	}
	return err
}
