package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"plait/protocol/handshake"
	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/apitoken"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
	"plait/shells/native/rocksstore"
	"plait/shells/native/tlsfiles"
)

// nameRule is what a node name is (wire.ValidName).
const nameRule = "1 to 64 of [A-Za-z0-9_.-]"

// minSecret is the shortest cluster secret accepted on a listener that is not loopback:
// 128 bits (README, "The cluster secret is a key").
const minSecret = 16

// serveConfig is plait serve's flags, checked, with the files they name loaded.
type serveConfig struct {
	node       node.Config
	listen     string
	httpListen string
	tokens     *apitoken.File   // --api-token-file; nil: the API is open
	httpTLS    *tlsfiles.Source // --http-tls-cert and --http-tls-key; nil: plain HTTP
	apiLimits  httpapi.Limits   // --lock-fence-wait, the feeds' bounds

	// --peer-mode and --peer-exclude, made Config.Links once every flag is parsed.
	links peerLinks
	// --hub's URL (its name is Config.Hub): the one peer a leaf dials, put in Peers once
	// every flag is parsed.
	hubURL string

	// The flags that name files or allow a risk, read once every flag is parsed.
	files         serveFiles
	insecurePlain bool // --insecure-plaintext
	insecureOpen  bool // --insecure-open-api

	// hup delivers SIGHUP (serve sets it; nil in tests that send none): each one reloads
	// the files of reloaders.
	hup <-chan os.Signal
}

// serveFiles are the paths of plait serve's files: the peer certificate set, the API's
// tokens and its HTTPS pair.
type serveFiles struct {
	tlsCert, tlsKey, tlsCA string
	tokens                 string
	httpCert, httpKey      string
}

