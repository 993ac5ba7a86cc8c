package node_test

import (
	"errors"
	"strings"
	"testing"

	"plait/shells/native/node"
)

// TestParsePeerURL: every form of ws://HOST[:PORT] is taken, with /v1/replicate for an
// empty path and a given path kept; every other form is refused with a *PeerURLError
// that names the URL and says what is wrong.
func TestParsePeerURL(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"ws://h", "ws://h/v1/replicate"},
		{"ws://h:7400", "ws://h:7400/v1/replicate"},
		{"ws://h:1", "ws://h:1/v1/replicate"},
		{"ws://h:65535", "ws://h:65535/v1/replicate"},
		{"ws://127.0.0.1:7400/", "ws://127.0.0.1:7400/v1/replicate"},
		{"ws://[::1]:7400", "ws://[::1]:7400/v1/replicate"},
		{"ws://node-b.example:7400//", "ws://node-b.example:7400/v1/replicate"},
		{"ws://h:7400/v1/replicate", "ws://h:7400/v1/replicate"},
		{"ws://h:7400/behind/a/proxy", "ws://h:7400/behind/a/proxy"},
		{"WS://h:7400", "ws://h:7400/v1/replicate"}, // a scheme is case-insensitive
		{"wss://h:7400", "wss://h:7400/v1/replicate"},
		{"wss://10.0.0.2", "wss://10.0.0.2/v1/replicate"},
	} {
		got, err := node.ParsePeerURL(c.raw)
		if err != nil || got != c.want {
			t.Errorf("ParsePeerURL(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	for _, c := range []struct{ raw, reason string }{
		{"", "no scheme"},
		{"h", "no scheme"},
		{"127.0.0.1:7400", "no scheme: write ws://127.0.0.1:7400, or wss://127.0.0.1:7400 with TLS"},
		{"h:7400", "no scheme: write ws://h:7400"},
		{"[::1]:7400", "no scheme: write ws://[::1]:7400"},
		{"http://h:7400", "the scheme is http, not ws"},
		{"ws:h:7400", "no host"},
		{"ws://", "no host"},
		{"ws:///v1/replicate", "no host"},
		{"ws://:7400", "no host"},
		{"ws://h:", "an empty port"},
		{"ws://h:0", "port 0 is not 1 to 65535"},
		{"ws://h:65536", "port 65536 is not 1 to 65535"},
		{"ws://h:x", "invalid port"},
		{"ws://h:7400 ", "invalid port"},
		{"ws://[::1", "missing ']'"},
		{"ws://u:p@h:7400", "user info"},
		{"ws://h:7400?a=1", "a query"},
		{"ws://h:7400?", "a query"},
		{"ws://h:7400#f", "a fragment"},
		{"ws://h:7400#", "a fragment"},
	} {
		got, err := node.ParsePeerURL(c.raw)
		var pe *node.PeerURLError
		if !errors.As(err, &pe) || pe.URL != c.raw || !strings.Contains(err.Error(), c.reason) || got != "" {
			t.Errorf("ParsePeerURL(%q) = %q, %v; want a *PeerURLError saying %q", c.raw, got, err, c.reason)
		}
	}
}

// TestBadPeerURLRefused: Start and AddPeer refuse what ParsePeerURL refuses, and a
// wss:// URL on a node without TLS, so a node never keeps a peer it cannot dial.
func TestBadPeerURLRefused(t *testing.T) {
	var pe *node.PeerURLError
	if n, err := node.Start(node.Config{Name: "A", DataDir: t.TempDir(), Peers: []node.Peer{{Name: "B", URL: "http://h:1"}}}); !errors.As(err, &pe) {
		t.Errorf("Start with a peer at http://h:1: %v, want a *PeerURLError", err)
		if n != nil {
			_ = n.Stop()
		}
	}
	a := start(t, "A")
	if err := a.AddPeer(node.Peer{Name: "B", URL: "wss://h:1"}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "needs TLS") {
		t.Errorf("AddPeer at wss://h:1 without TLS: %v, want a *PeerURLError saying it needs TLS", err)
	}
	if st, err := a.Status(); err != nil || len(st.Peers) != 0 {
		t.Errorf("after the refused AddPeer: %+v, %v; want no peer", st.Peers, err)
	}
}
