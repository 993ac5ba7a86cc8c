//go:build multiprocess

// Package multiprocess holds the tests that run the real plait binary as separate
// processes on 127.0.0.1, with real RocksDB data directories in temp dirs and real
// WebSockets (issue 5). They need the build tag multiprocess and run after every other
// package, one at a time (make test does both).
package multiprocess

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"plait/internal/testnet"
	"strings"
	"syscall"
	"testing"
	"time"

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

// proc is one plait serve process.
type proc struct {
	t      *testing.T
	name   string
	data   string
	listen string
	http   string
	args   []string
	cmd    *exec.Cmd
	log    *os.File
}

// serve starts a node named name; peers are NAME=URL flags.
func serve(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, data: filepath.Join(t.TempDir(), name), listen: testnet.FreeAddr(t), http: testnet.FreeAddr(t), args: args}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) url() string { return "ws://" + p.listen }

func (p *proc) peer() string { return p.name + "=" + p.url() }

// start runs the process and waits for /healthz.
func (p *proc) start() {
	p.t.Helper()
	args := append([]string{"serve", "--name", p.name, "--data", p.data, "--listen", p.listen, "--http", p.http,
		"--secret", "multi-process test secret, 32 bytes"}, p.args...)
	p.cmd = exec.Command(binary, args...)
	log, err := os.CreateTemp(p.t.TempDir(), p.name+"-*.log")
	if err != nil {
		p.t.Fatal(err)
	}
	p.log = log
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	waitFor(p.t, p.name+" healthy", 20*time.Second, func() bool {
		s, _ := p.get("/healthz")
		return s == 200
	})
}

// stop ends the process with SIGTERM and waits for it.
func (p *proc) stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("%s exited: %v", p.name, err)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		p.t.Errorf("%s did not stop on SIGTERM", p.name)
	}
	p.cmd = nil
}

// kill ends the process at once (kill -9); used by cleanup.
func (p *proc) kill() {
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

func (p *proc) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.http + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (p *proc) put(table, key, value string) {
	p.t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+p.http+"/v1/tables/"+table+"/records/"+key, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s: put: %v", p.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		p.t.Fatalf("%s: put: %s", p.name, resp.Status)
	}
}

// connected reports whether the node's connection to peer streams with fresh liveness.
func (p *proc) connected(peer string) bool {
	return p.status().Connected(peer)
}

// addPeer adds q as a peer through POST /v1/peers.
func (p *proc) addPeer(q *proc) {
	p.t.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.http+"/v1/peers", strings.NewReader(`{"name":"`+q.name+`","url":"`+q.url()+`"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("adding %s to %s: %v", q.name, p.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		p.t.Fatalf("adding %s to %s: %s", q.name, p.name, resp.Status)
	}
}

func (p *proc) status() httpapi.StatusDoc {
	p.t.Helper()
	st, err := httpapi.ReadStatus(http.DefaultClient, p.http)
	if err != nil {
		p.t.Fatalf("%s: status: %v", p.name, err)
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
	out, err := exec.Command(binary, "check", "--data", p.data).CombinedOutput()
	if err != nil {
		p.t.Errorf("plait check %s: %v\n%s", p.name, err, out)
	}
}

// waitFor polls cond until it holds or the bound passes.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