// settings is plait serve's table of flags (docs/contract.md §2): every flag's name, the
// field it sets, its default (the value each constructor puts in the field) and its one
// line of help. A new setting is a field, a row here and a row in the contract, which
// TestFlagsInContract holds this table to, both ways.
func (c *serveConfig) settings() []setting {
	n, r, f := &c.node, &c.node.Config, &c.files
	if c.links == nil {
		c.links = peerLinks{}
	}
	return []setting{
		str("name", "NAME", &n.Name, "", validNodeName, "the node's name, unique in a cluster (default: the host name)"),
		str("data", "DIR", &n.DataDir, "./plait-data", nil, "data directory (created on first start)"),
		str("listen", "HOST:PORT", &c.listen, "127.0.0.1:7400", hostPort, "replication WebSocket listener, HOST:PORT"),
		str("http", "HOST:PORT", &c.httpListen, "127.0.0.1:7401", hostPort, "HTTP API, status and metrics, HOST:PORT"),
		{"peer", "NAME=URL", &peerFlags{&n.Peers}, "NAME=URL: dial this peer and keep the connection up (repeatable)"},
		{"hub", "NAME=URL", hubFlag{&r.Hub, &c.hubURL}, "NAME=URL: make this node a leaf of the hub NAME: it dials only that hub, which re-originates its writes, and takes no peer connections (excludes --peer)"},
		num("max-leaves", "N", &r.MaxLeaves, 0, 0, nonNegative, "leaves this node accepts as a hub; one more is refused too-many-leaves (0: none, not a hub)"),
		dur("leaf-hold", &r.LeafHold, replica.DefaultLeafHold, -1, nonNegative, "how long this hub's retention holds its log, and keeps its mark, for a leaf that is away (0: its retention holds nothing for an absent leaf, and its marks are kept for ever)"),
		{"peer-mode", "NAME=MODE", peerModeFlags{c.links}, "NAME=receive|send|both: this node's direction on the link to --peer NAME (repeatable; default both)"},
		{"peer-exclude", "NAME=TABLE[,TABLE]", peerExcludeFlags{c.links}, "NAME=TABLE[,TABLE...]: tables left out of the link to --peer NAME, both ways (repeatable; at most 64 a peer)"},
		{"secret", "S", bytesValue{&r.Secret}, "cluster secret (default: the environment variable PLAIT_SECRET); required for plaintext peer links when --listen is not loopback"},
		num("protocol-max", "N", &r.MaxVersion, 0, 0, atMostNewest, "speak protocol versions up to N only (0: newest)"),
		str("sync", "MODE", &n.Sync, node.SyncOrigin, oneOf(node.SyncOrigin, node.SyncAll, node.SyncNone), "origin | all | none"),
		dur("move-delay", &r.MoveDelay, replica.DefaultMoveDelay, 0, positive, "how long another relay's head must stay ahead of an origin's source before the origin moves"),
		dur("stall-timeout", &r.StallTimeout, replica.DefaultStallTimeout, 0, positive, "how long a source may advertise entries that do not come before it counts as a gap"),
		dur("heads-interval", &r.HeadsInterval, replica.DefaultHeadsInterval, -1, nonNegative, "how long a moved head may wait before it goes to a peer that does not take that origin from this node (0: every head at once)"),
		num("channel-window", "BYTES", &r.Limits.MaxChannelBuffer, 0, 0, nonNegative, "bytes received and not yet applied per origin channel (0: the default, one largest frame)"),
		num("session-window", "BYTES", &r.Limits.MaxSessionBuffer, 0, 0, nonNegative, "bytes received and not yet applied per connection (0: the default, 64 MiB)"),
		num("send-queue", "BYTES", &n.MaxQueued, 0, 0, zeroOrAtLeast(wire.MinMaxMessage), "bytes queued to send on one connection past which a peer that does not read is closed with send-buffer-full (0: the session window plus 4 MiB)"),
		dur("retain-age", &r.RetainAge, replica.DefaultRetainAge, 0, positive, "log entries older than this (by HLC time) may be purged"),
		num("retain-bytes", "N", &r.RetainBytes, 0, 0, nil, "past this many bytes of origin logs, the oldest entries in arrival order are purged first (0: no bound)"),
		num("storage-reserve", "BYTES", &n.StorageReserve, 0, 0, atLeast[int64](-1), "below this many free bytes on the data directory's file system the node degrades (writes refused with 507 storage-full) before the disk fills, and a ballast file of this size is kept to release then (0: 16 MiB, or an eighth of a smaller file system; -1: no guard)"),
		dur("retain-hold", &r.RetainHold, replica.DefaultRetainHold, 0, positive, "entries a peer still needs are kept, until it has not advanced for this long"),
		num("max-copies", "N", &r.MaxCopies, replica.DefaultMaxCopies, -1, nonNegative, "base copies this node serves at once; one more is answered copy-busy (0: none)"),
		dur("max-clock-offset", &r.MaxClockOffset, replica.DefaultMaxClockOffset, -1, nonNegative, "entries stamped more than this ahead of this node's clock are held until it catches up, and local writes are refused while most measured peers see this node's clock more than this off (0: no bound)"),
		num("apply-retries", "N", &r.ApplyRetries, replica.DefaultApplyRetries, 0, atLeast(1), "a received entry that fails to apply this many times in a row for a reason of its own (a damaged record) shows its origin stuck apply-failed; it is retried, never passed (at least 1)"),
		dur("antientropy-interval", &r.AntiEntropyInterval, replica.DefaultAntiEntropy, -1, nonNegative, "how often this node asks the next peer to compare its next key range of records (anti-entropy; 0: no passes of its own, it still answers)"),
		num("antientropy-range", "N", &r.AntiEntropyRange, replica.DefaultAntiEntropyRange, 0, between(1, wire.MaxRangeCount), "the records of one anti-entropy range"),
		num("copy-chunk", "BYTES", &r.CopyChunk, replica.DefaultCopyChunk, 0, between(replica.MinCopyChunk, wire.MaxFrameBody), "the size of a base copy's chunks, in bytes"),
		dur("lock-max-ttl", &r.Locks.MaxTTL, replica.DefaultLockMaxTTL, 0, durBetween(1, lock.MaxTTLLimit), "the longest lease this node grants as a lock home; a restarted home grants nothing for this (with the drift) plus --max-clock-offset"),
		dur("lock-max-wait", &r.Locks.MaxWait, replica.DefaultLockMaxWait, -1, durBetween(0, lock.MaxWaitLimit), "the longest a lock request may wait at this home for a held key (0: none waits)"),
		num("lock-max-delegations", "N", &r.Locks.MaxDelegations, replica.DefaultLockMaxDelegations, 0, nonNegative, "the delegations this node keeps at once as a lock home and holds as a delegate: a key another node locks while nobody holds or waits for it is delegated to that node, whose next locks of it cost no round trip until another node wants it (0: none)"),
		num("max-leases", "N", &r.Locks.MaxLeases, replica.DefaultMaxLeases, 0, atLeast(1), "the leases this node holds at once as a lock home; one more is refused too-many-leases"),
		num("max-snapshots", "N", &n.MaxSnapshots, node.DefaultMaxSnapshots, -1, nonNegative, "listings from a pinned snapshot (snapshot=new) open at once; one more is answered too-many-snapshots (0: none)"),
		dur("snapshot-ttl", &n.SnapshotTTL, node.DefaultSnapshotTTL, 0, positive, "how long a listing's pinned snapshot is kept after its last page; a page after is answered snapshot-expired"),
		dur("lock-fence-wait", &c.apiLimits.LockFenceWait, httpapi.DefaultLockFenceWait, 0, positive, "how long a read under a lock waits for this node to apply the lease's fence before it answers fence-timeout"),
		dur("feed-catch-up", &c.apiLimits.FeedCatchUp, httpapi.DefaultFeedCatchUp, 0, positive, "how long a change feed whose position this node has not applied yet waits for it before it answers behind"),
		dur("feed-heartbeat", &c.apiLimits.FeedHeartbeat, httpapi.DefaultFeedHeartbeat, 0, positive, "how often an idle change feed sends a heartbeat with its position"),
		dur("feed-stall-timeout", &c.apiLimits.FeedStallTimeout, httpapi.DefaultFeedStallTimeout, 0, positive, "how long a write to a change feed's client may block before the feed is closed stalled"),
		num("max-feeds", "N", &c.apiLimits.MaxFeeds, httpapi.DefaultMaxFeeds, 0, atLeast(1), "change feeds this node serves at once; one more is answered too-many-feeds"),
		num("max-named-feeds", "N", &r.MaxNamedFeeds, replica.DefaultMaxNamedFeeds, -1, nonNegative, "named feeds this node keeps (each holds retention up to its hold_bytes); one more is answered too-many-named-feeds (0: none)"),
		float("lock-drift", "RHO", &r.Locks.Drift, lock.DefaultDrift, floatAbove(0, lock.DriftLimit), "the bound on how far a clock's rate may be off: a holder stops at ttl*(1-RHO) from its request, a home frees the key at ttl*(1+RHO)"),
		str("tls-cert", "FILE", &f.tlsCert, "", nil, "this node's certificate (plait cert node) for wss:// between peers; with --tls-key and --tls-ca"),
		str("tls-key", "FILE", &f.tlsKey, "", nil, "the key of --tls-cert"),
		str("tls-ca", "FILE", &f.tlsCA, "", nil, "the CA bundle peers' certificates must chain to"),
		boolean("tls-accept-plaintext", &n.AcceptPlaintext, "with TLS, serve ws:// beside wss:// and dial ws:// peers (while a cluster moves to TLS)"),
		boolean("insecure-plaintext", &c.insecurePlain, "let a --listen that is not loopback run without TLS (peer links in cleartext)"),
		str("api-token-file", "FILE", &f.tokens, "", nil, "a FILE of TOKEN SCOPE lines (scope read, write or admin): the API answers only bearer tokens of it; reloaded on SIGHUP"),
		boolean("insecure-open-api", &c.insecureOpen, "serve the API without tokens on an --http address that is not loopback"),
		str("http-tls-cert", "FILE", &f.httpCert, "", nil, "serve the API over HTTPS with the certificate in FILE (PEM; with --http-tls-key); reloaded on SIGHUP"),
		str("http-tls-key", "FILE", &f.httpKey, "", nil, "the private key of --http-tls-cert, in FILE (PEM)"),
	}
}

