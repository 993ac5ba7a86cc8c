package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Client calls one node's HTTP API. It is safe for concurrent use.
type Client struct {
	base    string // scheme://host[:port], no trailing slash
	hc      *http.Client
	token   string
	timeout time.Duration
	retry   retryPolicy
	feed    feedPolicy
}

// retryPolicy bounds the client's retries (docs/contract.md §25).
type retryPolicy struct {
	attempts   int // calls in all, the first included; 1: no retry
	minBackoff time.Duration
	maxBackoff time.Duration
}

// feedPolicy is how Changes reconnects.
type feedPolicy struct {
	idle       time.Duration // no line for this long: the connection is taken for dead
	reconnects int           // failed reconnects in a row before Changes gives up; 0: no bound
}

type config struct {
	token                string
	tokenFile            string
	caFile               string
	pool                 *x509.CertPool
	certs                []tls.Certificate
	certFile, keyFile    string
	hc                   *http.Client
	timeout, dialTimeout time.Duration
	retry                retryPolicy
	feed                 feedPolicy
	tlsSet               bool
}

// Option is an option of New.
type Option func(*config)

// WithToken sends token as every call's bearer token (docs/contract.md §6.4).
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTokenFile reads the bearer token from the first line of file, as plait status
// --token-file does.
func WithTokenFile(file string) Option { return func(c *config) { c.tokenFile = file } }

// WithCAFile trusts the PEM certificates in file for an https:// node, instead of the
// system's.
func WithCAFile(file string) Option { return func(c *config) { c.caFile, c.tlsSet = file, true } }

// WithCAPool trusts pool for an https:// node, instead of the system's.
func WithCAPool(pool *x509.CertPool) Option { return func(c *config) { c.pool, c.tlsSet = pool, true } }

// WithClientCertificate presents cert to an https:// node (for a proxy in front of it that
// asks for one: the node itself authenticates clients by token, docs/contract.md §6.4).
func WithClientCertificate(cert tls.Certificate) Option {
	return func(c *config) { c.certs, c.tlsSet = append(c.certs, cert), true }
}

// WithClientCertificateFiles is WithClientCertificate of a PEM certificate and key file.
func WithClientCertificateFiles(certFile, keyFile string) Option {
	return func(c *config) { c.certFile, c.keyFile, c.tlsSet = certFile, keyFile, true }
}

// WithTimeout bounds each call, its retries included (default 30s); a context's deadline
// bounds it too. Changes is bounded by its context alone. 0: no bound but the context's.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithDialTimeout bounds a connection's dial and TLS handshake (default 10s).
func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// WithHTTPClient makes the calls with hc, whose transport then decides TLS and dialing:
// New refuses it together with the TLS options or WithDialTimeout. hc's own Timeout would
// cut a change feed: leave it 0 and use WithTimeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.hc = hc } }

// WithMaxAttempts is how many times the client sends a call it may send again, the first
// included (default 4); 1 turns retries off. Which calls it sends again is
// docs/contract.md §25's rule.
func WithMaxAttempts(n int) Option { return func(c *config) { c.retry.attempts = max(n, 1) } }

// WithBackoff is the wait between attempts: from min, doubling to at most max, each a
// random time between half of it and all of it (defaults 100ms and 2s). An answer's
// Retry-After longer than max ends the retries: the error goes back to the caller.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) { c.retry.minBackoff, c.retry.maxBackoff = min, max }
}

// WithFeedIdleTimeout is how long Changes waits for a line (an event or a heartbeat)
// before it takes the connection for dead and reconnects (default 60s: four heartbeats of
// the node's default --feed-heartbeat).
func WithFeedIdleTimeout(d time.Duration) Option { return func(c *config) { c.feed.idle = d } }

// WithFeedReconnects is how many reconnects in a row may fail before Changes yields the
// last error and ends (default 0: it retries until its context ends).
func WithFeedReconnects(n int) Option { return func(c *config) { c.feed.reconnects = n } }

