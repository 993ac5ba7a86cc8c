package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"plait/client"
)

// apiFlags are the flags of every command that calls a node's HTTP API, plait status and
// plait map (docs/contract.md §12, §22.5): where the API is, the token to send, and the
// certificates to trust for HTTPS.
type apiFlags struct {
	http, tokenFile, ca string
	https               bool
}

// settings is the table of the API flags, the head of each such command's table.
func (c *apiFlags) settings() []setting {
	return []setting{
		str("http", "HOST:PORT", &c.http, "127.0.0.1:7401", nil, "the node's HTTP API: HOST:PORT, or a URL http://HOST:PORT or https://HOST:PORT"),
		str("token-file", "FILE", &c.tokenFile, "", nil, "send the bearer token in FILE (it holds the token alone); default: the environment variable PLAIT_TOKEN"),
		str("ca", "FILE", &c.ca, "", nil, "dial https:// and trust the certificates in FILE (PEM) for it"),
		boolean("https", &c.https, "dial https:// with the system's trusted certificates (implied by --ca)"),
	}
}

// apiConn is a node's API as a command calls it: the client of package client, with the
// token, the scheme and the --ca roots, a 10 s timeout, and one attempt per call: a
// command answers what the node answered (docs/contract.md §12, §22.5, §22.10), and the
// caller decides whether to run it again.
type apiConn struct {
	c *client.Client
}

// apiMessage is an error of a call as the commands print it: a refusal as its status, code
// and message ("409 Conflict: lock-held: another lease holds the key"), a call that got no
// answer as net/http said it.
func apiMessage(err error) string {
	var ae *client.Error
	var te *client.TransportError
	switch {
	case errors.As(err, &ae) && ae.Code == "":
		return ae.Status
	case errors.As(err, &ae):
		return ae.Status + ": " + ae.Code + ": " + ae.Message
	case errors.As(err, &te):
		return te.Err.Error()
	}
	return err.Error()
}

// connect checks the API flags and reads their files. A flag or file refused is said on
// stderr under cmd's name, and false returned: the command exits 2, having dialed nothing.
func (c *apiFlags) connect(cmd string, stderr io.Writer) (apiConn, bool) {
	hostPort, scheme, err := apiAddr(c.http)
	if err != nil {
		refused(stderr, cmd, err)
		return apiConn{}, false
	}
	token, err := apiToken(c.tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return apiConn{}, false
	}
	opts := []client.Option{client.WithToken(token), client.WithTimeout(10 * time.Second), client.WithMaxAttempts(1)}
	if c.ca != "" {
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			fmt.Fprintf(stderr, "%s: --ca: %v\n", cmd, err)
			return apiConn{}, false
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "%s: --ca: %s holds no PEM certificate\n", cmd, c.ca)
			return apiConn{}, false
		}
		opts = append(opts, client.WithCAPool(roots))
	}
	base := "http://" + hostPort
	if c.https || c.ca != "" || scheme == "https" {
		base = "https://" + hostPort
	}
	cl, err := client.New(base, opts...)
	if err != nil {
		refused(stderr, cmd, err)
		return apiConn{}, false
	}
	return apiConn{c: cl}, true
}

// apiAddr is --http's HOST:PORT and scheme ("" when the flag gave none): HOST:PORT, or
// a URL http://HOST[:PORT] or https://HOST[:PORT] with no path beyond "/" (the port then
// defaults to the scheme's).
func apiAddr(v string) (hostPort, scheme string, err error) {
	if !strings.Contains(v, "://") {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return "", "", fmt.Errorf("--http: %q is neither HOST:PORT nor a URL http(s)://HOST:PORT", v)
		}
		return v, "", nil
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("--http: %q: %v", v, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", fmt.Errorf("--http: %q: the scheme is neither http nor https", v)
	case u.Host == "" || u.User != nil || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("--http: %q: want http(s)://HOST:PORT, with no user, path or query", v)
	}
	hostPort = u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		hostPort = net.JoinHostPort(u.Hostname(), port)
	}
	return hostPort, u.Scheme, nil
}

// apiToken is the bearer token to send: the content of the --token-file, else the
// environment's PLAIT_TOKEN, else none. A file is read whole, around spaces and newlines,
// and must hold one token and nothing else: a server's token file (TOKEN SCOPE lines) given
// by mistake is refused, not half sent.
func apiToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("PLAIT_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("--token-file: %s holds no token", file)
	case strings.ContainsAny(token, " \t\r\n"):
		return "", errors.New("--token-file: " + file + " holds more than a token (the file holds the token alone)")
	}
	return token, nil
}