// The rules of plait serve's own settings.

func validNodeName(name string) error {
	if !wire.ValidName(name) {
		return fmt.Errorf("not a node name (%s)", nameRule)
	}
	return nil
}

func hostPort(addr string) error {
	_, _, err := net.SplitHostPort(addr)
	return err
}

func atMostNewest(v uint64) error {
	if newest := handshake.Implemented().Max; v > newest {
		return fmt.Errorf("beyond the newest version, %d", newest)
	}
	return nil
}

// peerFlags is the repeatable --peer.
type peerFlags struct{ p *[]node.Peer }

func (f *peerFlags) String() string {
	if f.p == nil {
		return ""
	}
	var s []string
	for _, p := range *f.p {
		s = append(s, p.Name+"="+p.URL)
	}
	return strings.Join(s, ",")
}

func (f *peerFlags) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want NAME=URL")
	}
	if !wire.ValidName(name) {
		return fmt.Errorf("%q is not a node name (%s)", name, nameRule)
	}
	if _, err := node.ParsePeerURL(raw); err != nil {
		return err
	}
	for _, q := range *f.p {
		if q.Name == name {
			return fmt.Errorf("peer %s given twice", name)
		}
	}
	*f.p = append(*f.p, node.Peer{Name: name, URL: raw})
	return nil
}

