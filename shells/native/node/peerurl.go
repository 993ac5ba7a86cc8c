package node

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// PeerURLError is a peer URL ParsePeerURL refuses, and why.
type PeerURLError struct {
	URL    string
	Reason string
}

func (e *PeerURLError) Error() string {
	return fmt.Sprintf("peer URL %q is not ws://HOST[:PORT] or wss://HOST[:PORT]: %s", e.URL, e.Reason)
}

// ParsePeerURL checks a peer's URL and returns the endpoint this node dials for it. A peer
// URL is ws://HOST[:PORT] or wss://HOST[:PORT] (TLS), optionally with a path; an empty
// path means /v1/replicate. Anything else is refused with a *PeerURLError that says what
// is wrong: another scheme, no host, a port outside 1 to 65535, user info, a query or a
// fragment. (Whether a node may dial wss:// or ws:// is its TLS configuration's to say:
// Start and AddPeer check it.) The --peer flag, POST /v1/peers and the node's dialers all parse with it, so
// a URL one of them takes the others take too.
func ParsePeerURL(raw string) (string, error) {
	refuse := func(reason string, args ...any) (string, error) {
		return "", &PeerURLError{URL: raw, Reason: fmt.Sprintf(reason, args...)}
	}
	if l := strings.ToLower(raw); !strings.Contains(raw, "://") && !strings.HasPrefix(l, "ws:") && !strings.HasPrefix(l, "wss:") {
		// HOST:PORT alone would parse as a scheme and an opaque part, or not at all ("first
		// path segment in URL cannot contain colon"): say what is missing instead.
		return refuse("no scheme: write ws://%s, or wss://%s with TLS", raw, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without url.Error's repetition of the URL
		}
		return refuse("%v", err)
	}
	switch {
	case u.Scheme == "":
		return refuse("no scheme")
	case u.Scheme != "ws" && u.Scheme != "wss":
		return refuse("the scheme is %s, not ws or wss", u.Scheme)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return refuse("no host")
	case u.User != nil:
		return refuse("user info has no place in it")
	case u.RawQuery != "" || u.ForceQuery:
		return refuse("a query has no place in it")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return refuse("a fragment has no place in it")
	case strings.HasSuffix(u.Host, ":"):
		return refuse("an empty port")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return refuse("port %s is not 1 to 65535", p)
		}
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/replicate"
	}
	return u.String(), nil
}
