package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCert: plait cert's exit statuses. A CA, then a node, are written (0); the same again
// is refused without --overwrite (1) and leaves the files as they were; a node before any
// CA fails (1); a bad command line is 2 and writes nothing.
func TestCert(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) int {
		var out, errOut bytes.Buffer
		return cert(args, &out, &errOut)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"server"}, 2},
		{[]string{"ca"}, 2}, // no --dir
		{[]string{"ca", "--dir", dir, "--key", "rsa"}, 2}, // unknown algorithm
		{[]string{"ca", "--dir", dir, "extra"}, 2},        // a positional argument
		{[]string{"ca", "--dir", dir, "--lifetime", "-1h"}, 2},
		{[]string{"node", "--dir", dir}, 2}, // no --name
		{[]string{"node", "--dir", dir, "--name", "ca"}, 2},
		{[]string{"node", "--dir", dir, "--name", "a b"}, 2},
		{[]string{"node", "--dir", dir, "--name", "A", "--host", "no host!"}, 2},
		{[]string{"node", "--dir", dir, "--name", "A"}, 1}, // no CA yet
	} {
		if got := run(c.args...); got != c.want {
			t.Errorf("plait cert %q: exit %d, want %d", c.args, got, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused command lines left %d files", len(entries))
	}
	if got := run("ca", "--dir", dir); got != 0 {
		t.Fatalf("plait cert ca: exit %d", got)
	}
	if got := run("node", "--dir", dir, "--name", "A", "--host", "127.0.0.1", "--host", "a.example", "--key", "ed25519"); got != 0 {
		t.Fatalf("plait cert node: exit %d", got)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "A.key"))
	if got := run("node", "--dir", dir, "--name", "A"); got != 1 {
		t.Errorf("plait cert node over an existing A: exit %d, want 1", got)
	}
	if got := run("ca", "--dir", dir); got != 1 {
		t.Errorf("plait cert ca over an existing CA: exit %d, want 1", got)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "A.key")); !bytes.Equal(before, after) {
		t.Error("a refused plait cert node changed A.key")
	}
	if got := run("node", "--dir", dir, "--name", "A", "--overwrite"); got != 0 {
		t.Errorf("plait cert node --overwrite: exit %d", got)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "A.key")); bytes.Equal(before, after) {
		t.Error("--overwrite kept A.key")
	}
}
