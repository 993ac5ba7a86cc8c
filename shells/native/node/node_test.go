package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

type testNode struct {
	*node.Node
	name string
	url  string
}

func start(t *testing.T, name string, peers ...*testNode) *testNode {
	t.Helper()
	return startIn(t, name, t.TempDir(), peers...)
}

var maxPending = 0 // startIn's MaxPendingHandshakes (0: the default)

// startIn starts a node on the data directory dir.
func startIn(t *testing.T, name, dir string, peers ...*testNode) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ps []node.Peer
	for _, p := range peers {
		ps = append(ps, node.Peer{Name: p.name, URL: p.url})
	}
	return run(t, node.Config{Name: name, DataDir: dir, Listener: l, Peers: ps, MaxPendingHandshakes: maxPending, Config: replica.Config{Secret: []byte("node test secret of enough bytes")}}, "ws://")
}

// run starts a node of cfg (its logs discarded) that its test stops at the end; its url
// is scheme and the listener's address.
func run(t *testing.T, cfg node.Config, scheme string) *testNode {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("%s: %v", cfg.Name, err)
		}
	})
	tn := &testNode{Node: n, name: cfg.Name}
	if cfg.Listener != nil {
		tn.url = scheme + cfg.Listener.Addr().String()
	}
	return tn
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func origin(t *testing.T, n *testNode, name string) replica.OriginStatus {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range st.Origins {
		if o.Name == name {
			return o
		}
	}
	return replica.OriginStatus{}
}

// TestChainOverWebSockets: A <- B <- C over real WebSockets on 127.0.0.1 and RocksDB in
// temp dirs. Writes at A and C reach every node; C takes A through B; digests are equal.
func TestChainOverWebSockets(t *testing.T) {
	a := start(t, "A")
	b := start(t, "B", a)
	c := start(t, "C", b)
	ctx := context.Background()
	const n = 50
	for i := range n {
		for _, w := range []*testNode{a, c} {
			seq, err := w.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(fmt.Sprintf("%s%d", w.name, i)), Value: []byte("v")}})
			if err != nil || seq != uint64(i+1) {
				t.Fatalf("%s write %d: seq %d, %v", w.name, i, seq, err)
			}
		}
	}
	for _, x := range []*testNode{a, b, c} {
		waitFor(t, x.name+" holding both origins", func() bool {
			return origin(t, x, "A").AppliedSeq == n && origin(t, x, "C").AppliedSeq == n
		})
	}
	if o := origin(t, c, "A"); o.SourcePeer != "B" || o.LagSeq != 0 || o.SourceChanges != 0 {
		t.Errorf("C's status of A = %+v, want source B, lag 0, no change", o)
	}
	var sums []string
	for _, x := range []*testNode{a, b, c} {
		count, sum, err := x.Digest("t")
		if err != nil || count != 2*n {
			t.Fatalf("%s digest: %d records, %v", x.name, count, err)
		}
		sums = append(sums, sum)
	}
	if sums[0] != sums[1] || sums[1] != sums[2] {
		t.Errorf("digests differ: %v", sums)
	}
	st, _ := c.Status()
	if st.Counters.DuplicatesReceived != 0 || st.Counters.ProtocolErrors != 0 {
		t.Errorf("C's counters = %+v", st.Counters)
	}
}

// TestRestartResumes: B stops while A writes on, starts again on its data directory and
// catches up from its own cursor vector: nothing is received twice.
func TestRestartResumes(t *testing.T) {
	a := start(t, "A")
	dir := t.TempDir()
	b := startIn(t, "B", dir, a)
	ctx := context.Background()
	put := func(i int) {
		t.Helper()
		if _, err := a.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		put(i)
	}
	waitFor(t, "B holding A's 20", func() bool { return origin(t, b, "A").AppliedSeq == 20 })
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 40; i++ {
		put(i)
	}
	b = startIn(t, "B", dir, a)
	waitFor(t, "B holding A's 40", func() bool { return origin(t, b, "A").AppliedSeq == 40 })
	st, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters.TxnsApplied != 20 || st.Counters.DuplicatesReceived != 0 {
		t.Errorf("B after the restart: %+v, want 20 applied and no duplicate", st.Counters)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if n, err := node.Start(node.Config{Name: "other", DataDir: dir}); err == nil || !strings.Contains(err.Error(), `belongs to node "B"`) {
		t.Errorf("a node named other on B's data directory: %v", err)
		if n != nil {
			_ = n.Stop()
		}
	}
}

// TestPendingHandshakeLimit: beyond MaxPendingHandshakes connections that have not
// completed their handshake, an upgrade is refused at once with 503, on record as
// too-many-pending; a slot frees when such a connection goes away.
func TestPendingHandshakeLimit(t *testing.T) {
	maxPending = 2
	defer func() { maxPending = 0 }()
	a := start(t, "A")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var silent []*websocket.Conn
	for range 2 {
		ws, _, err := websocket.Dial(ctx, a.url+"/v1/replicate", nil)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, ws) // never sends HELLO
	}
	// A stalled upgrade would end in the context's deadline with no response.
	_, resp, err := websocket.Dial(ctx, a.url+"/v1/replicate", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third pending handshake: %v, %+v; want 503", err, resp)
	}
	if got := refusedCount(t, a, wire.CodeTooManyPending); got != 1 {
		t.Fatalf("too-many-pending refusals: %d, want 1", got)
	}
	_ = silent[0].CloseNow()
	waitFor(t, "a slot to free", func() bool {
		ws, _, err := websocket.Dial(ctx, a.url+"/v1/replicate", nil)
		if err != nil {
			return false
		}
		_ = ws.CloseNow()
		return true
	})
	_ = silent[1].CloseNow()
}

