package httpapi_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"plait/shells/native/apitoken"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

const (
	readToken  = "read-token-of-the-http-api-test"
	writeToken = "write-token-of-the-http-api-test"
	adminToken = "admin-token-of-the-http-api-test"
)

// tokenFile writes a token file of content and loads it.
func tokenFile(t *testing.T, content string) (*apitoken.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := apitoken.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, path
}

// call sends a request with the given Authorization headers (none when empty) and
// returns the status, the WWW-Authenticate header and the body.
func call(t *testing.T, method, url, body string, auth ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// metric is the value of the series named exactly series (with its labels) in a
// /metrics answer, and whether it is there.
func metric(t *testing.T, body, series string) (float64, bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return v, true
		}
	}
	return 0, false
}

// TestScopes: each endpoint answers a token of its scope and of every scope above it, and
// refuses one of any scope below with 403 forbidden; every refusal is counted.
func TestScopes(t *testing.T) {
	tokens, _ := tokenFile(t, readToken+" read\n"+writeToken+" write\n"+adminToken+" admin\n")
	a, _ := startNodeWith(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	_, peer := startNode(t, "P")
	if s, _, body := call(t, "PUT", a.URL+"/v1/tables/t/records/k", "v", "Bearer "+adminToken); s != 200 {
		t.Fatalf("the first write: %d %s", s, body)
	}
	scopes := []struct {
		scope apitoken.Scope
		token string
	}{{apitoken.Read, readToken}, {apitoken.Write, writeToken}, {apitoken.Admin, adminToken}}
	var forbidden int
	for _, e := range []struct {
		method, path, body string
		need               apitoken.Scope
		status             int // the answer once allowed
	}{
		{"GET", "/v1/tables/t/records/k", "", apitoken.Read, 200},
		{"GET", "/v1/tables/t/records?limit=10", "", apitoken.Read, 200},
		{"GET", "/v1/tables/t/digest", "", apitoken.Read, 200},
		{"GET", "/v1/status", "", apitoken.Read, 200},
		{"GET", "/metrics", "", apitoken.Read, 200},
		{"GET", "/v1/cluster/map", "", apitoken.Read, 200},
		{"GET", "/v1/cluster/map?node=A", "", apitoken.Read, 200},
		{"PUT", "/v1/tables/t/records/k2", "v", apitoken.Write, 200},
		{"DELETE", "/v1/tables/t/records/k3", "", apitoken.Write, 200},
		{"POST", "/v1/tables/t/batch", `{"ops":[{"op":"put","key":"b","value":"v"}]}`, apitoken.Write, 200},
		// In this order: each scope is tried lowest first, and only admin adds, then removes.
		{"POST", "/v1/peers", `{"name":"P","url":"` + peer + `"}`, apitoken.Admin, 201},
		{"DELETE", "/v1/peers/P", "", apitoken.Admin, 204},
		{"PUT", "/v1/cluster/map", `{"generation":1}`, apitoken.Admin, 200},
	} {
		for _, sc := range scopes {
			what := e.method + " " + e.path + " with a " + sc.scope.String() + " token"
			s, www, body := call(t, e.method, a.URL+e.path, e.body, "Bearer "+sc.token)
			if sc.scope < e.need {
				forbidden++
				if s != 403 || !strings.Contains(body, `"code":"forbidden"`) || www != "" {
					t.Errorf("%s: %d (WWW-Authenticate %q) %s; want 403 forbidden", what, s, www, body)
				}
				if !strings.Contains(body, "scope "+e.need.String()) {
					t.Errorf("%s: the refusal %s does not name the scope needed", what, body)
				}
			} else if s != e.status {
				t.Errorf("%s: %d %s; want %d", what, s, body, e.status)
			}
		}
	}
	_, _, body := call(t, "GET", a.URL+"/metrics", "", "Bearer "+readToken)
	if v, ok := metric(t, body, `plait_api_refused_total{code="forbidden"}`); !ok || v != float64(forbidden) {
		t.Errorf("plait_api_refused_total{code=\"forbidden\"} = %v (present %v), want %d", v, ok, forbidden)
	}
	if v, ok := metric(t, body, `plait_api_refused_total{code="unauthorized"}`); !ok || v != 0 {
		t.Errorf("plait_api_refused_total{code=\"unauthorized\"} = %v (present %v), want 0", v, ok)
	}
}

// TestUnauthorized: without a valid bearer token, every endpoint but /healthz, and every
// path the API does not have, answers 401 unauthorized with WWW-Authenticate; with one, an
// unknown path is 404 and a method a path does not serve 405, as without tokens.
func TestUnauthorized(t *testing.T) {
	tokens, _ := tokenFile(t, readToken+" read\n"+adminToken+" admin\n")
	a, _ := startNodeWith(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	var unauthorized int
	refused := func(what, method, path string, auth ...string) {
		t.Helper()
		unauthorized++
		s, www, body := call(t, method, a.URL+path, "", auth...)
		if s != 401 || www != `Bearer realm="plait"` || !strings.Contains(body, `"code":"unauthorized"`) {
			t.Errorf("%s: %s %s: %d (WWW-Authenticate %q) %s; want 401 unauthorized", what, method, path, s, www, body)
		}
		for _, tok := range []string{readToken, adminToken} {
			if strings.Contains(body, tok) {
				t.Errorf("%s: the answer %s shows a token", what, body)
			}
		}
	}
	for _, c := range []struct {
		what string
		auth []string
	}{
		{"no Authorization header", nil},
		{"a wrong token", []string{"Bearer not-a-token-of-this-node"}},
		{"a token's prefix", []string{"Bearer " + readToken[:len(readToken)-1]}},
		{"a token's scope for a token", []string{"Bearer read"}},
		{"Basic", []string{"Basic " + readToken}},
		{"the token alone", []string{readToken}},
		{"Bearer without a token", []string{"Bearer"}},
		{"Bearer and spaces", []string{"Bearer   "}},
		{"two words", []string{"Bearer " + readToken + " " + readToken}},
		{"two headers", []string{"Bearer " + readToken, "Bearer " + readToken}},
		{"an empty header", []string{""}},
	} {
		for _, path := range []string{"/v1/status", "/v1/status/lag", "/metrics", "/v1/tables/t/records/k", "/v1/nothing-here"} {
			refused(c.what, "GET", path, c.auth...)
		}
		refused(c.what, "PUT", "/v1/tables/t/records/k", c.auth...)
		refused(c.what, "POST", "/v1/peers", c.auth...)
		refused(c.what, "POST", "/v1/status", c.auth...) // a method the path does not serve
		refused(c.what, "POST", "/healthz", c.auth...)   // only GET (and HEAD) of /healthz is open
	}
	// The scheme is case-insensitive (RFC 7235), and the token's own case matters.
	if s, _, body := call(t, "GET", a.URL+"/v1/status", "", "bearer "+readToken); s != 200 {
		t.Errorf("a lowercase scheme: %d %s", s, body)
	}
	refused("a token in capitals", "GET", "/v1/status", "Bearer "+strings.ToUpper(readToken))

	for _, m := range []string{"GET", "HEAD"} {
		if s, _, _ := call(t, m, a.URL+"/healthz", ""); s != 200 {
			t.Errorf("%s /healthz without a token: %d, want 200", m, s)
		}
	}
	// The status page and its files are open: they hold no data (the page asks for a token).
	s, _, page := call(t, "GET", a.URL+"/", "")
	asset := regexp.MustCompile(`src="\./(assets/[^"]+\.js)"`).FindStringSubmatch(page)
	if s != 200 || asset == nil {
		t.Fatalf("GET / without a token: %d, want 200 and the page naming its script\n%s", s, page)
	}
	if s, _, _ := call(t, "GET", a.URL+"/"+asset[1], ""); s != 200 {
		t.Errorf("GET /%s without a token: %d, want 200", asset[1], s)
	}
	s, _, body := call(t, "GET", a.URL+"/v1/nothing-here", "", "Bearer "+readToken)
	want(t, "an unknown path with a token", s, body, 404, `"code":"not-found"`)
	s, _, body = call(t, "POST", a.URL+"/v1/status", "", "Bearer "+readToken)
	want(t, "a method the path does not serve, with a token", s, body, 405, `"code":"bad-method"`)

	_, _, body = call(t, "GET", a.URL+"/metrics", "", "Bearer "+readToken)
	if v, ok := metric(t, body, `plait_api_refused_total{code="unauthorized"}`); !ok || v != float64(unauthorized) {
		t.Errorf("plait_api_refused_total{code=\"unauthorized\"} = %v (present %v), want %d", v, ok, unauthorized)
	}
}

// TestOpenWithoutTokens: without RequireTokens nothing asks for a token, and the refusal
// counters stand at 0.
func TestOpenWithoutTokens(t *testing.T) {
	a, _ := startNode(t, "A")
	s, www, body := call(t, "GET", a.URL+"/v1/status", "")
	if s != 200 || www != "" {
		t.Errorf("status of an open API: %d (WWW-Authenticate %q) %s", s, www, body)
	}
	// A token sent to an open API is not looked at.
	if s, _, body := call(t, "PUT", a.URL+"/v1/tables/t/records/k", "v", "Bearer whatever"); s != 200 {
		t.Errorf("a write with a stray token: %d %s", s, body)
	}
	_, _, body = call(t, "GET", a.URL+"/metrics", "")
	for _, code := range []string{"unauthorized", "forbidden"} {
		if v, ok := metric(t, body, `plait_api_refused_total{code="`+code+`"}`); !ok || v != 0 {
			t.Errorf("%s refusals of an open API: %v (present %v)", code, v, ok)
		}
	}
	if strings.Contains(body, "plait_api_token_reloads_total") {
		t.Error("an API without a token file reports token reloads")
	}
}

// TestTokenReload: a reload of the token file takes effect on the next request; a file
// that does not parse is refused and the tokens before it kept; both are counted.
func TestTokenReload(t *testing.T) {
	tokens, path := tokenFile(t, readToken+" read\n")
	a, _ := startNodeWith(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	get := func(token string) int {
		s, _, _ := call(t, "GET", a.URL+"/v1/status", "", "Bearer "+token)
		return s
	}
	if get(readToken) != 200 || get(adminToken) != 401 {
		t.Fatalf("before the reload: read %d, admin %d", get(readToken), get(adminToken))
	}
	if err := os.WriteFile(path, []byte(adminToken+" admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	if get(readToken) != 401 || get(adminToken) != 200 {
		t.Errorf("after the reload: read %d, admin %d; want 401, 200", get(readToken), get(adminToken))
	}
	if err := os.WriteFile(path, []byte(readToken+" read\nshort read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a reload of a bad file: %v; want line 2 named", err)
	}
	if get(readToken) != 401 || get(adminToken) != 200 {
		t.Errorf("after a refused reload: read %d, admin %d; want the tokens before it (401, 200)", get(readToken), get(adminToken))
	}
	_, _, body := call(t, "GET", a.URL+"/metrics", "", "Bearer "+adminToken)
	for result, n := range map[string]float64{"ok": 1, "failed": 1} {
		if v, ok := metric(t, body, `plait_api_token_reloads_total{result="`+result+`"}`); !ok || v != n {
			t.Errorf("plait_api_token_reloads_total{result=%q} = %v (present %v), want %v", result, v, ok, n)
		}
	}
}

// TestReadStatusToken: ReadStatus sends the token it is given; without one, a node that
// requires tokens is an error that says so.
func TestReadStatusToken(t *testing.T) {
	tokens, _ := tokenFile(t, readToken+" read\n")
	a, _ := startNodeWith(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	addr := strings.TrimPrefix(a.URL, "http://")
	if d, err := httpapi.ReadStatus(http.DefaultClient, addr, httpapi.SendToken(readToken)); err != nil || d.Node.Name != "A" {
		t.Errorf("with the token: %v, %+v", err, d.Node)
	}
	if _, err := httpapi.ReadStatus(http.DefaultClient, addr); err == nil || !strings.Contains(err.Error(), "401") ||
		!strings.Contains(err.Error(), "unauthorized") {
		t.Errorf("without a token: %v; want 401 unauthorized", err)
	}
	if _, err := httpapi.ReadStatus(http.DefaultClient, addr, httpapi.SendToken("")); err == nil {
		t.Error("an empty token read the status")
	}
}
