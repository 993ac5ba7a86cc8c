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
