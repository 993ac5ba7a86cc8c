package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"plait/internal/testnet"
	"plait/protocol/replica"
	"plait/shells/native/httpapi"
)

// runMap runs plait map with args and stdin: its exit status, standard output and error.
func runMap(stdin string, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := clusterMap(args, strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

// TestMapCommand: plait map get prints a node's map as indented JSON, of itself or with
// --node of a node asked through it; plait map set publishes a file or standard input and
// prints the map adopted; a refusal of the node exits 1 with its status, code and message
// on standard error; a token of scope read may get and not set.
func TestMapCommand(t *testing.T) {
	t.Setenv("PLAIT_TOKEN", "")
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, testReadToken+" read\n"+testAdminToken+" admin\n")
	readFile, adminFile := filepath.Join(dir, "read"), filepath.Join(dir, "admin")
	writeFile(t, readFile, testReadToken+"\n")
	writeFile(t, adminFile, testAdminToken+"\n")
	r := startServe(t, "http", "--http", testnet.FreeAddr(t), "--api-token-file", tokens)
	at := []string{"--http", r.cfg.httpListen}

	code, out, errs := runMap("", append([]string{"get", "--token-file", readFile}, at...)...)
	if code != 0 || out != "{\n  \"generation\": 0\n}\n" {
		t.Errorf("plait map get before any map: exit %d, %q, %q", code, out, errs)
	}
	doc := filepath.Join(dir, "map.json")
	writeFile(t, doc, `{"nodes":[{"name":"S"}],"generation":2}`)
	const two = "{\n  \"generation\": 2,\n  \"nodes\": [\n    {\n      \"name\": \"S\"\n    }\n  ]\n}\n"
	// FILE first, before the flags: it may stand anywhere.
	code, out, errs = runMap("", append([]string{"set", doc, "--token-file", adminFile}, at...)...)
	if code != 0 || out != two {
		t.Errorf("plait map set FILE: exit %d, %q, %q; want 0 and\n%s", code, out, errs, two)
	}
	for _, args := range [][]string{{"get"}, {"get", "--node", "S"}} {
		code, out, errs = runMap("", append(append(args, "--token-file", readFile), at...)...)
		if code != 0 || out != two {
			t.Errorf("plait map %v: exit %d, %q, %q; want 0 and\n%s", args, code, out, errs, two)
		}
	}
	code, out, errs = runMap(`{"generation":3}`, append([]string{"set", "--token-file", adminFile, "-"}, at...)...)
	if code != 0 || out != "{\n  \"generation\": 3\n}\n" {
		t.Errorf("plait map set - (standard input): exit %d, %q, %q", code, out, errs)
	}

	for _, c := range []struct {
		what, stdin string
		args        []string
		want        []string // on standard error
	}{
		{"a stale generation", `{"generation":2}`, []string{"set", "-", "--token-file", adminFile},
			[]string{"plait map set: 409 Conflict: stale-generation: ", "generation 2 is not above"}},
		{"a document refused", `{"generation":4,"colour":"red"}`, []string{"set", "-", "--token-file", adminFile},
			[]string{"400 Bad Request: unknown-field: "}},
		{"a read token sets", `{"generation":4}`, []string{"set", "-", "--token-file", readFile}, []string{"403 Forbidden: forbidden: "}},
		{"no token", "", []string{"get"}, []string{"401 Unauthorized: unauthorized: "}},
		{"a node no route reaches", "", []string{"get", "--node", "Z", "--token-file", readFile}, []string{"502 Bad Gateway: no-route: "}},
	} {
		code, out, errs := runMap(c.stdin, append(c.args, at...)...)
		if code != 1 || out != "" {
			t.Errorf("%s: exit %d, %q; want 1 and nothing on standard output", c.what, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: standard error %q lacks %q", c.what, errs, w)
			}
		}
	}
	code, out, errs = runMap("", append([]string{"get", "--token-file", readFile}, at...)...)
	if code != 0 || out != "{\n  \"generation\": 3\n}\n" {
		t.Errorf("plait map get after the refusals: exit %d, %q, %q; want generation 3 still", code, out, errs)
	}
}

// TestMapCommandLine: the command lines plait map refuses, with exit 2 before it dials
// (the --http given is nobody's), and with a message naming what is wrong.
func TestMapCommandLine(t *testing.T) {
	nobody := testnet.FreeAddr(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "map.json")
	writeFile(t, doc, `{"generation":1}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: plait map get"},
		{[]string{"put"}, "usage: plait map get"},
		{[]string{"get", "extra"}, `unexpected argument "extra"`},
		{[]string{"get", "--node", "a b"}, "--node a b: not a node name"},
		{[]string{"set"}, "FILE (- reads standard input) missing"},
		{[]string{"set", doc, doc}, "unexpected argument"},
		{[]string{"set", "--node", "S", doc}, "--node: no such flag"},
		{[]string{"set", filepath.Join(dir, "missing.json")}, "missing.json"},
		{[]string{"get", "--http", "nowhere"}, "--http"},
		{[]string{"get", "--token-file", filepath.Join(dir, "missing")}, "--token-file"},
		{[]string{"get", "--ca", doc}, "holds no PEM certificate"},
	} {
		args := c.args
		if len(args) > 0 && !strings.Contains(strings.Join(args, " "), "--http") {
			args = append(args, "--http", nobody)
		}
		code, out, errs := runMap("", args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("plait map %v: exit %d, %q, %q; want 2 naming %q", c.args, code, out, errs, c.want)
		}
	}
	if code, _, errs := runMap("", "get", "-h"); code != 2 || !strings.Contains(errs, "--node NAME") {
		t.Errorf("plait map get -h: exit %d, %q; want 2 and the flags", code, errs)
	}
	if code, _, errs := runMap("", "get", "--http", nobody); code != 1 || !strings.Contains(errs, "plait map get: ") {
		t.Errorf("plait map get of a node that is not there: exit %d, %q; want 1", code, errs)
	}
}

// TestPrintStatusMap: plait status's map line, after the TLS line: none; a map with its
// publisher, members and those below version 4; one without a member list; a conflict,
// with the generation that ends it. The locks line follows (no placement line between).
func TestPrintStatusMap(t *testing.T) {
	for _, c := range []struct {
		m    httpapi.ClusterMapDoc
		want string
	}{
		{httpapi.ClusterMapDoc{}, "map none"},
		{httpapi.ClusterMapDoc{Generation: 4, Publisher: "A", AppliedAt: "2026-12-07T00:00:00.000Z", Members: []string{"A", "B", "C"},
			MembersBelowV4: []string{"B", "C"}},
			"map generation 4  publisher A  applied 2026-12-07T00:00:00.000Z  members 3  below version 4: B, C"},
		{httpapi.ClusterMapDoc{Generation: 4, Publisher: "A", AppliedAt: "2026-12-07T00:00:00.000Z", Members: []string{"A"}},
			"map generation 4  publisher A  applied 2026-12-07T00:00:00.000Z  members 1  below version 4: -"},
		{httpapi.ClusterMapDoc{Generation: 5, Publisher: "B", AppliedAt: "2026-12-07T00:00:00.000Z", Conflict: &httpapi.MapConflictDoc{Generation: 5, Publisher: "C"}},
			"map generation 5  publisher B  applied 2026-12-07T00:00:00.000Z  members not listed  CONFLICT: another map of generation 5, published on C; publish generation 6 to end it"},
	} {
		d := httpapi.NewStatusDoc(replica.Status{})
		d.ClusterMap = c.m
		var out bytes.Buffer
		printStatus(&out, d)
		lines := strings.Split(out.String(), "\n")
		if len(lines) < 7 || lines[2] != "tls off" || lines[3] != c.want || !strings.HasPrefix(lines[4], "locks ") || !strings.HasPrefix(lines[5], "feeds ") || lines[6] != "" {
			t.Errorf("the lines after the node's:\n%s\nwant line 4 %q, then none about placement, then the locks and feeds lines", strings.Join(lines[:min(len(lines), 7)], "\n"), c.want)
		}
	}
}

// TestPrintStatusPlacement: with tables placed, plait status prints a line after the map's:
// each placed table with its carriers, marked where this node carries it, what it fills
// and what it waits to remove.
func TestPrintStatusPlacement(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	carried := []string{"orders"}
	d.ClusterMap = httpapi.ClusterMapDoc{Generation: 3, Publisher: "A", AppliedAt: "2026-12-07T00:00:00.000Z", Members: []string{"A", "B", "C"},
		Placement: map[string][]string{"stock": {"C"}, "orders": {"A", "B"}, "lines": {"C"}}, Carried: &carried, Filling: []string{"orders"},
		Removals: []httpapi.RemovalDoc{{Table: "lines", WaitingFor: []string{"C"}}}}
	var out bytes.Buffer
	printStatus(&out, d)
	lines := strings.Split(out.String(), "\n")
	want := "placement lines on C  orders* on A,B  stock on C  filling orders  removing lines (waiting for C)"
	if len(lines) < 5 || lines[4] != want {
		t.Errorf("the lines after the node's:\n%s\nwant line 5 %q", strings.Join(lines[:min(len(lines), 6)], "\n"), want)
	}
}
