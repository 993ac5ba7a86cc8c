package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"plait/internal/testnet"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeBadFlags: every bad flag exits with status 2 and a message naming the flag.
func TestServeBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--sync", "sometimes"}, "--sync"},
		{[]string{"--protocol-max", "5"}, "--protocol-max"},
		{[]string{"--protocol-max", "x"}, "-protocol-max"},
		{[]string{"--peer", "B"}, "-peer"},
		{[]string{"--peer", "B=http://h:1"}, "-peer"},
		{[]string{"--peer", "B=wss://h:1"}, "wss:// needs TLS"},
		{[]string{"--peer", "B=ws://h:0"}, "port 0"},
		{[]string{"--peer", "B=ws://h:1?x"}, "a query"},
		{[]string{"--peer", "B=ws://h:1", "--peer", "B=ws://h:2"}, "-peer"},
		{[]string{"--listen", "nocolon"}, "--listen"},
		{[]string{"--http", "nocolon"}, "--http"},
		{[]string{"--listen", "0.0.0.0:7400"}, "--listen"},
		{[]string{"--listen", "0.0.0.0:7400", "--secret", "a secret of 32 bytes, or longer."}, "--insecure-plaintext"},
		{[]string{"--listen", "0.0.0.0:7400", "--insecure-plaintext"}, "--secret"},
		{[]string{"--listen", "0.0.0.0:7400", "--insecure-plaintext", "--secret", "short"}, "--secret"},
		{[]string{"--tls-cert", "a.crt"}, "--tls-cert, --tls-key, --tls-ca"},
		{[]string{"--tls-cert", "a.crt", "--tls-key", "a.key", "--tls-ca", "ca.crt"}, "--tls-cert"},
		{[]string{"--tls-accept-plaintext"}, "--tls-accept-plaintext"},
		{[]string{"--name", ""}, "--name"},
		{[]string{"--name", "a b"}, "--name"},
		{[]string{"--name", strings.Repeat("n", 65)}, "--name"},
		{[]string{"--peer", "B/x=ws://h:1"}, "-peer"},
		{[]string{"--bogus"}, "--bogus: no such flag"},
		{[]string{"--move-delay", "0s"}, "--move-delay 0s: not positive"},
		{[]string{"--stall-timeout", "-1s"}, "--stall-timeout"},
		{[]string{"--heads-interval", "-1ms"}, "--heads-interval"},
		{[]string{"--retain-age", "0s"}, "--retain-age"},
		{[]string{"--retain-hold", "-1s"}, "--retain-hold"},
		{[]string{"--retain-bytes", "-1"}, "-retain-bytes"},
		{[]string{"--retain-bytes", "1KiB"}, "-retain-bytes"},
		{[]string{"--max-copies", "-1"}, "--max-copies"},
		{[]string{"--antientropy-interval", "-1s"}, "--antientropy-interval"},
		{[]string{"--antientropy-range", "0"}, "--antientropy-range"},
		{[]string{"--antientropy-range", "4097"}, "--antientropy-range"},
		{[]string{"--copy-chunk", "1023"}, "--copy-chunk"},
		{[]string{"--copy-chunk", "16777217"}, "--copy-chunk"},
		{[]string{"--channel-window", "100"}, "--channel-window"},
		{[]string{"--session-window", "-1"}, "--session-window -1: negative"},
		{[]string{"--channel-window", "-1"}, "--channel-window -1: negative"},
		{[]string{"--peer", "A=127.0.0.1:7400"}, "no scheme: write ws://127.0.0.1:7400"},
		{[]string{"--data", "serve_test.go"}, "--data: serve_test.go is a file, not a directory"},
		{[]string{"--send-queue", "-1"}, "--send-queue"},
		{[]string{"--send-queue", "65535"}, "--send-queue"},
		{[]string{"--storage-reserve", "-2"}, "--storage-reserve"},
		{[]string{"--storage-reserve", "16MiB"}, "-storage-reserve"},
		{[]string{"--apply-retries", "0"}, "--apply-retries"},
		{[]string{"--lock-max-ttl", "0s"}, "--lock-max-ttl"},
		{[]string{"--lock-max-ttl", "25h"}, "--lock-max-ttl"},
		{[]string{"--lock-max-wait", "-1ms"}, "--lock-max-wait"},
		{[]string{"--lock-max-wait", "25h"}, "--lock-max-wait"},
		{[]string{"--max-leases", "0"}, "--max-leases"},
		{[]string{"--lock-fence-wait", "0s"}, "--lock-fence-wait"},
		{[]string{"--max-snapshots", "-1"}, "--max-snapshots"},
		{[]string{"--snapshot-ttl", "0s"}, "--snapshot-ttl"},
		{[]string{"--lock-drift", "0"}, "--lock-drift"},
		{[]string{"--lock-drift", "0.2"}, "--lock-drift"},
		{[]string{"--lock-drift", "NaN"}, "--lock-drift"},
		{[]string{"--lock-drift", "x"}, "-lock-drift"},
		{[]string{"extra"}, "extra"},
		{[]string{"--peer", "B=ws://h:1", "--peer-mode", "B=sideways"}, `--peer-mode B=sideways: mode "sideways" is none of receive, send and both`},
		{[]string{"--peer", "B=ws://h:1", "--peer-mode", "B"}, "--peer-mode B: want NAME=receive|send|both"},
		{[]string{"--peer", "B=ws://h:1", "--peer-mode", "B=receive", "--peer-mode", "B=send"}, "--peer-mode B=send: the mode of peer B given twice"},
		{[]string{"--peer", "B=ws://h:1", "--peer-exclude", "B=orders,a/b"}, `--peer-exclude B=orders,a/b: "a/b" is not a table name`},
		{[]string{"--peer", "B=ws://h:1", "--peer-exclude", "B=orders,"}, `--peer-exclude B=orders,: "" is not a table name`},
		{[]string{"--peer", "B=ws://h:1", "--peer-exclude", "B=orders", "--peer-exclude", "B=orders"}, "table orders excluded from peer B twice"},
		{[]string{"--peer", "B=ws://h:1", "--peer-exclude", "B=" + tableList(0, 65)}, "65 tables excluded from peer B; a link excludes at most 64"},
		{[]string{"--peer", "B=ws://h:1", "--peer-exclude", "B=" + tableList(0, 60), "--peer-exclude", "B=" + tableList(60, 65)}, "65 tables excluded from peer B; a link excludes at most 64"},
		{[]string{"--peer-mode", "C=receive", "--peer", "B=ws://h:1"}, "--peer-mode, --peer-exclude: C is not a --peer of this command line"},
		{[]string{"--peer-exclude", "C=t"}, "--peer-mode, --peer-exclude: C is not a --peer of this command line"},
		{[]string{"--hub", "H"}, "-hub H: want NAME=URL"},
		{[]string{"--hub", "H=http://h:1"}, "-hub"},
		{[]string{"--hub", "H=ws://h:1", "--hub", "G=ws://h:2"}, "given twice: a leaf has one hub"},
		{[]string{"--hub", "H=ws://h:1", "--peer", "B=ws://h:2"}, "--hub, --peer: a leaf dials only its hub"},
		{[]string{"--peer", "B=ws://h:2", "--hub", "H=ws://h:1"}, "--hub, --peer: a leaf dials only its hub"},
		{[]string{"--hub", "H=ws://h:1", "--max-leaves", "10"}, "--hub, --max-leaves: a leaf (--hub H) is not a hub itself"},
		{[]string{"--name", "H", "--hub", "H=ws://h:1"}, "--hub H: that is this node's own name"},
		{[]string{"--hub", "H=ws://h:1", "--peer-exclude", "H=t"}, "--peer-mode, --peer-exclude: H is not a --peer of this command line"},
		{[]string{"--max-leaves", "-1"}, "-max-leaves"},
		{[]string{"--leaf-hold", "-1s"}, "-leaf-hold"},
	} {
		var stderr bytes.Buffer
		if code := serve(c.args, &stderr); code != 2 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("plait serve %v: exit %d, %q; want 2 naming %s", c.args, code, stderr.String(), c.flag)
		}
	}
}

