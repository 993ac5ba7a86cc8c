package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"plait/internal/certs"
	"plait/protocol/wire"
)

// Files names the files of one set. CA is empty for a server pair.
type Files struct {
	Cert, Key, CA string
}

// Generation is one loading of the files: the key pair, what it says, and the
// configurations built from it.
type Generation struct {
	Cert     tls.Certificate
	Leaf     *x509.Certificate
	NodeName string         // a peer set's node name (its URI SAN); empty for a server pair
	Roots    *x509.CertPool // a peer set's CA bundle; nil for a server pair
	Loaded   time.Time

	stamp  stamp
	server *tls.Config // the listener's, with this generation's certificate
}

// Expiry is when the generation's certificate expires.
func (g *Generation) Expiry() time.Time { return g.Leaf.NotAfter }

// Subject is the certificate's subject, as text.
func (g *Generation) Subject() string { return g.Leaf.Subject.String() }

// Source holds the current generation of a set of files and loads the next.
type Source struct {
	files Files
	peer  bool
	cur   atomic.Pointer[Generation]
	mu    sync.Mutex // serializes reloads

	listener, dialer *tls.Config // built once (build)

	reloads, failures atomic.Uint64
	lastErr           atomic.Pointer[error]
}

// LoadPeer loads a peer set: Cert and Key a node certificate (serverAuth and clientAuth,
// one URI SAN plait://node/NAME) and CA the bundle peers' certificates must chain to.
// name, when not empty, must be the certificate's node name.
func LoadPeer(f Files, name string) (*Source, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("tlsfiles: a peer set needs a certificate, a key and a CA bundle")
	}
	s := &Source{files: f, peer: true}
	g, err := s.load()
	if err != nil {
		return nil, err
	}
	if name != "" && g.NodeName != name {
		return nil, fmt.Errorf("tlsfiles: %s names node %q, not %q", f.Cert, g.NodeName, name)
	}
	s.cur.Store(g)
	s.build()
	return s, nil
}

// LoadServer loads a server pair (the HTTP API's certificate and key).
func LoadServer(f Files) (*Source, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tlsfiles: a server pair needs a certificate and a key")
	}
	f.CA = ""
	s := &Source{files: f}
	g, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(g)
	return s, nil
}

// Current is the generation in use.
func (s *Source) Current() *Generation { return s.cur.Load() }

// Reload reads the files again. A set that does not load, or a peer set whose node name
// changed, is refused and the current generation kept: a half-written file or a wrong one
// must not take a node off its cluster.
func (s *Source) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.load()
	if err == nil && s.peer && g.NodeName != s.Current().NodeName {
		err = fmt.Errorf("tlsfiles: %s now names node %q, not %q: kept the loaded set", s.files.Cert, g.NodeName, s.Current().NodeName)
	}
	if err != nil {
		s.lastErr.Store(&err)
		s.failures.Add(1)
		return err
	}
	// The generation first, then the count: whoever reads the count sees its files.
	s.cur.Store(g)
	s.lastErr.Store(nil)
	s.reloads.Add(1)
	return nil
}

// ReloadIfChanged reloads when a file differs on disk from the current generation's (by
// size, modification time and inode; a file that cannot be read counts as changed, so that
// its reload reports why); it reports whether it tried, and the error.
// A reload that failed is not tried again until the files change once more.
func (s *Source) ReloadIfChanged() (bool, error) {
	seen := stampOf(s.files) // before the read: a change during it is seen at the next poll
	if seen == s.Current().stamp {
		return false, nil
	}
	err := s.Reload()
	if err != nil {
		// Remember what was refused, so that the poll does not retry (and count) it every
		// time; a file that changes again (the second of two renames) differs from it.
		s.mu.Lock()
		g := *s.Current()
		g.stamp = seen
		s.cur.Store(&g)
		s.mu.Unlock()
	}
	return true, err
}

// Reloads counts the reloads that loaded a new generation and the ones refused; LastError
// is the last refusal's, nil once a reload succeeded.
func (s *Source) Reloads() (ok, failed uint64) { return s.reloads.Load(), s.failures.Load() }

// LastError is the error of the last reload if it failed.
func (s *Source) LastError() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// ListenerConfig is a listener's configuration for peer links, built once: TLS 1.3, a
// client certificate required and verified by VerifyPeer against the current generation's
// CA bundle. Each handshake takes the current generation's configuration through
// GetConfigForClient, which returns a configuration with its certificate set statically:
// GetCertificate is not consulted for a client that sends no server name (one that dials
// an IP address) when static Certificates are set, and this way neither path depends on it.
func (s *Source) ListenerConfig() *tls.Config { return s.listener }

// DialerConfig is a dialer's configuration for peer links, built once: TLS 1.3, the
// listener's certificate verified by VerifyPeer (the current CA bundle, the URL's host,
// serverAuth, a node name), and this node's current certificate through
// GetClientCertificate.
func (s *Source) DialerConfig() *tls.Config { return s.dialer }

// ServerConfig is the HTTP API's configuration: TLS 1.2 or newer (clients of an HTTP API
// are many and not all current), the current certificate for every handshake.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &s.Current().Cert, nil
		},
	}
}

// build makes the peer configurations; their callbacks read the current generation, so
// they outlive every reload.
func (s *Source) build() {
	s.listener = &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.Current().server, nil
		},
	}
	s.dialer = &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain, the host and the node name are verified in VerifyConnection against the
		// current generation: RootCAs would fix the bundle for the configuration's life.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.Current().Cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.VerifyPeer(cs, x509.ExtKeyUsageServerAuth)
		},
	}
}

