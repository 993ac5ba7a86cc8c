package tlsfiles_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"plait/internal/certs"
	"plait/protocol/wire"
	"plait/shells/native/tlsfiles"
)

func authority(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := certs.NewCA(certs.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func files(dir, name string) tlsfiles.Files {
	return tlsfiles.Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, "ca.crt")}
}

// odd writes DIR/NAME.crt and .key signed by DIR's CA from a template changed by mod: the
// certificates plait cert never makes.
func odd(t *testing.T, dir, name string, mod func(*x509.Certificate)) {
	t.Helper()
	ca, caKey, err := certs.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{certs.NodeURI(name)}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	mod(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLoadPeerRefuses: a peer set loads only as a node certificate of its bundle, naming
// the node given; every other set is refused with a message that says what is wrong.
func TestLoadPeerRefuses(t *testing.T) {
	dir := authority(t)
	must(t, certs.NewNode(certs.Options{Dir: dir}, "A", nil))
	if src, err := tlsfiles.LoadPeer(files(dir, "A"), "A"); err != nil || src.Current().NodeName != "A" {
		t.Fatalf("a good set: %v", err)
	}
	odd(t, dir, "nouri", func(c *x509.Certificate) { c.URIs = nil })
	odd(t, dir, "server", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} })
	other := authority(t)
	must(t, certs.NewNode(certs.Options{Dir: other}, "B", nil))
	for _, c := range []struct {
		name string
		f    tlsfiles.Files
		as   string
		says string
	}{
		{"another node's", files(dir, "A"), "B", `names node "A", not "B"`},
		{"no node name", files(dir, "nouri"), "", "names no node"},
		{"not a client", files(dir, "server"), "", "lacks serverAuth or clientAuth"},
		{"another CA", tlsfiles.Files{Cert: filepath.Join(other, "B.crt"), Key: filepath.Join(other, "B.key"), CA: filepath.Join(dir, "ca.crt")}, "", "does not verify"},
		{"a key of another", tlsfiles.Files{Cert: filepath.Join(dir, "A.crt"), Key: filepath.Join(dir, "server.key"), CA: filepath.Join(dir, "ca.crt")}, "", "private key does not match"},
		{"no bundle", tlsfiles.Files{Cert: filepath.Join(dir, "A.crt"), Key: filepath.Join(dir, "A.key"), CA: filepath.Join(dir, "A.key")}, "", "holds no PEM certificate"},
		{"a file missing", tlsfiles.Files{Cert: filepath.Join(dir, "A.crt"), Key: filepath.Join(dir, "A.key")}, "", "needs a certificate, a key and a CA bundle"},
	} {
		if _, err := tlsfiles.LoadPeer(c.f, c.as); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.says)
		}
	}
}

// TestReloadIfChanged: a change on disk is seen and loaded; a file replaced by one that
// does not load is refused once (the loaded generation kept) and not tried again until the
// files change once more.
func TestReloadIfChanged(t *testing.T) {
	dir := authority(t)
	o := certs.Options{Dir: dir, Overwrite: true}
	must(t, certs.NewNode(o, "A", nil))
	src, err := tlsfiles.LoadPeer(files(dir, "A"), "A")
	must(t, err)
	if tried, _ := src.ReloadIfChanged(); tried {
		t.Fatal("reloaded unchanged files")
	}
	first := src.Current().Leaf.SerialNumber
	must(t, certs.NewNode(o, "A", nil))
	if tried, err := src.ReloadIfChanged(); !tried || err != nil || src.Current().Leaf.SerialNumber.Cmp(first) == 0 {
		t.Fatalf("after new files: tried %v, %v", tried, err)
	}
	second := src.Current().Leaf.SerialNumber
	must(t, os.WriteFile(filepath.Join(dir, "A.crt"), []byte("half a file"), 0o644))
	if tried, err := src.ReloadIfChanged(); !tried || err == nil {
		t.Fatalf("a broken file: tried %v, %v", tried, err)
	}
	if tried, _ := src.ReloadIfChanged(); tried {
		t.Fatal("a refused file was tried again before it changed")
	}
	if ok, failed := src.Reloads(); ok != 1 || failed != 1 || src.LastError() == nil || src.Current().Leaf.SerialNumber.Cmp(second) != 0 {
		t.Fatalf("reloads %d ok, %d failed; last error %v", ok, failed, src.LastError())
	}
	must(t, certs.NewNode(o, "A", nil))
	if tried, err := src.ReloadIfChanged(); !tried || err != nil || src.LastError() != nil {
		t.Fatalf("fixed files: tried %v, %v", tried, err)
	}
	// A reload that would rename the node is refused.
	must(t, os.Rename(filepath.Join(dir, "A.crt"), filepath.Join(dir, "A.bak")))
	must(t, certs.NewNode(certs.Options{Dir: dir}, "B", nil))
	must(t, os.Rename(filepath.Join(dir, "B.crt"), filepath.Join(dir, "A.crt")))
	must(t, os.Rename(filepath.Join(dir, "B.key"), filepath.Join(dir, "A.key")))
	if err := src.Reload(); err == nil || !strings.Contains(err.Error(), `now names node "B"`) || src.Current().NodeName != "A" {
		t.Fatalf("a reload to another node's files: %v", err)
	}
}

