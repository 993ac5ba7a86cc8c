//go:build multiprocess

package multiprocess

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"plait/shells/native/httpapi"
)

// Terminal control plait status --watch draws with (cmd/plait/status.go).
const (
	cursorHome  = "\x1b[H"
	clearBelow  = "\x1b[J"
	clearScreen = "\x1b[2J"
)

// output collects what a process writes, for polling.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) copyFrom(r io.Reader) {
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		o.mu.Lock()
		o.buf.Write(b[:n])
		o.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitExit waits for a process sent SIGINT to end; it fails the test unless it exits 0
// within the bound.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("plait status --watch after SIGINT: %v, want exit 0", err)
		}
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("plait status --watch still ran %s after SIGINT", bound)
	}
}

// TestStatusWatchTerminal: plait status --watch under a pseudo-terminal clears the screen
// once, then draws a frame about every second, each from the cursor's home and clearing
// what is left of the last one below it; a write made while it runs shows in a later
// frame (the table's numbers, not only the clock, are read again); SIGINT ends it with
// exit 0.
func TestStatusWatchTerminal(t *testing.T) {
	a := serve(t, "A")
	cmd := exec.Command(binary, "status", "--watch", "--http", a.HTTP)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var out output
	go out.copyFrom(ptmx)
	frames := func() []string {
		s := out.String()
		if !strings.HasPrefix(s, clearScreen) {
			return nil
		}
		var fs []string
		for _, f := range strings.Split(s, cursorHome)[1:] {
			if body, ok := strings.CutSuffix(f, clearBelow); ok {
				fs = append(fs, body)
			}
		}
		return fs
	}
	waitFor(t, "two frames of node A with nothing applied", 20*time.Second, func() bool {
		fs := frames()
		return len(fs) >= 2 && strings.Contains(fs[len(fs)-1], "node A ") && strings.Contains(fs[len(fs)-1], "txns_applied 0")
	})
	a.put("t", "k", "v")
	waitFor(t, "a frame with the write applied", 20*time.Second, func() bool {
		fs := frames()
		return len(fs) > 0 && strings.Contains(fs[len(fs)-1], "txns_applied 1")
	})
	fs := frames()
	clock := regexp.MustCompile(`^plait status --watch  (\d\d:\d\d:\d\d)`)
	seen := map[string]bool{}
	for i, f := range fs {
		m := clock.FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("frame %d does not start with the header: %q", i, f)
		}
		seen[m[1]] = true
	}
	if len(fs) < 3 || len(seen) < 2 {
		t.Errorf("%d frames at %d distinct seconds, want at least 3 frames over 2 seconds", len(fs), len(seen))
	}
	if strings.Count(out.String(), clearScreen) != 1 {
		t.Errorf("the screen was cleared %d times, want once (then redrawn in place)", strings.Count(out.String(), clearScreen))
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, 10*time.Second)
}

// TestStatusWatchPipe: --watch into a pipe writes frames one after another with no
// terminal control; --watch --json writes one status document a line (JSON lines); plain
// --json prints one document, the node's; a node stopped under --watch --json shows as an
// error line, and the watch goes on.
func TestStatusWatchPipe(t *testing.T) {
	a := serve(t, "A")
	plain := exec.Command(binary, "status", "--watch", "--http", a.HTTP)
	plainOut, err := plain.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	jsonl := exec.Command(binary, "status", "--watch", "--json", "--http", a.HTTP)
	jsonOut, err := jsonl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{plain, jsonl} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var po output
	go po.copyFrom(plainOut)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(jsonOut)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var docs []httpapi.StatusDoc
	deadline := time.After(20 * time.Second)
	for len(docs) < 2 {
		select {
		case l := <-lines:
			var d httpapi.StatusDoc
			if err := json.Unmarshal([]byte(l), &d); err != nil || d.Node.Name != "A" {
				t.Fatalf("--watch --json line %q: %v, want a status document of A", l, err)
			}
			docs = append(docs, d)
		case <-deadline:
			t.Fatalf("--watch --json wrote %d documents in 20 s, want 2", len(docs))
		}
	}
	waitFor(t, "two plain frames", 20*time.Second, func() bool {
		return strings.Count(po.String(), "plait status --watch  ") >= 2
	})
	if s := po.String(); strings.Contains(s, "\x1b") || !strings.Contains(s, "\n\nplait status --watch  ") {
		t.Errorf("--watch into a pipe: %q, want frames separated by a blank line and no escape", s)
	}

	out, err := exec.Command(binary, "status", "--json", "--http", a.HTTP).Output()
	var one httpapi.StatusDoc
	if err != nil || bytes.Count(out, []byte("\n")) != 1 || json.Unmarshal(out, &one) != nil || one.Node.Name != "A" {
		t.Errorf("plait status --json: %v, %q; want one line, A's status document", err, out)
	}

	a.stop()
	var stopped struct {
		Error string `json:"error"`
	}
	deadline = time.After(20 * time.Second)
	for stopped.Error == "" {
		select {
		case l := <-lines:
			_ = json.Unmarshal([]byte(l), &stopped)
		case <-deadline:
			t.Fatal("--watch --json showed no error line in 20 s after the node stopped")
		}
	}
	for _, c := range []*exec.Cmd{plain, jsonl} {
		if err := c.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		waitExit(t, c, 10*time.Second)
	}
}