// New is a client of the node whose HTTP API is at baseURL: "http://HOST:PORT" or
// "https://HOST:PORT" (a path after it is refused: the API's paths are its own).
func New(baseURL string, opts ...Option) (*Client, error) {
	c := config{
		timeout: 30 * time.Second, dialTimeout: 10 * time.Second,
		retry: retryPolicy{attempts: 4, minBackoff: 100 * time.Millisecond, maxBackoff: 2 * time.Second},
		feed:  feedPolicy{idle: 60 * time.Second},
	}
	dialSet := false
	for _, o := range opts {
		before := c.dialTimeout
		o(&c)
		dialSet = dialSet || c.dialTimeout != before
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: the node's URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("client: the node's URL %q is not http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if c.retry.minBackoff <= 0 || c.retry.maxBackoff < c.retry.minBackoff {
		return nil, fmt.Errorf("client: backoff from %v to %v: the first must be above 0 and not above the second", c.retry.minBackoff, c.retry.maxBackoff)
	}
	if c.tokenFile != "" {
		raw, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("client: the token file: %w", err)
		}
		line, _, _ := strings.Cut(string(raw), "\n")
		if c.token = strings.TrimSpace(line); c.token == "" {
			return nil, fmt.Errorf("client: the token file %s has no token on its first line", c.tokenFile)
		}
	}
	cl := &Client{base: u.Scheme + "://" + u.Host, token: c.token, timeout: c.timeout, retry: c.retry, feed: c.feed}
	if c.hc != nil {
		if c.tlsSet || dialSet {
			return nil, errors.New("client: WithHTTPClient takes the TLS and dial settings from its transport: give them there, not as options")
		}
		cl.hc = c.hc
		return cl, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.pool, Certificates: c.certs}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("client: the CA file: %w", err)
		}
		if tc.RootCAs == nil {
			tc.RootCAs = x509.NewCertPool()
		}
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: the CA file %s holds no PEM certificate", c.caFile)
		}
	}
	if c.certFile != "" || c.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: the client certificate: %w", err)
		}
		tc.Certificates = append(tc.Certificates, cert)
	}
	dialer := &net.Dialer{Timeout: c.dialTimeout, KeepAlive: 30 * time.Second}
	cl.hc = &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: c.dialTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
	return cl, nil
}

// URL is the node's base URL the client calls.
func (c *Client) URL() string { return c.base }

// CallOption is an option of one call.
type CallOption func(*call)

// UnderLock sends token in Plait-Lock: a write or read of a record under a lease
// (docs/contract.md §22.9).
func UnderLock(token string) CallOption { return func(c *call) { c.header.Set("Plait-Lock", token) } }

// NoForward asks a node that does not carry the table to answer 409 not-carried instead of
// forwarding the request to a carrier (docs/contract.md §23.4).
func NoForward() CallOption { return func(c *call) { c.header.Set("Plait-Forward", "no") } }

// kind is how a call may be sent again (docs/contract.md §25).
type kind int

const (
	// read: sent again after any failure but an answer that refuses it (4xx).
	read kind = iota
	// write: sent again only when it was not sent whole, or its refusal says nothing was
	// applied and that it heals.
	write
	// once: never sent again by the client.
	once
)

// call is one request of the API.
type call struct {
	method, path string
	query        url.Values
	body         []byte
	header       http.Header
	kind         kind
	limit        int64 // bytes of answer taken; 0: no bound (the caller reads a stream)
	// retryCodes are the codes, besides the transport's "not sent", on which a write is
	// sent again: each refuses before anything was applied, and heals by itself.
	retryCodes []error
}

// writeRetryCodes are a record write's: docs/contract.md §6.3 says of each that nothing
// was applied and to retry later. Not no-carrier: a write forwarded to a carrier may have
// applied there if the answer was lost. Not origin-rewound: it does not heal by itself.
// Not unavailable: the write may still apply.
var writeRetryCodes = []error{ErrClockOffset, ErrStorageFull, ErrStorageFailed}

