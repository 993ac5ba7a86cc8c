package bench

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"plait/shells/native/node"
)

// TestCheck: every load the measures cannot split or run is refused, naming the flag; a
// stalled-receiver measure without the plait binary is refused before anything runs.
func TestCheck(t *testing.T) {
	good := Config{Records: 1600, PerTxn: 100, Samples: 1, Writers: 1, Sync: node.SyncNone}
	if err := good.Check(); err != nil {
		t.Fatalf("a good load: %v", err)
	}
	for _, c := range []struct {
		change func(*Config)
		flag   string
	}{
		{func(c *Config) { c.PerTxn = 0 }, "--per-txn"},
		{func(c *Config) { c.Records = 150 }, "--per-txn"},
		{func(c *Config) { c.Records = 1000 }, "16 transactions"},
		{func(c *Config) { c.Writers = 0 }, "--writers"},
		{func(c *Config) { c.Samples = 0 }, "--latency-samples"},
		{func(c *Config) { c.Stalled = -1 }, "--stalled-records"},
		{func(c *Config) { c.Copy = -100 }, "--copy-records"},
		{func(c *Config) { c.Copy = 150 }, "--copy-records"},
		{func(c *Config) { c.Copy = 100 }, "--copy-records"},
		{func(c *Config) { c.Sync = "sometimes" }, "--sync"},
		{func(c *Config) { c.Placement = -1 }, "--placement-records"},
		{func(c *Config) { c.Move = 100 }, "--move-records needs --placement-records"},
		{func(c *Config) { c.Placement, c.Move = 100, -1 }, "--move-records"},
		{func(c *Config) { c.TLS = true }, "--tls-rounds"},
		{func(c *Config) { c.FeedRecords = 150 }, "--feed-records"},
		{func(c *Config) { c.FeedRecords = -100 }, "--feed-records"},
		{func(c *Config) { c.FeedSamples = -1 }, "--feed-samples"},
		{func(c *Config) { c.FeedIdle = -1 }, "--feed-idle"},
		{func(c *Config) { c.FeedIdle = 257 }, "--feed-idle"},
		{func(c *Config) { c.FeedStall = time.Second }, "--feed-stall"},
		{func(c *Config) { c.FeedStall = 2 * time.Minute }, "--feed-stall"},
		{func(c *Config) { c.HubRecords = 150 }, "--hub-records"},
		{func(c *Config) { c.HubRecords = -100 }, "--hub-records"},
		{func(c *Config) { c.HubSamples = -1 }, "--hub-samples"},
	} {
		bad := good
		c.change(&bad)
		if err := bad.Check(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: %v, want an error naming %s", bad, err, c.flag)
		}
		if err := Run(io.Discard, bad); err == nil {
			t.Errorf("Run of %+v ran", bad)
		}
	}
	stalled := good
	stalled.Stalled = 1000
	if err := Run(io.Discard, stalled); err == nil || !strings.Contains(err.Error(), "Binary") {
		t.Errorf("Run with a stalled receiver and no binary: %v", err)
	}
}

// TestBaseCopy: a small run of the base copy measures, whose checks (the copy logged
// started and completed, every record copied, the receivers' digests equal to the
// source's) are the test; the times are not judged.
func TestBaseCopy(t *testing.T) {
	dir := t.TempDir()
	r := &run{Config: Config{PerTxn: 100, Writers: 4, Sync: node.SyncOrigin, Copy: 2000}, dir: dir,
		value: []byte(strings.Repeat("v", benchValue))}
	res, err := r.baseCopy()
	if err != nil {
		t.Fatal(err)
	}
	if res.records != 2000 || res.bytes == 0 || res.copyTime <= 0 || res.byCopy < res.copyTime || res.byReplay <= 0 ||
		res.rawWrite <= 0 || res.rawScan <= 0 {
		t.Errorf("copy result %+v", res)
	}
}

// BenchmarkReplicationAB: plait bench's replication A -> B alone (16 writers, --sync
// origin), through the Go API and as HTTP batches of JSON and of CBOR, so that a CPU
// profile shows one path and not the whole run
// (go test -run='^$' -bench=ReplicationAB/json -cpuprofile=... ./internal/bench/). An op is
// one transaction of 100 records; records/s beside ns/op.
func BenchmarkReplicationAB(b *testing.B) {
	for _, how := range []via{viaAPI, viaJSON, viaCBOR} {
		b.Run([]string{"api", "json", "cbor"}[how], func(b *testing.B) {
			r := &run{Config: Config{PerTxn: 100, Writers: 16, Sync: node.SyncOrigin}, dir: b.TempDir(),
				value: []byte(strings.Repeat("v", benchValue))}
			benchAB(b, r, how, false)
		})
	}
}

// benchAB times b.N transactions of r written on A as how says, over ws:// or wss://,
// until B applied them.
func benchAB(b *testing.B, r *run, how via, secure bool) {
	a, n, done, err := r.pairAB(filepath.Join(r.dir, "ab"), how.http(), secure)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	b.ResetTimer()
	rate, err := r.timeAB(a, n, b.N*r.PerTxn, how)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rate, "records/s")
}

// TestHTTPBatchBodies: the HTTP measures' JSON and hand-written CBOR bodies are taken by
// the API (postBatch fails on any other answer than 200) and B applies every record; the
// rates are not judged.
func TestHTTPBatchBodies(t *testing.T) {
	for _, how := range []via{viaJSON, viaCBOR} {
		r := &run{Config: Config{PerTxn: 100, Writers: 4, Sync: node.SyncOrigin}, dir: t.TempDir(),
			value: []byte(strings.Repeat("v", benchValue))}
		a, b, done, err := r.pairAB(filepath.Join(r.dir, "ab"), how.http(), false)
		if err != nil {
			t.Fatal(err)
		}
		if rate, err := r.timeAB(a, b, 1600, how); err != nil || rate <= 0 {
			t.Errorf("via %d: %v, %v", how, rate, err)
		}
		done()
	}
}
