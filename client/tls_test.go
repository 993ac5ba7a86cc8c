package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"plait/client"
)

// selfSigned writes a self-signed certificate and its key, PEM, for a client, and answers
// their files and the pair.
func selfSigned(t *testing.T, cn string) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if os.WriteFile(certFile, certPEM, 0o600) != nil || os.WriteFile(keyFile, keyPEM, 0o600) != nil {
		t.Fatal("writing the pair")
	}
	if pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// TestTLS: an https:// node is trusted by WithCAFile or WithCAPool and not without them;
// the client certificate of WithClientCertificateFiles or WithClientCertificate is
// presented; the token goes as a bearer token.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, cn+" "+r.Header.Get("Authorization"))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the unknown CA's refused handshake
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	certFile, keyFile, pair := selfSigned(t, "app")
	ctx := context.Background()

	_, err := newClient(t, srv.URL, client.WithMaxAttempts(1)).Get(ctx, "t", []byte("k"))
	var ue x509.UnknownAuthorityError
	var te *client.TransportError
	if !errors.As(err, &te) || te.Sent || !errors.As(err, &ue) {
		t.Errorf("a node of an unknown CA: %v, want an unknown authority, not sent", err)
	}
	for what, opts := range map[string][]client.Option{
		"CA file, certificate files": {client.WithCAFile(caFile), client.WithClientCertificateFiles(certFile, keyFile)},
		"CA pool, certificate":       {client.WithCAPool(pool), client.WithClientCertificate(pair)},
	} {
		v, err := newClient(t, srv.URL, append(opts, client.WithToken("a-token-of-the-test"))...).Get(ctx, "t", []byte("k"))
		if err != nil || string(v) != "app Bearer a-token-of-the-test" {
			t.Errorf("%s: %q %v, want the certificate app and the token", what, v, err)
		}
	}
	if _, err := client.New(srv.URL, client.WithCAFile(caFile), client.WithHTTPClient(http.DefaultClient)); err == nil {
		t.Error("WithHTTPClient with a TLS option was taken")
	}
	for _, bad := range []string{"127.0.0.1:7401", "ftp://h:1", "http://h:1/v1", "http://h:1?x=1", "http://"} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) was taken", bad)
		}
	}
}
