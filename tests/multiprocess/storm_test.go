//go:build multiprocess || scale

package multiprocess

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/protocol/replica"
	"plait/shells/native/httpapi"
)

// The dialer's backoff (shells/native/node, dialLoop): the wait after a failed dial is
// uniform in [backoff/2, backoff]; backoff starts at RedialMin and doubles up to RedialMax.
const (
	redialMin = 100 * time.Millisecond
	redialMax = 5 * time.Second
)

// maxReconnects is the most dials after the first that can have started within elapsed
// of the first dial: dial k starts no earlier than the sum of the shortest possible first
// k waits (dials take no time at best).
func maxReconnects(elapsed time.Duration) uint64 {
	var n uint64
	at, backoff := time.Duration(0), redialMin
	for {
		at += backoff / 2
		if at > elapsed {
			return n
		}
		n++
		backoff = min(2*backoff, redialMax)
	}
}

// dialers are p's peers[] entries by name; a name must show once (a bad peer never
// connects, so it has no second entry of its own connection).
func (p *proc) dialers() map[string]httpapi.PeerDoc {
	p.t.Helper()
	m := map[string]httpapi.PeerDoc{}
	for _, d := range p.status().Peers {
		if _, dup := m[d.Name]; dup {
			p.t.Errorf("%s: two peers[] entries named %s", p.Name, d.Name)
		}
		m[d.Name] = d
	}
	return m
}

// badPeer is a listener on 127.0.0.1 that ends every connection at once; hits counts
// the connections (or upgrade requests) it ended.
type badPeer struct {
	name string
	addr string
	hits atomic.Uint64
}

// upgradeAndClose accepts the WebSocket upgrade at GET /v1/replicate and closes the
// connection at once, without a byte of the protocol.
func upgradeAndClose(t *testing.T) *badPeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &badPeer{name: "BADWS", addr: l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/replicate", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("bad peer: upgrade: %v", err)
			return
		}
		b.hits.Add(1)
		_ = ws.CloseNow()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("bad peer: unexpected %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("bad peer: serve: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

// acceptAndClose accepts TCP connections and closes each at once, with no HTTP answer.
func acceptAndClose(t *testing.T) *badPeer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &badPeer{name: "BADTCP", addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed by cleanup
			}
			b.hits.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return b
}

// TestRedialStorm: a node dials two bad peers for 30 s, one that accepts the WebSocket
// upgrade and closes at once, one that accepts TCP and closes without an HTTP answer. At
// every status sample the reconnects counter stays within what the backoff schedule
// (100 ms doubling to 5 s, waits in [backoff/2, backoff]) allows since the process
// started; it still grows past a floor, so the node keeps redialing; the bad peers saw
// exactly the dials the node counts; and the node serves and its data passes plait check.
func TestRedialStorm(t *testing.T) {
	const window = 30 * time.Second
	bad := []*badPeer{upgradeAndClose(t), acceptAndClose(t)}
	start := time.Now() // before the process exists: no dial can be earlier
	n := serve(t, "N", "--peer", bad[0].name+"=ws://"+bad[0].addr, "--peer", bad[1].name+"=ws://"+bad[1].addr)

	states := map[string]map[replica.PeerState]int{}
	last := map[string]uint64{}
	waitFor(t, "the 30 s window", window+10*time.Second, func() bool {
		ds := n.dialers()
		elapsed := time.Since(start) // the status answer describes a moment before this
		bound := maxReconnects(elapsed)
		for _, b := range bad {
			d, ok := ds[b.name]
			if !ok {
				t.Fatalf("no peers[] entry for %s in %v", b.name, ds)
			}
			if states[b.name] == nil {
				states[b.name] = map[replica.PeerState]int{}
			}
			states[b.name][d.State]++
			if d.Connected || d.State == replica.PeerStreaming {
				t.Errorf("%s: %+v, but it never completes a handshake", b.name, d)
			}
			if d.Reconnects < last[b.name] {
				t.Errorf("%s: reconnects went from %d down to %d", b.name, last[b.name], d.Reconnects)
			}
			last[b.name] = d.Reconnects
			if d.Reconnects > bound {
				t.Fatalf("%s: %d reconnects %v after start; the backoff allows at most %d", b.name, d.Reconnects, elapsed.Round(time.Millisecond), bound)
			}
		}
		return elapsed >= window
	})

	// With the longest waits, 10 redials fit in 26.3 s after the first dial; 6 leaves
	// more than 10 s for the process start and the dials themselves. A node that stopped
	// redialing (or never started) fails here.
	const floor = 6
	for _, b := range bad {
		t.Logf("%s: %d reconnects in %v, at most %d allowed; states sampled %v", b.name, last[b.name], window, maxReconnects(window), states[b.name])
		if last[b.name] < floor {
			t.Errorf("%s: %d reconnects in %v, want at least %d", b.name, last[b.name], window, floor)
		}
		// The bad peer ended one connection per dial; reconnects counts the dials after
		// the first. A dial may be between the counter and the bad peer, so wait for a
		// quiet moment (between dials the node waits at least 2.5 s by now).
		var hits, reconnects uint64
		waitFor(t, b.name+" seeing every dial the node counts", 15*time.Second, func() bool {
			before := b.hits.Load()
			reconnects = n.dialers()[b.name].Reconnects
			hits = b.hits.Load()
			return before == hits && hits == reconnects+1
		})
		t.Logf("%s: the bad peer ended %d connections; the node counts %d reconnects", b.name, hits, reconnects)
	}

	// The node still serves.
	if s, body := n.get("/healthz"); s != 200 {
		t.Errorf("/healthz: %d %s", s, body)
	}
	n.put("t", "k", "still serving")
	if s, body := n.get("/v1/tables/t/records/k"); s != 200 || body != "still serving" {
		t.Errorf("GET after the storm: %d %q", s, body)
	}
	n.stop()
	n.check()
}