func (c *Client) newCall(method, path string, k kind, opts []CallOption) *call {
	cl := &call{method: method, path: path, kind: k, header: http.Header{}, limit: 1 << 20}
	for _, o := range opts {
		o(cl)
	}
	return cl
}

// do sends cl, sending it again as its kind allows, and answers the response of a 2xx
// with its body read (at most cl.limit bytes), or an *Error or *TransportError.
func (c *Client) do(ctx context.Context, cl *call) (*http.Response, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	backoff := c.retry.minBackoff
	for attempt := 1; ; attempt++ {
		resp, body, err := c.once(ctx, cl)
		if err == nil {
			return resp, body, nil
		}
		if attempt >= c.retry.attempts || !c.mayRetry(cl, err) || ctx.Err() != nil {
			return nil, nil, err
		}
		wait := jitter(backoff)
		if ae := (*Error)(nil); errors.As(err, &ae) && ae.RetryAfter > wait {
			if ae.RetryAfter > c.retry.maxBackoff {
				return nil, nil, err // the node says it is longer than this client waits
			}
			wait = ae.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, err
		case <-t.C:
		}
		backoff = min(2*backoff, c.retry.maxBackoff)
	}
}

// jitter is a random wait between half of d and d: clients that failed together do not
// come back together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// mayRetry is docs/contract.md §25's rule.
func (c *Client) mayRetry(cl *call, err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		if errors.Is(te.Err, context.Canceled) || errors.Is(te.Err, context.DeadlineExceeded) {
			return false
		}
		return cl.kind == read || (cl.kind == write && !te.Sent)
	}
	var ae *Error
	if !errors.As(err, &ae) {
		return false // the answer did not decode: it will not decode better
	}
	switch cl.kind {
	case read:
		return ae.StatusCode >= 500
	case write:
		for _, s := range cl.retryCodes {
			if errors.Is(ae, s) {
				return true
			}
		}
	}
	return false
}

// once sends cl once.
func (c *Client) once(ctx context.Context, cl *call) (*http.Response, []byte, error) {
	resp, err := c.send(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, cl.limit)
	if err != nil {
		// The answer's status came: the node took the request. A body cut short is an
		// answer lost, which is as good as "sent".
		return nil, nil, &TransportError{Method: cl.method, Path: cl.path, Sent: true, Err: err}
	}
	return resp, body, nil
}

// send sends cl and answers the response of a 2xx, its body unread, or an error.
func (c *Client) send(ctx context.Context, cl *call) (*http.Response, error) {
	u := c.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var rd io.Reader
	if cl.body != nil {
		rd = bytes.NewReader(cl.body)
	}
	// sent is whether the request went whole: after that, a write may have applied.
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { sent.Store(sent.Load() || i.Err == nil) },
	})
	req, err := http.NewRequestWithContext(ctx, cl.method, u, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range cl.header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if cl.body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &TransportError{Method: cl.method, Path: cl.path, Sent: sent.Load(), Err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := readLimited(resp.Body, 64<<10)
	ae := &Error{Method: cl.method, Path: cl.path, StatusCode: resp.StatusCode, Status: resp.Status,
		Class: classOf(resp.StatusCode), RetryAfter: retryAfter(resp.Header), Body: raw}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
		ae.Code, ae.Message = e.Error.Code, e.Error.Message
	}
	return nil, ae
}

// readLimited reads r whole, refusing past limit bytes (0: no bound).
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		return io.ReadAll(r)
	}
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, errTooLarge
	}
	return raw, nil
}

// decode decodes a JSON answer into v.
func decode(cl *call, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's JSON: %w", cl.method, cl.path, err)
	}
	return nil
}

// tablePath is /v1/tables/{t}, the table escaped.
func tablePath(table string) string { return "/v1/tables/" + url.PathEscape(table) }