// hubFlag is --hub NAME=URL: the hub's name goes to Config.Hub, its URL beside it.
type hubFlag struct {
	name, url *string
}

func (f hubFlag) String() string {
	if f.name == nil || *f.name == "" {
		return ""
	}
	return *f.name + "=" + *f.url
}

func (f hubFlag) Set(v string) error {
	if *f.name != "" {
		return errors.New("given twice: a leaf has one hub")
	}
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want NAME=URL")
	}
	if !wire.ValidName(name) {
		return fmt.Errorf("%q is not a node name (%s)", name, nameRule)
	}
	if _, err := node.ParsePeerURL(raw); err != nil {
		return err
	}
	*f.name, *f.url = name, raw
	return nil
}

// peerLinks is what --peer-mode and --peer-exclude give, by peer name (docs/design.md
// §24.6): parseServe checks the names against --peer and makes them Config.Links.
type peerLinks map[string]*peerLink

// peerLink is one peer's link settings as the flags build them up, and whether its mode was
// given (a second --peer-mode of a peer is refused).
type peerLink struct {
	replica.LinkSettings
	modeGiven bool
}

func (l peerLinks) of(name string) *peerLink {
	if l[name] == nil {
		l[name] = &peerLink{}
	}
	return l[name]
}

// peerModeFlags is the repeatable --peer-mode NAME=MODE.
type peerModeFlags struct{ links peerLinks }

func (f peerModeFlags) String() string { return "" }

func (f peerModeFlags) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return errors.New("want NAME=receive|send|both")
	}
	if !wire.ValidName(name) {
		return fmt.Errorf("%q is not a node name (%s)", name, nameRule)
	}
	mode, ok := wire.ParseLinkMode(raw)
	if !ok {
		return fmt.Errorf("mode %q is none of receive, send and both", raw)
	}
	l := f.links.of(name)
	if l.modeGiven {
		return fmt.Errorf("the mode of peer %s given twice", name)
	}
	l.Mode, l.modeGiven = mode, true
	return nil
}

// peerExcludeFlags is the repeatable --peer-exclude NAME=TABLE[,TABLE]. The tables of one
// peer's flags add up, each named once, at most wire.MaxLinkTables in all.
type peerExcludeFlags struct{ links peerLinks }

func (f peerExcludeFlags) String() string { return "" }

