package httpapi

import (
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"plait/internal/docsection"
	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// tableCodes reads the codes and statuses of an error table of docs/contract.md: rows
// "| `code`[, `code`...] | status |" or "| status | `code` |", each code with the statuses
// its rows give.
func tableCodes(t *testing.T, section string) map[string]map[int]bool {
	t.Helper()
	code := regexp.MustCompile("`([a-z0-9-]+)`")
	codes := map[string]map[int]bool{}
	for _, line := range strings.Split(docsection.Section(t, "docs/contract.md", section), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, pair := range [][2]string{{cells[1], cells[2]}, {cells[2], cells[1]}} {
			status, err := strconv.Atoi(strings.TrimSpace(pair[1]))
			if err != nil {
				continue
			}
			for _, m := range code.FindAllStringSubmatch(pair[0], -1) {
				if codes[m[1]] == nil {
					codes[m[1]] = map[int]bool{}
				}
				codes[m[1]][status] = true
			}
		}
	}
	if len(codes) == 0 {
		t.Fatalf("docs/contract.md §%s has no error table", section)
	}
	return codes
}

// TestRequestErrorsInContract: a refused request between nodes answers the status
// docs/contract.md §22.7 gives its code, and §22.7's table is requestStatus's, both ways;
// a code this build does not know answers 502 with that code. Every code the cluster map's
// endpoints answer has its row in §6.3 at that status.
func TestRequestErrorsInContract(t *testing.T) {
	documented := tableCodes(t, "22.7")
	served := map[string]int{codeBadAnswer: 502}
	for c, s := range requestStatus {
		if c != wire.CodeInternal { // the node's own failure, as every call's (§6.3)
			served[string(c)] = s
		}
	}
	for c, s := range served {
		if !documented[c][s] || len(documented[c]) != 1 {
			t.Errorf("%s answers %d; docs/contract.md §22.7 says %v", c, s, documented[c])
		}
	}
	for c := range documented {
		if _, ok := served[c]; !ok {
			t.Errorf("docs/contract.md §22.7 has a row for %s, which requestStatus does not answer", c)
		}
	}
	for c, s := range requestStatus {
		rec := httptest.NewRecorder()
		fail(rec, requestError(replica.Answer{Code: c, Message: "why"}))
		if want := `{"error":{"code":"` + string(c) + `","message":"why"}}` + "\n"; rec.Code != s || rec.Body.String() != want {
			t.Errorf("%s: %d %s; want %d %s", c, rec.Code, rec.Body.String(), s, want)
		}
	}
	rec := httptest.NewRecorder()
	fail(rec, requestError(replica.Answer{Code: "a-newer-code", Message: "why"}))
	if rec.Code != 502 || !strings.Contains(rec.Body.String(), `"code":"a-newer-code"`) {
		t.Errorf("a code this build does not know: %d %s; want 502 with it", rec.Code, rec.Body.String())
	}

	errors := tableCodes(t, "6.3")
	served[string(replica.CodeStaleGeneration)] = 409
	for _, c := range []string{clustermap.CodeBadJSON, clustermap.CodeUnknownField, clustermap.CodeBadGeneration, clustermap.CodeBadName,
		clustermap.CodeBadURL, clustermap.CodeDuplicateNode, clustermap.CodeTooManyNodes, clustermap.CodeMapTooLarge,
		clustermap.CodeBadPlacement, clustermap.CodeTooManyTables, clustermap.CodeBadLockHomes, clustermap.CodeBadFencedTables, clustermap.CodeBadLeafWindow} {
		served[c] = 400
	}
	served[clustermap.CodeMixedPlacement] = 409
	served[clustermap.CodeUnfenced] = 409
	served[clustermap.CodeLeafWindowLowered] = 409
	served[clustermap.CodeClusterNotV4] = 503
	for c, s := range served {
		if !errors[c][s] {
			t.Errorf("%s (%d) has no row at %d in docs/contract.md §6.3's error table: %v", c, s, s, errors[c])
		}
	}
}