// TestAddedPeerIsKept: a peer added through the API is dialed again after a restart.
func TestAddedPeerIsKept(t *testing.T) {
	a := start(t, "A")
	dir := t.TempDir()
	b := startIn(t, "B", dir)
	if err := b.AddPeer(node.Peer{Name: "A", URL: a.url}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddPeer(node.Peer{Name: "A", URL: a.url}); !errors.Is(err, node.ErrPeerExists) {
		t.Errorf("adding A twice: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b = startIn(t, "B", dir)
	waitFor(t, "B connected to A after the restart", func() bool {
		st, _ := b.Status()
		return len(st.Peers) == 1 && st.Peers[0].Name == "A" && st.Peers[0].State == replica.PeerStreaming
	})
	if err := b.RemovePeer("A"); err != nil {
		t.Fatal(err)
	}
	if err := b.RemovePeer("A"); !errors.Is(err, node.ErrPeerUnknown) {
		t.Errorf("removing A twice: %v", err)
	}
}

// TestWriteLimits: the configured write limits reach the replica: a local write one byte
// past them is refused, one at them is taken; WriteLimits reports them, with the defaults
// for the fields left zero.
func TestWriteLimits(t *testing.T) {
	n, err := node.Start(node.Config{Name: "A", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: replica.Config{Write: replica.WriteLimits{MaxKey: 4, MaxValue: 8}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if got, want := n.WriteLimits(), (replica.WriteLimits{MaxKey: 4, MaxValue: 8, MaxTxn: replica.DefaultMaxTxn}); got != want {
		t.Errorf("WriteLimits() = %+v, want %+v", got, want)
	}
	put := func(key, value string) error {
		_, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(key), Value: []byte(value)}})
		return err
	}
	if err := put("kkkk", "vvvvvvvv"); err != nil {
		t.Errorf("a key of 4 and a value of 8: %v", err)
	}
	var we *wire.Error
	for _, c := range [][2]string{{"kkkkk", "v"}, {"k", "vvvvvvvvv"}} {
		if err := put(c[0], c[1]); !errors.As(err, &we) || we.Code != wire.CodeBadArgument {
			t.Errorf("key %q, value %q: %v, want bad-argument", c[0], c[1], err)
		}
	}
	if _, err := node.Start(node.Config{Name: "B", DataDir: t.TempDir(), Config: replica.Config{Write: replica.WriteLimits{MaxValue: -1}}}); err == nil {
		t.Error("a negative value limit was taken")
	}
}

// TestRetentionWithoutPeers: a node that no peer connects to runs retention from its
// start: a log written with no bound is purged to its head once the node starts again with
// --retain-bytes, with no write or connection to wake it.
func TestRetentionWithoutPeers(t *testing.T) {
	dir := t.TempDir()
	startA := func(retain uint64) *node.Node {
		t.Helper()
		n, err := node.Start(node.Config{Name: "A", DataDir: dir, Sync: node.SyncNone,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: replica.Config{RetainBytes: retain}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := startA(0)
	for i := range 5 {
		if _, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n = startA(1)
	defer func() { _ = n.Stop() }()
	waitFor(t, "the log purged to its head", func() bool {
		st, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Origins) == 1 && st.Origins[0].FloorSeq == 4
	})
}

// rawUpgrade opens a WebSocket to a node by hand, so that the test controls every byte:
// it never answers a close.
func rawUpgrade(t *testing.T, n *testNode) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url, "ws://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /v1/replicate HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	var head []byte
	one := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := c.Read(one); err != nil {
			t.Fatalf("upgrade response: %v after %q", err, head)
		}
		head = append(head, one[0])
	}
	if !strings.HasPrefix(string(head), "HTTP/1.1 101") {
		t.Fatalf("upgrade response %q", head)
	}
	return c
}

// TestErrorCloseTornDown: a connection that sends a garbage frame before its handshake is
// refused on record with the frame's code (frame-too-large) and its socket is gone within
// 1 s although the client never answers the close.
func TestErrorCloseTornDown(t *testing.T) {
	a := start(t, "A")
	c := rawUpgrade(t, a)
	// One masked binary message: a HELLO header whose body length is 2^24 + 1.
	payload := []byte{0x01, 0, 0, 0, 0, 0, 0x01, 0, 0, 0x01}
	mask := []byte{1, 2, 3, 4}
	msg := append([]byte{0x82, 0x80 | byte(len(payload))}, mask...)
	for i, b := range payload {
		msg = append(msg, b^mask[i%4])
	}
	sent := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, c) // the node's CLOSE, then its end of the socket
	if took := time.Since(sent); took > time.Second {
		t.Errorf("the socket stayed open %v after the error", took)
	}
	st, err := a.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters.ConnectionsRefused != 1 || len(st.Refusals) != 1 || st.Refusals[0].Code != wire.CodeFrameTooLarge || st.Refusals[0].Remote == "" {
		t.Fatalf("refusals %+v, counters %+v", st.Refusals, st.Counters)
	}
}
