package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a `plait serve` process to run.
type Process struct {
	Binary  string // the plait binary
	Name    string
	DataDir string
	Secret  string    // the cluster secret, given as PLAIT_SECRET (kept off the command line)
	Args    []string  // serve flags after --name, --data, --listen and --http (--peer, --sync, ...)
	Output  io.Writer // the process's stdout and stderr (nil: discarded)
	Token   string    // the bearer token Status sends, for a node run with --api-token-file (empty: none)

	// Prefix is a command the binary runs under, its arguments before the binary's path
	// (ip netns exec NAME: the node in a network namespace of its own). It must exec the
	// binary, not fork it, so the process's pid, signals and /proc are plait's own.
	Prefix []string
	// Listen and HTTP are the node's --listen and --http, HOST:PORT; empty, each is a port
	// of 127.0.0.1 that was free a moment before. Listen is the address peers dial
	// (Node.URL), so it must be one they reach.
	Listen, HTTP string
}

// Bounds of a process's life.
const (
	StartBound = 30 * time.Second // from exec until /healthz answers 200
	StopBound  = 30 * time.Second // from SIGTERM (or SIGKILL) until it exited
)

// process is a Node's process: its configuration and, while one runs, the command.
type process struct {
	cfg     Process
	listen  string
	cmd     *exec.Cmd     // nil while none runs
	exited  chan struct{} // closed once cmd exited
	exitErr error         // cmd.Wait's, once exited is closed
}

// StartProcess runs plait serve as p says, on p.Listen and p.HTTP or two free 127.0.0.1
// ports, and returns once its /healthz answers 200. A process that exits first, or is not
// healthy within StartBound, is an error (and killed).
//
// A port freeAddr found free may be taken by another socket before the process binds it
// (an outgoing connection's ephemeral port, another test's listener): the process then
// exits at once. So a process on ports chosen here that exits before it is healthy is
// started again on fresh ones, up to startTries times in all; one that fails so every
// time, or on ports the caller chose, is the error.
func StartProcess(p Process) (*Node, error) {
	for try := 1; ; try++ {
		listen, httpAddr := p.Listen, p.HTTP
		for _, a := range []*string{&listen, &httpAddr} {
			if *a == "" {
				free, err := freeAddr()
				if err != nil {
					return nil, err
				}
				*a = free
			}
		}
		n := &Node{Name: p.Name, DataDir: p.DataDir, URL: "ws://" + listen, HTTP: httpAddr,
			proc: &process{cfg: p, listen: listen}}
		err := n.Restart(p.Args...)
		if err == nil {
			return n, nil
		}
		if try == startTries || p.Listen != "" || p.HTTP != "" || !errors.Is(err, errExitedEarly) {
			return nil, err
		}
	}
}

// startTries is how many times StartProcess starts a process that exits before it is
// healthy on ports it chose.
const startTries = 3

// errExitedEarly marks Restart's error for a process that exited before it was healthy.
var errExitedEarly = errors.New("exited before it was healthy")

// Restart starts a process that was stopped or killed again, on its data directory and
// addresses, with args as its further serve flags (in place of the ones before), and
// returns once it is healthy.
func (n *Node) Restart(args ...string) error {
	p := n.proc
	if p == nil {
		return fmt.Errorf("cluster: %s runs in this process; only a process can be restarted", n.Name)
	}
	if p.cmd != nil {
		return fmt.Errorf("cluster: %s is running", n.Name)
	}
	p.cfg.Args = args
	argv := append(append(append([]string(nil), p.cfg.Prefix...), p.cfg.Binary, "serve", "--name", n.Name, "--data", n.DataDir,
		"--listen", p.listen, "--http", n.HTTP), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PLAIT_SECRET="+p.cfg.Secret)
	cmd.Stdout, cmd.Stderr = p.cfg.Output, p.cfg.Output
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: starting %s: %w", n.Name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	var exited bool
	err := WaitFor(n.Name+" healthy", StartBound, func() bool {
		select {
		case <-p.exited:
			exited = true
			return true
		default:
		}
		resp, err := httpClient.Get("http://" + n.HTTP + "/healthz")
		if err != nil {
			return false // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if exited {
		p.cmd = nil
		if err := exitError(n.Name, p.exitErr); err != nil {
			return fmt.Errorf("%w, %w", err, errExitedEarly)
		}
		return fmt.Errorf("cluster: %s exited with status 0, %w", n.Name, errExitedEarly)
	}
	if err != nil {
		return errors.Join(err, p.kill())
	}
	return nil
}

// stop is Node.Stop of a process.
func (p *process) stop() error {
	if p.cmd == nil {
		return nil
	}
	// A signal fails only once the process is gone; its exit status then says how it went.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		err := exitError(p.cfg.Name, p.exitErr)
		p.cmd = nil
		return err
	case <-time.After(StopBound):
		return errors.Join(fmt.Errorf("cluster: %s did not stop within %s of SIGTERM", p.cfg.Name, StopBound), p.kill())
	}
}

// kill is Node.Kill: SIGKILL and the wait for the exit. How it exited does not matter
// (killed, by definition), unless it does not exit at all.
func (p *process) kill() error {
	if p.cmd == nil {
		return nil
	}
	_ = p.cmd.Process.Kill() // fails only once the process is gone, which is the aim
	select {
	case <-p.exited:
		p.cmd = nil
		return nil
	case <-time.After(StopBound):
		return fmt.Errorf("cluster: %s did not exit within %s of SIGKILL", p.cfg.Name, StopBound)
	}
}

// procStatus is the value of a field of /proc/PID/status of the running process.
func (n *Node) procStatus(field string) (string, error) {
	pid := n.Pid()
	if pid == 0 {
		return "", fmt.Errorf("cluster: %s is not a running process", n.Name)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("cluster: no %s in /proc/%d/status", field, pid)
}

// Memory is a memory field of a process's /proc/PID/status (VmRSS, VmHWM), in bytes.
func (n *Node) Memory(field string) (int64, error) {
	v, err := n.procStatus(field)
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: %s of %s: %w", field, n.Name, err)
	}
	return kb << 10, nil
}

// WatchRSS samples the process's resident memory (VmRSS) now and every every, until the
// returned stop is called; stop returns the largest sample, in bytes (0 when none
// succeeded). A failed sample is skipped: VmHWM, read after, covers every moment.
func (n *Node) WatchRSS(every time.Duration) (stop func() int64) {
	var peak int64 // the sampler's until done is closed
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if rss, err := n.Memory("VmRSS"); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-t.C:
			case <-quit:
				return
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		return peak
	}
}

// Stopped reports whether a process is stopped (SIGSTOP: state T in /proc/PID/status).
func (n *Node) Stopped() (bool, error) {
	v, err := n.procStatus("State")
	if err != nil {
		return false, err
	}
	return strings.HasPrefix(v, "T"), nil
}
