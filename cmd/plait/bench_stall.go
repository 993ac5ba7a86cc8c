package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"plait/shells/native/httpapi"
)

// stallResult is the memory of a sender and its stopped receiver, each its own process.
type stallResult struct {
	senderIdle, senderPeak        int64 // bytes
	receiverStopped, receiverPeak int64
	catchUp                       float64 // records per second once the receiver resumed
}

// benchProc is a plait serve process of plait bench.
type benchProc struct {
	name, listen, http string
	cmd                *exec.Cmd
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startProc runs this binary's plait serve as node name in dir.
func startProc(c *benchConfig, dir, name string, args ...string) (*benchProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &benchProc{name: name}
	if p.listen, err = freeAddr(); err != nil {
		return nil, err
	}
	if p.http, err = freeAddr(); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(self, append([]string{"serve", "--name", name, "--data", filepath.Join(dir, name),
		"--listen", p.listen, "--http", p.http, "--sync", string(c.sync)}, args...)...)
	p.cmd.Env = append(os.Environ(), "PLAIT_SECRET="+string(benchSecret))
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	err = waitUntil(name+" serving", time.Minute, func() bool {
		resp, err := http.Get("http://" + p.http + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// stop ends the process (SIGCONT first, in case it is stopped) and waits for it.
func (p *benchProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// memory reads a field of /proc/PID/status (VmRSS, VmHWM) in bytes.
func (p *benchProc) memory(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
}

// status reads GET /v1/status: each origin's applied seq and each peer's connected, by name.
func (p *benchProc) status() (applied map[string]uint64, connected map[string]bool, err error) {
	doc, err := httpapi.ReadStatus(http.DefaultClient, p.http)
	if err != nil {
		return nil, nil, err
	}
	applied, connected = map[string]uint64{}, map[string]bool{}
	for _, o := range doc.Origins {
		applied[o.Name] = o.AppliedSeq
	}
	for _, q := range doc.Peers {
		connected[q.Name] = q.Connected
	}
	return applied, connected, nil
}

// stalledReceiver runs A and B as processes (B dials A), stops B with SIGSTOP, writes
// c.stalled records to A as HTTP batches while sampling A's resident memory, then resumes
// B and times its catch-up.
func stalledReceiver(c *benchConfig) (stallResult, error) {
	var res stallResult
	dir := filepath.Join(c.dir, "stalled")
	a, err := startProc(c, dir, "A")
	if err != nil {
		return res, err
	}
	defer a.stop()
	b, err := startProc(c, dir, "B", "--peer", "A=ws://"+a.listen)
	if err != nil {
		return res, err
	}
	defer b.stop()
	if err := waitUntil("B connected to A", time.Minute, func() bool {
		_, conn, err := b.status()
		return err == nil && conn["A"]
	}); err != nil {
		return res, err
	}
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return res, err
	}
	if res.senderIdle, err = a.memory("VmRSS"); err != nil {
		return res, err
	}
	if res.receiverStopped, err = b.memory("VmRSS"); err != nil {
		return res, err
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, err := a.memory("VmRSS"); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	txns, err := writeRecords(c, &benchNode{name: "A", httpURL: "http://" + a.http}, 0, c.stalled, c.writers, true)
	close(stop)
	<-sampled
	if err != nil {
		return res, err
	}
	hwm, err := a.memory("VmHWM") // the kernel's peak, between samples too
	if err != nil {
		return res, err
	}
	res.senderPeak = max(peak.Load(), hwm)
	begin := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return res, err
	}
	if err := waitUntil("B caught up after resuming", benchBound, func() bool {
		applied, _, err := b.status()
		return err == nil && applied["A"] >= txns
	}); err != nil {
		return res, err
	}
	res.catchUp = float64(c.stalled) / time.Since(begin).Seconds()
	if res.receiverPeak, err = b.memory("VmHWM"); err != nil {
		return res, errors.New("receiver: " + err.Error())
	}
	return res, nil
}