// TestRefusalCode: a handshake refused by the peer verification carries its code; a
// plaintext client's bytes are tls-required; the rest is tls-handshake.
func TestRefusalCode(t *testing.T) {
	dir := authority(t)
	must(t, certs.NewNode(certs.Options{Dir: dir}, "A", []string{"127.0.0.1"}))
	src, err := tlsfiles.LoadPeer(files(dir, "A"), "A")
	must(t, err)
	other := authority(t)
	must(t, certs.NewNode(certs.Options{Dir: other}, "B", nil))
	stranger, err := tlsfiles.LoadPeer(files(other, "B"), "B")
	must(t, err)
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{stranger.Current().Leaf}}
	if code := tlsfiles.RefusalCode(src.VerifyPeer(cs, x509.ExtKeyUsageClientAuth)); code != wire.CodeTLSUnknownCA {
		t.Errorf("another CA's certificate: %s", code)
	}
	if code := tlsfiles.RefusalCode(src.VerifyPeer(tls.ConnectionState{}, x509.ExtKeyUsageClientAuth)); code != wire.CodeTLSNoCert {
		t.Errorf("no certificate: %s", code)
	}
	own := tls.ConnectionState{PeerCertificates: []*x509.Certificate{src.Current().Leaf}, ServerName: "10.9.9.9"}
	if code := tlsfiles.RefusalCode(src.VerifyPeer(own, x509.ExtKeyUsageServerAuth)); code != wire.CodeTLSBadName {
		t.Errorf("a host the certificate lacks: %s", code)
	}
	own.ServerName = "127.0.0.1"
	if err := src.VerifyPeer(own, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("the host it has: %v", err)
	}
	if code := tlsfiles.RefusalCode(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}); code != wire.CodeTLSRequired {
		t.Errorf("a plaintext client: %s", code)
	}
	if code := tlsfiles.RefusalCode(errors.New("EOF")); code != wire.CodeTLSHandshake {
		t.Errorf("anything else: %s", code)
	}
	// A dialer tells a handshake that failed from a connection that could not be made.
	for _, err := range []error{src.VerifyPeer(tls.ConnectionState{}, x509.ExtKeyUsageClientAuth), tls.AlertError(42),
		tls.RecordHeaderError{Msg: "x"}} {
		if !tlsfiles.IsHandshakeFailure(fmt.Errorf("dial: %w", err)) {
			t.Errorf("%v is not a handshake failure", err)
		}
	}
	if tlsfiles.IsHandshakeFailure(errors.New("connection refused")) {
		t.Error("a refused TCP connection is a handshake failure")
	}
}

// handshake runs one TLS handshake of a client presenting cert against the listener
// configuration lc over a pipe, and returns the listener's error.
func handshake(t *testing.T, lc *tls.Config, cert tls.Certificate) error {
	t.Helper()
	sc, cc := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := tls.Client(cc, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
		if c.Handshake() == nil {
			_, _ = c.Read(make([]byte, 1)) // the listener's alert, or its close
		}
		_ = cc.Close()
	}()
	s := tls.Server(sc, lc)
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	err := s.Handshake()
	_ = sc.Close()
	<-done
	return err
}

