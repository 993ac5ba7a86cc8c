package docsection

import (
	"strings"
	"testing"
)

// TestSection: a subsection runs to the next heading of its level or above, a top-level
// one takes its subsections, and a number that is only a prefix of another's does not match.
func TestSection(t *testing.T) {
	s := Section(t, "docs/contract.md", "6.4")
	if !strings.HasPrefix(s, "### 6.4 Tokens and HTTPS") || strings.Contains(s, "### 6.5") || !strings.Contains(s, "**Scopes.**") {
		t.Errorf("§6.4: %.80q ... %d bytes", s, len(s))
	}
	s = Section(t, "docs/contract.md", "8")
	if !strings.HasPrefix(s, "## 8. `GET /v1/status`") || !strings.Contains(s, "### 8.7") || strings.Contains(s, "\n## 9.") {
		t.Errorf("§8: %.80q ... %d bytes", s, len(s))
	}
	if s := Section(t, "docs/contract.md", "1"); strings.Contains(s, "## 10.") || strings.Contains(s, "## 2.") {
		t.Errorf("§1 runs into another section: %d bytes", len(s))
	}
	if _, err := section("docs/contract.md", "99.9"); err == nil {
		t.Error("a section that is not there was found")
	}
}
