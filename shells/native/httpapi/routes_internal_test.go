package httpapi

import (
	"regexp"
	"strings"
	"testing"

	"plait/internal/docsection"
	"plait/shells/native/apitoken"
)

// TestScopeTableInContract: docs/contract.md §6.4's scope table names every endpoint of
// routes at the scope it needs, and nothing routes does not serve: an endpoint added
// without its row, or a row left for one removed or moved, fails.
func TestScopeTableInContract(t *testing.T) {
	scopeOf := map[string]apitoken.Scope{"`read`": apitoken.Read, "`write`": apitoken.Write, "`admin`": apitoken.Admin, "none": open}
	endpoint := regexp.MustCompile("`((?:GET|PUT|POST|DELETE) /[^`]*)`")
	documented := map[string]apitoken.Scope{}
	for _, line := range strings.Split(docsection.Section(t, "docs/contract.md", "6.4"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 {
			continue
		}
		scope, ok := scopeOf[strings.TrimSpace(cells[1])]
		if !ok {
			continue
		}
		for _, m := range endpoint.FindAllStringSubmatch(cells[2], -1) {
			documented[m[1]] = scope
		}
	}
	// A pattern as the contract writes it: {key...} is {key}, and /{$} is /.
	written := strings.NewReplacer("...}", "}", "{$}", "")
	served := map[string]apitoken.Scope{}
	for _, r := range (&API{}).routes(nil) {
		served[written.Replace(r.pattern)] = r.scope
	}
	if len(documented) < 10 {
		t.Fatalf("the scope table names %d endpoints: the check found nothing to check", len(documented))
	}
	for e, s := range served {
		if d, ok := documented[e]; !ok {
			t.Errorf("%s (scope %v) has no place in docs/contract.md §6.4's scope table", e, s)
		} else if d != s {
			t.Errorf("%s needs scope %v; docs/contract.md §6.4 says %v", e, s, d)
		}
	}
	for e := range documented {
		if _, ok := served[e]; !ok {
			t.Errorf("docs/contract.md §6.4's scope table names %s, which the API does not serve", e)
		}
	}
}
