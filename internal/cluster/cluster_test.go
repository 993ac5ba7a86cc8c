package cluster_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

var secret = []byte("cluster test secret of 32 bytes.")

// TestLocalNodes: two nodes in this process, B dialing A; B's status document shows A
// connected and A's write applied; one serves its HTTP API, which answers the same
// document; a node in this process cannot be killed; Stop is idempotent.
func TestLocalNodes(t *testing.T) {
	a, err := cluster.StartLocal(node.Config{Name: "A", DataDir: t.TempDir(), Config: replica.Config{Secret: secret}}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, a)
	b, err := cluster.StartLocal(node.Config{Name: "B", DataDir: t.TempDir(), Peers: []node.Peer{a.Peer()}, Config: replica.Config{Secret: secret}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, b)
	if a.HTTP == "" || b.HTTP != "" || !strings.HasPrefix(a.URL, "ws://127.0.0.1:") || a.PeerFlag() != "A="+a.URL {
		t.Errorf("A at %q and %q (%s), B's HTTP %q", a.URL, a.HTTP, a.PeerFlag(), b.HTTP)
	}
	if _, err := a.Local.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor("B holding A's write", 20*time.Second, func() bool {
		st, err := b.Status()
		o, _ := st.Origin("A")
		return err == nil && st.Connected("A") && o.AppliedSeq == 1
	}); err != nil {
		t.Fatal(err)
	}
	// A's document, through the Go API and through its HTTP API.
	local, err := a.Status()
	if err != nil {
		t.Fatal(err)
	}
	served, err := httpapi.ReadStatus(http.DefaultClient, a.HTTP)
	// The clock offset is a pointer (null before a sample), and a sample between the two
	// reads may move it: the rest of the node's document must be the same.
	sn, ln := served.Node, local.Node
	sn.Clock.OffsetMs, ln.Clock.OffsetMs = nil, nil
	if err != nil || sn != ln || len(served.Origins) != len(local.Origins) {
		t.Errorf("A's status over HTTP: %+v, %v; through the Go API: %+v", served.Node, err, local.Node)
	}
	// A's client reads the write; B serves no API, so it has none.
	if c, err := a.Client(); err != nil {
		t.Error(err)
	} else if v, err := c.Get(context.Background(), "t", []byte("k")); err != nil || string(v) != "v" {
		t.Errorf("A's client read %q, %v; want v", v, err)
	}
	if _, err := b.Client(); err == nil {
		t.Error("B, which serves no API, has a client")
	}
	if err := b.Kill(); err == nil {
		t.Error("a node in this process was killed")
	}
	for range 2 {
		if err := b.Stop(); err != nil {
			t.Errorf("stopping B: %v", err)
		}
	}
}

// TestWaitFor: a condition that holds ends the wait; one that never does is an error
// naming what was awaited, once the bound passed.
func TestWaitFor(t *testing.T) {
	n := 0
	if err := cluster.WaitFor("three polls", time.Second, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("WaitFor: %v after %d polls", err, n)
	}
	begin := time.Now()
	err := cluster.WaitEvery("nothing", 50*time.Millisecond, time.Millisecond, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "nothing") || time.Since(begin) < 50*time.Millisecond {
		t.Errorf("WaitEvery of a condition that never holds: %v after %v", err, time.Since(begin))
	}
}

// TestProcessNeedsABinary: a process of a binary that does not exist is an error, not a
// hang.
func TestProcessNeedsABinary(t *testing.T) {
	if _, err := cluster.StartProcess(cluster.Process{Binary: "/nonexistent/plait", Name: "P", DataDir: t.TempDir()}); err == nil {
		t.Error("a process of /nonexistent/plait started")
	}
}

func stop(t *testing.T, n *cluster.Node) {
	t.Helper()
	if err := n.Stop(); err != nil {
		t.Errorf("stopping %s: %v", n.Name, err)
	}
}

// TestProcessExitingEarlyIsTriedAgain: a process that exits before it is healthy, on ports
// StartProcess chose, is started again on fresh ones (a port found free may be taken before
// the process binds it), three times in all; on ports the caller chose, once.
func TestProcessExitingEarlyIsTriedAgain(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "plait")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho start >> "+count+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	starts := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "start")
	}
	if _, err := cluster.StartProcess(cluster.Process{Binary: script, Name: "P", DataDir: dir}); err == nil {
		t.Fatal("a process that always exits at once started")
	}
	if n := starts(); n != 3 {
		t.Fatalf("started %d times on ports it chose, want 3", n)
	}
	_ = os.Remove(count)
	if _, err := cluster.StartProcess(cluster.Process{Binary: script, Name: "P", DataDir: dir, Listen: "127.0.0.1:1", HTTP: "127.0.0.1:2"}); err == nil {
		t.Fatal("a process that always exits at once started")
	}
	if n := starts(); n != 1 {
		t.Fatalf("started %d times on ports the caller chose, want 1", n)
	}
}