// VerifyPeer verifies a peer link's other side against the current generation: a
// certificate is there, chains to the CA bundle at the current time for usage, names a
// node, and (on a dialer's side, where cs.ServerName is the URL's host) carries that host
// as a DNS or IP SAN. Its errors are *RefusedError.
func (s *Source) VerifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage) error {
	return verify(s.Current().Roots, cs, usage)
}

// verifyAgainst is a listener's VerifyPeer with one generation's bundle.
func verifyAgainst(roots *x509.CertPool, cs tls.ConnectionState) error {
	return verify(roots, cs, x509.ExtKeyUsageClientAuth)
}

func verify(roots *x509.CertPool, cs tls.ConnectionState, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return &RefusedError{Code: CodeNoCert, Err: errors.New("the peer sent no certificate")}
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}
	if usage == x509.ExtKeyUsageServerAuth {
		opts.DNSName = cs.ServerName
	}
	if _, err := leaf.Verify(opts); err != nil {
		return &RefusedError{Code: verifyCode(err), Err: err}
	}
	if _, ok := certs.NodeName(leaf); !ok {
		return &RefusedError{Code: CodeBadName, Err: ErrNoNodeName}
	}
	return nil
}

// The refusal codes of TLS (wire's transport codes, docs/contract.md §8.5).
const (
	CodeRequired  = wire.CodeTLSRequired
	CodeNoCert    = wire.CodeTLSNoCert
	CodeUnknownCA = wire.CodeTLSUnknownCA
	CodeExpired   = wire.CodeTLSExpired
	CodeBadName   = wire.CodeTLSBadName
	CodeBadCert   = wire.CodeTLSBadCert
	CodeHandshake = wire.CodeTLSHandshake
)

// RefusedError is a TLS handshake refused by this side's verification, with its code.
type RefusedError struct {
	Code wire.Code
	Err  error
}

func (e *RefusedError) Error() string { return string(e.Code) + ": " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

func verifyCode(err error) wire.Code {
	var ua x509.UnknownAuthorityError
	var inv x509.CertificateInvalidError
	var host x509.HostnameError
	switch {
	case errors.As(err, &ua):
		return CodeUnknownCA
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return CodeExpired
	case errors.As(err, &host):
		return CodeBadName
	}
	return CodeBadCert
}

// RefusalCode is the code of a failed TLS handshake: this side's verification's own, a
// peer that does not speak TLS (tls-required), or tls-handshake for the rest (the other
// side refused, a version below 1.3, a connection cut).
func RefusalCode(err error) wire.Code {
	var re *RefusedError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &re):
		return re.Code
	case errors.As(err, &rh):
		return CodeRequired
	}
	return CodeHandshake
}

// IsHandshakeFailure reports whether a dial failed in its TLS handshake (this side's
// verification, the other side's alert, or a side that does not speak TLS), as opposed to
// a connection that could not be made: what RefusalCode has a code for.
func IsHandshakeFailure(err error) bool {
	var re *RefusedError
	var ae tls.AlertError
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &re) || errors.As(err, &ae) || errors.As(err, &rh) || errors.As(err, &cv)
}

// ErrNoNodeName is the refusal of a peer certificate that carries no node name.
var ErrNoNodeName = errors.New("the certificate names no node (one URI SAN plait://node/NAME)")

// PeerName is the node name of a verified connection's peer certificate ("" when none).
func PeerName(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	name, _ := certs.NodeName(cs.PeerCertificates[0])
	return name
}

// load reads the files into a new generation.
func (s *Source) load() (*Generation, error) {
	st := stampOf(s.files)
	pair, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: %s, %s: %w", s.files.Cert, s.files.Key, err)
	}
	leaf := pair.Leaf // parsed by LoadX509KeyPair
	g := &Generation{Cert: pair, Leaf: leaf, Loaded: time.Now(), stamp: st}
	if !s.peer {
		return g, nil
	}
	name, ok := certs.NodeName(leaf)
	if !ok {
		return nil, fmt.Errorf("tlsfiles: %s names no node (one URI SAN plait://node/NAME): make it with plait cert node", s.files.Cert)
	}
	if !hasUsage(leaf, x509.ExtKeyUsageServerAuth) || !hasUsage(leaf, x509.ExtKeyUsageClientAuth) {
		return nil, fmt.Errorf("tlsfiles: %s lacks serverAuth or clientAuth: a node certificate serves and dials", s.files.Cert)
	}
	pem, err := os.ReadFile(s.files.CA)
	if err != nil {
		return nil, fmt.Errorf("tlsfiles: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tlsfiles: %s holds no PEM certificate", s.files.CA)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tlsfiles: %s does not verify against %s: %w", s.files.Cert, s.files.CA, err)
	}
	g.NodeName, g.Roots = name, roots
	g.server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		// Requested, and required by VerifyPeer, which verifies it against this generation's
		// bundle with errors of its own (Go's own refusal of a missing certificate has no type).
		ClientAuth: tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyAgainst(roots, cs)
		},
	}
	return g, nil
}

func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, k := range c.ExtKeyUsage {
		if k == u {
			return true
		}
	}
	return false
}

// stamp is what Changed compares: each file's size, modification time and inode.
type stamp [3]fileStamp

type fileStamp struct {
	size  int64
	mtime int64
	ino   uint64
	err   bool
}

func stampOf(f Files) stamp {
	var st stamp
	for i, p := range []string{f.Cert, f.Key, f.CA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			st[i].err = true
			continue
		}
		st[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: inode(fi)}
	}
	return st
}
