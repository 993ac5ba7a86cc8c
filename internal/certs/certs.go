package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"plait/protocol/wire"
)

// Algorithm is a key algorithm: ECDSA P-256 or Ed25519.
type Algorithm string

// The algorithms.
const (
	ECDSAP256 Algorithm = "ecdsa-p256"
	Ed25519   Algorithm = "ed25519"
)

// Default lifetimes: long for the authority, which is hard to replace everywhere, shorter
// for the nodes, whose certificates reload without a restart.
const (
	DefaultCALifetime   = 10 * 365 * 24 * time.Hour
	DefaultNodeLifetime = 2 * 365 * 24 * time.Hour
)

// CAName is the file stem of the authority (DIR/ca.crt, DIR/ca.key); no node may take it.
const CAName = "ca"

// ErrExists is returned when a file to write is there already and Overwrite is off.
var ErrExists = errors.New("certs: the file exists (use --overwrite to replace it)")

// Options are what both commands take.
type Options struct {
	Dir       string
	Algorithm Algorithm     // "" is ECDSAP256
	Lifetime  time.Duration // 0 is the command's default
	Overwrite bool
	Now       time.Time // the start of validity (zero: the current time)
}

// NodeURI is the URI SAN that names a node in its certificate.
func NodeURI(name string) *url.URL {
	return &url.URL{Scheme: "plait", Host: "node", Path: "/" + name}
}

// nodeURIPrefix is the text of a node's URI SAN before its name.
const nodeURIPrefix = "plait://node/"

// NodeName is the node name a certificate carries: its one URI SAN, which must be exactly
// the text plait://node/NAME with NAME by the name rule (docs/contract.md §18.2). ok is
// false when the certificate has no URI SAN, more than one, or one of any other text: a
// host other than node (a check that read only the path would take plait://ANYTHING/NAME
// for node NAME), a port, user info, a query or fragment, more path segments, another
// scheme or case, or a name percent-encoded. The SAN is compared as the certificate
// holds it, not as net/url parsed it: parsing folds the scheme's case, decodes the path and
// drops an empty query or fragment, so that several texts would name the same node.
func NodeName(c *x509.Certificate) (string, bool) {
	raw, ok := uriSANs(c)
	if !ok || len(raw) != 1 || len(c.URIs) != 1 {
		return "", false
	}
	name, found := strings.CutPrefix(raw[0], nodeURIPrefix)
	if !found || !wire.ValidName(name) {
		return "", false
	}
	return name, true
}

// oidSubjectAltName is the subject alternative name extension's id (RFC 5280 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// uriSANs reads the texts of a certificate's URI SANs (GeneralName uniformResourceIdentifier,
// [6] IA5String) as they are encoded; ok is false when the extension does not parse.
func uriSANs(c *x509.Certificate) (uris []string, ok bool) {
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var seq asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &seq); err != nil || len(rest) != 0 ||
			seq.Class != asn1.ClassUniversal || seq.Tag != asn1.TagSequence || !seq.IsCompound {
			return nil, false
		}
		for b := seq.Bytes; len(b) > 0; {
			var gn asn1.RawValue
			var err error
			if b, err = asn1.Unmarshal(b, &gn); err != nil {
				return nil, false
			}
			if gn.Class == asn1.ClassContextSpecific && gn.Tag == 6 && !gn.IsCompound {
				uris = append(uris, string(gn.Bytes))
			}
		}
	}
	return uris, true
}

// NewCA writes DIR/ca.crt and DIR/ca.key: a self-signed authority that signs node
// certificates only (path length 0).
func NewCA(o Options) error {
	if err := o.check(DefaultCALifetime); err != nil {
		return err
	}
	crt, key := filepath.Join(o.Dir, CAName+".crt"), filepath.Join(o.Dir, CAName+".key")
	if err := o.free(crt, key); err != nil {
		return err
	}
	priv, pub, err := newKey(o.Algorithm)
	if err != nil {
		return err
	}
	tmpl, err := o.template("plait CA")
	if err != nil {
		return err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return fmt.Errorf("certs: signing the CA: %w", err)
	}
	return writePair(crt, key, der, priv)
}

