//go:build multiprocess

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
	wa := startWriters(t, a)
	waitFor(t, "C taking A through B", 30*time.Second, func() bool {
		o := c.origin("A")
		return o.SourcePeer == "B" && o.AppliedSeq > 0
	})
	c.addPeer(b2) // POST /v1/peers with B2's wss:// URL
	wd := startWriters(t, d)
	waitFor(t, "C taking D through B2", 30*time.Second, func() bool {
		o := c.origin("D")
		return o.SourcePeer == "B2" && o.AppliedSeq > 0
	})
	if o := c.origin("A"); o.SourcePeer != "B" {
		t.Fatalf("C moved A before the failover: %+v", o)
	}
	waitFor(t, "C streaming over TLS with B and B2", 30*time.Second, func() bool { return streamingTLS(c, "B", "B2") })
	tlsCluster(t, dir, a, b, b2, c, d)
	dups := c.status().Counters.DuplicatesReceived

	b.kill() // kill -9 under writes
	before := c.origin("D").AppliedSeq
	waitFor(t, "D advancing on C during the outage", 30*time.Second, func() bool { return c.origin("D").AppliedSeq > before+10 })
	waitFor(t, "A moving onto B2", 30*time.Second, func() bool { return c.origin("A").SourcePeer == "B2" })
	wa.halt()
	wd.halt()
	waitFor(t, "C converging", 30*time.Second, func() bool {
		return c.origin("A").AppliedSeq == a.origin("A").AppliedSeq && c.origin("D").AppliedSeq == d.origin("D").AppliedSeq
	})
	if o := c.origin("A"); o.SourceChanges != 1 || o.LagSeq != 0 {
		t.Errorf("C's status of A: %+v, want one source change, lag 0", o)
	}
	if o := c.origin("D"); o.SourceChanges != 0 || o.SourcePeer != "B2" {
		t.Errorf("C's status of D: %+v, want B2 and no change", o)
	}
	if got := c.status().Counters.DuplicatesReceived; got != dups {
		t.Errorf("C's duplicates went from %d to %d across the failover", dups, got)
	}
	for _, p := range []*proc{a, b2, c, d} {
		if p.digest("t") != a.digest("t") {
			t.Errorf("%s's digest differs from A's", p.Name)
		}
	}
	tlsCluster(t, dir, a, b2, c, d)
	for _, p := range []*proc{a, b2, c, d} {
		p.stop()
	}
	for _, p := range []*proc{a, b, b2, c, d} {
		p.check()
	}
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
