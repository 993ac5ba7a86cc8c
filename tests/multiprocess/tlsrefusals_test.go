//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/internal/certs"
	"plait/shells/native/node"
	"plait/shells/native/tlsfiles"
)

// TestTLSRefusalsOnTheBinary: B runs on TLS alone and A, its good peer, dials it over
// wss:// and writes throughout. Then B is presented a certificate of another CA, an expired
// one of its own CA, none, a plaintext ws:// upgrade, and a node (D, in this process) that
// presents C's certificate but says it is D in its HELLO; and A is told to dial B's
// address as a peer C. Each is refused with its code on the node that refused it: B's
// refusals[] and plait_connections_refused_total{code} show tls-unknown-ca, tls-expired,
// tls-no-cert and tls-required once each and peer-name-mismatch, A's show tls-bad-name for
// C as a dial; connections_refused counts them. A's link to B never drops (its reconnects
// stay 0, no connection error on B) and B keeps applying A's writes meanwhile; the two
// end with equal digests.
func TestTLSRefusalsOnTheBinary(t *testing.T) {
	dir := newCerts(t, "A", "B", "C")
	b := serveTLS(t, dir, "B", nil)
	a := serveTLS(t, dir, "A", []*proc{b})
	wa := startWriters(t, a)
	waitFor(t, "A streaming to B over TLS", 30*time.Second, func() bool { return streamingTLS(a, "B") })
	waitFor(t, "B applying A's writes", 30*time.Second, func() bool { return b.origin("A").AppliedSeq > 5 })

	// B's own refusals, each awaited before the next so that each is counted once.
	other := newCerts(t, "A") // another CA's certificate of the same name
	expired := filepath.Join(t.TempDir(), "expired")
	if err := os.MkdirAll(expired, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(expired, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Valid for an hour, two days ago: plait cert has no --now, its package has.
	if err := certs.NewNode(certs.Options{Dir: expired, Now: time.Now().Add(-48 * time.Hour), Lifetime: time.Hour}, "A",
		[]string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code  string
		hello func()
	}{
		{"tls-unknown-ca", func() { tlsHello(b, clientTLS(t, other, "A")) }},
		{"tls-expired", func() { tlsHello(b, clientTLS(t, expired, "A")) }},
		{"tls-no-cert", func() { tlsHello(b, clientTLS(t, dir, "")) }},
		{"tls-required", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ws, resp, err := websocket.Dial(ctx, wsURL(b), nil)
			if err == nil {
				_ = ws.CloseNow()
				t.Fatal("a plaintext ws:// client was upgraded on B, which runs on TLS alone")
			}
			if resp == nil || resp.StatusCode != http.StatusBadRequest {
				t.Errorf("a plaintext upgrade on B: %v, %+v; want 400", err, resp)
			}
		}},
	} {
		c.hello()
		waitFor(t, c.code+" counted on B", 10*time.Second, func() bool { return b.refused(c.code) >= 1 })
	}

	// D presents C's certificate and names itself D: B expects the node its certificate
	// names. plait serve refuses a certificate naming another node, so D runs here.
	src, err := tlsfiles.LoadPeer(tlsfiles.Files{Cert: filepath.Join(dir, "C.crt"), Key: filepath.Join(dir, "C.key"),
		CA: filepath.Join(dir, "ca.crt")}, "")
	if err != nil {
		t.Fatal(err)
	}
	dn, err := node.Start(node.Config{Name: "D", DataDir: t.TempDir(), TLS: src, Peers: []node.Peer{{Name: "B", URL: wssURL(b)}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "peer-name-mismatch counted on B", 10*time.Second, func() bool { return b.refused("peer-name-mismatch") >= 1 })
	if err := dn.Stop(); err != nil {
		t.Error(err)
	}

	// A dials B's address as peer C: B's certificate names B.
	req, _ := http.NewRequest("POST", "http://"+a.HTTP+"/v1/peers", strings.NewReader(`{"name":"C","url":"`+wssURL(b)+`"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("adding C to A: %s", resp.Status)
	}
	waitFor(t, "tls-bad-name counted on A", 10*time.Second, func() bool { return a.refused("tls-bad-name") >= 1 })
	req, _ = http.NewRequest("DELETE", "http://"+a.HTTP+"/v1/peers/C", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("removing C from A: %s", resp.Status)
	}

	st := b.status()
	for _, code := range []string{"tls-unknown-ca", "tls-expired", "tls-no-cert", "tls-required"} {
		if n := b.refused(code); n != 1 {
			t.Errorf("B: plait_connections_refused_total{code=%q} %v, want 1", code, n)
		}
	}
	for _, code := range []string{"tls-unknown-ca", "tls-expired", "tls-no-cert", "tls-required", "peer-name-mismatch"} {
		r, ok := hasRefusal(st, code, false)
		if !ok {
			t.Errorf("B: no accepted refusal %s in refusals[] %+v", code, st.Refusals)
			continue
		}
		if r.Remote == "" || r.At == "" || r.Class != "refused" {
			t.Errorf("B: refusal %+v: want a remote, a time and class refused", r)
		}
		t.Logf("B refused: %+v", r)
	}
	if st.Counters.ConnectionsRefused < 5 {
		t.Errorf("B: connections_refused %d, want at least 5", st.Counters.ConnectionsRefused)
	}
	if r, ok := hasRefusal(a.status(), "tls-bad-name", true); !ok || r.Peer != "C" {
		t.Errorf("A: refusals[] %+v; want tls-bad-name dialing C", a.status().Refusals)
	} else {
		t.Logf("A refused: %+v", r)
	}

	// The good link went on throughout, and goes on.
	progress := b.origin("A").AppliedSeq
	if d := a.dialers()["B"]; d.Reconnects != 0 || !d.Connected {
		t.Errorf("A's link to B: %+v; want connected and never redialed", d)
	}
	if n := st.Counters.ConnectionErrors; n != 0 {
		t.Errorf("B: %d connection errors; A's link must not have broken", n)
	}
	waitFor(t, "B applying more of A's writes", 30*time.Second, func() bool { return b.origin("A").AppliedSeq > progress+20 })
	wa.halt()
	waitFor(t, "B converging on A", 30*time.Second, func() bool { return b.origin("A").AppliedSeq == a.origin("A").AppliedSeq })
	if da, db := a.digest("t"), b.digest("t"); da != db {
		t.Errorf("digests differ: A %s, B %s", da, db)
	}
	for _, p := range []*proc{a, b} {
		p.stop()
		p.check()
	}
}
