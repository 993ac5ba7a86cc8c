//go:build multiprocess || scale

package multiprocess

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTLSRelayFailover: the relay failover of TestRelayFailover with every link over
// wss:// and no cluster secret, the certificates made by the binary's plait cert (a CA,
// then one node certificate each with --host 127.0.0.1). C takes A through B while B2
// also carries A, and D through B2; B is killed under writes at A and D; A's channel on C
// moves onto B2, C converges with duplicates_received unchanged, and every node ends with
// A's digest. Throughout, every node reports itself authenticated (by mutual TLS alone),
// each of its streaming links bound to its TLS channel (tls-exporter), node.tls naming it
// with the certificate's NotAfter as expiry both in the status and in
// plait_tls_cert_expiry_timestamp_seconds, and no TLS refusal on record.
func TestTLSRelayFailover(t *testing.T) {
	dir := newCerts(t, "A", "B", "B2", "C", "D")
	a := serveTLS(t, dir, "A", nil)
	b := serveTLS(t, dir, "B", []*proc{a})
	b2 := serveTLS(t, dir, "B2", []*proc{a})
	d := serveTLS(t, dir, "D", []*proc{b2})
	c := serveTLS(t, dir, "C", []*proc{b})
	relayFailover(t, a, b, b2, c, d, func(running ...*proc) {
		waitFor(t, "C streaming over TLS with its peers", 30*time.Second, func() bool {
			if len(running) == 5 {
				return streamingTLS(c, "B", "B2")
			}
			return streamingTLS(c, "B2")
		})
		tlsCluster(t, dir, running...)
	})
}

// tlsCluster checks each node of a cluster without a secret that runs on the
// certificates of dir: authenticated, node.tls naming it with its certificate's expiry
// (the status and the metric), TLS only, every streaming link bound to TLS and at least
// one, every dialed peer a wss:// URL, and no connection refused at TLS.
func tlsCluster(t *testing.T, dir string, nodes ...*proc) {
	t.Helper()
	for _, p := range nodes {
		st := p.status()
		cert := leaf(t, filepath.Join(dir, p.Name+".crt"))
		switch ts := st.Node.TLS; {
		case !st.Node.Authenticated:
			t.Errorf("%s: not authenticated, with mutual TLS and no secret", p.Name)
		case ts == nil:
			t.Errorf("%s: node.tls is null", p.Name)
		case ts.NodeName != p.Name || ts.AcceptPlaintext || ts.Expiry != cert.NotAfter.UTC().Format(time.RFC3339):
			t.Errorf("%s: node.tls %+v; want node %s, no plaintext, expiry %s", p.Name, ts, p.Name, cert.NotAfter.UTC().Format(time.RFC3339))
		}
		if got, ok := p.metrics()["plait_tls_cert_expiry_timestamp_seconds"]; !ok || int64(got) != cert.NotAfter.Unix() {
			t.Errorf("%s: plait_tls_cert_expiry_timestamp_seconds %v (present %v), want %d", p.Name, got, ok, cert.NotAfter.Unix())
		}
		if n := tlsLinks(t, p); n == 0 {
			t.Errorf("%s: no streaming link", p.Name)
		}
		for _, d := range st.Peers {
			if d.URL != "" && !strings.HasPrefix(d.URL, "wss://") {
				t.Errorf("%s: peer %s dialed at %s", p.Name, d.Name, d.URL)
			}
		}
		for _, r := range st.Refusals {
			if strings.HasPrefix(r.Code, "tls-") {
				t.Errorf("%s: a connection refused at TLS: %+v", p.Name, r)
			}
		}
	}
}
