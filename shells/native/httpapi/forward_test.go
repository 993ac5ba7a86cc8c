package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// startForwardNode runs a node of cfg and its API, as startNodeLimits does, and gives the
// node too.
func startForwardNode(t *testing.T, cfg node.Config) (*node.Node, *httptest.Server, string) {
	t.Helper()
	return startNodeAPI(t, cfg, httpapi.Limits{})
}

// answer is one HTTP answer: status, headers and body.
type answer struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, method, url, contentType, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// waitFor polls cond until it holds, or fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// forwardPair is A, which does not carry table t, dialing B, which does (and carries x,
// which A carries alone, and w, which only C does, and C never runs), both holding the
// map. B's frame limit is frame (0: the default), A's frameA.
func forwardPair(t *testing.T, frame uint32, frameA ...uint32) (a, b *node.Node, aAPI, bAPI *httptest.Server) {
	t.Helper()
	cfgB := node.Config{Name: "B"}
	cfgB.Limits.MaxFrameBody = frame
	b, bAPI, bURL := startForwardNode(t, cfgB)
	cfgA := node.Config{Name: "A", Peers: []node.Peer{{Name: "B", URL: bURL}}}
	if len(frameA) > 0 {
		cfgA.Limits.MaxFrameBody = frameA[0]
	}
	a, aAPI, _ = startForwardNode(t, cfgA)
	doc := `{"generation":2,"nodes":[{"name":"A"},{"name":"B","api":"http://b.example:7411"},{"name":"C"}],` +
		`"placement":{"t":["B","C"],"w":["C"],"x":["A"]}}`
	if _, err := a.PublishMap([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to hold A's map over a version-4 connection", func() bool {
		st, sa := statusOf(t, bAPI.URL), statusOf(t, aAPI.URL)
		return st.ClusterMap.Generation == 2 && len(sa.Peers) == 1 && sa.Peers[0].Connected && sa.Peers[0].Version == 4
	})
	return a, b, aAPI, bAPI
}

