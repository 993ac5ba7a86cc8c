package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeBadFlags: every bad flag exits with status 2 and a message naming the flag.
func TestServeBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--sync", "sometimes"}, "--sync"},
		{[]string{"--protocol-max", "3"}, "--protocol-max"},
		{[]string{"--protocol-max", "x"}, "-protocol-max"},
		{[]string{"--peer", "B"}, "-peer"},
		{[]string{"--peer", "B=http://h:1"}, "-peer"},
		{[]string{"--peer", "B=ws://h:1", "--peer", "B=ws://h:2"}, "-peer"},
		{[]string{"--listen", "nocolon"}, "--listen"},
		{[]string{"--http", "nocolon"}, "--http"},
		{[]string{"--listen", "0.0.0.0:7400"}, "--secret"},
		{[]string{"--listen", "0.0.0.0:7400", "--secret", "short"}, "--secret"},
		{[]string{"--name", ""}, "--name"},
		{[]string{"--bogus"}, "-bogus"},
		{[]string{"extra"}, "extra"},
	} {
		var stderr bytes.Buffer
		if code := serve(c.args, &stderr); code != 2 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("plait serve %v: exit %d, %q; want 2 naming %s", c.args, code, stderr.String(), c.flag)
		}
	}
}

// TestServeDefaults: no flags at all is a valid configuration (CONTRACT.md).
func TestServeDefaults(t *testing.T) {
	t.Setenv("PLAIT_SECRET", "")
	cfg, err := parseServe(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.listen != "127.0.0.1:7400" || cfg.httpListen != "127.0.0.1:7401" || cfg.node.DataDir != "./plait-data" ||
		cfg.node.Sync != "origin" || cfg.node.ProtocolMax != 0 || cfg.node.Name == "" {
		t.Errorf("defaults: %+v", cfg)
	}
	t.Setenv("PLAIT_SECRET", "from the environment, 32 bytes..")
	cfg, err = parseServe([]string{"--listen", "0.0.0.0:7400"}, &bytes.Buffer{})
	if err != nil || string(cfg.node.Secret) != "from the environment, 32 bytes.." {
		t.Errorf("PLAIT_SECRET: %v, %+v", err, cfg)
	}
}
