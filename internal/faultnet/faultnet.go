package faultnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Direction is the way bytes go over a link: Up from its dialer to its listener, Down from
// the listener back (toxiproxy's "upstream" and "downstream").
type Direction string

const (
	Up   Direction = "upstream"
	Down Direction = "downstream"
)

// Both is every direction of a link, the default of every toxic.
var Both = []Direction{Up, Down}

// Toxic is one toxiproxy toxic: its type and attributes, as toxiproxy's API names them.
type Toxic struct {
	Type       string
	Attributes map[string]int64
}

// Latency delays every chunk by ms ± jitter milliseconds (in each direction it is set on,
// so both directions make a round trip of 2·ms).
func Latency(ms, jitter int64) Toxic {
	return Toxic{Type: "latency", Attributes: map[string]int64{"latency": ms, "jitter": jitter}}
}

// Bandwidth limits the link to kbPerSecond kilobytes (1024 bytes) a second.
func Bandwidth(kbPerSecond int64) Toxic {
	return Toxic{Type: "bandwidth", Attributes: map[string]int64{"rate": kbPerSecond}}
}

// Timeout drops every byte and closes the connection after ms milliseconds; with 0 it never
// closes it: a black hole, the partition of a WAN (no reset, no FIN, nothing arrives).
func Timeout(ms int64) Toxic {
	return Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": ms}}
}

// Reset resets (TCP RST) every connection ms milliseconds after its first byte.
func Reset(ms int64) Toxic {
	return Toxic{Type: "reset_peer", Attributes: map[string]int64{"timeout": ms}}
}

// SlowClose holds a connection's close back for ms milliseconds.
func SlowClose(ms int64) Toxic {
	return Toxic{Type: "slow_close", Attributes: map[string]int64{"delay": ms}}
}

// Net is the proxies of one test cluster. Its methods may be used from any goroutine.
type Net struct {
	srv *toxiproxy.ApiServer

	mu    sync.Mutex
	links map[string]*Link
}

// New is a network with no link yet.
func New() *Net {
	// toxiproxy's metrics go to a registry of their own, never read: the node's metrics
	// are what the tests read.
	return &Net{srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		links: map[string]*Link{}}
}

// Link is one proxied link: its dialing side dials Addr, and the proxy connects each such
// connection to the listener's address it was made with.
type Link struct {
	Name string
	Addr string // the proxy's HOST:PORT, the address the dialing side dials

	proxy *toxiproxy.Proxy
}

// Link starts a proxy named name on a free port of listenHost (127.0.0.1, or a namespace's
// address) to the listener at upstream (HOST:PORT).
func (n *Net) Link(name, listenHost, upstream string) (*Link, error) {
	p := toxiproxy.NewProxy(n.srv, name, listenHost+":0", upstream)
	if err := n.srv.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("faultnet: link %s to %s: %w", name, upstream, err)
	}
	l := &Link{Name: name, Addr: p.Listen, proxy: p}
	n.mu.Lock()
	n.links[name] = l
	n.mu.Unlock()
	return l, nil
}

// Links is every link made so far, by name.
func (n *Net) Links() map[string]*Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]*Link, len(n.links))
	for k, v := range n.links {
		out[k] = v
	}
	return out
}

// Close stops every proxy and closes every connection through one.
func (n *Net) Close() error {
	return n.srv.Collection.Clear()
}

// Add sets toxic t, named name, on the link in the directions given (both when none is).
// Its name, with the direction appended, is what Remove takes.
func (l *Link) Add(name string, t Toxic, dirs ...Direction) error {
	if len(dirs) == 0 {
		dirs = Both
	}
	for _, d := range dirs {
		body, err := json.Marshal(map[string]any{"name": name + "-" + string(d), "type": t.Type,
			"stream": string(d), "toxicity": 1.0, "attributes": t.Attributes})
		if err != nil {
			return err
		}
		if _, err := l.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			return fmt.Errorf("faultnet: %s: toxic %s %s: %w", l.Name, name, d, err)
		}
	}
	return nil
}

// Remove takes the toxic named name off the link, in the directions given (both when none
// is); a direction it was not set on is skipped.
func (l *Link) Remove(name string, dirs ...Direction) error {
	if len(dirs) == 0 {
		dirs = Both
	}
	for _, d := range dirs {
		full := name + "-" + string(d)
		if l.proxy.Toxics.GetToxic(full) == nil {
			continue
		}
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), full); err != nil {
			return fmt.Errorf("faultnet: %s: removing toxic %s: %w", l.Name, full, err)
		}
	}
	return nil
}

// Partition cuts the link in the directions given (both when none is): every byte is
// dropped, and no connection is closed, as a WAN partition does.
func (l *Link) Partition(dirs ...Direction) error {
	return l.Add("partition", Timeout(0), dirs...)
}

// Heal ends a Partition in every direction.
func (l *Link) Heal() error {
	return l.Remove("partition")
}
