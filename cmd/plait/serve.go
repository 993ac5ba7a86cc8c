package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"plait/protocol"
	"plait/protocol/handshake"
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

	// hup delivers SIGHUP (serve sets it; nil in tests that send none): each one reloads
	// the files of reloaders.
	hup <-chan os.Signal
}

type peerFlags []node.Peer

func (p *peerFlags) String() string { return fmt.Sprint(*p) }

func (p *peerFlags) Set(v string) error {
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
	for _, q := range *p {
		if q.Name == name {
			return fmt.Errorf("peer %s given twice", name)
		}
	}
	*p = append(*p, node.Peer{Name: name, URL: raw})
	return nil
}

// parseServe reads plait serve's flags (docs/contract.md §2). Errors name the flag.
func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := newFlags("plait serve", stderr)
	host, _ := os.Hostname()
	name := fs.String("name", host, "the node's human name; unique in a cluster")
	data := fs.String("data", "./plait-data", "data directory (created on first start)")
	listen := fs.String("listen", "127.0.0.1:7400", "replication WebSocket listener")
	httpListen := fs.String("http", "127.0.0.1:7401", "HTTP API, status and metrics")
	var peers peerFlags
	fs.Var(&peers, "peer", "NAME=URL: dial this peer and keep the connection up (repeatable)")
	secret := fs.String("secret", "", "cluster secret (default: the environment variable PLAIT_SECRET); required for plaintext peer links when --listen is not loopback")
	protoMax := fs.Uint64("protocol-max", 0, "speak protocol versions up to N only (0: newest)")
	sync := fs.String("sync", "origin", "origin | all | none")
	moveDelay := fs.Duration("move-delay", replica.DefaultMoveDelay, "how long another relay's head must stay ahead of an origin's source before the origin moves")
	stall := fs.Duration("stall-timeout", replica.DefaultStallTimeout, "how long a source may advertise entries that do not come before it counts as a gap")
	headsEvery := fs.Duration("heads-interval", replica.DefaultHeadsInterval, "how long a moved head may wait before it goes to a peer that does not take that origin from this node (0: every head at once)")
	retainAge := fs.Duration("retain-age", replica.DefaultRetainAge, "log entries older than this (by HLC time) may be purged")
	storageReserve := fs.Int64("storage-reserve", 0, "below this many free bytes on the data directory's file system the node degrades (writes refused with 507 storage-full) before the disk fills, and a ballast file of this size is kept to release then (0: 16 MiB, or an eighth of a smaller file system; -1: no guard)")
	retainBytes := fs.Uint64("retain-bytes", 0, "past this many bytes of origin logs, the oldest entries in arrival order are purged first (0: no bound)")
	retainHold := fs.Duration("retain-hold", replica.DefaultRetainHold, "entries a peer still needs are kept, until it has not advanced for this long")
	maxCopies := fs.Int("max-copies", replica.DefaultMaxCopies, "base copies this node serves at once; one more is answered copy-busy (0: none)")
	maxClock := fs.Duration("max-clock-offset", replica.DefaultMaxClockOffset, "entries stamped more than this ahead of this node's clock are held until it catches up, and local writes are refused while most measured peers see this node's clock more than this off (0: no bound)")
	applyRetries := fs.Int("apply-retries", replica.DefaultApplyRetries, "a received entry that fails to apply this many times in a row for a reason of its own (a damaged record) shows its origin stuck apply-failed; it is retried, never passed (at least 1)")
	aeEvery := fs.Duration("antientropy-interval", replica.DefaultAntiEntropy, "how often this node asks each peer to compare its next key range of records (anti-entropy; 0: no passes of its own, it still answers)")
	aeRange := fs.Int("antientropy-range", replica.DefaultAntiEntropyRange, "the records of one anti-entropy range")
	copyChunk := fs.Int("copy-chunk", replica.DefaultCopyChunk, "the size of a base copy's chunks, in bytes")
	tlsCert := fs.String("tls-cert", "", "this node's certificate (plait cert node) for wss:// between peers; with --tls-key and --tls-ca")
	tlsKey := fs.String("tls-key", "", "the key of --tls-cert")
	tlsCA := fs.String("tls-ca", "", "the CA bundle peers' certificates must chain to")
	acceptPlain := fs.Bool("tls-accept-plaintext", false, "with TLS, serve ws:// beside wss:// and dial ws:// peers (while a cluster moves to TLS)")
	insecurePlain := fs.Bool("insecure-plaintext", false, "let a --listen that is not loopback run without TLS (peer links in cleartext)")
	chanWin := fs.Int("channel-window", 0, "bytes received and not yet applied per origin channel (0: the default, one largest frame)")
	sessWin := fs.Int("session-window", 0, "bytes received and not yet applied per connection (0: the default, 64 MiB)")
	sendQueue := fs.Int("send-queue", 0, "bytes queued to send on one connection past which a peer that does not read is closed with send-buffer-full (0: the session window plus 4 MiB)")
	tokenFile := fs.String("api-token-file", "", "a `FILE` of TOKEN SCOPE lines (scope read, write or admin): the API answers only bearer tokens of it; reloaded on SIGHUP")
	insecureOpen := fs.Bool("insecure-open-api", false, "serve the API without tokens on an --http address that is not loopback")
	httpCert := fs.String("http-tls-cert", "", "serve the API over HTTPS with the certificate in `FILE` (PEM; with --http-tls-key); reloaded on SIGHUP")
	httpKey := fs.String("http-tls-key", "", "the private key of --http-tls-cert, in `FILE` (PEM)")
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	// Read after parsing, never as the flag's default: the usage prints every default.
	if !given(fs, "secret") {
		*secret = os.Getenv("PLAIT_SECRET")
	}
	switch node.SyncMode(*sync) {
	case node.SyncOrigin, node.SyncAll, node.SyncNone:
	default:
		return nil, fmt.Errorf("--sync: %q is not origin, all or none", *sync)
	}
	if newest := handshake.Implemented().Max; *protoMax > newest {
		return nil, fmt.Errorf("--protocol-max: %d is beyond the newest version, %d", *protoMax, newest)
	}
	if *moveDelay <= 0 {
		return nil, fmt.Errorf("--move-delay: %v is not positive", *moveDelay)
	}
	if *stall <= 0 {
		return nil, fmt.Errorf("--stall-timeout: %v is not positive", *stall)
	}
	if *headsEvery < 0 {
		return nil, fmt.Errorf("--heads-interval: %v is negative", *headsEvery)
	}
	headsInterval := *headsEvery
	if headsInterval == 0 {
		headsInterval = -1 // the replica's "every head at once"
	}
	if *retainAge <= 0 {
		return nil, fmt.Errorf("--retain-age: %v is not positive", *retainAge)
	}
	if *retainHold <= 0 {
		return nil, fmt.Errorf("--retain-hold: %v is not positive", *retainHold)
	}
	if *maxCopies < 0 {
		return nil, fmt.Errorf("--max-copies: %d is negative", *maxCopies)
	}
	if *aeEvery < 0 {
		return nil, fmt.Errorf("--antientropy-interval: %v is negative", *aeEvery)
	}
	if *aeRange < 1 || *aeRange > wire.MaxRangeCount {
		return nil, fmt.Errorf("--antientropy-range: %d is outside 1..%d", *aeRange, wire.MaxRangeCount)
	}
	aeInterval := *aeEvery
	if aeInterval == 0 {
		aeInterval = -1 // the replica's "no passes"
	}
	if *copyChunk < replica.MinCopyChunk || *copyChunk > wire.MaxFrameBody {
		return nil, fmt.Errorf("--copy-chunk: %d is outside %d..%d", *copyChunk, replica.MinCopyChunk, wire.MaxFrameBody)
	}
	if *applyRetries < 1 {
		return nil, fmt.Errorf("--apply-retries: %d is below 1", *applyRetries)
	}
	if *maxClock < 0 {
		return nil, fmt.Errorf("--max-clock-offset: %v is negative", *maxClock)
	}
	clockBound := *maxClock
	if clockBound == 0 {
		clockBound = -1 // the replica's "no bound"
	}
	copies := *maxCopies
	if copies == 0 {
		copies = -1 // the replica's "none"
	}
	limits := protocol.Limits{MaxChannelBuffer: *chanWin, MaxSessionBuffer: *sessWin}
	for _, w := range []struct {
		flag string
		v    int
	}{{"--channel-window", *chanWin}, {"--session-window", *sessWin}} {
		if w.v < 0 {
			return nil, fmt.Errorf("%s: %d is negative (0: the default, or a number of bytes)", w.flag, w.v)
		}
	}
	if err := limits.WithDefaults().Validate(); err != nil {
		return nil, fmt.Errorf("--channel-window, --session-window: %s", err.Message)
	}
	if *sendQueue < 0 || *sendQueue > 0 && *sendQueue < wire.MinMaxMessage {
		return nil, fmt.Errorf("--send-queue: %d is neither 0 nor at least %d (one message)", *sendQueue, wire.MinMaxMessage)
	}
	if *storageReserve < -1 {
		return nil, fmt.Errorf("--storage-reserve: %d is neither -1 (no guard), 0 (the default) nor a number of bytes", *storageReserve)
	}
	if fi, err := os.Stat(*data); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("--data: %s is a file, not a directory", *data)
	}
	if *name == "" {
		return nil, errors.New("--name: empty (and the host has no name)")
	}
	if !wire.ValidName(*name) {
		return nil, fmt.Errorf("--name: %q is not a node name (%s)", *name, nameRule)
	}
	for _, l := range []struct{ flag, addr string }{{"--listen", *listen}, {"--http", *httpListen}} {
		if _, _, err := net.SplitHostPort(l.addr); err != nil {
			return nil, fmt.Errorf("%s: %v", l.flag, err)
		}
	}
	peerTLS, err := loadPeerTLS(*tlsCert, *tlsKey, *tlsCA, *name)
	if err != nil {
		return nil, err
	}
	if *acceptPlain && peerTLS == nil {
		return nil, errors.New("--tls-accept-plaintext: serves ws:// beside wss://, and there is no TLS (--tls-cert, --tls-key, --tls-ca)")
	}
	if !loopback(*listen) {
		switch {
		case peerTLS == nil && !*insecurePlain:
			return nil, fmt.Errorf("--listen: a listener on %s (not loopback) needs TLS (--tls-cert, --tls-key and --tls-ca; plait cert makes them), "+
				"or --insecure-plaintext to run peer links in cleartext", *listen)
		case (peerTLS == nil || *acceptPlain) && len(*secret) < minSecret:
			// Plaintext links are authenticated by the secret alone.
			return nil, fmt.Errorf("--secret: plaintext peer links on %s (not loopback) need a cluster secret of at least %d bytes (128 random bits, e.g. openssl rand -hex 32)", *listen, minSecret)
		case *secret != "" && len(*secret) < minSecret:
			return nil, fmt.Errorf("--secret: a listener on %s (not loopback) needs a cluster secret of at least %d bytes, or none with mutual TLS", *listen, minSecret)
		}
	}
	nodeCfg := node.Config{TLS: peerTLS, AcceptPlaintext: *acceptPlain}
	for _, p := range peers {
		if err := nodeCfg.CheckPeerURL(p.URL); err != nil {
			return nil, fmt.Errorf("--peer %s: %w", p.Name, err)
		}
	}
	// An API that anyone who reaches it may write to and reconfigure is opened only on
	// purpose: off loopback it needs tokens, or the flag that says so.
	if !loopback(*httpListen) && *tokenFile == "" && !*insecureOpen {
		return nil, fmt.Errorf("--http: %s is not loopback: give --api-token-file FILE, or --insecure-open-api to serve the API to every client that reaches it", *httpListen)
	}
	cfg := &serveConfig{listen: *listen, httpListen: *httpListen, node: node.Config{Name: *name, DataDir: *data,
		TLS: peerTLS, AcceptPlaintext: *acceptPlain,
		Peers: peers, Secret: []byte(*secret), ProtocolMax: *protoMax, Sync: node.SyncMode(*sync),
		MoveDelay: *moveDelay, StallTimeout: *stall, HeadsInterval: headsInterval, Limits: limits,
		RetainAge: *retainAge, RetainBytes: *retainBytes, RetainHold: *retainHold, StorageReserve: *storageReserve,
		MaxCopies: copies, CopyChunk: *copyChunk, MaxQueued: *sendQueue, MaxClockOffset: clockBound,
		ApplyRetries: *applyRetries, AntiEntropyInterval: aeInterval, AntiEntropyRange: *aeRange}}
	if (*httpCert == "") != (*httpKey == "") {
		return nil, errors.New("--http-tls-cert, --http-tls-key: give both or neither")
	}
	// The files are read now, so that a bad one is a refused command line (exit 2) rather
	// than a node that starts and answers no one.
	if *tokenFile != "" {
		if cfg.tokens, err = apitoken.Load(*tokenFile); err != nil {
			return nil, fmt.Errorf("--api-token-file: %w", err)
		}
	}
	if *httpCert != "" {
		if cfg.httpTLS, err = tlsfiles.LoadServer(tlsfiles.Files{Cert: *httpCert, Key: *httpKey}); err != nil {
			return nil, fmt.Errorf("--http-tls-cert, --http-tls-key: %w", err)
		}
	}
	return cfg, nil
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
	srv.Handler = httpapi.New(n, httpapi.Limits{}, opts...)
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
