//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestTLSReconnectStorm: 1000 clients with a valid certificate of the cluster's CA, four
// at a time, open a connection to a TLS node's replication listener and close it at once:
// in one variant right after the TLS handshake, in the other right after the WebSocket
// upgrade over it (the node opens a session for each, which ends unestablished: a refusal
// on record). Before, right after and once settled, the node's goroutines (go_goroutines)
// and resident memory (VmRSS) are read: goroutines must come back to within 10 of the
// baseline, RSS must grow by less than stormRSSBound, and allocation per connection
// (go_memstats_alloc_bytes_total) must stay below stormAllocBound (the WebSocket variant:
// plus stormUpgradeAlloc).
//
// What the numbers show of the node building its TLS state once (shells/native/tlsfiles:
// one listener configuration per loaded certificate generation, handed out by
// GetConfigForClient): what a connection left behind (a goroutine, a session, a cache
// entry) would show in the goroutines and in RSS; a configuration built afresh for each
// connection is garbage after its handshake, so RSS would not show it, but the allocation
// per connection does. Measured on the project's 2-core machine: a TLS handshake served
// from the one configuration allocates 68 KiB on the node, the WebSocket variant 91 KiB
// (its HTTP request, upgrade and session); a node that loads its certificate files and
// builds the configuration for every handshake (GetConfigForClient calling the source's
// load) allocates 91 and 114 KiB. The bounds sit between, about 12 KiB from each. A
// configuration built per connection from certificates already in memory would cost far
// less and pass: it is not the storm this guards against.
func TestTLSReconnectStorm(t *testing.T) {
	const storm, parallel = 1000, 4
	dir := newCerts(t, "N", "X")
	for _, v := range []struct {
		name       string
		allocBound float64 // bytes per connection
		refused    uint64  // connections_refused per connection: 1 for a session that ends unestablished
		open       func(n *proc, cfg *tls.Config) error
	}{
		{"after the TLS handshake", stormAllocBound, 0, func(n *proc, cfg *tls.Config) error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", listenAddr(n), cfg)
			if err != nil {
				return err
			}
			return c.Close()
		}},
		{"after the WebSocket upgrade", stormAllocBound + stormUpgradeAlloc, 1, func(n *proc, cfg *tls.Config) error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
			ws, _, err := websocket.Dial(ctx, wssURL(n)+"/v1/replicate", &websocket.DialOptions{HTTPClient: client})
			if err != nil {
				return err
			}
			return ws.CloseNow()
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			n := serveTLS(t, dir, "N", nil)
			cfg := clientTLS(t, dir, "X")
			hammer := func(k int) {
				t.Helper()
				var next, failed atomic.Int64
				var first atomic.Value
				var wg sync.WaitGroup
				for range parallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(k) {
							if err := v.open(n, cfg); err != nil && failed.Add(1) == 1 {
								first.Store(err)
							}
						}
					}()
				}
				wg.Wait()
				if f := failed.Load(); f > 0 {
					t.Fatalf("%d of %d connections failed; the first: %v", f, k, first.Load())
				}
			}
			goroutines := func() float64 { return n.metrics()["go_goroutines"] }
			rss := func() int64 {
				r, err := n.Memory("VmRSS")
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			idle := goroutines()
			hammer(50) // warm-up: what a first connection sets up once is in the baseline
			waitFor(t, "the warm-up's connections gone", 30*time.Second, func() bool { return goroutines() <= idle+10 })
			baseG, baseRSS := goroutines(), rss()
			refused0 := n.status().Counters.ConnectionsRefused
			alloc0 := n.metrics()["go_memstats_alloc_bytes_total"]

			watch := n.WatchRSS(20 * time.Millisecond)
			began := time.Now()
			hammer(storm)
			took := time.Since(began)
			peak := watch()
			perConn := (n.metrics()["go_memstats_alloc_bytes_total"] - alloc0) / storm
			afterG, afterRSS := goroutines(), rss()
			settling := time.Now()
			waitFor(t, "goroutines back within 10 of the baseline", 30*time.Second, func() bool { return goroutines() <= baseG+10 })
			settled := time.Since(settling)
			endG, endRSS := goroutines(), rss()
			t.Logf("%d connections in %v (%.0f/s); goroutines %.0f idle, %.0f baseline, %.0f after, %.0f settled (in %v); "+
				"RSS %s baseline, %s peak, %s after, %s settled (%+.1f MiB); %.1f KiB allocated per connection",
				storm, took.Round(time.Millisecond), storm/took.Seconds(), idle, baseG, afterG, endG, settled.Round(time.Millisecond),
				mibs(baseRSS), mibs(peak), mibs(afterRSS), mibs(endRSS), float64(endRSS-baseRSS)/(1<<20), perConn/1024)
			if grew := endRSS - baseRSS; grew > stormRSSBound {
				t.Errorf("RSS grew by %s over %d connections, more than %s", mibs(grew), storm, mibs(stormRSSBound))
			}
			if perConn > v.allocBound {
				t.Errorf("%.1f KiB allocated per connection, more than %.0f KiB: is TLS state built per connection?", perConn/1024, v.allocBound/1024)
			}
			// Every client passed TLS; every upgrade reached the replica, and ended unestablished.
			st := n.status()
			if refused := st.Counters.ConnectionsRefused - refused0; refused != v.refused*storm {
				t.Errorf("%d connections refused, want %d; the last: %+v", refused, v.refused*storm, st.Refusals[max(0, len(st.Refusals)-3):])
			}
			if s, body := n.get("/healthz"); s != http.StatusOK {
				t.Errorf("/healthz after the storm: %d %s", s, body)
			}
			n.stop()
			n.check()
		})
	}
}

// The bounds of TestTLSReconnectStorm.
const (
	// stormRSSBound bounds the growth of RSS over the storm, once settled. Measured on a
	// baseline of about 40 MiB: -0.1 to +2.0 MiB in 14 runs of each variant; 32 KiB kept
	// per connection made it +45 MiB. 16 MiB is 16 KiB a connection: a goroutine's
	// smallest stack is 8 KiB, and a session with its buffers is far more.
	stormRSSBound = 16 << 20
	// stormAllocBound bounds the bytes a TLS handshake allocates on the node; the
	// WebSocket variant adds stormUpgradeAlloc for its request, upgrade and session.
	stormAllocBound   = 80 << 10
	stormUpgradeAlloc = 24 << 10
)

func mibs(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