func (f peerExcludeFlags) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" || raw == "" {
		return errors.New("want NAME=TABLE[,TABLE]")
	}
	if !wire.ValidName(name) {
		return fmt.Errorf("%q is not a node name (%s)", name, nameRule)
	}
	l := f.links.of(name)
	for _, t := range strings.Split(raw, ",") {
		if !wire.ValidName(t) {
			return fmt.Errorf("%q is not a table name (%s)", t, nameRule)
		}
		if slices.ContainsFunc(l.Exclude, func(e []byte) bool { return string(e) == t }) {
			return fmt.Errorf("table %s excluded from peer %s twice", t, name)
		}
		l.Exclude = append(l.Exclude, []byte(t))
	}
	if len(l.Exclude) > wire.MaxLinkTables {
		return fmt.Errorf("%d tables excluded from peer %s; a link excludes at most %d", len(l.Exclude), name, wire.MaxLinkTables)
	}
	return nil
}

// parseServe reads plait serve's flags// parseServe reads plait serve's flags (docs/contract.md §2): each checked by its own rule
// as it is parsed, then the rules that join several and the files they name. Errors name
// the flag.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	c := &serveConfig{}
	fs := newFlags("plait serve", stderr)
	bind(fs, c.settings())
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	n := &c.node
	// Read after parsing, never as a flag's default: the usage prints every default.
	if !given(fs, "secret") {
		n.Secret = []byte(os.Getenv("PLAIT_SECRET"))
	}
	if !given(fs, "name") {
		host, _ := os.Hostname()
		if host == "" {
			return nil, errors.New("--name: not given, and the host has no name")
		}
		if err := validNodeName(host); err != nil {
			return nil, fmt.Errorf("--name: not given, and the host name %q is %v", host, err)
		}
		n.Name = host
	}
	if err := n.Limits.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("--channel-window, --session-window: %s", err.Message)
	}
	if fi, err := os.Stat(n.DataDir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("--data: %s is a file, not a directory", n.DataDir)
	}
	peerTLS, err := loadPeerTLS(c.files.tlsCert, c.files.tlsKey, c.files.tlsCA, n.Name)
	if err != nil {
		return nil, err
	}
	n.TLS = peerTLS
	if n.AcceptPlaintext && peerTLS == nil {
		return nil, errors.New("--tls-accept-plaintext: serves ws:// beside wss://, and there is no TLS (--tls-cert, --tls-key, --tls-ca)")
	}
	if !loopback(c.listen) {
		switch {
		case peerTLS == nil && !c.insecurePlain:
			return nil, fmt.Errorf("--listen: a listener on %s (not loopback) needs TLS (--tls-cert, --tls-key and --tls-ca; plait cert makes them), "+
				"or --insecure-plaintext to run peer links in cleartext", c.listen)
		case (peerTLS == nil || n.AcceptPlaintext) && len(n.Secret) < minSecret:
			// Plaintext links are authenticated by the secret alone.
			return nil, fmt.Errorf("--secret: plaintext peer links on %s (not loopback) need a cluster secret of at least %d bytes (128 random bits, e.g. openssl rand -hex 32)", c.listen, minSecret)
		case len(n.Secret) > 0 && len(n.Secret) < minSecret:
			return nil, fmt.Errorf("--secret: a listener on %s (not loopback) needs a cluster secret of at least %d bytes, or none with mutual TLS", c.listen, minSecret)
		}
	}
	for _, p := range n.Peers {
		if err := n.CheckPeerURL(p.URL); err != nil {
			return nil, fmt.Errorf("--peer %s: %w", p.Name, err)
		}
	}
	// A link's settings are for a peer this node dials: a name no --peer gives could only
	// be a peer that dials in, or one kept in the data directory, which PUT /v1/peers/{name}
	// sets; a misspelt name would otherwise be taken in silence.
	for _, name := range slices.Sorted(maps.Keys(c.links)) {
		if !slices.ContainsFunc(n.Peers, func(p node.Peer) bool { return p.Name == name }) {
			return nil, fmt.Errorf("--peer-mode, --peer-exclude: %s is not a --peer of this command line (set the link of a peer added through the API with PUT /v1/peers/%s)", name, name)
		}
		if n.Links == nil {
			n.Links = map[string]replica.LinkSettings{}
		}
		ls, err := replica.CheckLink(c.links[name].LinkSettings)
		if err != nil { // the flags' own rules come first; CheckLink is the replica's last word
			return nil, fmt.Errorf("--peer-mode, --peer-exclude %s: %w", name, err)
		}
		n.Links[name] = ls
	}
	// A leaf (docs/contract.md §26) dials its hub and nothing else, and is no hub itself:
	// its hub is its one peer, which the rules of a --peer URL hold to as well.
	if r := &n.Config; r.Hub != "" {
		switch {
		case len(n.Peers) > 0:
			return nil, fmt.Errorf("--hub, --peer: a leaf dials only its hub (--hub %s) and takes no peers: give one or the other", r.Hub)
		case r.MaxLeaves > 0:
			return nil, fmt.Errorf("--hub, --max-leaves: a leaf (--hub %s) is not a hub itself: give one or the other", r.Hub)
		case r.Hub == n.Name:
			return nil, fmt.Errorf("--hub %s: that is this node's own name", r.Hub)
		}
		if err := n.CheckPeerURL(c.hubURL); err != nil {
			return nil, fmt.Errorf("--hub %s: %w", r.Hub, err)
		}
		n.Peers = []node.Peer{{Name: r.Hub, URL: c.hubURL}}
	}
	// An API that anyone who reaches it may write to and reconfigure is opened only on
	// purpose: off loopback it needs tokens, or the flag that says so.
	if !loopback(c.httpListen) && c.files.tokens == "" && !c.insecureOpen {
		return nil, fmt.Errorf("--http: %s is not loopback: give --api-token-file FILE, or --insecure-open-api to serve the API to every client that reaches it", c.httpListen)
	}
	if (c.files.httpCert == "") != (c.files.httpKey == "") {
		return nil, errors.New("--http-tls-cert, --http-tls-key: give both or neither")
	}
	// The files are read now, so that a bad one is a refused command line (exit 2) rather
	// than a node that starts and answers no one.
	if c.files.tokens != "" {
		if c.tokens, err = apitoken.Load(c.files.tokens); err != nil {
			return nil, fmt.Errorf("--api-token-file: %w", err)
		}
	}
	if c.files.httpCert != "" {
		if c.httpTLS, err = tlsfiles.LoadServer(tlsfiles.Files{Cert: c.files.httpCert, Key: c.files.httpKey}); err != nil {
			return nil, fmt.Errorf("--http-tls-cert, --http-tls-key: %w", err)
		}
	}
	return c, nil
}

