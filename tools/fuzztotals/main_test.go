package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The logs in testdata are real `go test -fuzz -parallel=1` output: pass.log a FuzzDecode run
// of 20 s, fail.log a run that found a failing input after its first progress line,
// seedfail.log one whose committed corpus failed before fuzzing started.
func TestParseRun(t *testing.T) {
	for _, c := range []struct {
		log  string
		want Totals
	}{
		{"pass.log", Totals{Execs: 61895, Seconds: 20, Interesting: 18}},
		{"fail.log", Totals{Execs: 1432, Seconds: 2}},
		{"seedfail.log", Totals{}},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", c.log))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseRun(out)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.log, got, err, c.want)
		}
	}
	// Go's other forms: durations past a minute, no "new interesting" part.
	got, err := parseRun([]byte("fuzz: elapsed: 1h2m3s, execs: 7 (0/sec)\nPASS\n"))
	if err != nil || got != (Totals{Execs: 7, Seconds: 3723}) {
		t.Errorf("long run: %+v, %v", got, err)
	}
	if _, err := parseRun([]byte("ok  \tplait/fuzz\t0.1s\n")); err == nil {
		t.Error("a log without fuzzing output was read as a run")
	}
}

// TestAddRoundTrip: runs add up per target through the rendered file, and a broken row is an
// error, not a row dropped.
func TestAddRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "totals")
	logs := []struct {
		target, log string
		added       int
		crashed     bool
	}{
		{"FuzzSession", "pass.log", 2, false},
		{"FuzzDecode", "fail.log", 0, true},
		{"FuzzSession", "pass.log", 1, false},
		{"FuzzDecode", "seedfail.log", 0, true},
	}
	for _, l := range logs {
		if err := run(file, l.target, filepath.Join("testdata", l.log), l.added, l.crashed); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	totals, err := parseTotals(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Totals{
		{Target: "FuzzDecode", Runs: 2, Execs: 1432, Seconds: 2, Crashes: 2},
		{Target: "FuzzSession", Runs: 2, Execs: 2 * 61895, Seconds: 40, Interesting: 36, Added: 3},
	}
	if len(totals) != len(want) || totals[0] != want[0] || totals[1] != want[1] {
		t.Fatalf("totals %+v\nwant %+v\nfile:\n%s", totals, want, b)
	}
	for _, row := range []string{
		"| FuzzSession | 2 | 123790 | 40s | 40 | 36 | 3 | 0 |",
		"| **all targets** | 4 | 125222 | 42s | 42 | 36 | 3 | 2 |",
	} {
		if !strings.Contains(string(b), row+"\n") {
			t.Errorf("no row %q in\n%s", row, b)
		}
	}
	broken := strings.Replace(string(b), "| FuzzSession | 2 |", "| FuzzSession | two |", 1)
	if _, err := parseTotals([]byte(broken)); err == nil {
		t.Error("a row with a broken count was read")
	}
	if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(file, "FuzzDecode", filepath.Join("testdata", "pass.log"), 0, false); err == nil {
		t.Error("a run was added to a file with a broken row")
	}
	if hours(3723) != "1h 02m" {
		t.Errorf("hours(3723) = %q", hours(3723))
	}
}
