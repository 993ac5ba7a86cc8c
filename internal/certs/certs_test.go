package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"plait/internal/certs"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s holds no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNodeCertificates: for each algorithm, a CA and two node certificates verify for
// serverAuth and clientAuth against the CA alone, name their node in the one URI SAN, carry
// the hosts given, keep their keys 0600, and complete a mutual TLS 1.3 handshake in which
// each side reads the other's node name.
func TestNodeCertificates(t *testing.T) {
	for _, alg := range []certs.Algorithm{certs.ECDSAP256, certs.Ed25519} {
		t.Run(string(alg), func(t *testing.T) {
			dir := t.TempDir()
			o := certs.Options{Dir: dir, Algorithm: alg}
			if err := certs.NewCA(o); err != nil {
				t.Fatal(err)
			}
			if err := certs.NewNode(o, "A", []string{"127.0.0.1", "a.example", "::1"}); err != nil {
				t.Fatal(err)
			}
			if err := certs.NewNode(o, "B", nil); err != nil {
				t.Fatal(err)
			}
			ca := readCert(t, filepath.Join(dir, "ca.crt"))
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			a := readCert(t, filepath.Join(dir, "A.crt"))
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := a.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("A's certificate for usage %v: %v", usage, err)
				}
			}
			if _, err := a.Verify(x509.VerifyOptions{Roots: pool, DNSName: "a.example"}); err != nil {
				t.Errorf("A's certificate for host a.example: %v", err)
			}
			if _, err := a.Verify(x509.VerifyOptions{Roots: pool, DNSName: "b.example"}); err == nil {
				t.Error("A's certificate verified for a host it does not name")
			}
			if name, ok := certs.NodeName(a); !ok || name != "A" {
				t.Errorf("A's node name %q, %v", name, ok)
			}
			if len(a.IPAddresses) != 2 || len(a.DNSNames) != 1 || a.IsCA || a.NotAfter.After(ca.NotAfter) {
				t.Errorf("A's certificate: IPs %v, DNS %v, CA %v, until %v (CA until %v)", a.IPAddresses, a.DNSNames, a.IsCA, a.NotAfter, ca.NotAfter)
			}
			for _, f := range []string{"ca.key", "A.key", "B.key"} {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
				}
			}
			handshake(t, dir, pool)
		})
	}
}

// handshake runs mutual TLS 1.3 between A (server) and B (client) over a pipe.
func handshake(t *testing.T, dir string, pool *x509.CertPool) {
	t.Helper()
	load := func(name string) tls.Certificate {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	server := tls.Server(sc, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{load("A")},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	client := tls.Client(cc, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{load("B")},
		RootCAs: pool, ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() { done <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server handshake: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server handshake did not end")
	}
	if name, ok := certs.NodeName(server.ConnectionState().PeerCertificates[0]); !ok || name != "B" {
		t.Errorf("the server sees the client as %q, %v", name, ok)
	}
	if name, ok := certs.NodeName(client.ConnectionState().PeerCertificates[0]); !ok || name != "A" {
		t.Errorf("the client sees the server as %q, %v", name, ok)
	}
}

// TestNoOverwrite: an existing CA or node file is never replaced without Overwrite (the
// file's bytes stay), and is with it; the name "ca", a name that breaks the rule, a host
// that is neither IP nor DNS name, and an unknown algorithm are refused, writing nothing.
func TestNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	o := certs.Options{Dir: dir}
	if err := certs.NewCA(o); err != nil {
		t.Fatal(err)
	}
	if err := certs.NewNode(o, "A", nil); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "A.crt"))
	caBefore, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err := certs.NewCA(o); !errors.Is(err, certs.ErrExists) {
		t.Errorf("a second CA: %v, want ErrExists", err)
	}
	if err := certs.NewNode(o, "A", nil); !errors.Is(err, certs.ErrExists) {
		t.Errorf("a second A: %v, want ErrExists", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "A.crt"))
	caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	if string(before) != string(after) || string(caBefore) != string(caAfter) {
		t.Fatal("a refused command changed a file")
	}
	o.Overwrite = true
	if err := certs.NewNode(o, "A", nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "A.crt")); string(again) == string(before) {
		t.Error("--overwrite left A's certificate as it was")
	}
	for _, c := range []struct {
		name  string
		hosts []string
		alg   certs.Algorithm
	}{{"ca", nil, ""}, {"bad name", nil, ""}, {"C", []string{"not a host!"}, ""}, {"D", nil, "rsa"}} {
		o := certs.Options{Dir: dir, Algorithm: c.alg}
		if err := certs.NewNode(o, c.name, c.hosts); err == nil {
			t.Errorf("node %q hosts %v algorithm %q was made", c.name, c.hosts, c.alg)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 { // ca.crt, ca.key, A.crt, A.key
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v", names)
	}
}

// TestNodeNeedsCA: a node certificate without the CA's files is refused, writing nothing.
func TestNodeNeedsCA(t *testing.T) {
	dir := t.TempDir()
	if err := certs.NewNode(certs.Options{Dir: dir}, "A", nil); err == nil {
		t.Fatal("a node certificate was made without a CA")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the directory holds %d files", len(entries))
	}
}

// TestNodeNameMalformedExtension: a subject alternative name extension that does not
// parse, cut short or of the wrong type, names no node (and never panics), whatever
// c.URIs says; a well-formed one with the exact text does.
func TestNodeNameMalformedExtension(t *testing.T) {
	san := asn1.ObjectIdentifier{2, 5, 29, 17}
	good := []byte{0x30, 0x10, 0x86, 0x0e}
	good = append(good, "plait://node/A"...)
	uris := []*url.URL{certs.NodeURI("A")}
	for _, c := range []struct {
		name  string
		value []byte
		ok    bool
	}{
		{"the exact text", good, true},
		{"cut short", good[:len(good)-3], false},
		{"empty", nil, false},
		{"a set, not a sequence", append([]byte{0x31}, good[1:]...), false},
		{"trailing bytes", append(append([]byte{}, good...), 0), false},
		{"a name cut short inside the sequence", []byte{0x30, 0x03, 0x86, 0x05, 'p'}, false},
		{"the URI constructed, not primitive", append([]byte{0x30, 0x10, 0xa6, 0x0e}, "plait://node/A"...), false},
	} {
		cert := &x509.Certificate{URIs: uris, Extensions: []pkix.Extension{{Id: san, Value: c.value}}}
		if name, ok := certs.NodeName(cert); ok != c.ok || ok && name != "A" {
			t.Errorf("%s: %q, %v; want ok %v", c.name, name, ok, c.ok)
		}
	}
}
