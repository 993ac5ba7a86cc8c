package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"plait/protocol/replica"
)

// The codes of a peer's last_dial_error (docs/contract.md §8.3): why a dial opened no
// connection, so that a peer in backoff says why without a look at the log.
const (
	DialRefused     = "dial-refused"     // nothing listens there (ECONNREFUSED)
	DialTimeout     = "dial-timeout"     // no answer within the dial's bound
	DialUnreachable = "dial-unreachable" // no route to the host or network
	DialDNS         = "dns"              // the host name does not resolve
	DialTLS         = "tls-handshake"    // the TLS handshake failed, or the certificate names another node
	DialUpgrade     = "upgrade-refused"  // an HTTP answer other than the WebSocket upgrade
	DialBadURL      = "bad-url"          // a kept URL this node may not dial (wss:// without TLS, ws:// with TLS only)
	DialFailed      = "dial-failed"      // any other failure before the connection opened
)

// dialCode classifies a failed WebSocket dial: resp is the HTTP answer when one came.
func dialCode(err error, resp *http.Response) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
		return DialUpgrade
	case errors.As(err, &dns):
		return DialDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return DialRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return DialUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return DialTimeout
	}
	return DialFailed
}

// dialFailed records why a dial of peer opened no connection, for its status.
func (n *Node) dialFailed(peer, code, msg string) {
	n.mu.Lock()
	d := n.dials[peer]
	d.lastErr = &replica.DialError{Code: code, Message: msg, At: time.Now()}
	n.dials[peer] = d
	n.mu.Unlock()
}

// upgradeMessage is the message of a dial answered without the WebSocket upgrade.
func upgradeMessage(resp *http.Response, err error) string {
	return "the listener answered HTTP " + strconv.Itoa(resp.StatusCode) + " to the WebSocket upgrade: " + err.Error()
}
