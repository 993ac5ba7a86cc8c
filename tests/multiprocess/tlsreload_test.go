//go:build multiprocess || scale

package multiprocess

import (
	"path/filepath"
	"testing"
	"time"
)

// TestCertificateReloadUnderLoad: B dials A over wss:// (no secret) while both write. A's
// certificate files are replaced by plait cert node --overwrite (a new key and serial,
// written by rename): A's poll takes them up, node.tls.reloads goes to 1 (and
// plait_tls_reloads_total{result="ok"} with it), node.tls.expiry becomes the new
// certificate's, and a new TLS connection to A is presented the new serial. The open
// link is not dropped: B's reconnects stay 0, neither node counts a connection error, and
// both origins keep flowing over it after the reload. Then B restarts and its new
// connection, verified against A's new certificate, streams again. At the end the digests
// are equal and every acknowledged write reads back on both nodes.
func TestCertificateReloadUnderLoad(t *testing.T) {
	dir := newCerts(t, "A", "B")
	a := serveTLS(t, dir, "A", nil)
	b := serveTLS(t, dir, "B", []*proc{a})
	waitFor(t, "B streaming to A over TLS", 30*time.Second, func() bool { return streamingTLS(b, "A") })
	writers, stopWriters := startCopyWriters(t, 1_000_000, a, b)
	defer stopWriters()
	flowing := func(what string) {
		t.Helper()
		ab, ba := b.origin("A").AppliedSeq, a.origin("B").AppliedSeq
		waitFor(t, what, 30*time.Second, func() bool { return b.origin("A").AppliedSeq >= ab+20 && a.origin("B").AppliedSeq >= ba+20 })
	}
	flowing("both origins flowing before the reload")

	client := clientTLS(t, dir, "B")
	old := presented(t, a, client)
	if ts := a.status().Node.TLS; ts == nil || ts.Reloads != 0 {
		t.Fatalf("A's node.tls before the reload: %+v", ts)
	}
	plaitCert(t, "node", "--dir", dir, "--name", "A", "--host", "127.0.0.1", "--overwrite")
	fresh := leaf(t, filepath.Join(dir, "A.crt"))
	if fresh.SerialNumber.String() == old {
		t.Fatal("plait cert node --overwrite kept the serial")
	}
	rotated := time.Now()
	waitFor(t, "A reloading its certificate", 10*time.Second, func() bool { return a.status().Node.TLS.Reloads >= 1 })
	took := time.Since(rotated)
	ts := a.status().Node.TLS
	if ts.Reloads != 1 || ts.LastReloadError != "" || ts.Expiry != fresh.NotAfter.UTC().Format(time.RFC3339) {
		t.Errorf("A's node.tls after the reload: %+v; want 1 reload, no error, expiry %s", ts, fresh.NotAfter.UTC().Format(time.RFC3339))
	}
	if ts.ReloadFailures != 0 {
		// plait cert writes the key, then the certificate: a poll between the two sees a
		// pair that does not match and refuses it, and the next one loads the pair.
		t.Logf("A refused %d reloads on the way (%s)", ts.ReloadFailures, ts.LastReloadError)
	}
	m := a.metrics()
	if got := m[`plait_tls_reloads_total{result="ok"}`]; got != 1 {
		t.Errorf(`A: plait_tls_reloads_total{result="ok"} %v, want 1`, got)
	}
	if got := m["plait_tls_cert_expiry_timestamp_seconds"]; int64(got) != fresh.NotAfter.Unix() {
		t.Errorf("A: plait_tls_cert_expiry_timestamp_seconds %v, want the new certificate's %d", got, fresh.NotAfter.Unix())
	}
	if got := presented(t, a, client); got != fresh.SerialNumber.String() {
		t.Errorf("a new connection to A is presented serial %s; the new certificate's is %s (the old %s)", got, fresh.SerialNumber, old)
	}
	t.Logf("A reloaded %v after the files were replaced (it polls every second)", took.Round(time.Millisecond))

	flowing("both origins flowing over the open link after the reload")
	if d := b.dialers()["A"]; d.Reconnects != 0 || !d.Connected || !streamingTLS(b, "A") {
		t.Errorf("B's link to A after the reload: %+v; want the first connection, still up over TLS", d)
	}
	for _, p := range []*proc{a, b} {
		if n := p.status().Counters.ConnectionErrors; n != 0 {
			t.Errorf("%s: %d connection errors; the open link must not have broken", p.Name, n)
		}
	}

	// A new connection from B: B verifies A's new certificate.
	b.stop()
	b.start()
	waitFor(t, "B streaming to A again over TLS", 30*time.Second, func() bool { return streamingTLS(b, "A") })
	if r := b.status().Refusals; len(r) != 0 {
		t.Errorf("B refused connections after its restart: %+v", r)
	}
	flowing("both origins flowing over B's new connection")

	stopWriters()
	waitFor(t, "A and B converged", 30*time.Second, func() bool { return converged(a, b) })
	everyWriteEverywhere(t, writers, a, b)
	for _, w := range writers {
		t.Logf("%s: %d batches acknowledged (the slowest in %v), %d unanswered", w.p.Name, w.batches.Load(),
			w.slowest.Round(time.Millisecond), w.failed.Load())
		if w.p == a && w.failed.Load() > 0 {
			t.Errorf("A: %d batches unanswered (the first: %s); A was never restarted", w.failed.Load(), w.firstErr)
		}
	}
	for _, p := range []*proc{a, b} {
		p.stop()
		p.check()
	}
}
