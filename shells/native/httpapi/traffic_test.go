package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// startNodeIn runs a node of name on the data directory dir with its API, for a test that
// stops it and starts it again on the same directory (startNodeAPI's directory is new).
func startNodeIn(t *testing.T, name, dir string, peers ...node.Peer) (*node.Node, *httptest.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{Name: name, Peers: peers, DataDir: dir, Listener: l, Config: replica.Config{Secret: []byte("http api test secret, long enough")},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(httpapi.New(n, httpapi.Limits{}))
	t.Cleanup(func() {
		api.Close()
		_ = n.Stop() // once: a second Stop does nothing
	})
	return n, api, "ws://" + l.Addr().String()
}

// metricValue is the value of the series of /metrics whose name and labels are series
// exactly (labels in the exposition's order), or -1 when there is none.
func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// peerRows is A's status rows of peer name (its open connections).
func peerRows(st replica.Status, name string) []replica.PeerStatus {
	var rows []replica.PeerStatus
	for _, p := range st.Peers {
		if p.Name == name && p.State == replica.PeerStreaming {
			rows = append(rows, p)
		}
	}
	return rows
}

// trafficFor is the status's traffic total of peer name.
func trafficFor(st replica.Status, name string) replica.Traffic {
	for _, p := range st.Traffic {
		if p.Name == name {
			return p.Traffic
		}
	}
	return replica.Traffic{}
}

// TestPeerTrafficStatusAndMetrics: real traffic between two nodes shows in A's status of
// its peer B (the connection's bytes, messages and frames, each way) and in A's metrics,
// which keep counting across B's connections: B stops and starts again, its new
// connection's status counts from 0, the metrics go on from where they were.
func TestPeerTrafficStatusAndMetrics(t *testing.T) {
	a, aAPI, aURL := startNodeIn(t, "A", t.TempDir())
	bDir := t.TempDir()
	b, _, _ := startNodeIn(t, "B", bDir, node.Peer{Name: "A", URL: aURL})
	ctx := context.Background()
	write := func(n int) {
		t.Helper()
		for range n {
			if _, err := a.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitApplied := func(b *node.Node, seq uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, err := b.Status()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range st.Origins {
				if o.Name == "A" && o.AppliedSeq == seq {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("B never applied A's %d entries", seq)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	write(5)
	waitApplied(b, 5)

	st, err := a.Status()
	if err != nil {
		t.Fatal(err)
	}
	rows := peerRows(st, "B")
	if len(rows) != 1 {
		t.Fatalf("A's rows of B: %+v", rows)
	}
	p := rows[0].Stats
	if p.FramesOutByType.Of(wire.TypeData) != 5 || p.BytesIn == 0 || p.BytesOut <= p.BytesIn || p.MessagesIn == 0 || p.MessagesOut == 0 ||
		p.FramesIn < p.MessagesIn || p.FramesOut < p.MessagesOut {
		t.Fatalf("A's counters of its connection from B after 5 entries: %+v", p)
	}
	first := trafficFor(st, "B")
	if first != replica.TrafficOf(&p) {
		t.Fatalf("A's total of B %+v\nwant its one connection's %+v", first, replica.TrafficOf(&p))
	}
	doc := httpapi.NewStatusDoc(st)
	for _, d := range doc.Peers {
		if d.Name == "B" && (d.BytesIn != p.BytesIn || d.BytesOut != p.BytesOut || d.MessagesIn != p.MessagesIn ||
			d.MessagesOut != p.MessagesOut || d.FramesIn != p.FramesIn || d.FramesOut != p.FramesOut) {
			t.Errorf("A's status document of B %+v\nwant the connection's counters %+v", d, p)
		}
	}
	_, body := do(t, "GET", aAPI.URL+"/metrics", "")
	if v := metricValue(t, body, `plait_peer_frames_total{direction="out",frame="DATA",peer="B"}`); v != 5 {
		t.Errorf("A's DATA frames out to B: %v, want 5", v)
	}
	if v := metricValue(t, body, `plait_peer_frames_total{direction="in",frame="HELLO",peer="B"}`); v != 1 {
		t.Errorf("A's HELLO frames in from B: %v, want 1", v)
	}
	if v := metricValue(t, body, `plait_peer_bytes_total{direction="in",peer="B"}`); v < float64(first.BytesIn) {
		t.Errorf("A's bytes in from B: %v, want at least %d", v, first.BytesIn)
	}
	if v := metricValue(t, body, `plait_peer_frames_total{direction="in",frame="unknown",peer="B"}`); v != -1 {
		t.Errorf("A's unknown frames from B: %v, want no series", v)
	}

	// B goes away and comes back: a new connection.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	write(3)
	b, _, _ = startNodeIn(t, "B", bDir, node.Peer{Name: "A", URL: aURL})
	waitApplied(b, 8)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, err = a.Status(); err != nil {
			t.Fatal(err)
		}
		if rows = peerRows(st, "B"); len(rows) == 1 && len(st.Peers) == 1 && rows[0].Stats.FramesOutByType.Of(wire.TypeData) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's rows of B after B came back: %+v", st.Peers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p = rows[0].Stats
	total := trafficFor(st, "B")
	if total.FramesOutByType.Of(wire.TypeData) != 8 || total.FramesInByType.Of(wire.TypeHello) != 2 ||
		total.BytesIn < first.BytesIn+p.BytesIn || total.BytesOut < first.BytesOut+p.BytesOut || total.FramesIn < first.FramesIn+p.FramesIn {
		t.Errorf("A's total of B over two connections %+v\nfirst %+v\nsecond %+v", total, first, p)
	}
	_, body = do(t, "GET", aAPI.URL+"/metrics", "")
	if v := metricValue(t, body, `plait_peer_frames_total{direction="out",frame="DATA",peer="B"}`); v != 8 {
		t.Errorf("A's DATA frames out to B over two connections: %v, want 8", v)
	}
	if v := metricValue(t, body, `plait_peer_bytes_total{direction="out",peer="B"}`); v < float64(total.BytesOut) {
		t.Errorf("A's bytes out to B: %v, want at least %d", v, total.BytesOut)
	}
}
