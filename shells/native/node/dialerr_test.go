package node_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"plait/protocol/replica"
	"plait/shells/native/node"
)

// TestLastDialError: a peer nobody listens for shows dial-refused with the dial's message
// and time, a peer whose address answers HTTP without the WebSocket upgrade shows
// upgrade-refused with the status, and the last dial error is kept once the first peer
// comes up and streams.
func TestLastDialError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	later := l.Addr().String()
	l.Close() // nothing listens there until B starts on it below
	web, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { _ = srv.Serve(web) }()
	t.Cleanup(func() { _ = srv.Close() })

	a := start(t, "A", &testNode{name: "B", url: "ws://" + later}, &testNode{name: "W", url: "ws://" + web.Addr().String()})
	waitFor(t, "A's dial errors of B and W", func() bool {
		b, _ := peerOf(t, a, "B")
		w, _ := peerOf(t, a, "W")
		return b.LastDialError != nil && w.LastDialError != nil
	})
	b, _ := peerOf(t, a, "B")
	if e := b.LastDialError; e.Code != node.DialRefused || !strings.Contains(e.Message, "refused") || e.At.IsZero() {
		t.Errorf("B, where nothing listens: last dial error %+v; want %s with the dial's message and time", e, node.DialRefused)
	}
	if w, _ := peerOf(t, a, "W"); w.LastDialError.Code != node.DialUpgrade || !strings.Contains(w.LastDialError.Message, "HTTP 404") {
		t.Errorf("W, an HTTP server: last dial error %+v; want %s naming HTTP 404", w.LastDialError, node.DialUpgrade)
	}

	l, err = net.Listen("tcp", later)
	if err != nil {
		t.Skipf("the port B was to take is taken: %v", err)
	}
	run(t, node.Config{Name: "B", DataDir: t.TempDir(), Listener: l, Config: replica.Config{Secret: []byte("node test secret of enough bytes")}}, "ws://")
	waitFor(t, "A streaming to B", func() bool { return streamingTo(t, a, "B") })
	if b, _ := peerOf(t, a, "B"); b.LastDialError == nil || b.LastDialError.Code != node.DialRefused {
		t.Errorf("B, streaming now: last dial error %+v; want the dial-refused of before, kept", b.LastDialError)
	}
}
