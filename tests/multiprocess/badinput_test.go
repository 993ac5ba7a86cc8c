//go:build multiprocess || scale

package multiprocess

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBadInput: the binary answers bad HTTP input with 4xx and a named error code, at
// each bound and one past it, and keeps serving.
func TestBadInput(t *testing.T) {
	n := serve(t, "N")
	for _, c := range []struct {
		what, method, path, body string
		status                   int
		code                     string
	}{
		{"bad JSON", "POST", "/v1/tables/t/batch", `{"ops":`, 400, "bad-json"},
		{"oversized body", "PUT", "/v1/tables/t/records/k", strings.Repeat("v", 1<<20+1), 413, "too-large"},
		{"bad table name", "PUT", "/v1/tables/a%2Fb/records/k", "v", 400, "bad-table"},
		{"oversized key", "PUT", "/v1/tables/t/records/" + strings.Repeat("k", 1025), "v", 400, "bad-key"},
		{"table at 64", "PUT", "/v1/tables/" + strings.Repeat("t", 64) + "/records/k", "v", 200, ""},
		{"key at 1024", "PUT", "/v1/tables/t/records/" + strings.Repeat("k", 1024), "v", 200, ""},
		{"value at 1 MiB", "PUT", "/v1/tables/t/records/big", strings.Repeat("v", 1<<20), 200, ""},
		// Past the URL bound, and past net/http's default head bound of 1 MiB: the API's
		// JSON answer, not the server's plain text.
		{"URL of 16 KiB + 1", "GET", "/v1/tables/t/records?prefix=" + strings.Repeat("p", 16<<10+1-len("/v1/tables/t/records?prefix=")), "", 414, "too-large"},
		{"URL of 1.5 MB", "GET", "/v1/tables/t/records?prefix=" + strings.Repeat("p", 1500_000), "", 414, "too-large"},
	} {
		req, _ := http.NewRequest(c.method, "http://"+n.HTTP+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), `"code":"`+c.code+`"`) && c.code != "" {
			t.Errorf("%s: %d %s, want %d %s", c.what, resp.StatusCode, body, c.status, c.code)
		}
	}
	if s, _ := n.get("/healthz"); s != 200 {
		t.Errorf("healthz %d after bad input", s)
	}
	n.stop()
	n.check()
}
