package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"plait/internal/docsection"
)

// TestFlagsInContract: every flag of plait serve and plait status has a row of its own in
// the flag table of its section of docs/contract.md (§2 and §12), "| `--NAME ...` |": a flag
// added without its row fails, even when the text mentions it elsewhere.
func TestFlagsInContract(t *testing.T) {
	section := func(number string) string { return docsection.Section(t, "docs/contract.md", number) }
	flagLine := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	for _, c := range []struct {
		command string
		usage   func(w *bytes.Buffer)
		section string
	}{
		{"serve", func(w *bytes.Buffer) { _, _ = parseServe([]string{"-h"}, w) }, section("2")},
		{"status", func(w *bytes.Buffer) { status([]string{"-h"}, io.Discard, w) }, section("12")},
	} {
		var usage bytes.Buffer
		c.usage(&usage)
		flags := flagLine.FindAllStringSubmatch(usage.String(), -1)
		if len(flags) == 0 {
			t.Fatalf("plait %s -h listed no flags:\n%s", c.command, usage.String())
		}
		for _, f := range flags {
			if !strings.Contains(c.section, "\n| `--"+f[1]+" ") && !strings.Contains(c.section, "\n| `--"+f[1]+"`") {
				t.Errorf("plait %s --%s has no row in its section's flag table in docs/contract.md", c.command, f[1])
			}
		}
	}
}
