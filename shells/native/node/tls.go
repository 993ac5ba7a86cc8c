package node

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"time"

	"plait/protocol/handshake"
	"plait/shells/native/tlsfiles"
)

// TLS between peers: which URLs a node may dial, the dialers' client, the reload of the
// certificate files, and the channel binding each side gives its session.

// CheckPeerURL is ParsePeerURL and the TLS configuration's rule: wss:// needs TLS, and a
// node with TLS dials ws:// only while it serves plaintext too (moving to TLS).
func (c *Config) CheckPeerURL(raw string) error {
	target, err := ParsePeerURL(raw)
	if err != nil {
		return err
	}
	u, _ := url.Parse(target) // ParsePeerURL made it
	switch {
	case u.Scheme == "wss" && c.TLS == nil:
		return &PeerURLError{URL: raw, Reason: "wss:// needs TLS (--tls-cert, --tls-key and --tls-ca)"}
	case u.Scheme == "ws" && c.TLS != nil && !c.AcceptPlaintext:
		return &PeerURLError{URL: raw, Reason: "a node with TLS dials wss:// only (ws:// while moving to TLS: --tls-accept-plaintext)"}
	}
	return nil
}

// newTLSClient is the wss:// dialers' HTTP client, built once: every dial reuses its
// configuration (whose callbacks read the current certificates), so a reconnect storm
// builds no TLS state. The upgraded connections are hijacked, never pooled.
func newTLSClient(src *tlsfiles.Source) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     src.DialerConfig(),
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		DisableKeepAlives:   true,
		Proxy:               nil, // peers are dialed directly
	}}
}

// binding is a TLS connection's channel binding for its session (none for plaintext).
func binding(cs *tls.ConnectionState) []byte {
	if cs == nil {
		return nil
	}
	b, err := cs.ExportKeyingMaterial(handshake.ExporterLabel, nil, handshake.ExporterLength)
	if err != nil {
		return nil // TLS 1.3 always exports; without a binding the session refuses a bound peer
	}
	return b
}

// pollCerts reloads the certificate files when they change on disk.
func (n *Node) pollCerts() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.CertPoll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if tried, err := n.cfg.TLS.ReloadIfChanged(); tried {
				n.logReload(err)
			}
		case <-n.ctx.Done():
			return
		}
	}
}

// ReloadTLS reads the certificate files again (SIGHUP): new connections use them, open
// ones go on. A set that does not load is refused and the loaded one kept.
func (n *Node) ReloadTLS() error {
	if n.cfg.TLS == nil {
		return nil
	}
	err := n.cfg.TLS.Reload()
	n.logReload(err)
	return err
}

// logReload logs a reload of the peer certificates found by the file watch, in the words
// and with the flag of a reload on SIGHUP (cmd/plait), so that one event has one spelling
// in the log (docs/contract.md §2.3).
func (n *Node) logReload(err error) {
	if err != nil {
		n.log.Error("reload failed; the files loaded before are kept", "flag", "--tls-cert", "err", err)
		return
	}
	g := n.cfg.TLS.Current()
	n.log.Info("reloaded", "flag", "--tls-cert", "subject", g.Subject(), "expires", g.Expiry().UTC().Format(time.RFC3339))
}

// TLSStatus is node.tls of the status (docs/contract.md §8.1).
type TLSStatus struct {
	Subject         string
	NodeName        string
	Expiry          time.Time
	AcceptPlaintext bool
	Reloads         uint64 // reloads that loaded new certificates
	ReloadFailures  uint64 // reloads refused (the loaded certificates kept)
	LastReloadError string
}

// TLS reports the node's peer certificates; nil without TLS.
func (n *Node) TLS() *TLSStatus {
	src := n.cfg.TLS
	if src == nil {
		return nil
	}
	g := src.Current()
	ok, failed := src.Reloads()
	st := &TLSStatus{Subject: g.Subject(), NodeName: g.NodeName, Expiry: g.Expiry(), AcceptPlaintext: n.cfg.AcceptPlaintext,
		Reloads: ok, ReloadFailures: failed}
	if err := src.LastError(); err != nil {
		st.LastReloadError = err.Error()
	}
	return st
}
