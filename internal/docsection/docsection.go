package docsection

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"plait/tools/docrefs"
)

// Section is the section numbered number ("6.4", or "8" for a top-level "## 8. ...") of
// file (its path from the repository's root, as "docs/contract.md"), from its heading to the next heading of the same or a higher level; the test
// fails when the file or the section is not there.
func Section(t testing.TB, file, number string) string {
	t.Helper()
	s, err := section(file, number)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func section(file, number string) (string, error) {
	root, err := docrefs.Root(".") // a test runs in its package's directory
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return "", err
	}
	lines := strings.SplitAfter(string(raw), "\n")
	start, level, fenced := -1, 0, false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced // a "# comment" in a code block is no heading
		}
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if fenced || hashes == 0 || !strings.HasPrefix(l[hashes:], " ") {
			continue
		}
		if start >= 0 && hashes <= level {
			return strings.Join(lines[start:i], ""), nil
		}
		rest := l[hashes+1:]
		if start < 0 && (strings.HasPrefix(rest, number+" ") || strings.HasPrefix(rest, number+". ")) {
			start, level = i, hashes
		}
	}
	if start < 0 {
		return "", fmt.Errorf("%s has no section %s", file, number)
	}
	return strings.Join(lines[start:], ""), nil
}