// TestNodeNameIsExactlyTheURI: a certificate names a node only by one URI SAN that is
// exactly plait://node/NAME (docs/contract.md §18.2). Every other form, signed by the
// cluster's own CA and otherwise a good node certificate, names no node: it does not load
// as this node's set, a listener refuses it as a client and a dialer as a listener
// (tls-bad-name, or a failed handshake for a URI that does not parse), and PeerName reads
// no name from it. A check that ignored the URI's host would take plait://ANYTHING/NAME
// for node NAME.
func TestNodeNameIsExactlyTheURI(t *testing.T) {
	dir := authority(t)
	must(t, certs.NewNode(certs.Options{Dir: dir}, "L", []string{"127.0.0.1"}))
	src, err := tlsfiles.LoadPeer(files(dir, "L"), "L")
	must(t, err)
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return u
	}
	uris := func(ss ...string) func(*x509.Certificate) {
		return func(c *x509.Certificate) {
			c.URIs = nil
			for _, s := range ss {
				c.URIs = append(c.URIs, uri(s))
			}
		}
	}
	cases := []struct {
		name string
		mod  func(*x509.Certificate)
	}{
		{"another host", uris("plait://evil/A")},
		{"the name as the host", uris("plait://A/A")},
		{"a host of which node is a part", uris("plait://node.evil/A")},
		{"the host in capitals", uris("plait://NODE/A")},
		{"a port", uris("plait://node:7400/A")},
		{"user info", uris("plait://x@node/A")},
		{"no host", uris("plait:///A")},
		{"opaque", func(c *x509.Certificate) { c.URIs = []*url.URL{{Scheme: "plait", Opaque: "node/A"}} }},
		{"another scheme", uris("https://node/A")},
		{"a path of two segments", uris("plait://node/A/B")},
		{"a trailing slash", uris("plait://node/A/")},
		{"an empty first segment", uris("plait://node//A")},
		{"no name", uris("plait://node/")},
		{"no path", uris("plait://node")},
		{"a name breaking the name rule", uris("plait://node/A%20B")},
		{"a name too long", uris("plait://node/" + strings.Repeat("a", wire.MaxNameLen+1))},
		{"a percent-encoded name", uris("plait://node/%41")},
		{"a query", uris("plait://node/A?x=1")},
		{"an empty query", uris("plait://node/A?")},
		{"a fragment", uris("plait://node/A#x")},
		{"the scheme in capitals", func(c *x509.Certificate) { c.URIs = []*url.URL{{Scheme: "PLAIT", Host: "node", Path: "/A"}} }},
		{"two URIs, the same", uris("plait://node/A", "plait://node/A")},
		{"two URIs, two nodes", uris("plait://node/A", "plait://node/B")},
		{"another URI beside it", uris("plait://node/A", "spiffe://example.org/A")},
		{"another URI before it", uris("spiffe://example.org/A", "plait://node/A")},
		{"DNS names only", func(c *x509.Certificate) { c.URIs, c.DNSNames = nil, []string{"A", "node"} }},
		{"a common name only", uris()},
		{"an email address only", func(c *x509.Certificate) { c.URIs, c.EmailAddresses = nil, []string{"A@node"} }},
		{"a URI that does not parse", func(c *x509.Certificate) { c.URIs = []*url.URL{{Scheme: "plait", Opaque: "//node/A%zz"}} }},
	}
	odd(t, dir, "good", uris("plait://node/A"))
	for i, c := range append([]struct {
		name string
		mod  func(*x509.Certificate)
	}{{"plait://node/A itself", nil}}, cases...) {
		stem := fmt.Sprint("c", i)
		if c.mod == nil {
			stem = "good"
		} else {
			odd(t, dir, stem, func(x *x509.Certificate) { x.Subject.CommonName = "A"; c.mod(x) })
		}
		f := files(dir, stem)
		pair, perr := tls.LoadX509KeyPair(f.Cert, f.Key)
		if c.mod == nil {
			if perr != nil {
				t.Fatal(perr)
			}
			if s, err := tlsfiles.LoadPeer(f, "A"); err != nil || s.Current().NodeName != "A" {
				t.Fatalf("the good certificate does not load as node A: %v", err)
			}
			cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{pair.Leaf}, ServerName: "127.0.0.1"}
			if err := src.VerifyPeer(cs, x509.ExtKeyUsageServerAuth); err != nil || tlsfiles.PeerName(&cs) != "A" {
				t.Fatalf("the good certificate as a listener's: %v, name %q", err, tlsfiles.PeerName(&cs))
			}
			if err := handshake(t, src.ListenerConfig(), pair); err != nil {
				t.Fatalf("the good certificate as a client's: %v", err)
			}
			continue
		}
		if _, err := tlsfiles.LoadPeer(f, ""); err == nil {
			t.Errorf("%s: loads as a node's own set", c.name)
		}
		if perr != nil {
			// Go's x509 refuses the certificate whole: no TLS handshake takes it.
			if err := handshake(t, src.ListenerConfig(), tls.Certificate{Certificate: [][]byte{mustDER(t, f.Cert)}, PrivateKey: mustKey(t, f.Key)}); err == nil {
				t.Errorf("%s: a listener took it as a client's", c.name)
			}
			continue
		}
		cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{pair.Leaf}, ServerName: "127.0.0.1"}
		if name := tlsfiles.PeerName(&cs); name != "" {
			t.Errorf("%s (%v): PeerName reads node %q from it", c.name, pair.Leaf.URIs, name)
		}
		if err := src.VerifyPeer(cs, x509.ExtKeyUsageServerAuth); err == nil || tlsfiles.RefusalCode(err) != wire.CodeTLSBadName {
			t.Errorf("%s (%v): a dialer's verification: %v, want a refusal %s", c.name, pair.Leaf.URIs, err, wire.CodeTLSBadName)
		}
		if err := handshake(t, src.ListenerConfig(), pair); err == nil || tlsfiles.RefusalCode(err) != wire.CodeTLSBadName {
			t.Errorf("%s (%v): a listener's handshake: %v, want a refusal %s", c.name, pair.Leaf.URIs, err, wire.CodeTLSBadName)
		}
	}
}

func mustDER(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	return block.Bytes
}

func mustKey(t *testing.T, path string) any {
	t.Helper()
	k, err := x509.ParsePKCS8PrivateKey(mustDER(t, path))
	must(t, err)
	return k
}
