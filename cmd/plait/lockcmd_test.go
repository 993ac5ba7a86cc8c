package main

import (
	"bytes"
	"strings"
	"testing"

	"plait/internal/testnet"
)

// runLock runs plait lock with args: its exit status, standard output and error.
func runLock(args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := lockCommand(args, &out, &errs)
	return code, out.String(), errs.String()
}

// TestLockCommand: plait lock acquire prints a token and its expiry, renew the expiry,
// release nothing; a refusal of the node (the key held, a stale token) exits 1 with its
// code on standard error; a bad command line exits 2.
func TestLockCommand(t *testing.T) {
	t.Setenv("PLAIT_TOKEN", "")
	r := startServe(t, "http", "--http", testnet.FreeAddr(t), "--lock-max-ttl", "2s", "--max-clock-offset", "100ms")
	at := []string{"--http", r.cfg.httpListen}
	if code, _, errs := runLock(append([]string{"acquire", "t", "k", "--ttl", "1s"}, at...)...); code != 1 || !strings.Contains(errs, "no-lock-homes") {
		t.Errorf("acquire before any home: exit %d, %q", code, errs)
	}
	if code, out, errs := runMap(`{"generation":1,"nodes":[{"name":"S"}],"lock_homes":["S"]}`, append([]string{"set", "-"}, at...)...); code != 0 {
		t.Fatalf("map set: %d %q %q", code, out, errs)
	}
	var token string
	poll(t, "a grant after the home's quarantine", func() bool {
		code, out, errs := runLock(append([]string{"acquire", "t", "k", "--ttl", "2s"}, at...)...)
		if code == 1 && strings.Contains(errs, "quarantined") {
			return false
		}
		lines := strings.Split(out, "\n")
		if code != 0 || len(lines) != 3 || len(lines[0]) != 80 || !strings.HasPrefix(lines[1], "expires in ") {
			t.Fatalf("acquire: exit %d, %q, %q", code, out, errs)
		}
		token = lines[0]
		return true
	})
	if code, _, errs := runLock(append([]string{"acquire", "t", "k", "--ttl", "1s"}, at...)...); code != 1 || !strings.Contains(errs, "409 Conflict: lock-held") {
		t.Errorf("acquire of a held key: exit %d, %q", code, errs)
	}
	if code, out, errs := runLock(append([]string{"renew", "t", "k", "--ttl", "2s", "--token", token}, at...)...); code != 0 || !strings.HasPrefix(out, "expires in ") {
		t.Errorf("renew: exit %d, %q, %q", code, out, errs)
	}
	if code, out, errs := runLock(append([]string{"release", "t", "k", "--token", token}, at...)...); code != 0 || out != "" {
		t.Errorf("release: exit %d, %q, %q", code, out, errs)
	}
	if code, _, errs := runLock(append([]string{"release", "t", "k", "--token", token}, at...)...); code != 1 || !strings.Contains(errs, "lock-lost") {
		t.Errorf("release of a stale token: exit %d, %q", code, errs)
	}
	for _, args := range [][]string{{}, {"steal"}, {"acquire", "t"}, {"renew", "t", "k"}, {"acquire", "t", "k", "--token", token}, {"acquire", "t", "k", "--ttl", "0s"}} {
		if code, _, _ := runLock(args...); code != 2 {
			t.Errorf("plait lock %v: exit %d, want 2", args, code)
		}
	}
}
