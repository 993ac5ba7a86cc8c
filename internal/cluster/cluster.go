package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"plait/client"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// Node is a running node, in this process or a process of its own. Its fields and Status
// may be used from any goroutine; Stop, Kill and Restart from one at a time.
type Node struct {
	Name    string
	DataDir string
	URL     string // the replication endpoint, ws://HOST:PORT
	HTTP    string // the HTTP API's HOST:PORT; empty for a node in this process that serves none

	// Local is the node when it runs in this process (nil for a process): the Go API, for
	// the measures that must not go through HTTP.
	Local *node.Node
	srv   *http.Server // Local's HTTP API, when it serves one

	proc *process // nil in this process
}

// httpClient is the harness's HTTP client for /healthz: a stopped (SIGSTOP) process must
// not hang a poll.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// Client is a client of the node's HTTP API (package client), with its Process.Token when
// it has one, and opts after the harness's: a 10 s bound on each call, so that a stopped
// (SIGSTOP) process does not hang a poll.
func (n *Node) Client(opts ...client.Option) (*client.Client, error) {
	if n.HTTP == "" {
		return nil, fmt.Errorf("cluster: %s serves no HTTP API", n.Name)
	}
	base := []client.Option{client.WithTimeout(10 * time.Second)}
	if n.proc != nil {
		base = append(base, client.WithToken(n.proc.cfg.Token))
	}
	return client.New("http://"+n.HTTP, append(base, opts...)...)
}

// Peer is the node as a peer to dial.
func (n *Node) Peer() node.Peer { return node.Peer{Name: n.Name, URL: n.URL} }

// PeerFlag is the node as plait serve's --peer value, NAME=URL.
func (n *Node) PeerFlag() string { return n.Name + "=" + n.URL }

// Status is the node's /v1/status document: through the Go API in this process (no HTTP
// round trip in the benchmarks' polling), through GET /v1/status for a process, with its
// Process.Token when it has one.
func (n *Node) Status() (httpapi.StatusDoc, error) {
	if n.Local != nil {
		st, err := n.Local.Status()
		if err != nil {
			return httpapi.StatusDoc{}, err
		}
		return httpapi.NewStatusDoc(st), nil
	}
	// One attempt: the callers poll, and a poll must see a node that fails as it fails.
	c, err := n.Client(client.WithMaxAttempts(1))
	if err != nil {
		return httpapi.StatusDoc{}, err
	}
	s, err := c.Status(context.Background())
	if err != nil {
		return httpapi.StatusDoc{}, err
	}
	var d httpapi.StatusDoc
	if err := json.Unmarshal(s.Raw, &d); err != nil {
		return httpapi.StatusDoc{}, fmt.Errorf("cluster: %s: the status document: %w", n.Name, err)
	}
	return d, nil
}

// Stop stops the node: Node.Stop in this process; SIGCONT (it may be stopped), then
// SIGTERM for a process, which must exit with status 0 within StopBound (it is killed
// otherwise, and that is an error). Stopping a node that is not running does nothing.
func (n *Node) Stop() error {
	if n.proc != nil {
		return n.proc.stop()
	}
	if n.srv != nil {
		// Close only fails with the listener's close error, which cannot matter: the
		// node's stop below is what the caller waits for.
		_ = n.srv.Close()
	}
	return n.Local.Stop()
}

// Kill ends a process at once (SIGKILL, kill -9) and waits for it. A node in this process
// cannot be killed: that is an error.
func (n *Node) Kill() error {
	if n.proc == nil {
		return fmt.Errorf("cluster: %s runs in this process; only a process can be killed", n.Name)
	}
	return n.proc.kill()
}

// Signal sends a signal to a process (SIGSTOP, SIGCONT).
func (n *Node) Signal(sig os.Signal) error {
	if n.proc == nil || n.proc.cmd == nil {
		return fmt.Errorf("cluster: %s is not a running process", n.Name)
	}
	return n.proc.cmd.Process.Signal(sig)
}

// Pid is a process's id (0 for a node in this process, or a process not running).
func (n *Node) Pid() int {
	if n.proc == nil || n.proc.cmd == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// PollEvery is how often WaitFor looks.
const PollEvery = 20 * time.Millisecond

// WaitFor polls cond every PollEvery until it holds, for at most bound; past the bound it
// is an error that names what was awaited.
func WaitFor(what string, bound time.Duration, cond func() bool) error {
	return WaitEvery(what, bound, PollEvery, cond)
}

// WaitEvery is WaitFor polling every every: the benchmarks time catch-ups by it, so they
// poll every 2 ms.
func WaitEvery(what string, bound, every time.Duration, cond func() bool) error {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, bound)
		}
		time.Sleep(every)
	}
	return nil
}

// freeAddr is a 127.0.0.1 address whose port was free a moment ago (a process started on
// it may lose it to another first; it then fails to start, loudly).
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// exitError says how a process ended, for errors: its exit status or signal.
func exitError(name string, err error) error {
	if err == nil {
		return nil
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Errorf("cluster: %s exited: %s", name, ee.ProcessState)
	}
	return fmt.Errorf("cluster: %s: %w", name, err)
}