// TestForwardedRequests: every table endpoint of a node that does not carry the table is
// answered by a carrier: a write's answer names the carrier as its origin, and every
// forwarded answer names the node that forwarded it; reads, listings and digests are the
// carrier's. A table the node carries is its own, as before. Plait-Forward: no answers
// not-carried with the carriers; a table whose carriers are all out of reach answers
// no-carrier. Each outcome is counted, in the status and the metrics.
func TestForwardedRequests(t *testing.T) {
	_, _, a, b := forwardPair(t, 0)
	forwarded := func(what string, got answer, status int, contentType, body string) {
		t.Helper()
		if got.status != status || got.header.Get("Content-Type") != contentType || got.body != body || got.header.Get("Plait-Forwarded-By") != "A" {
			t.Errorf("%s: %d %q %q, Plait-Forwarded-By %q; want %d %q %q, forwarded by A", what, got.status,
				got.header.Get("Content-Type"), got.body, got.header.Get("Plait-Forwarded-By"), status, contentType, body)
		}
	}
	const js = "application/json"
	forwarded("PUT", send(t, "PUT", a.URL+"/v1/tables/t/records/dir/k%2F1", "", "one"), 200, js, `{"origin":"B","origin_seq":1}`+"\n")
	forwarded("POST batch, CBOR", send(t, "POST", a.URL+"/v1/tables/t/batch", "application/cbor",
		"\xa1\x63ops\x82\xa3\x62op\x63put\x63key\x42k2\x65value\x43two\xa2\x62op\x66delete\x63key\x42k3"), 200, js, `{"origin":"B","origin_seq":2}`+"\n")
	forwarded("DELETE", send(t, "DELETE", a.URL+"/v1/tables/t/records/k3", "", ""), 200, js, `{"origin":"B","origin_seq":3}`+"\n")
	forwarded("GET", send(t, "GET", a.URL+"/v1/tables/t/records/dir/k%2F1", "", ""), 200, "application/octet-stream", "one")
	forwarded("GET of a missing key", send(t, "GET", a.URL+"/v1/tables/t/records/k3", "", ""), 404, js,
		`{"error":{"code":"not-found","message":"no record k3 in table t"}}`+"\n")
	forwarded("listing", send(t, "GET", a.URL+"/v1/tables/t/records?prefix=k&limit=1", "", ""), 200, js,
		`{"records":[{"key":"k2","value":"two"}],"next":null}`+"\n")
	forwarded("a listing's refusal", send(t, "GET", a.URL+"/v1/tables/t/records?limit=0", "", ""), 400, js,
		`{"error":{"code":"bad-limit","message":"limit is 1 to 1000"}}`+"\n")
	digest := send(t, "GET", b.URL+"/v1/tables/t/digest", "", "")
	if !strings.HasPrefix(digest.body, `{"count":2,`) {
		t.Fatalf("B's digest of t: %d %s", digest.status, digest.body)
	}
	forwarded("digest", send(t, "GET", a.URL+"/v1/tables/t/digest", "", ""), 200, js, digest.body)

	// A table A carries stays A's own: answered here, not forwarded.
	if got := send(t, "PUT", a.URL+"/v1/tables/u/records/k", "", "v"); got.body != `{"origin_seq":1}`+"\n" || got.header.Get("Plait-Forwarded-By") != "" {
		t.Errorf("a PUT of a table A carries: %d %q, Plait-Forwarded-By %q", got.status, got.body, got.header.Get("Plait-Forwarded-By"))
	}

	// Plait-Forward: no: not-carried, with the carriers and their API where the map gives it.
	got := send(t, "GET", a.URL+"/v1/tables/t/records/k2", "", "", "Plait-Forward", "no")
	if want := `{"carriers":[{"name":"B","api":"http://b.example:7411"},{"name":"C"}],"error":{"code":"not-carried",` +
		`"message":"this node (A) does not carry table t: its carriers are B, C"}}` + "\n"; got.status != 409 || got.body != want {
		t.Errorf("Plait-Forward: no: %d %s; want 409 %s", got.status, got.body, want)
	}
	// No carrier reachable: w's only carrier, C, never runs.
	got = send(t, "PUT", a.URL+"/v1/tables/w/records/k", "", "v")
	if got.status != 503 || !strings.HasPrefix(got.body, `{"error":{"code":"no-carrier","message":"this node (A) does not carry table w and reaches none of its carriers"`) {
		t.Errorf("a PUT of a table no reachable node carries: %d %s; want 503 no-carrier", got.status, got.body)
	}

	sa, sb := statusOf(t, a.URL), statusOf(t, b.URL)
	if c := sa.Counters; c.ForwardsAnswered != 8 || c.ForwardsNotCarried != 1 || c.ForwardsNoCarrier != 1 || c.WritesRefusedNotCarried != 0 {
		t.Errorf("A's counters: forwards answered %d, not carried %d, no carrier %d, writes refused not-carried %d; want 8, 1, 1, 0",
			c.ForwardsAnswered, c.ForwardsNotCarried, c.ForwardsNoCarrier, c.WritesRefusedNotCarried)
	}
	if got := sb.Counters.ForwardsServed; got != 8 {
		t.Errorf("B served %d forwarded requests; want 8", got)
	}
	metrics := send(t, "GET", a.URL+"/metrics", "", "").body
	for _, m := range []string{"plait_forwards_answered_total 8", "plait_forwards_not_carried_total 1", "plait_forwards_no_carrier_total 1"} {
		if !strings.Contains(metrics, "\n"+m+"\n") {
			t.Errorf("A's metrics lack %s", m)
		}
	}
}

