//go:build multiprocess || scale

package multiprocess

import (
	"strings"
	"testing"
)

// TestDataDirectoryInUse: plait check, plait reseed and a second plait serve on the data
// directory of a running node exit 1 saying, with the flag, that another plait process
// holds it, never RocksDB's lock error; the running node keeps serving.
func TestDataDirectoryInUse(t *testing.T) {
	n := serve(t, "N")
	for _, args := range [][]string{
		{"check", "--data", n.DataDir},
		{"reseed", "--data", n.DataDir},
		{"serve", "--name", "N", "--data", n.DataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
	} {
		code, out := run(t, []string{"PLAIT_SECRET=" + secret}, args...)
		if code != 1 || !strings.Contains(out, "--data: ") || !strings.Contains(out, "held open by another plait process") ||
			strings.Contains(out, "IO error") || strings.Contains(out, "Resource temporarily unavailable") {
			t.Errorf("plait %s on a running node's directory: exit %d\n%s\nwant 1, saying --data is held by another plait process", args[0], code, out)
		}
	}
	if s, _ := n.get("/healthz"); s != 200 {
		t.Errorf("the running node's healthz: %d", s)
	}
	n.stop()
	n.check()
}
