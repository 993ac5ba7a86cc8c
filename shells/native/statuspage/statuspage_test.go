package statuspage_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"plait/internal/docsection"
	"plait/shells/native/statuspage"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Result(), string(body)
}

// TestHandler: / answers the built index.html, uncached, with a policy that lets it load
// nothing but its own files; every asset index.html names is served from /assets/ with
// its type; anything else is 404.
func TestHandler(t *testing.T) {
	h := statuspage.Handler()
	resp, body := get(t, h, "/")
	if resp.StatusCode != 200 || !strings.Contains(body, `id="peers"`) ||
		resp.Header.Get("Cache-Control") != "no-cache" || !strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	assets := regexp.MustCompile(`(?:src|href)="\./(assets/[^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(assets) < 2 {
		t.Fatalf("index.html names %d assets, want the script and the style sheet", len(assets))
	}
	for _, a := range assets {
		resp, body := get(t, h, "/"+a[1])
		want := map[bool]string{true: "text/javascript", false: "text/css"}[strings.HasSuffix(a[1], ".js")]
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(body) == 0 ||
			!strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET /%s: %d %s, %d bytes, want 200 %s", a[1], resp.StatusCode, resp.Header.Get("Content-Type"), len(body), want)
		}
	}
	for _, p := range []string{"/index.html.bak", "/assets/none.js", "/v1/status"} {
		if resp, _ := get(t, h, p); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	files, _ := fs.Glob(statuspage.Files(), "assets/*")
	if len(files) != len(assets) {
		t.Errorf("dist holds %d assets, index.html names %d", len(files), len(assets))
	}
}

// TestSecurityHeadersInContract: every security header the page sends is written in
// docs/contract.md §6.5 as it is sent, so the documented policy is the one in force.
func TestSecurityHeadersInContract(t *testing.T) {
	section := docsection.Section(t, "docs/contract.md", "6.5")
	resp, _ := get(t, statuspage.Handler(), "/")
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"} {
		v := resp.Header.Get(h)
		if v == "" {
			t.Errorf("the page sends no %s", h)
			continue
		}
		if !strings.Contains(section, h+": "+v) {
			t.Errorf("docs/contract.md §6.5 does not say %q as it is sent", h+": "+v)
		}
	}
}
