package main

import (
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"

	"plait/internal/docsection"
)

// contractFlag is one row of a flag table of docs/contract.md: "| `--NAME ARG` | DEFAULT |".
type contractFlag struct {
	arg, def string
}

// contractFlags reads the flag table of a section of docs/contract.md.
func contractFlags(t *testing.T, section string) map[string]contractFlag {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)(?: ([^`]+))?` \\| ([^|]*) \\|")
	flags := map[string]contractFlag{}
	for _, m := range row.FindAllStringSubmatch(docsection.Section(t, "docs/contract.md", section), -1) {
		flags[m[1]] = contractFlag{arg: m[2], def: strings.TrimSpace(m[3])}
	}
	if len(flags) == 0 {
		t.Fatalf("docs/contract.md §%s has no flag table", section)
	}
	return flags
}

// defaultLiteral is the default a contract cell writes: its leading code span (`2s`,
// `0`: the default), a bare true or false, or "" for none (none, the environment's ...).
func defaultLiteral(cell string) (string, bool) {
	switch {
	case strings.HasPrefix(cell, "`"):
		lit, _, ok := strings.Cut(cell[1:], "`")
		return lit, ok
	case cell == "false" || cell == "true":
		return cell, true
	case strings.HasPrefix(cell, "none"):
		return "", true
	}
	return "", false
}

// TestFlagsInContract: the flag tables of plait serve, plait status and plait map (their
// settings, from which their flags and -h come) and the contract's (§2, §12 and §22.5) are
// the same, both ways: every flag has its row, with the same argument name and default, and every row is
// a flag. A default compares as a value: the contract's literal, given to the flag, must
// read back as the flag's default (72h is 72h0m0s).
func TestFlagsInContract(t *testing.T) {
	for _, c := range []struct {
		command, section string
		table            func() []setting
		others           []string // rows of the section for another command of it
	}{
		{"serve", "2", func() []setting { return (&serveConfig{}).settings() }, nil},
		{"status", "12", func() []setting { return (&statusFlags{}).settings() }, nil},
		{"map get", "22.5", func() []setting { return (&mapFlags{}).getSettings() }, nil},
		{"map set", "22.5", func() []setting { return (&mapFlags{}).apiFlags.settings() }, []string{"node"}},
		{"lock", "22.10", func() []setting { return (&lockFlags{}).settings() }, nil},
	} {
		documented := contractFlags(t, c.section)
		for _, name := range c.others {
			delete(documented, name)
		}
		fs := flag.NewFlagSet(c.command, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		table := c.table()
		bind(fs, table)
		for _, s := range table {
			d, ok := documented[s.name]
			if !ok {
				t.Errorf("plait %s --%s has no row in docs/contract.md §%s", c.command, s.name, c.section)
				continue
			}
			delete(documented, s.name)
			if d.arg != s.arg {
				t.Errorf("plait %s --%s: the contract writes its value %q, the flag %q", c.command, s.name, d.arg, s.arg)
			}
			lit, ok := defaultLiteral(d.def)
			if !ok {
				t.Errorf("plait %s --%s: the contract's default %q starts with neither a `value`, true, false nor none", c.command, s.name, d.def)
				continue
			}
			f := fs.Lookup(s.name)
			if lit == "" {
				if f.DefValue != "" {
					t.Errorf("plait %s --%s: the contract says no default, the flag's is %q", c.command, s.name, f.DefValue)
				}
				continue
			}
			// The contract's literal, set on a fresh table's field, must read back as the
			// default does (the fresh table's values are separate from fs's).
			fresh := flag.NewFlagSet("fresh", flag.ContinueOnError)
			fresh.SetOutput(io.Discard)
			bind(fresh, c.table())
			if err := fresh.Set(s.name, lit); err != nil {
				t.Errorf("plait %s --%s: the contract's default %q is not a value of the flag: %v", c.command, s.name, lit, err)
			} else if got := fresh.Lookup(s.name).Value.String(); got != f.DefValue {
				t.Errorf("plait %s --%s: the contract's default %q reads %q; the flag's default is %q", c.command, s.name, lit, got, f.DefValue)
			}
		}
		for name := range documented {
			t.Errorf("docs/contract.md §%s has a row for --%s, which plait %s does not have", c.section, name, c.command)
		}
	}
}
