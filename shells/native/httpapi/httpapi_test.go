package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"plait/internal/testnet"
	"plait/protocol/replica"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// startNode runs a node with its API on httptest; peers are URLs of other nodes' listeners.
func startNode(t *testing.T, name string, peers ...node.Peer) (api *httptest.Server, replicate string) {
	t.Helper()
	return startNodeWith(t, node.Config{Name: name, Peers: peers})
}

// startNodeWith runs a node of cfg, with a data directory, listener, secret and logger of
// its own, and its API (with opts) on httptest.
func startNodeWith(t *testing.T, cfg node.Config, opts ...httpapi.Option) (api *httptest.Server, replicate string) {
	t.Helper()
	return startNodeLimits(t, cfg, httpapi.Limits{}, opts...)
}

// startNodeLimits is startNodeWith with the API's own limits.
func startNodeLimits(t *testing.T, cfg node.Config, limits httpapi.Limits, opts ...httpapi.Option) (api *httptest.Server, replicate string) {
	t.Helper()
	_, api, replicate = startNodeAPI(t, cfg, limits, opts...)
	return api, replicate
}

// startNodeAPI is startNodeLimits that gives the node too.
func startNodeAPI(t *testing.T, cfg node.Config, limits httpapi.Limits, opts ...httpapi.Option) (n *node.Node, api *httptest.Server, replicate string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Listener, cfg.Secret = t.TempDir(), l, []byte("http api test secret, long enough")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err = node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api = httptest.NewServer(httpapi.New(n, limits, opts...))
	t.Cleanup(func() {
		api.Close()
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	return n, api, "ws://" + l.Addr().String()
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	code, _, b := doTyped(t, method, url, body)
	return code, b
}

// doTyped is do with the answer's content type.
func doTyped(t *testing.T, method, url, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func want(t *testing.T, what string, status int, body string, wantStatus int, wantBody string) {
	t.Helper()
	if status != wantStatus || !strings.Contains(body, wantBody) {
		if body = strings.TrimSpace(body); len(body) > 200 { // a value at a limit is a MiB
			body = fmt.Sprintf("%s... (%d bytes)", body[:200], len(body))
		}
		t.Errorf("%s: %d %s, want %d with %s", what, status, body, wantStatus, wantBody)
	}
}

func TestRecordsAndReplication(t *testing.T) {
	a, aURL := startNode(t, "A")
	b, _ := startNode(t, "B", node.Peer{Name: "A", URL: aURL})
	s, body := do(t, "PUT", a.URL+"/v1/tables/t/records/k1", "one")
	want(t, "put", s, body, 200, `{"origin_seq":1}`)
	s, body = do(t, "PUT", a.URL+"/v1/tables/t/records/dir/k2", "two")
	want(t, "put a key with a slash", s, body, 200, `{"origin_seq":2}`)
	s, body = do(t, "GET", a.URL+"/v1/tables/t/records/dir/k2", "")
	want(t, "get", s, body, 200, "two")
	s, body = do(t, "POST", a.URL+"/v1/tables/t/batch",
		`{"ops":[{"op":"put","key":"k3","value":"text"},{"op":"put","key":"k4","value_b64":"AP8="},{"op":"delete","key":"k1"}]}`)
	want(t, "batch", s, body, 200, `{"origin_seq":3}`)
	s, body = do(t, "GET", a.URL+"/v1/tables/t/records/k1", "")
	want(t, "deleted", s, body, 404, `"not-found"`)
	s, body = do(t, "DELETE", a.URL+"/v1/tables/t/records/missing", "")
	want(t, "delete of a missing key", s, body, 200, `{"origin_seq":4}`)

	s, body = do(t, "GET", a.URL+"/v1/tables/t/records?prefix=k&limit=1", "")
	want(t, "list page 1", s, body, 200, `{"records":[{"key":"k3","value":"text"}],"next":"k3"}`)
	s, body = do(t, "GET", a.URL+"/v1/tables/t/records?prefix=k&after=k3", "")
	want(t, "list page 2", s, body, 200, `{"records":[{"key":"k4","value_b64":"AP8="}],"next":null}`)

	// B replicates A: it applies A's four transactions (the delete of a missing key, the
	// last, changes no digest, so only the applied seq tells it arrived), and the digests
	// are equal.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := httpapi.ReadStatus(http.DefaultClient, strings.TrimPrefix(b.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := st.Origin("A"); o.AppliedSeq == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never applied A's 4 transactions: %+v", st.Origins)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, da := do(t, "GET", a.URL+"/v1/tables/t/digest", "")
	_, db := do(t, "GET", b.URL+"/v1/tables/t/digest", "")
	if da != db || !strings.Contains(da, `"count":3`) {
		t.Errorf("digests: A %s, B %s; want equal, of 3 records", da, db)
	}
	_, body = do(t, "GET", b.URL+"/v1/status", "")
	var st httpapi.StatusDoc
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err, body)
	}
	if st.Node.Name != "B" || st.Node.Protocol.Max != 4 || st.Counters.TxnsApplied != 4 || len(st.Peers) != 1 ||
		st.Peers[0].Name != "A" || st.Peers[0].URL != aURL || st.Peers[0].State != replica.PeerStreaming || !st.Peers[0].Connected || st.Peers[0].Version != 4 {
		t.Errorf("B's status: %s", body)
	}
	_, body = do(t, "GET", b.URL+"/metrics", "")
	for _, m := range []string{"plait_txns_applied_total 4", `plait_peer_connected{peer="A"} 1`, `origin_name="A"} 4`, "go_goroutines"} {
		if !strings.Contains(body, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	s, body = do(t, "GET", b.URL+"/healthz", "")
	want(t, "healthz", s, body, 200, "ok")
}

func TestBadInput(t *testing.T) {
	a, _ := startNode(t, "A")
	for _, c := range []struct {
		what, method, path, body string
		status                   int
		code                     string
	}{
		{"bad JSON", "POST", "/v1/tables/t/batch", `{"ops":[`, 400, "bad-json"},
		{"unknown field", "POST", "/v1/tables/t/batch", `{"ops":[{"op":"put","key":"k","value":"v","x":1}]}`, 400, "bad-json"},
		{"no ops", "POST", "/v1/tables/t/batch", `{"ops":[]}`, 400, "bad-json"},
		{"no ops field", "POST", "/v1/tables/t/batch", `{}`, 400, "bad-json"},
		{"unknown op", "POST", "/v1/tables/t/batch", `{"ops":[{"op":"upsert","key":"k","value":"v"}]}`, 400, "bad-op"},
		{"both values", "POST", "/v1/tables/t/batch", `{"ops":[{"op":"put","key":"k","value":"v","value_b64":"AA=="}]}`, 400, "bad-json"},
		{"bad base64", "POST", "/v1/tables/t/batch", `{"ops":[{"op":"put","key":"k","value_b64":"!"}]}`, 400, "bad-json"},
		{"bad table", "PUT", "/v1/tables/no%20spaces/records/k", "v", 400, "bad-table"},
		{"table of 65", "PUT", "/v1/tables/" + strings.Repeat("t", 65) + "/records/k", "v", 400, "bad-table"},
		{"key of 1025", "PUT", "/v1/tables/t/records/" + strings.Repeat("k", 1025), "v", 400, "bad-key"},
		{"empty batch key", "POST", "/v1/tables/t/batch", `{"ops":[{"op":"delete","key":""}]}`, 400, "bad-key"},
		{"value of 1 MiB + 1", "PUT", "/v1/tables/t/records/k", strings.Repeat("v", 1<<20+1), 413, "too-large"},
		{"bad limit", "GET", "/v1/tables/t/records?limit=0", "", 400, "bad-limit"},
		{"missing", "GET", "/v1/tables/t/records/nothing", "", 404, "not-found"},
		{"no such endpoint", "GET", "/v2/anything", "", 404, "not-found"},
		{"no such method", "PATCH", "/v1/status", "", 405, "bad-method"},
		{"a transaction over 8 MiB", "POST", "/v1/tables/t/batch", nineMiB(), 413, "too-large"},
	} {
		s, body := do(t, c.method, a.URL+c.path, c.body)
		want(t, c.what, s, body, c.status, `"code":"`+c.code+`"`)
	}
	// At the limits: accepted.
	s, body := do(t, "PUT", a.URL+"/v1/tables/"+strings.Repeat("t", 64)+"/records/"+strings.Repeat("k", 1024), strings.Repeat("v", 1<<20))
	want(t, "table of 64, key of 1024, value of 1 MiB", s, body, 200, `"origin_seq":1`)
	s, body = do(t, "POST", a.URL+"/v1/tables/t/batch", `{"ops":[]}`)
	want(t, "an empty batch, in words", s, body, 400, "at least one op")

	// The request's URL and headers: at their bounds answered by the endpoint, one byte
	// past answered too-large in the API's JSON form.
	target := func(n int) string {
		base := "/v1/tables/t/records?prefix="
		return base + strings.Repeat("p", n-len(base))
	}
	s, body = do(t, "GET", a.URL+target(16<<10), "")
	want(t, "a URL of 16 KiB", s, body, 200, `"records"`)
	s, body = do(t, "GET", a.URL+target(16<<10+1), "")
	want(t, "a URL of 16 KiB + 1", s, body, 414, `"code":"too-large"`)
	for _, c := range []struct {
		size   int
		status int
		code   string
	}{{64 << 10, 200, `"records"`}, {64<<10 + 1, 431, `"code":"too-large"`}} {
		req, _ := http.NewRequest("GET", a.URL+"/v1/tables/t/records", nil)
		// Go's client adds Host (not a header field here), User-Agent and Accept-Encoding.
		fixed := len("User-Agent") + len("Go-http-client/1.1") + len("Accept-Encoding") + len("gzip")
		req.Header.Set("X-Pad", strings.Repeat("h", c.size-fixed-len("X-Pad")))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want(t, fmt.Sprintf("headers of %d bytes", c.size), resp.StatusCode, string(b), c.status, c.code)
	}
}

// TestConfiguredWriteLimits: with a node's write limits set below the defaults, the API
// takes a key and a value at the limits, single and in a batch, and refuses one byte past
// either with the contract's codes; the defaults no longer apply.
func TestConfiguredWriteLimits(t *testing.T) {
	const maxKey, maxValue = 8, 64
	a, _ := startNodeWith(t, node.Config{Name: "A", Config: replica.Config{Write: replica.WriteLimits{MaxKey: maxKey, MaxValue: maxValue}}})
	key, value := strings.Repeat("k", maxKey), strings.Repeat("v", maxValue)
	batch := func(key, value string) string {
		return `{"ops":[{"op":"put","key":"` + key + `","value":"` + value + `"}]}`
	}
	for _, c := range []struct {
		what, method, path, body string
		status                   int
		want                     string
	}{
		{"key and value at the limits", "PUT", "/v1/tables/t/records/" + key, value, 200, `"origin_seq":1`},
		{"a batch at the limits", "POST", "/v1/tables/t/batch", batch(key, value), 200, `"origin_seq":2`},
		{"a key one past", "PUT", "/v1/tables/t/records/" + key + "k", "v", 400, `"code":"bad-key"`},
		{"a batch key one past", "POST", "/v1/tables/t/batch", batch(key+"k", "v"), 400, `"code":"bad-key"`},
		{"a value one past", "PUT", "/v1/tables/t/records/k", value + "v", 413, `"code":"too-large"`},
		{"a batch value one past", "POST", "/v1/tables/t/batch", batch("k", value+"v"), 413, `"code":"too-large"`},
		{"a key within the default, past the limit", "PUT", "/v1/tables/t/records/" + strings.Repeat("k", 1024), "v", 400, `"code":"bad-key"`},
	} {
		s, body := do(t, c.method, a.URL+c.path, c.body)
		want(t, c.what, s, body, c.status, c.want)
	}
}

// TestBatchValueLimit: a batch with a value one byte over the limit (as value or as
// value_b64) is refused with 413 too-large and writes nothing, not even its other ops:
// the records are absent and the origin's applied seq did not move. A value exactly at
// the limit is taken whole.
func TestBatchValueLimit(t *testing.T) {
	a, _ := startNode(t, "A")
	const limit = replica.DefaultMaxValue
	applied := func() uint64 {
		t.Helper()
		st, err := httpapi.ReadStatus(http.DefaultClient, strings.TrimPrefix(a.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		o, _ := st.Origin("A")
		return o.AppliedSeq
	}
	s, body := do(t, "PUT", a.URL+"/v1/tables/t/records/before", "v")
	want(t, "a first write", s, body, 200, `"origin_seq":1`)
	over := strings.Repeat("v", limit+1)
	for _, op := range []string{
		`{"op":"put","key":"big","value":"` + over + `"}`,
		`{"op":"put","key":"big","value_b64":"` + base64.StdEncoding.EncodeToString([]byte(over)) + `"}`,
	} {
		s, body = do(t, "POST", a.URL+"/v1/tables/t/batch", `{"ops":[{"op":"put","key":"small","value":"x"},`+op+`]}`)
		want(t, "a batch with a value of the limit + 1", s, body, 413, `"code":"too-large"`)
		for _, key := range []string{"small", "big"} {
			s, body = do(t, "GET", a.URL+"/v1/tables/t/records/"+key, "")
			want(t, "after the refused batch, "+key, s, body, 404, `"code":"not-found"`)
		}
		if seq := applied(); seq != 1 {
			t.Errorf("A's applied seq is %d after a refused batch, want 1", seq)
		}
	}
	at := strings.Repeat("w", limit)
	s, body = do(t, "POST", a.URL+"/v1/tables/t/batch", `{"ops":[{"op":"put","key":"big","value":"`+at+`"}]}`)
	want(t, "a batch with a value at the limit", s, body, 200, `"origin_seq":2`)
	if s, body = do(t, "GET", a.URL+"/v1/tables/t/records/big", ""); s != 200 || body != at {
		t.Errorf("the value at the limit reads back as %d bytes (status %d), want %d", len(body), s, limit)
	}
}

// TestDigestCoversTheLastKey: changing the value of a table's last key (in key order)
// changes GET /v1/tables/{t}/digest, with the count unchanged, and changing it back
// restores the digest exactly.
func TestDigestCoversTheLastKey(t *testing.T) {
	a, _ := startNode(t, "A")
	for _, kv := range [][2]string{{"a", "1"}, {"m", "2"}, {"z", "3"}} {
		s, body := do(t, "PUT", a.URL+"/v1/tables/t/records/"+kv[0], kv[1])
		want(t, "put "+kv[0], s, body, 200, `"origin_seq"`)
	}
	digest := func() string {
		t.Helper()
		s, body := do(t, "GET", a.URL+"/v1/tables/t/digest", "")
		want(t, "digest", s, body, 200, `"count":3`)
		return body
	}
	before := digest()
	do(t, "PUT", a.URL+"/v1/tables/t/records/z", "4")
	if changed := digest(); changed == before {
		t.Errorf("the digest %s did not change with the last key's value", changed)
	}
	do(t, "PUT", a.URL+"/v1/tables/t/records/z", "3")
	if back := digest(); back != before {
		t.Errorf("the last key's value restored: digest %s, want %s again", back, before)
	}
}

// nineMiB is a batch of nine 1 MiB values: within the body limit, over 8 MiB encoded.
func nineMiB() string {
	var b strings.Builder
	b.WriteString(`{"ops":[`)
	for i := range 9 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"op":"put","key":"k%d","value":"%s"}`, i, strings.Repeat("v", 1<<20))
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestHealthAndMetrics: /healthz answers 200 while the node serves and 503 once it
// stopped; /metrics answers while connections without a name yet (in their handshake)
// are open, with one series per named peer.
func TestHealthAndMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(node.Config{Name: "A", DataDir: t.TempDir(), Listener: l, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Config: replica.Config{Secret: []byte("http api test secret, long enough")}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(httpapi.New(n, httpapi.Limits{}))
	defer api.Close()
	s, body := do(t, "GET", api.URL+"/healthz", "")
	want(t, "healthz while serving", s, body, 200, "ok")

	// Two raw upgrades that never send a HELLO: two peers without a name.
	for range 2 {
		c, _, err := websocket.Dial(context.Background(), "ws://"+l.Addr().String()+"/v1/replicate", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, st := do(t, "GET", api.URL+"/v1/status", "")
		if strings.Count(st, `"state":"handshaking"`) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two upgrades never showed as handshaking: %s", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, body = do(t, "GET", api.URL+"/metrics", "")
	want(t, "metrics with two unnamed connections", s, body, 200, "plait_txns_applied_total 0")

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	s, body = do(t, "GET", api.URL+"/healthz", "")
	want(t, "healthz once stopped", s, body, 503, `"code":"unavailable"`)
}

// TestDegradedStorage: a node whose free-space guard trips (a reserve no file system has)
// stays up: the write that met it answers 507 storage-full, /healthz 200 "degraded:
// storage-full", status node.storage and /metrics say degraded, and reads go on.
func TestDegradedStorage(t *testing.T) {
	api, _ := startNodeWith(t, node.Config{Name: "A", StorageReserve: 1 << 60})
	s, body := do(t, "GET", api.URL+"/healthz", "")
	want(t, "healthz before any write", s, body, 200, "ok")
	s, body = do(t, "PUT", api.URL+"/v1/tables/t/records/k", "v")
	want(t, "a write below the reserve", s, body, 507, `{"error":{"code":"storage-full","message":"storage storage-full in free-space guard: `)
	s, body = do(t, "PUT", api.URL+"/v1/tables/t/records/k2", "v")
	want(t, "a second write", s, body, 507, `"code":"storage-full"`)
	s, body = do(t, "POST", api.URL+"/v1/tables/t/batch", `{"ops":[{"op":"delete","key":"k"}]}`)
	want(t, "a batch", s, body, 507, `"code":"storage-full"`)
	if s, body = do(t, "GET", api.URL+"/healthz", ""); s != 200 || body != "degraded: storage-full" {
		t.Errorf("healthz while degraded: %d %q, want 200 \"degraded: storage-full\"", s, body)
	}
	s, body = do(t, "GET", api.URL+"/v1/tables/t/records/k", "")
	want(t, "a read while degraded", s, body, 404, `"code":"not-found"`)
	s, body = do(t, "GET", api.URL+"/v1/tables/t/digest", "")
	want(t, "the digest while degraded", s, body, 200, `"count":0`)

	_, body = do(t, "GET", api.URL+"/v1/status", "")
	var doc httpapi.StatusDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if st := doc.Node.Storage; st.State != "degraded" || st.Code != "storage-full" ||
		!strings.Contains(st.Message, "below the reserve of 1152921504606846976") || st.Since == "" {
		t.Errorf("node.storage while degraded: %+v", st)
	} else if since, err := time.Parse(time.RFC3339Nano, st.Since); err != nil || time.Since(since) > time.Minute {
		t.Errorf("node.storage.since %q: %v", st.Since, err)
	}
	_, body = do(t, "GET", api.URL+"/metrics", "")
	want(t, "metrics while degraded", 200, body, 200, "\nplait_storage_degraded 1\n")
}

// TestPeers: a peer added with POST /v1/peers is dialed and kept in the data directory; a
// second of the same name conflicts; DELETE closes its connection and forgets it.
func TestPeers(t *testing.T) {
	a, aURL := startNode(t, "A")
	b, _ := startNode(t, "B")
	s, body := do(t, "POST", b.URL+"/v1/peers", `{"name":"A","url":"`+aURL+`"}`)
	want(t, "add", s, body, 201, `"name":"A"`)
	s, body = do(t, "POST", b.URL+"/v1/peers", `{"name":"A","url":"`+aURL+`"}`)
	want(t, "add again", s, body, 409, `"peer-exists"`)
	for _, bad := range []string{"http://h:1", "wss://h:1", "ws://:1", "ws://h:1?x", "ws://h:65536"} {
		s, body = do(t, "POST", b.URL+"/v1/peers", `{"name":"X","url":"`+bad+`"}`)
		want(t, "url "+bad, s, body, 400, `"bad-peer"`)
	}
	do(t, "PUT", a.URL+"/v1/tables/t/records/k", "v")
	waitBody(t, b.URL+"/v1/tables/t/records/k", "v")
	s, body = do(t, "DELETE", b.URL+"/v1/peers/A", "")
	want(t, "remove", s, body, 204, "")
	s, body = do(t, "DELETE", b.URL+"/v1/peers/A", "")
	want(t, "remove again", s, body, 404, `"not-found"`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, st := do(t, "GET", b.URL+"/v1/status", "")
		if strings.Contains(st, `"peers":[]`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still lists a peer after DELETE: %s", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitBody polls a GET until it answers 200 with body.
func waitBody(t *testing.T, url, body string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s, got := do(t, "GET", url, ""); s == 200 && got == body {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never answered %q", url, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHealthAndLagHistory: B, dialing A and a peer Z that nothing listens for, reports A's
// origin and A healthy once A's writes applied, Z stalled, in its status and as the
// state-set metrics; GET /v1/status/lag answers A's samples, about a second apart, at
// lag 0 (and not B's own origin).
func TestHealthAndLagHistory(t *testing.T) {
	a, aURL := startNode(t, "A")
	z := testnet.FreeAddr(t) // nothing listens there
	b, _ := startNode(t, "B", node.Peer{Name: "A", URL: aURL}, node.Peer{Name: "Z", URL: "ws://" + z})
	s, body := do(t, "PUT", a.URL+"/v1/tables/t/records/k", "v")
	want(t, "put", s, body, 200, `{"origin_seq":1}`)
	var lag httpapi.LagDoc
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := httpapi.ReadStatus(http.DefaultClient, strings.TrimPrefix(b.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, body := do(t, "GET", b.URL+"/v1/status/lag", "")
		if err := json.Unmarshal([]byte(body), &lag); err != nil {
			t.Fatal(err, body)
		}
		o, _ := st.Origin("A")
		health := map[string]replica.Health{}
		for _, p := range st.Peers {
			health[p.Name] = p.Health
		}
		if o.AppliedSeq == 1 && o.Health == replica.HealthHealthy && health["A"] == replica.HealthHealthy &&
			health["Z"] == replica.HealthStalled && len(lag.Origins) == 1 && len(lag.Origins[0].Samples) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's status never showed A applied and healthy, Z stalled and two samples of A: %+v, peers %v, lag %+v", o, health, lag)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if o := lag.Origins[0]; o.Name != "A" {
		t.Errorf("lag history of %q, want A's alone", o.Name)
	}
	st, err := httpapi.ReadStatus(http.DefaultClient, strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Peers {
		var heard time.Time
		if p.LastContact != nil {
			heard, _ = time.Parse(time.RFC3339, *p.LastContact)
		}
		switch {
		case p.Name == "A" && (heard.IsZero() || time.Since(heard) > 10*time.Second || p.LagSeq == nil || *p.LagSeq != 0):
			t.Errorf("B's peer A: last contact %v, lag %v; want within the last seconds (PINGs every second), 0 behind", p.LastContact, p.LagSeq)
		case p.Name == "Z" && (p.LastContact != nil || p.LagSeq != nil):
			t.Errorf("B's peer Z (never connected): last contact %v, lag %v; want null, null", p.LastContact, p.LagSeq)
		}
	}
	for i, s := range lag.Origins[0].Samples {
		if i > 0 && s[0]-lag.Origins[0].Samples[i-1][0] < 1000 {
			t.Errorf("samples %d and %d are %d ms apart, want at least a second", i-1, i, s[0]-lag.Origins[0].Samples[i-1][0])
		}
	}
	last := lag.Origins[0].Samples[len(lag.Origins[0].Samples)-1]
	if last[1] != 0 || last[2] != 0 || time.Since(time.UnixMilli(int64(last[0]))) > 10*time.Second {
		t.Errorf("A's last sample %v, want lag 0 within the last seconds", last)
	}
	_, body = do(t, "GET", b.URL+"/metrics", "")
	for _, m := range []string{`plait_origin_health{health="healthy",origin=`, `plait_peer_health{health="healthy",peer="A"} 1`,
		`plait_peer_health{health="stalled",peer="A"} 0`, `plait_peer_health{health="stalled",peer="Z"} 1`, `plait_peer_health{health="healthy",peer="Z"} 0`} {
		if !strings.Contains(body, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	if !strings.Contains(body, `origin_name="A"} 1`) {
		t.Errorf("metrics lack A's healthy series")
	}
}
