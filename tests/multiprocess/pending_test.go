//go:build multiprocess || scale

package multiprocess

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestPendingUpgradesRefused: the binary holds at most 64 connections that completed the
// WebSocket upgrade but not the protocol handshake (node.Config.MaxPendingHandshakes,
// default 64); the 65th upgrade is answered 503 at once instead of waiting. Once the
// silent connections go, upgrades are accepted again, and the node serves throughout.
func TestPendingUpgradesRefused(t *testing.T) {
	const limit = 64
	n := serve(t, "N")
	// Well inside the 10 s handshake timeout that would free the slots by itself.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var silent []*websocket.Conn
	defer func() {
		for _, ws := range silent {
			_ = ws.CloseNow()
		}
	}()
	for range limit {
		ws, _, err := websocket.Dial(ctx, n.URL+"/v1/replicate", nil)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, ws) // never sends a HELLO
	}
	// A stalled upgrade would end in the context's deadline with no response.
	_, resp, err := websocket.Dial(ctx, n.URL+"/v1/replicate", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upgrade %d: %v, %+v; want 503", limit+1, err, resp)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" {
		t.Error("the 503 carries no Retry-After")
	}
	n.put("t", "k", "v") // the API serves meanwhile
	for _, ws := range silent {
		_ = ws.CloseNow()
	}
	silent = nil
	waitFor(t, "an upgrade accepted again", 20*time.Second, func() bool {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		ws, _, err := websocket.Dial(dctx, n.URL+"/v1/replicate", nil)
		if err != nil {
			return false
		}
		_ = ws.CloseNow()
		return true
	})
	n.stop()
	n.check()
}
