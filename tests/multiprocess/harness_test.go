//go:build multiprocess || scale

// Package multiprocess holds the tests that run the real plait binary as separate
// processes on 127.0.0.1 (internal/cluster runs them), with real RocksDB data directories
// in temp dirs and real WebSockets. They need the build tag multiprocess and run after
// every other package, one at a time (make test does both). The tag scale builds the same
// package with the clusters at scale beside it (scale_test.go, netns_test.go: make scale
// runs those alone); every other file builds under either tag, so both share one harness.
package multiprocess

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"plait/client"
	"plait/internal/cluster"
	"plait/shells/native/httpapi"
)

// binary is the plait binary, built once per test run.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plait-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "plait")
	build := exec.Command("go", "build", "-o", binary, "plait/cmd/plait")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building plait:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secret is every test node's cluster secret.
const secret = "multi-process test secret, 32 bytes"

// proc is one plait serve process of a test: a cluster.Node whose failures fail the test.
type proc struct {
	*cluster.Node
	t    *testing.T
	args []string // serve's further flags, at every start
}

// serve starts a node named name with the further serve flags args (--peer NAME=URL,
// ...); it is killed at the test's end if it still runs. Its output goes to a log file in
// the test's temporary directory.
func serve(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return serveSecret(t, name, secret, args...)
}

// start starts the node again, on its data directory and addresses, with p.args.
func (p *proc) start() {
	p.t.Helper()
	if err := p.Restart(p.args...); err != nil {
		p.t.Fatal(err)
	}
}

// stop ends the process with SIGTERM and waits for it: it must exit with status 0.
func (p *proc) stop() {
	p.t.Helper()
	if err := p.Stop(); err != nil {
		p.t.Error(err)
	}
}

// kill ends the process at once (kill -9).
func (p *proc) kill() {
	p.t.Helper()
	if err := p.Kill(); err != nil {
		p.t.Error(err)
	}
}

func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.HTTP + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// api is a client of the node's HTTP API (package client), with its token and opts.
func (p *proc) api(opts ...client.Option) *client.Client {
	p.t.Helper()
	c, err := p.Client(opts...)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// put writes value under key through the node's API; a write the client does not send
// again (its rule, docs/contract.md §25.3) and that failed fails the test.
func (p *proc) put(table, key, value string) {
	p.t.Helper()
	if _, err := p.api().Put(context.Background(), table, []byte(key), []byte(value)); err != nil {
		p.t.Fatalf("%s: put: %v", p.Name, err)
	}
}

// connected reports whether the node's connection to peer streams with fresh liveness.
func (p *proc) connected(peer string) bool {
	return p.status().Connected(peer)
}

// addPeer adds q as a peer through POST /v1/peers.
func (p *proc) addPeer(q *proc) {
	p.t.Helper()
	p.addPeerAt(q.Name, q.URL)
}

// addPeerAt adds the peer name, dialed at url (a proxy in front of it, say), through POST
// /v1/peers.
func (p *proc) addPeerAt(name, url string) {
	p.t.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.HTTP+"/v1/peers", strings.NewReader(`{"name":"`+name+`","url":"`+url+`"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("adding %s to %s: %v", name, p.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		p.t.Fatalf("adding %s to %s: %s", name, p.Name, resp.Status)
	}
}

func (p *proc) status() httpapi.StatusDoc {
	p.t.Helper()
	st, err := p.Status()
	if err != nil {
		p.t.Fatalf("%s: status: %v", p.Name, err)
	}
	return st
}

// origin is p's status of the origin of that name (the zero value when p has none).
func (p *proc) origin(name string) httpapi.OriginDoc {
	o, _ := p.status().Origin(name)
	return o
}

func (p *proc) digest(table string) string {
	_, body := p.get("/v1/tables/" + table + "/digest")
	return body
}

// check runs plait check on the stopped node's data directory.
func (p *proc) check() {
	p.t.Helper()
	out, err := exec.Command(binary, "check", "--data", p.DataDir).CombinedOutput()
	if err != nil {
		p.t.Errorf("plait check %s: %v\n%s", p.Name, err, out)
	}
}

// waitFor polls cond until it holds; past the bound the test fails.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	if err := cluster.WaitFor(what, bound, cond); err != nil {
		t.Fatal(err)
	}
}