// loadPeerTLS loads the peer certificate set of --tls-cert, --tls-key and --tls-ca: all
// three or none (nil). The certificate must name this node.
func loadPeerTLS(cert, key, ca, name string) (*tlsfiles.Source, error) {
	if cert == "" && key == "" && ca == "" {
		return nil, nil
	}
	if cert == "" || key == "" || ca == "" {
		return nil, errors.New("--tls-cert, --tls-key, --tls-ca: give all three, or none")
	}
	src, err := tlsfiles.LoadPeer(tlsfiles.Files{Cert: cert, Key: key, CA: ca}, name)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	return src, nil
}

// loopback reports whether a listen address binds only the loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve is plait serve: it runs until SIGINT or SIGTERM, and reloads its files on SIGHUP.
// It returns the exit status.
func serve(args []string, stderr io.Writer) int {
	// From the start: a SIGHUP sent while the node starts is kept for the loop (one is
	// enough) instead of ending the process, which is what it does by default.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, err := parseServe(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			refused(stderr, "plait serve", err)
		}
		return 2
	}
	cfg.hup = hup
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runServe(ctx, cfg, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintln(stderr, "plait serve:", err)
		return 1
	}
	return 0
}

// runServe binds both listeners, opens the node and serves until ctx ends.
func runServe(ctx context.Context, cfg *serveConfig, log *slog.Logger) error {
	repl, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	api, err := net.Listen("tcp", cfg.httpListen)
	if err != nil {
		repl.Close()
		return fmt.Errorf("--http: %w", err)
	}
	cfg.node.Listener, cfg.node.Logger = repl, log
	n, err := node.Start(cfg.node)
	if err != nil {
		repl.Close()
		api.Close()
		if errors.Is(err, rocksstore.ErrInUse) {
			return fmt.Errorf("--data: %w", err)
		}
		return err
	}
	var opts []httpapi.Option
	if cfg.tokens != nil {
		opts = append(opts, httpapi.RequireTokens(cfg.tokens))
	}
	// The server's own errors (a failed TLS handshake, ...) go to the node's log, not to the
	// standard library's logger.
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: httpapi.MaxRequestHead,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if cfg.httpTLS != nil {
		opts = append(opts, httpapi.ReportTLS(cfg.httpTLS))
		srv.TLSConfig = cfg.httpTLS.ServerConfig()
	}
	handler := httpapi.New(n, cfg.apiLimits, opts...)
	srv.Handler = handler
	srv.RegisterOnShutdown(handler.CloseFeeds) // a feed runs until it is told to close
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(api, "", "") // the certificate is the configuration's, of the current generation
		} else {
			err = srv.Serve(api)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http listener", "err", err)
		}
	}()
	if cfg.node.TLS == nil && !loopback(cfg.listen) {
		log.Warn("peer links run in cleartext (--insecure-plaintext): records cross the network unencrypted")
	}
	attrs := []any{"name", cfg.node.Name, "listen", repl.Addr().String(), "http", api.Addr().String(), "data", cfg.node.DataDir,
		"http_tls", cfg.httpTLS != nil, "api_tokens", cfg.tokens != nil}
	if cfg.httpTLS != nil {
		attrs = append(attrs, "http_tls_expiry", cfg.httpTLS.Current().Expiry().UTC())
	}
	log.Info("serving", attrs...)
	reloaders := cfg.reloaders()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-cfg.hup:
			reload(reloaders, log)
		}
	}
	reason := "stopped"
	if cause := context.Cause(ctx); cause != nil {
		reason = cause.Error() // the signal, as os/signal names it
	}
	log.Info("stopping", "reason", reason)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Shutdown fails only when requests outlast the bound; they are cut off, and the node's
	// stop below is what says whether the data is safe.
	_ = srv.Shutdown(shutdown)
	err = n.Stop()
	r := n.Stopped()
	attrs = []any{"reason", reason, "connections_closed", r.Connections, "writes_unanswered", r.WritesUnanswered,
		"store_synced", r.Synced, "own_seq", r.OwnSeq}
	if r.SyncErr != nil {
		attrs = append(attrs, "sync_err", r.SyncErr)
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	log.Info("stopped", attrs...)
	return err
}