// apiRequest is the body of a request of kind api.
func apiRequest(t *testing.T, method, path, body string) []byte {
	t.Helper()
	b, err := wire.AppendAPIRequest(nil, &wire.APIRequest{Method: method, Path: path, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forwardTo sends a request of kind api from n, as the API does, and decodes the
// carrier's answer.
func forwardTo(t *testing.T, n *node.Node, table, scope string, body []byte) (string, *wire.APIAnswer) {
	t.Helper()
	carrier, ans, err := n.Forward(context.Background(), []byte(table), scope, body)
	if err != nil || ans.Code != "" {
		t.Fatalf("forwarding to %q: %v, %+v", carrier, err, ans)
	}
	got, err := wire.DecodeAPIAnswer(ans.Body)
	if err != nil {
		t.Fatal(err)
	}
	return carrier, got
}

// TestForwardOnTheCarrier: a carrier runs a forwarded request with the scope it carries
// (a write with scope read is refused forbidden there, though the carrier's API is open),
// and never forwards one again: a request for a table it does not carry either is
// answered not-carried, with the carriers it knows.
func TestForwardOnTheCarrier(t *testing.T) {
	a, _, _, bAPI := forwardPair(t, 0)
	carrier, got := forwardTo(t, a, "t", "read", apiRequest(t, "PUT", "/v1/tables/t/records/k", "v"))
	if carrier != "B" || got.Status != 403 || !strings.HasPrefix(string(got.Body), `{"error":{"code":"forbidden"`) {
		t.Errorf("a PUT forwarded with scope read: %s answered %d %s; want 403 forbidden", carrier, got.Status, got.Body)
	}
	if _, got = forwardTo(t, a, "t", "write", apiRequest(t, "PUT", "/v1/tables/t/records/k", "v")); got.Status != 200 {
		t.Errorf("a PUT forwarded with scope write: %d %s; want 200", got.Status, got.Body)
	}
	// x is A's alone: B, asked for it, does not send it back to A.
	_, got = forwardTo(t, a, "t", "read", apiRequest(t, "GET", "/v1/tables/x/records/k", ""))
	if want := `{"carriers":[{"name":"A"}],"error":{"code":"not-carried","message":"this node (B) does not carry table x: its carriers are A"}}` + "\n"; got.Status != 409 || string(got.Body) != want {
		t.Errorf("a request for x forwarded to B: %d %s; want 409 %s", got.Status, got.Body, want)
	}
	if st := statusOf(t, bAPI.URL); st.Counters.ForwardsServed != 3 || st.Counters.ForwardsNotCarried != 1 {
		t.Errorf("B: forwards served %d, not carried %d; want 3, 1", st.Counters.ForwardsServed, st.Counters.ForwardsNotCarried)
	}
}

// TestForwardFrameLimit: a forwarded request is bounded by the carrier's frame limit: one
// whose REQUEST body is exactly at it is answered, one byte more is 413 too-large.
func TestForwardFrameLimit(t *testing.T) {
	const frame = 4 << 10
	_, _, aAPI, _ := forwardPair(t, frame)
	// The REQUEST A sends for a PUT of a value of n bytes: its id on the connection is
	// below 24 (one byte, as 1 is), its timeout the default 5 s, the open API's scope admin.
	size := func(n int) int {
		body, err := wire.AppendAPIRequest(nil, &wire.APIRequest{Method: "PUT", Path: "/v1/tables/t/records/k", Body: make([]byte, n)})
		if err != nil {
			t.Fatal(err)
		}
		req := wire.Request{ID: 1, Target: "B", Path: []string{"A"}, TimeoutMS: 5000, Scope: "admin", Kind: "api", Body: body}
		b, err := req.AppendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	n := frame
	for size(n) > frame {
		n--
	}
	if size(n) != frame {
		t.Fatalf("no value makes a REQUEST of exactly %d bytes (%d: %d)", frame, n, size(n))
	}
	if got := send(t, "PUT", aAPI.URL+"/v1/tables/t/records/k", "", strings.Repeat("v", n)); got.status != 200 {
		t.Errorf("a PUT whose REQUEST is %d bytes, the frame limit: %d %s; want 200", size(n), got.status, got.body)
	}
	got := send(t, "PUT", aAPI.URL+"/v1/tables/t/records/k", "", strings.Repeat("v", n+1))
	if got.status != 413 || !strings.HasPrefix(got.body, `{"error":{"code":"too-large"`) {
		t.Errorf("a PUT whose REQUEST is %d bytes: %d %s; want 413 too-large", size(n+1), got.status, got.body)
	}
	var doc struct{ Error struct{ Message string } }
	_ = json.Unmarshal([]byte(got.body), &doc)
	t.Logf("one byte past: %s", doc.Error.Message)
}

// TestForwardAnswerPastFrameLimit: a carrier's answer past the frame limit of the
// connection it goes back on is answered too-large in its place, and the connection stays
// up: the next request is answered on it.
func TestForwardAnswerPastFrameLimit(t *testing.T) {
	const frame = 4 << 10
	_, _, aAPI, bAPI := forwardPair(t, 0, frame)
	if got := send(t, "PUT", bAPI.URL+"/v1/tables/t/records/big", "", strings.Repeat("v", frame)); got.status != 200 {
		t.Fatalf("a PUT on B: %d %s", got.status, got.body)
	}
	got := send(t, "GET", aAPI.URL+"/v1/tables/t/records/big", "", "")
	if got.status != 413 || !strings.HasPrefix(got.body, `{"error":{"code":"too-large"`) {
		t.Errorf("a GET whose answer is past A's frame limit: %d %s; want 413 too-large", got.status, got.body)
	}
	got = send(t, "GET", aAPI.URL+"/v1/tables/t/digest", "", "")
	if got.status != 200 || got.header.Get("Plait-Forwarded-By") != "A" {
		t.Errorf("a GET after it: %d %s; want 200, forwarded", got.status, got.body)
	}
	if st := statusOf(t, aAPI.URL); st.Peers[0].Reconnects != 0 {
		t.Errorf("A reconnected to B %d times; want 0: the connection stays up", st.Peers[0].Reconnects)
	}
}