// NewNode writes DIR/NAME.crt and DIR/NAME.key, signed by DIR/ca.crt and DIR/ca.key: the
// node's name as its one URI SAN, each host an IP or DNS SAN (what a dialer's URL host is
// checked against), usable as a server and as a client.
func NewNode(o Options, name string, hosts []string) error {
	if err := o.check(DefaultNodeLifetime); err != nil {
		return err
	}
	if !wire.ValidName(name) {
		return fmt.Errorf("certs: node name %q breaks the name rule (1 to 64 bytes of [A-Za-z0-9_.-])", name)
	}
	if name == CAName {
		return fmt.Errorf("certs: the name %q is the authority's files", CAName)
	}
	tmpl, err := o.template(name)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if ValidHost(h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		} else {
			return fmt.Errorf("certs: host %q is neither an IP address nor a DNS name", h)
		}
	}
	tmpl.URIs = []*url.URL{NodeURI(name)}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	ca, caKey, err := LoadCA(o.Dir)
	if err != nil {
		return err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter // a certificate never outlives the authority that vouches for it
	}
	crt, key := filepath.Join(o.Dir, name+".crt"), filepath.Join(o.Dir, name+".key")
	if err := o.free(crt, key); err != nil {
		return err
	}
	priv, pub, err := newKey(o.Algorithm)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return fmt.Errorf("certs: signing %s: %w", name, err)
	}
	return writePair(crt, key, der, priv)
}

// LoadCA reads DIR/ca.crt and DIR/ca.key.
func LoadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(filepath.Join(dir, CAName+".crt"))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: the CA (make it with plait cert ca): %w", err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, CAName+".key"))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: the CA's key: %w", err)
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || cblock.Type != "CERTIFICATE" || kblock == nil || kblock.Type != "PRIVATE KEY" {
		return nil, nil, errors.New("certs: ca.crt or ca.key is not the PEM this command writes")
	}
	ca, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: ca.crt: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: ca.key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !ca.IsCA {
		return nil, nil, errors.New("certs: ca.crt is not an authority, or ca.key cannot sign")
	}
	return ca, signer, nil
}

func (o *Options) check(lifetime time.Duration) error {
	switch o.Algorithm {
	case "":
		o.Algorithm = ECDSAP256
	case ECDSAP256, Ed25519:
	default:
		return fmt.Errorf("certs: key algorithm %q: want %s or %s", o.Algorithm, ECDSAP256, Ed25519)
	}
	if o.Lifetime == 0 {
		o.Lifetime = lifetime
	}
	if o.Lifetime < 0 {
		return fmt.Errorf("certs: lifetime %s is negative", o.Lifetime)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Dir == "" {
		return errors.New("certs: no directory")
	}
	return os.MkdirAll(o.Dir, 0o755)
}

// free refuses files that exist unless Overwrite is set.
func (o *Options) free(paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%w: %s", ErrExists, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (o *Options) template(cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"plait"}},
		// An hour back: a peer whose clock is a little behind still takes a new certificate.
		NotBefore: o.Now.Add(-time.Hour).UTC(),
		NotAfter:  o.Now.Add(o.Lifetime).UTC(),
	}, nil
}

func newKey(a Algorithm) (crypto.Signer, crypto.PublicKey, error) {
	if a == Ed25519 {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, pub, err
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return priv, &priv.PublicKey, nil
}

// writePair writes the certificate (0644) and its key (0600), each to a temporary file
// renamed into place, so a reader sees the old file or the new one, never a part.
func writePair(crt, key string, der []byte, priv crypto.Signer) error {
	kder, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	if err := writeFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone already once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ValidHost reports whether h may be a node certificate's host: an IP address or a DNS name.
func ValidHost(h string) bool { return net.ParseIP(h) != nil || validDNS(h) }

// validDNS is a host name of letters, digits and hyphens in dot-separated labels, none
// empty, longer than 63 bytes or with a hyphen at either end (a leading "*." allowed).
func validDNS(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
