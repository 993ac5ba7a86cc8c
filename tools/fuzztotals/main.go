package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	file := flag.String("file", "fuzz/TOTALS.md", "the totals file (created if missing)")
	target := flag.String("target", "", "the fuzz target the run was of")
	logPath := flag.String("log", "", "the run's go test -fuzz output")
	added := flag.Int("added", 0, "corpus files the run added to testdata/fuzz/<target>")
	crashed := flag.Bool("crashed", false, "the run failed (a crash, or any failure of the target)")
	flag.Parse()
	if err := run(*file, *target, *logPath, *added, *crashed); err != nil {
		fmt.Fprintln(os.Stderr, "fuzztotals:", err)
		os.Exit(1)
	}
}

func run(file, target, logPath string, added int, crashed bool) error {
	if !strings.HasPrefix(target, "Fuzz") || added < 0 {
		return fmt.Errorf("usage: -target FuzzX -log FILE [-added N] [-crashed]")
	}
	out, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	r, err := parseRun(out)
	if err != nil {
		return err
	}
	r.Runs, r.Added = 1, uint64(added)
	if crashed {
		r.Crashes = 1
	}
	var totals []Totals
	if old, err := os.ReadFile(file); err == nil {
		if totals, err = parseTotals(old); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	totals = add(totals, target, r)
	return os.WriteFile(file, render(totals), 0o644)
}

// Totals are one target's cumulative figures (or one run's, with Runs 1).
type Totals struct {
	Target      string
	Runs        uint64
	Execs       uint64
	Seconds     uint64
	Interesting uint64 // new interesting inputs Go's fuzzer reported
	Added       uint64 // of them, files added to the committed corpus
	Crashes     uint64
}

// plus adds r's figures to t's (not its name).
func (t *Totals) plus(r Totals) {
	t.Runs += r.Runs
	t.Execs += r.Execs
	t.Seconds += r.Seconds
	t.Interesting += r.Interesting
	t.Added += r.Added
	t.Crashes += r.Crashes
}

// progress is the coordinator's progress line; "new interesting" is absent when the target
// has no seed corpus to compare with (Go prints the shorter form then).
var progress = regexp.MustCompile(`(?m)^fuzz: elapsed: ([0-9hms.]+), execs: ([0-9]+) \([0-9.]+/sec\)(?:, new interesting: ([0-9]+) \(total: [0-9]+\))?\s*$`)

// parseRun reads a run's figures from its output: the last progress line.
func parseRun(out []byte) (Totals, error) {
	var r Totals
	m := progress.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		if bytes.Contains(out, []byte("fuzz: elapsed: ")) || bytes.Contains(out, []byte("FAIL")) {
			return r, nil // failed before the first progress line: no execs to count
		}
		return r, errors.New("no fuzzing output in the log (not a go test -fuzz run?)")
	}
	last := m[len(m)-1]
	d, err := time.ParseDuration(string(last[1]))
	if err != nil {
		return r, fmt.Errorf("elapsed %q: %w", last[1], err)
	}
	r.Seconds = uint64(d.Round(time.Second) / time.Second)
	if r.Execs, err = strconv.ParseUint(string(last[2]), 10, 64); err != nil {
		return r, fmt.Errorf("execs %q: %w", last[2], err)
	}
	if len(last[3]) > 0 {
		if r.Interesting, err = strconv.ParseUint(string(last[3]), 10, 64); err != nil {
			return r, fmt.Errorf("new interesting %q: %w", last[3], err)
		}
	}
	return r, nil
}

// add adds a run's figures to its target's row (a new row for a new target), rows sorted.
func add(totals []Totals, target string, r Totals) []Totals {
	i := slices.IndexFunc(totals, func(t Totals) bool { return t.Target == target })
	if i < 0 {
		totals = append(totals, Totals{Target: target})
		i = len(totals) - 1
	}
	totals[i].plus(r)
	slices.SortFunc(totals, func(a, b Totals) int { return strings.Compare(a.Target, b.Target) })
	return totals
}

const header = `# Cumulative fuzzing

Every run of ` + "`make fuzz`" + ` (also in its ` + "`DURATION`" + ` mode) adds its figures here, per target:
runs, inputs executed, time spent fuzzing, new interesting inputs Go's fuzzer found (the
fuzz cache keeps them), the corpus files the run added to ` + "`fuzz/testdata/fuzz/<Target>/`" + `,
and crashes (runs that failed). ` + "`make fuzz-ci`" + ` adds nothing: CI fuzzes a fresh clone and
commits nothing. Written by ` + "`tools/fuzztotals`" + ` (do not edit the table by hand); commit it
with the corpus files a run adds. docs/testing.md §7 describes the targets.

`

const tableHead = "| target | runs | execs | fuzzing time | seconds | new interesting | corpus files added | crashes |\n" +
	"|---|---:|---:|---:|---:|---:|---:|---:|\n"

// render writes the file: the header, then a row per target and the sum of all.
func render(totals []Totals) []byte {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString(tableHead)
	sum := Totals{Target: "all targets"}
	for _, t := range totals {
		writeRow(&b, t, t.Target)
		sum.plus(t)
	}
	writeRow(&b, sum, "**"+sum.Target+"**")
	return []byte(b.String())
}

func writeRow(b *strings.Builder, t Totals, name string) {
	fmt.Fprintf(b, "| %s | %d | %d | %s | %d | %d | %d | %d |\n", name, t.Runs, t.Execs,
		hours(t.Seconds), t.Seconds, t.Interesting, t.Added, t.Crashes)
}

// hours renders seconds as hours and minutes (or seconds under a minute).
func hours(s uint64) string {
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dh %02dm", s/3600, s/60%60)
}

// parseTotals reads the rows of targets back (the sum row is recomputed by render).
func parseTotals(b []byte) ([]Totals, error) {
	var out []Totals
	for n, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| Fuzz") {
			continue
		}
		f := strings.Split(strings.Trim(line, "| "), " | ")
		if len(f) != 8 {
			return nil, fmt.Errorf("line %d: %d columns, want 8: %q", n+1, len(f), line)
		}
		t := Totals{Target: f[0]}
		for i, p := range []*uint64{&t.Runs, &t.Execs, nil, &t.Seconds, &t.Interesting, &t.Added, &t.Crashes} {
			if p == nil {
				continue // fuzzing time: rendered from seconds
			}
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d, column %d: %w", n+1, i+2, err)
			}
			*p = v
		}
		if slices.ContainsFunc(out, func(o Totals) bool { return o.Target == t.Target }) {
			return nil, fmt.Errorf("line %d: a second row of %s", n+1, t.Target)
		}
		out = append(out, t)
	}
	return out, nil
}