// reloader is one set of files that SIGHUP reads again: the flag that names them, for the
// log, and its reload, which keeps the files loaded before when the new ones do not load.
type reloader struct {
	flag   string
	reload func() error
}

// reloaders is everything SIGHUP reloads, in order: the one place where a set of files a
// node serves with joins the reload, one line each.
func (cfg *serveConfig) reloaders() []reloader {
	var rs []reloader
	if cfg.tokens != nil {
		rs = append(rs, reloader{"--api-token-file", cfg.tokens.Reload})
	}
	if cfg.httpTLS != nil {
		rs = append(rs, reloader{"--http-tls-cert", cfg.httpTLS.Reload})
	}
	if cfg.node.TLS != nil {
		rs = append(rs, reloader{"--tls-cert", cfg.node.TLS.Reload})
	}
	return rs
}

// reload runs every reloader, each whatever the ones before it did, and logs each outcome.
// A failed one leaves its files as they were loaded before and the node serving; its
// count is in the metrics (docs/contract.md §9).
func reload(rs []reloader, log *slog.Logger) {
	for _, r := range rs {
		if err := r.reload(); err != nil {
			log.Error("reload failed; the files loaded before are kept", "flag", r.flag, "err", err)
			continue
		}
		log.Info("reloaded", "flag", r.flag)
	}
}
