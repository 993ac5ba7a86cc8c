package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A value is one figure of a plait bench table: its number in the unit it was read in
// (records/s, seconds, MiB), and whether a larger number is better (a rate) or worse (a
// time, a size).
type value struct {
	n      float64
	higher bool
	unit   string
}

// table is one run's figures by measure name (normalized, see key).
type table map[string]value

// aliases are the rows whose names changed across builds: the older name, normalized, and
// the name the current build prints for the same measure.
var aliases = map[string]string{
	// Before CBOR batches, the JSON row said only "HTTP batches".
	"replication a -> b, N records written as http batches": "replication a -> b, N records written as http batches (json)",
}

var (
	digits   = regexp.MustCompile(`\b\d+(?:,\d{3})*(?:\.\d+)?\b`)
	spaces   = regexp.MustCompile(`\s+`)
	rowRE    = regexp.MustCompile(`^\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$`)
	numberRE = regexp.MustCompile(`^(-?[\d.]+)\s*(.*)$`)
	ofLimit  = regexp.MustCompile(`^([\d.]+) of (.+)$`)
)

// key is a measure's name as compared across builds: lower case, every number N (the
// load's sizes are printed in the names), and an older build's name as today's.
func key(name string) string {
	k := spaces.ReplaceAllString(digits.ReplaceAllString(strings.ToLower(name), "N"), " ")
	if a, ok := aliases[k]; ok {
		return a
	}
	return k
}

// parse reads the table plait bench prints: "| measure | result | ratio |" rows. A result
// of two figures ("540µs / 899µs") is two measures: the name's "p50 / p99" read once as
// p50 and once as p99 when it says so, else NAME (1) and NAME (2). A result that is no figure is passed over.
func parse(r io.Reader) (table, error) {
	t := table{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := rowRE.FindStringSubmatch(sc.Text())
		if m == nil || m[1] == "measure" || strings.HasPrefix(m[1], "---") {
			continue
		}
		name, result := m[1], m[2]
		// A ratio to a limit of the same run ("0.19 of raw RocksDB") is a measure of its
		// own: it sets aside what slowed the whole run (the machine, the disk's writeback).
		if r := ofLimit.FindStringSubmatch(m[3]); r != nil {
			if n, err := strconv.ParseFloat(r[1], 64); err == nil {
				t[key(name)+" (of "+strings.ToLower(r[2])+")"] = value{n, true, "of " + r[2]}
			}
		}
		parts := strings.Split(result, " / ")
		for i, p := range parts {
			v, ok := figure(p)
			if !ok {
				continue
			}
			k := key(name)
			switch {
			case len(parts) == 2 && strings.Contains(k, "p50 / p99"):
				k = strings.Replace(k, "p50 / p99", []string{"p50", "p99"}[i], 1)
			case len(parts) > 1:
				k = fmt.Sprintf("%s (%d)", k, i+1)
			}
			t[k] = v
		}
	}
	return t, sc.Err()
}

// figure reads one figure: a rate ("146000 records/s"), a duration ("540.12µs", "12.3
// s"), a size ("45 MiB", "+12 MiB").
func figure(s string) (value, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "+")
	if d, err := time.ParseDuration(s); err == nil {
		return value{d.Seconds(), false, "s"}, true
	}
	m := numberRE.FindStringSubmatch(s)
	if m == nil {
		return value{}, false
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return value{}, false
	}
	unit := m[2]
	switch {
	case strings.HasSuffix(unit, "/s"):
		return value{n, true, unit}, true
	case unit == "s":
		return value{n, false, "s"}, true
	case unit == "MiB":
		return value{n, false, "MiB"}, true
	}
	return value{}, false
}

// compare writes, for every measure either build printed, the median of each build's
// rounds, the ratio of HEAD's median to the base's and the least and greatest ratio of one
// round's pair; a measure one build lacks is "absent" on its side.
func compare(w io.Writer, baseName string, base, head []table) {
	names := map[string]bool{}
	for _, ts := range [][]table{base, head} {
		for _, t := range ts {
			for k := range t {
				names[k] = true
			}
		}
	}
	var sorted []string
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	fmt.Fprintf(w, "| measure | %s, median of %d | HEAD, median of %d | HEAD / %s | per-round ratio, min – max | |\n",
		baseName, len(base), len(head), baseName)
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, k := range sorted {
		b, bok := median(base, k)
		h, hok := median(head, k)
		if !bok || !hok {
			fmt.Fprintf(w, "| %s | %s | %s | | | |\n", k, show(b, bok), show(h, hok))
			continue
		}
		ratio := h.n / b.n
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range min(len(base), len(head)) {
			bv, bok := base[i][k]
			hv, hok := head[i][k]
			if bok && hok && bv.n != 0 {
				lo, hi = min(lo, hv.n/bv.n), max(hi, hv.n/bv.n)
			}
		}
		verdict := "better"
		if ratio == 1 {
			verdict = "same"
		} else if (ratio > 1) != b.higher {
			verdict = "worse"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f – %.2f | %s |\n", k, show(b, true), show(h, true), ratio, lo, hi, verdict)
	}
}

// median is the median of a measure's figures in the tables that hold it.
func median(ts []table, k string) (value, bool) {
	var ns []float64
	var v value
	for _, t := range ts {
		if x, ok := t[k]; ok {
			ns, v = append(ns, x.n), x
		}
	}
	if len(ns) == 0 {
		return value{}, false
	}
	slices.Sort(ns)
	if len(ns)%2 == 1 {
		v.n = ns[len(ns)/2]
	} else {
		v.n = (ns[len(ns)/2-1] + ns[len(ns)/2]) / 2
	}
	return v, true
}

func show(v value, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case v.unit == "s" && v.n < 1:
		return fmt.Sprintf("%.0f µs", v.n*1e6)
	case v.unit == "s":
		return fmt.Sprintf("%.2f s", v.n)
	}
	if v.unit == "MiB" && math.Abs(v.n) < 10 {
		// The feed measures' memory is a few MiB, or a growth near 0: whole MiB would hide it.
		return fmt.Sprintf("%.2f MiB", v.n)
	}
	if strings.HasPrefix(v.unit, "of ") {
		return fmt.Sprintf("%.3f %s", v.n, v.unit)
	}
	return fmt.Sprintf("%.0f %s", v.n, v.unit)
}
