package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"plait/internal/certs"
	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/shells/native/node"
	"plait/shells/native/tlsfiles"
)

// The TLS measures (--tls): the same replication and the same raw WebSocket over wss://
// with mutual TLS 1.3, on throwaway certificates made in the run's directory, each beside
// its ws:// measure of the same run.

// tlsNames are the nodes that get certificates: the replication pair, whose certificates
// the raw measure's two ends use too.
var tlsNames = []string{"A", "B"}

// makeCerts writes a CA and a certificate for each of tlsNames (host 127.0.0.1) to
// c.dir/certs, once a run.
func (c *run) makeCerts() error {
	if c.certs != "" {
		return nil
	}
	dir := filepath.Join(c.dir, "certs")
	o := certs.Options{Dir: dir}
	if err := certs.NewCA(o); err != nil {
		return err
	}
	for _, n := range tlsNames {
		if err := certs.NewNode(o, n, []string{"127.0.0.1"}); err != nil {
			return err
		}
	}
	c.certs = dir
	return nil
}

// peerTLS loads the certificate set of name, as plait serve's --tls-cert, --tls-key and
// --tls-ca do.
func (c *run) peerTLS(name string) (*tlsfiles.Source, error) {
	if err := c.makeCerts(); err != nil {
		return nil, err
	}
	return tlsfiles.LoadPeer(tlsfiles.Files{Cert: filepath.Join(c.certs, name+".crt"), Key: filepath.Join(c.certs, name+".key"),
		CA: filepath.Join(c.certs, "ca.crt")}, name)
}

// startTLSNode is startNode over TLS: the node serves wss:// only and dials peers at
// their wss:// URLs, with the cluster secret as startNode's (so both handshakes are
// the same but for TLS). Its URL is its wss:// one.
func (c *run) startTLSNode(dir, name string, serveHTTP bool, peers ...*cluster.Node) (*cluster.Node, error) {
	src, err := c.peerTLS(name)
	if err != nil {
		return nil, err
	}
	var dial []node.Peer
	for _, p := range peers {
		dial = append(dial, p.Peer())
	}
	n, err := cluster.StartLocal(node.Config{Name: name, DataDir: filepath.Join(dir, name), Peers: dial, Sync: c.Sync, TLS: src, Config: replica.Config{Secret: []byte(benchSecret)}}, serveHTTP)
	if err != nil {
		return nil, err
	}
	n.URL = "wss://" + strings.TrimPrefix(n.URL, "ws://")
	return n, nil
}

// rawWebSocketTLS is rawWebSocket over wss://: B's certificate set serves, A's dials,
// with the configurations a node's listener and dialers use.
func (c *run) rawWebSocketTLS(n, size int) (float64, error) {
	srv, err := c.peerTLS("B")
	if err != nil {
		return 0, err
	}
	cli, err := c.peerTLS("A")
	if err != nil {
		return 0, err
	}
	return rawWebSocketOver(n, size, srv.ListenerConfig(), cli.DialerConfig())
}

// pairs are the results of alternated ws:// and wss:// measures, one pair a round.
type pairs struct{ ws, wss []float64 }

// alternate runs ws then wss, rounds times: on a shared machine the load drifts, and a
// round's two measures, taken one after the other, see about the same.
func alternate(rounds int, ws, wss func() (float64, error)) (pairs, error) {
	var p pairs
	for range rounds {
		a, err := ws()
		if err != nil {
			return p, err
		}
		b, err := wss()
		if err != nil {
			return p, err
		}
		p.ws, p.wss = append(p.ws, a), append(p.wss, b)
	}
	return p, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rates is the two medians, ws:// then wss://.
func (p pairs) rates(unit string) string {
	return fmt.Sprintf("%.0f / %.0f %s/s", median(p.ws), median(p.wss), unit)
}

// ratio is the median of the rounds' wss:// / ws:// ratios and their range.
func (p pairs) ratio() string {
	r := make([]float64, len(p.ws))
	for i := range r {
		r[i] = p.wss[i] / p.ws[i]
	}
	return fmt.Sprintf("wss:// %.2f of ws:// (rounds %.2f – %.2f)", median(r), slices.Min(r), slices.Max(r))
}