// TestServeDefaults: no flags at all is a valid configuration (docs/contract.md §2).
func TestServeDefaults(t *testing.T) {
	t.Setenv("PLAIT_SECRET", "")
	cfg, err := parseServe(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:7400" || cfg.httpListen != "127.0.0.1:7401" || cfg.node.DataDir != "./plait-data" ||
		cfg.node.Sync != "origin" || cfg.node.MaxVersion != 0 || cfg.node.Name == "" {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg.node.RetainAge != 72*time.Hour || cfg.node.RetainBytes != 0 || cfg.node.RetainHold != 24*time.Hour {
		t.Errorf("retention defaults: age %v, bytes %d, hold %v", cfg.node.RetainAge, cfg.node.RetainBytes, cfg.node.RetainHold)
	}
	if cfg.node.ApplyRetries != 5 {
		t.Errorf("apply retries default: %d", cfg.node.ApplyRetries)
	}
	if cfg, err := parseServe([]string{"--apply-retries", "1"}, &bytes.Buffer{}); err != nil {
		t.Errorf("--apply-retries 1, the smallest budget: %v", err)
	} else if cfg.node.ApplyRetries != 1 {
		t.Errorf("--apply-retries 1 gave a budget of %d", cfg.node.ApplyRetries)
	}
	if cfg.node.MaxCopies != 2 || cfg.node.CopyChunk != 1<<20 {
		t.Errorf("copy defaults: %d copies, chunks of %d", cfg.node.MaxCopies, cfg.node.CopyChunk)
	}
	// The bounds of the copies: none served, and chunks of 1 KiB and of 16 MiB.
	for _, c := range []struct {
		args         []string
		copies, size int
	}{{[]string{"--max-copies", "0", "--copy-chunk", "1024"}, -1, 1024}, {[]string{"--copy-chunk", "16777216"}, 2, 16 << 20}} {
		cfg, err := parseServe(c.args, &bytes.Buffer{})
		if err != nil || cfg.node.MaxCopies != c.copies || cfg.node.CopyChunk != c.size {
			t.Errorf("%v: %v, %d copies, chunks of %d", c.args, err, cfg.node.MaxCopies, cfg.node.CopyChunk)
		}
	}
	// Locks: the defaults, and each flag reaching the replica's and the API's settings.
	if l := cfg.node.Locks; l.MaxTTL != time.Minute || l.MaxWait != 2*time.Second || l.MaxLeases != 10000 || l.Drift != 0.001 || cfg.apiLimits.LockFenceWait != 5*time.Second {
		t.Errorf("lock defaults: %+v, fence wait %v", l, cfg.apiLimits.LockFenceWait)
	}
	if cfg, err := parseServe([]string{"--lock-max-ttl", "10s", "--lock-max-wait", "0", "--max-leases", "7", "--lock-drift", "0.01", "--lock-fence-wait", "1s"}, &bytes.Buffer{}); err != nil {
		t.Errorf("lock flags: %v", err)
	} else if l := cfg.node.Locks; l.MaxTTL != 10*time.Second || l.MaxWait != -1 || l.MaxLeases != 7 || l.Drift != 0.01 || cfg.apiLimits.LockFenceWait != time.Second {
		t.Errorf("lock flags: %+v, fence wait %v", l, cfg.apiLimits.LockFenceWait)
	}
	// Pinned snapshots: the defaults, none (0, the node's -1), and values given.
	for _, c := range []struct {
		args []string
		max  int
		ttl  time.Duration
	}{{nil, 64, time.Minute}, {[]string{"--max-snapshots", "0"}, -1, time.Minute}, {[]string{"--max-snapshots", "3", "--snapshot-ttl", "5s"}, 3, 5 * time.Second}} {
		cfg, err := parseServe(c.args, &bytes.Buffer{})
		if err != nil || cfg.node.MaxSnapshots != c.max || cfg.node.SnapshotTTL != c.ttl {
			t.Errorf("%v: %v, --max-snapshots %d, --snapshot-ttl %v; want %d, %v", c.args, err, cfg.node.MaxSnapshots, cfg.node.SnapshotTTL, c.max, c.ttl)
		}
	}
	// Heads: the default wait, every head at once (0, the replica's -1), and a wait given.
	for _, c := range []struct {
		args     []string
		interval time.Duration
	}{{nil, 500 * time.Millisecond}, {[]string{"--heads-interval", "0"}, -1}, {[]string{"--heads-interval", "2s"}, 2 * time.Second}} {
		cfg, err := parseServe(c.args, &bytes.Buffer{})
		if err != nil || cfg.node.HeadsInterval != c.interval {
			t.Errorf("%v: %v, heads interval %v", c.args, err, cfg.node.HeadsInterval)
		}
	}
	// Anti-entropy: the default pace and range, off (0), and the range's bounds.
	for _, c := range []struct {
		args     []string
		interval time.Duration
		size     int
	}{{nil, time.Second, 256}, {[]string{"--antientropy-interval", "0"}, -1, 256},
		{[]string{"--antientropy-interval", "250ms", "--antientropy-range", "1"}, 250 * time.Millisecond, 1},
		{[]string{"--antientropy-range", "4096"}, time.Second, 4096}} {
		cfg, err := parseServe(c.args, &bytes.Buffer{})
		if err != nil || cfg.node.AntiEntropyInterval != c.interval || cfg.node.AntiEntropyRange != c.size {
			t.Errorf("%v: %v, interval %v, range %d", c.args, err, cfg.node.AntiEntropyInterval, cfg.node.AntiEntropyRange)
		}
	}
	// The smallest retention a node takes: one nanosecond, one byte.
	cfg, err = parseServe([]string{"--retain-age", "1ns", "--retain-hold", "1ns", "--retain-bytes", "1"}, &bytes.Buffer{})
	if err != nil || cfg.node.RetainAge != 1 || cfg.node.RetainHold != 1 || cfg.node.RetainBytes != 1 {
		t.Errorf("the smallest retention: %v, %+v", err, cfg)
	}
	// The storage reserve: the default (0), off (-1), a number of bytes.
	for _, c := range []struct {
		args []string
		want int64
	}{{nil, 0}, {[]string{"--storage-reserve", "0"}, 0}, {[]string{"--storage-reserve", "-1"}, -1}, {[]string{"--storage-reserve", "1048576"}, 1 << 20}} {
		cfg, err := parseServe(c.args, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
		} else if cfg.node.StorageReserve != c.want {
			t.Errorf("%v: a reserve of %d; want %d", c.args, cfg.node.StorageReserve, c.want)
		}
	}
	t.Setenv("PLAIT_SECRET", "from the environment, 32 bytes..")
	cfg, err = parseServe([]string{"--listen", "0.0.0.0:7400", "--insecure-plaintext"}, &bytes.Buffer{})
	if err != nil || string(cfg.node.Secret) != "from the environment, 32 bytes.." {
		t.Errorf("PLAIT_SECRET: %v, %+v", err, cfg)
	}
}

// TestServeTLSFlags: the files plait cert makes are taken for the node they name, and
// refused for another; with TLS a non-loopback listener needs no secret, wss:// peers are
// taken and ws:// ones only while plaintext is served too.
func TestServeTLSFlags(t *testing.T) {
	t.Setenv("PLAIT_SECRET", "")
	dir := t.TempDir()
	if code := cert([]string{"ca", "--dir", dir}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("plait cert ca: %d", code)
	}
	if code := cert([]string{"node", "--dir", dir, "--name", "A", "--host", "10.0.0.1"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("plait cert node: %d", code)
	}
	files := []string{"--tls-cert", dir + "/A.crt", "--tls-key", dir + "/A.key", "--tls-ca", dir + "/ca.crt"}
	cfg, err := parseServe(append([]string{"--name", "A", "--listen", "0.0.0.0:7400", "--peer", "B=wss://10.0.0.2:7400"}, files...), io.Discard)
	if err != nil || cfg.node.TLS == nil || cfg.node.TLS.Current().NodeName != "A" || len(cfg.node.Secret) != 0 {
		t.Fatalf("TLS without a secret: %v, %+v", err, cfg)
	}
	if _, err := parseServe(append([]string{"--name", "B"}, files...), io.Discard); err == nil || !strings.Contains(err.Error(), `names node "A", not "B"`) {
		t.Errorf("another node's certificate: %v", err)
	}
	if _, err := parseServe(append([]string{"--name", "A", "--peer", "B=ws://10.0.0.2:7400"}, files...), io.Discard); err == nil || !strings.Contains(err.Error(), "--peer B") {
		t.Errorf("a ws:// peer with TLS: %v", err)
	}
	if _, err := parseServe(append([]string{"--name", "A", "--listen", "0.0.0.0:7400", "--tls-accept-plaintext", "--peer", "B=ws://10.0.0.2:7400"}, files...), io.Discard); err == nil || !strings.Contains(err.Error(), "--secret") {
		t.Errorf("plaintext served beside TLS off loopback without a secret: %v", err)
	}
	cfg, err = parseServe(append([]string{"--name", "A", "--tls-accept-plaintext", "--peer", "B=ws://10.0.0.2:7400"}, files...), io.Discard)
	if err != nil || !cfg.node.AcceptPlaintext {
		t.Errorf("a ws:// peer while moving to TLS: %v, %+v", err, cfg)
	}
}

// TestStatusPrintsTables: plait status reads a node's /v1/status and prints its origins,
// peers and counters.
func TestStatusPrintsTables(t *testing.T) {
	repl, api := testnet.FreeAddr(t), testnet.FreeAddr(t)
	cfg, err := parseServe([]string{"--name", "S", "--data", t.TempDir(), "--listen", repl, "--http", api}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var out, errs bytes.Buffer
	deadline := time.Now().Add(10 * time.Second)
	for status([]string{"--http", api}, &out, &errs) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("plait status: %s", errs.String())
		}
		out.Reset()
		errs.Reset()
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"node S ", "tls off", "ORIGIN", "APPLIED", "PEER", "txns_applied 0", "connections_refused 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plait status output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCheck: plait check passes a directory a node wrote and stopped, and refuses one that
// holds no store.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	api := testnet.FreeAddr(t)
	cfg, err := parseServe([]string{"--name", "K", "--data", dir, "--listen", testnet.FreeAddr(t), "--http", api}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("PUT", "http://"+api+"/v1/tables/t/records/k", strings.NewReader("v"))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never took a write")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := check([]string{"--data", dir}, &out, &errs); code != 0 || !strings.Contains(out.String(), "1 log entries") ||
		!strings.Contains(out.String(), "every check holds") {
		t.Errorf("plait check: exit %d\n%s%s", code, out.String(), errs.String())
	}
	if code := check([]string{"--data", t.TempDir()}, &out, &errs); code != 2 {
		t.Errorf("plait check of an empty directory: exit %d, want 2", code)
	}
	errs.Reset()
	if code := check([]string{"--data", dir, "extra"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), `"extra"`) {
		t.Errorf("plait check with an argument: exit %d, %q; want 2 naming it", code, errs.String())
	}
	errs.Reset()
	if code := status([]string{"extra"}, &out, &errs); code != 2 || !strings.Contains(errs.String(), `"extra"`) {
		t.Errorf("plait status with an argument: exit %d, %q; want 2 naming it", code, errs.String())
	}
}

// TestBench: plait bench runs on a small load and prints every row of the in-process
// measures (the stalled receiver runs plait serve processes: the multi-process tests run
// it from the real binary; the stalled feed, which takes seconds, is internal/bench's
// TestBenchFeeds).
func TestBench(t *testing.T) {
	var out, errs bytes.Buffer
	if code := benchmark([]string{"--records", "1600", "--latency-samples", "5", "--stalled-records", "0", "--copy-records", "2000",
		"--feed-records", "1600", "--feed-samples", "5", "--feed-idle", "3", "--feed-stall", "0"}, &out, &errs); code != 0 {
		t.Fatalf("plait bench: exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"raw RocksDB", "raw WebSocket", "replication A -> B, 1600 records written through the Go API",
		"written as HTTP batches", "write -> visible on B", "visible on C (two hops", "relay hop",
		"records of 1 origin", "from 16 origins", "raw RocksDB write of 2000 records", "raw RocksDB scan", "raw scan + write",
		"base copy of 2000 records", "catch-up by that base copy", "replaying the whole log",
		"B applies 1600 records of A's", "B's change feed read from oldest", "raw NDJSON lines", "visible on B, p50 / p99 of 5 single writes (the feed latency's run)",
		"its event delivered by B's change feed", "the feed's event after visible on B", "grown by 3 idle change feeds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plait bench output lacks %q:\n%s", want, out.String())
		}
	}
	for _, args := range [][]string{
		{"--records", "150", "--per-txn", "100"},  // not a multiple of per-txn
		{"--records", "1000", "--per-txn", "100"}, // 10 transactions: not a multiple of 16
		{"--writers", "0"},
		{"--copy-records", "150"}, // not a multiple of per-txn
		{"--copy-records", "100"}, // one transaction: nothing below a head to purge
		{"--copy-records", "-100"},
		{"--sync", "sometimes"},
		{"--placement-records", "-1"},
		{"--lock-cycles", "-1"},
		{"--move-records", "100"}, // without --placement-records
		{"--feed-records", "150"}, // not a multiple of per-txn
		{"--feed-idle", "-1"},
		{"--feed-stall", "1s"}, // too short to sample
		{"extra"},
	} {
		if code := benchmark(args, &out, &errs); code != 2 {
			t.Errorf("plait bench %v: exit %d, want 2", args, code)
		}
	}
}

// TestBenchPlacement: plait bench --placement-records runs the placement measures on a tiny
// load and prints their rows, with ratios that say what placement does whatever the
// machine's speed: each node holds about half the bytes when each table is on half the
// nodes, and the fill sends at least the moved table's keys and values.
func TestBenchPlacement(t *testing.T) {
	var out, errs bytes.Buffer
	if code := benchmark([]string{"--records", "1600", "--latency-samples", "20", "--stalled-records", "0", "--copy-records", "0",
		"--placement-records", "200", "--move-records", "300", "--feed-records", "0", "--feed-samples", "0", "--feed-idle", "0", "--feed-stall", "0"}, &out, &errs); code != 0 {
		t.Fatalf("plait bench: exit %d: %s", code, errs.String())
	}
	ratio := func(re string) float64 {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("plait bench output lacks %s:\n%s", re, out.String())
		}
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if r := ratio(`\| disk per node, the same with each table placed on 2 of the 4 nodes: [^|]*\| [^|]*\| ([\d.]+) of every table on every node \|`); r <= 0 || r >= 0.65 {
		t.Errorf("disk per node with each table on 2 of 4 nodes: %.2f of every table on every node, want about a half", r)
	}
	if r := ratio(`\| the fill's chunk bytes \(fill_bytes\)[^|]*\| [^|]*\| ([\d.]+) of the table's bytes \|`); r < 1 || r > 2 {
		t.Errorf("the fill sent %.2f of the moved table's bytes, want at least all of them and not twice", r)
	}
	for _, re := range []string{`\| GET of a record through a carrier's HTTP API, p50 / p99 of 20 \| \S+ / \S+ \| (1) \|`,
		`\| GET of the same record through a node that does not carry it \(forwarded to a carrier\), p50 / p99 \| \S+ / \S+ \| p50 ([\d.]+), p99 [\d.]+ of the carrier's \|`,
		`\| a table of 300 records of 1 KiB \(0.3 MB\) moved to a node a map adds to it: publication until it filled the table \| ([\d.]+) s \|`} {
		if r := ratio(re); r <= 0 {
			t.Errorf("%s: %v, want a positive figure", re, r)
		}
	}
}

// TestBenchLocks: plait bench --lock-cycles runs the lock measures on 3 and 5 nodes and
// prints their rows. Every cycle writes the count it read under the lock plus one, and the
// measure fails when two cycles wrote one count, so a run that exits 0 had each of its
// contended holders alone and seeing its predecessor's write.
func TestBenchLocks(t *testing.T) {
	var out, errs bytes.Buffer
	if code := benchmark([]string{"--records", "1600", "--latency-samples", "20", "--stalled-records", "0", "--copy-records", "0",
		"--lock-cycles", "5", "--feed-records", "0", "--feed-samples", "0", "--feed-idle", "0", "--feed-stall", "0"}, &out, &errs); code != 0 {
		t.Fatalf("plait bench: exit %d: %s", code, errs.String())
	}
	for _, nodes := range []string{"3", "5"} {
		for _, re := range []string{
			`\| ` + nodes + ` nodes: lock acquire through the key's home, p50 / p99 of 5 \| \S+ / \S+ \| 1 \|`,
			`\| ` + nodes + ` nodes: lock acquire through another node \(one round trip to the home\) \| \S+ / \S+ \| [\d.]+ of the home's p50 \|`,
			`\| ` + nodes + ` nodes: 4 clients on one key through different nodes: acquire \(its wait included\) / cycle, p50 \| \S+ / \S+ \|`,
		} {
			if !regexp.MustCompile(re).MatchString(out.String()) {
				t.Errorf("plait bench output lacks %s:\n%s", re, out.String())
			}
		}
	}
}

// TestPrintStatusTLSAndRefusals: plait status prints the node's certificate and the
// refused connections when the document has them.
func TestPrintStatusTLSAndRefusals(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Node.TLS = &httpapi.TLSDoc{NodeName: "A", Subject: "CN=A,O=plait", Expiry: "2028-01-01T00:00:00Z", Reloads: 2}
	d.Refusals = []httpapi.RefusalDoc{{At: "2026-12-01T10:00:00.000Z", Remote: "10.0.0.9:5000", Code: "tls-unknown-ca", Message: "unknown authority"}}
	var out bytes.Buffer
	printStatus(&out, d)
	for _, want := range []string{"tls A  certificate CN=A,O=plait  expires 2028-01-01T00:00:00Z", "REFUSED AT", "10.0.0.9:5000", "tls-unknown-ca"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plait status output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPeerCertificatesReloadOnHUP: SIGHUP's reloaders include the peer certificate set,
// and running it loads the files written since.
func TestPeerCertificatesReloadOnHUP(t *testing.T) {
	t.Setenv("PLAIT_SECRET", "")
	dir := t.TempDir()
	if cert([]string{"ca", "--dir", dir}, io.Discard, io.Discard) != 0 || cert([]string{"node", "--dir", dir, "--name", "A"}, io.Discard, io.Discard) != 0 {
		t.Fatal("plait cert failed")
	}
	cfg, err := parseServe([]string{"--name", "A", "--tls-cert", dir + "/A.crt", "--tls-key", dir + "/A.key", "--tls-ca", dir + "/ca.crt"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	before := cfg.node.TLS.Current().Leaf.SerialNumber.String()
	if cert([]string{"node", "--dir", dir, "--name", "A", "--overwrite"}, io.Discard, io.Discard) != 0 {
		t.Fatal("plait cert --overwrite failed")
	}
	found := false
	for _, r := range cfg.reloaders() {
		if r.flag == "--tls-cert" {
			found = true
			if err := r.reload(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found || cfg.node.TLS.Current().Leaf.SerialNumber.String() == before {
		t.Fatalf("the peer certificates on SIGHUP: reloader found %v, serial still %s", found, before)
	}
}

// TestPrintStatusHealth: the tables print each origin's and peer's health and how far a
// peer is behind this node's origin ("-" for a peer that never subscribed to it).
func TestPrintStatusHealth(t *testing.T) {
	behind := uint64(12)
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Origins = []httpapi.OriginDoc{{Name: "O1", Health: replica.HealthFallingBehind}}
	d.Peers = []httpapi.PeerDoc{{Name: "P1", State: replica.PeerStreaming, Health: replica.HealthStalled, LagSeq: &behind},
		{Name: "P2", State: replica.PeerBackoff, Health: replica.HealthStalled}}
	var out bytes.Buffer
	printStatus(&out, d)
	lines := strings.Split(out.String(), "\n")
	row := func(first string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == first {
				return f
			}
		}
		t.Fatalf("no row %s in:\n%s", first, out.String())
		return nil
	}
	if r := row("O1"); r[1] != "falling-behind" {
		t.Errorf("origin row %v, want health falling-behind second", r)
	}
	if r := row("P1"); r[3] != "stalled" || r[4] != "12" {
		t.Errorf("peer row %v, want health stalled and 12 behind", r)
	}
	if r := row("P2"); r[4] != "-" {
		t.Errorf("peer row %v, want - behind", r)
	}
}

// TestSecretNeverInUsage: the cluster secret comes from PLAIT_SECRET when --secret is not
// given, and from the flag when it is, but no usage text or refusal prints it: neither -h,
// nor an unknown flag, nor a value that does not parse, nor a check that fails after
// parsing.
func TestSecretNeverInUsage(t *testing.T) {
	const known = "the known secret 0123456789abcdef"
	t.Setenv("PLAIT_SECRET", known)
	for _, args := range [][]string{
		{"-h"}, {"--bogus"}, {"--sync", "sometimes"}, {"--move-delay", "x"}, {"extra"},
		{"--listen", "0.0.0.0:7400"}, {"--listen", "0.0.0.0:7400", "--insecure-plaintext", "--secret", "short"},
	} {
		var out bytes.Buffer
		if code := serve(args, &out); code != 2 {
			t.Errorf("plait serve %v: exit %d; want 2", args, code)
		}
		if strings.Contains(out.String(), known) || strings.Contains(out.String(), "short\"") {
			t.Errorf("plait serve %v printed the secret:\n%s", args, out.String())
		}
		if args[0] != "-h" && strings.Count(out.String(), "\n") > 2 {
			t.Errorf("plait serve %v: a refusal is its error and one line pointing to -h, not:\n%s", args, out.String())
		}
	}
	cfg, err := parseServe(nil, io.Discard)
	if err != nil || string(cfg.node.Secret) != known {
		t.Errorf("without --secret: %v, secret %q; want PLAIT_SECRET's", err, cfg.node.Secret)
	}
	cfg, err = parseServe([]string{"--secret", "from the command line"}, io.Discard)
	if err != nil || string(cfg.node.Secret) != "from the command line" {
		t.Errorf("--secret given: %v, secret %q; want the flag's", err, cfg.node.Secret)
	}
}

// tableList is the tables t<from> to t<to-1>, comma-separated, as --peer-exclude takes them.
func tableList(from, to int) string {
	var ts []string
	for i := from; i < to; i++ {
		ts = append(ts, fmt.Sprintf("t%02d", i))
	}
	return strings.Join(ts, ",")
}

// TestServePeerLinks: --peer-mode and --peer-exclude become the replica's Config.Links,
// by peer name, the tables of one peer's flags added up and sorted; 64 tables, the most a
// link excludes, are taken (one more is refused: TestServeBadFlags); a peer with neither
// flag has no entry.
func TestServePeerLinks(t *testing.T) {
	cfg, err := parseServe([]string{"--peer", "B=ws://h:1", "--peer", "C=ws://h:2", "--peer", "D=ws://h:3",
		"--peer-exclude", "B=stock,audit", "--peer-mode", "B=receive", "--peer-exclude", "B=cache",
		"--peer-mode", "C=send", "--peer-exclude", "D=" + tableList(0, 40), "--peer-exclude", "D=" + tableList(40, 64)}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ts [][]byte) string { return string(bytes.Join(ts, []byte(","))) }
	links := cfg.node.Links
	if b := links["B"]; len(links) != 3 || b.Mode != wire.LinkReceive || names(b.Exclude) != "audit,cache,stock" {
		t.Errorf("B's link = %v %q (of %d links); want receive, audit,cache,stock", b.Mode, names(b.Exclude), len(links))
	}
	if c := links["C"]; c.Mode != wire.LinkSend || len(c.Exclude) != 0 {
		t.Errorf("C's link = %v %q; want send, nothing excluded", c.Mode, names(c.Exclude))
	}
	if d := links["D"]; d.Mode != wire.LinkBoth || names(d.Exclude) != tableList(0, 64) {
		t.Errorf("D's link = %v, %d tables; want both, the 64 tables given", d.Mode, len(d.Exclude))
	}
	// A name no --peer gives, in either order of the flags: refused before anything starts.
	for _, args := range [][]string{{"--peer-mode", "C=receive", "--peer", "B=ws://h:1"}, {"--peer", "B=ws://h:1", "--peer-exclude", "C=t"}} {
		if _, err := parseServe(args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "C is not a --peer of this command line") {
			t.Errorf("%v: %v; want C refused as no --peer", args, err)
		}
	}
	if cfg, err := parseServe([]string{"--peer", "B=ws://h:1"}, &bytes.Buffer{}); err != nil || cfg.node.Links != nil {
		t.Errorf("no link flags: %v, links %v; want none", err, cfg.node.Links)
	}
}

// TestServeHubFlags: --hub makes the hub the one peer a leaf dials and the replica's
// Config.Hub; --max-leaves and --leaf-hold reach the replica, --leaf-hold 0 as its "none"
// (-1); without them a node is neither leaf nor hub, with the default hold.
func TestServeHubFlags(t *testing.T) {
	cfg, err := parseServe([]string{"--name", "L", "--hub", "H=ws://h:1"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.node; n.Hub != "H" || len(n.Peers) != 1 || n.Peers[0].Name != "H" || n.Peers[0].URL != "ws://h:1" || n.MaxLeaves != 0 {
		t.Errorf("--hub H=ws://h:1: hub %q, peers %v, max leaves %d; want hub H, the one peer H at ws://h:1, no leaves", n.Hub, n.Peers, n.MaxLeaves)
	}
	// Refused before anything starts (parsed only: serve would run a node that is let through).
	for _, args := range [][]string{{"--hub", "H=ws://h:1", "--peer", "B=ws://h:2"}, {"--hub", "H=ws://h:1", "--max-leaves", "1"}} {
		if _, err := parseServe(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: taken; a leaf dials only its hub and is no hub", args)
		}
	}
	cfg, err = parseServe([]string{"--max-leaves", "100", "--leaf-hold", "0"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.node; n.Hub != "" || n.MaxLeaves != 100 || n.LeafHold != -1 {
		t.Errorf("--max-leaves 100 --leaf-hold 0: hub %q, max %d, hold %v; want no hub, 100, -1 (none)", n.Hub, n.MaxLeaves, n.LeafHold)
	}
	cfg, err = parseServe(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.node; n.Hub != "" || n.MaxLeaves != 0 || n.LeafHold != replica.DefaultLeafHold || len(n.Peers) != 0 {
		t.Errorf("defaults: hub %q, max %d, hold %v, peers %v; want none, 0, %v, none", n.Hub, n.MaxLeaves, n.LeafHold, n.Peers, replica.DefaultLeafHold)
	}
}
