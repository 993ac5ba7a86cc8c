package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// lockNode runs a node whose lock bounds keep a test short: a lease of at most 2 s and a
// clock bound of 100 ms, so a new home's restart quarantine is about 2.1 s.
func lockNode(t *testing.T, name string, maxLeases int, fenceWait time.Duration, peers ...node.Peer) (*node.Node, *httptest.Server, string) {
	t.Helper()
	cfg := node.Config{Name: name, Peers: peers}
	cfg.Locks.MaxTTL, cfg.Locks.MaxLeases, cfg.MaxClockOffset = 2*time.Second, maxLeases, 100*time.Millisecond
	return startNodeAPI(t, cfg, httpapi.Limits{LockFenceWait: fenceWait})
}

// grant is a lock endpoint's 200 answer.
type grant struct {
	Token       string `json:"token"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// acquire asks api for a lock on table/key until the home's quarantine is over, and
// gives the grant.
func acquire(t *testing.T, api, table, key string, ttlMS int) grant {
	t.Helper()
	var g grant
	body := `{"ttl_ms":` + itoa(ttlMS) + `}`
	waitFor(t, "a lock on "+table+"/"+key, func() bool {
		got := send(t, "POST", api+"/v1/tables/"+table+"/locks/"+key, "application/json", body)
		if got.status == 503 && strings.Contains(got.body, `"quarantined"`) {
			if got.header.Get("Retry-After") == "" {
				t.Errorf("quarantined without Retry-After: %s", got.body)
			}
			return false
		}
		if got.status != 200 || json.Unmarshal([]byte(got.body), &g) != nil {
			t.Fatalf("acquire %s/%s: %d %s", table, key, got.status, got.body)
		}
		return true
	})
	if len(g.Token) != 80 || g.ExpiresInMS <= 0 || g.ExpiresInMS > int64(ttlMS) {
		t.Fatalf("grant %+v for a ttl of %d ms", g, ttlMS)
	}
	return g
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func wantCode(t *testing.T, what string, got answer, status int, code string) {
	t.Helper()
	if got.status != status || !strings.Contains(got.body, `"code":"`+code+`"`) {
		t.Errorf("%s: %d %s, want %d %s", what, got.status, strings.TrimSpace(got.body), status, code)
	}
}

// TestLockEndpoints: acquire, renew, release and a write and a read under the token on
// a one-node cluster that is its own lock home, and each refusal of the endpoints.
func TestLockEndpoints(t *testing.T) {
	n, api, _ := lockNode(t, "A", 1, time.Second)
	a := api.URL
	lockURL := a + "/v1/tables/t/locks/k"
	wantCode(t, "no homes", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000}`), 503, "no-lock-homes")
	if _, err := n.PublishMap([]byte(`{"generation":1,"nodes":[{"name":"A"}],"lock_homes":["A"]}`)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no ttl", send(t, "POST", lockURL, "application/json", `{}`), 400, "bad-ttl")
	wantCode(t, "ttl 0", send(t, "POST", lockURL, "application/json", `{"ttl_ms":0}`), 400, "bad-ttl")
	wantCode(t, "ttl above the home's", send(t, "POST", lockURL, "application/json", `{"ttl_ms":5000}`), 400, "bad-ttl")
	wantCode(t, "wait above the home's", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000,"wait_ms":3000}`), 400, "bad-wait")
	wantCode(t, "negative wait", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000,"wait_ms":-1}`), 400, "bad-wait")

	g := acquire(t, a, "t", "k", 2000)
	held := send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000}`)
	wantCode(t, "held", held, 409, "lock-held")
	if ra := held.header.Get("Retry-After"); ra != "1" && ra != "2" && ra != "3" {
		t.Errorf("lock-held's Retry-After %q, want the lease's end in whole seconds rounded up", ra)
	}
	wantCode(t, "a second lease past --max-leases 1", send(t, "POST", a+"/v1/tables/t/locks/k2", "application/json", `{"ttl_ms":1000}`), 503, "too-many-leases")

	// Renew.
	wantCode(t, "renew without a token", send(t, "PUT", lockURL, "application/json", `{"ttl_ms":1000}`), 400, "bad-token")
	wantCode(t, "renew with a malformed token", send(t, "PUT", lockURL, "application/json", `{"ttl_ms":1000}`, "Plait-Lock", strings.ToUpper(g.Token)), 400, "bad-token")
	got := send(t, "PUT", lockURL, "application/json", `{"ttl_ms":2000}`, "Plait-Lock", g.Token)
	if got.status != 200 || !strings.HasPrefix(got.body, `{"expires_in_ms":`) {
		t.Errorf("renew: %d %s", got.status, got.body)
	}

	// Writes and reads under the token.
	got = send(t, "PUT", a+"/v1/tables/t/records/k", "", "v1", "Plait-Lock", g.Token)
	if got.status != 200 || !strings.Contains(got.body, `"origin_seq":1`) {
		t.Errorf("a write under the lock: %d %s", got.status, got.body)
	}
	wantCode(t, "a write of another key under the token", send(t, "PUT", a+"/v1/tables/t/records/other", "", "v", "Plait-Lock", g.Token), 409, "lock-lost")
	wantCode(t, "a batch of two keys under the token", send(t, "POST", a+"/v1/tables/t/batch", "application/json",
		`{"ops":[{"op":"put","key":"k","value":"a"},{"op":"put","key":"j","value":"b"}]}`, "Plait-Lock", g.Token), 400, "lock-scope")
	got = send(t, "POST", a+"/v1/tables/t/batch", "application/json", `{"ops":[{"op":"put","key":"k","value":"v2"}]}`, "Plait-Lock", g.Token)
	if got.status != 200 {
		t.Errorf("a batch of the lock's key: %d %s", got.status, got.body)
	}
	if got := send(t, "GET", a+"/v1/tables/t/records/k", "", "", "Plait-Lock", g.Token); got.status != 200 || got.body != "v2" {
		t.Errorf("a read under the token: %d %s", got.status, got.body)
	}
	wantCode(t, "a read with a malformed token", send(t, "GET", a+"/v1/tables/t/records/k", "", "", "Plait-Lock", "x"), 400, "bad-token")

	// Release, then the token is stale everywhere.
	wantCode(t, "release without a token", send(t, "DELETE", lockURL, "", ""), 400, "bad-token")
	if got := send(t, "DELETE", lockURL, "", "", "Plait-Lock", g.Token); got.status != 204 {
		t.Errorf("release: %d %s", got.status, got.body)
	}
	wantCode(t, "renew after release", send(t, "PUT", lockURL, "application/json", `{"ttl_ms":1000}`, "Plait-Lock", g.Token), 409, "lock-lost")
	wantCode(t, "release after release", send(t, "DELETE", lockURL, "", "", "Plait-Lock", g.Token), 409, "lock-lost")
	wantCode(t, "a write under a released token", send(t, "PUT", a+"/v1/tables/t/records/k", "", "v3", "Plait-Lock", g.Token), 409, "lock-lost")
	if got := send(t, "GET", a+"/v1/tables/t/records/k", "", ""); got.body != "v2" {
		t.Errorf("after a refused write under a stale token the record is %q, want v2", got.body)
	}

	// The status counts what the home and the caller did.
	l := statusOf(t, a).Locks
	if !l.Home || l.Leases != 0 || l.Held != 0 || l.Granted != 1 || l.Renewed != 1 || l.Released != 1 || l.Refused["lock-held"] != 1 ||
		l.Refused["too-many-leases"] != 1 || l.Refused["lock-lost"] < 2 || l.Incarnation != 1 {
		t.Errorf("the home's locks status: %+v", l)
	}
	if c := l.Caller; c.Acquired != 1 || c.Renewed != 1 || c.Released != 1 || c.Writes != 2 || c.WritesLost != 0 ||
		c.Refused["lock-held"] != 1 || c.Refused["lock-lost"] != 4 || c.Refused["lock-scope"] != 1 || c.Refused["bad-token"] != 4 {
		t.Errorf("the caller's locks status: %+v", c)
	}
	metrics := send(t, "GET", a+"/metrics", "", "").body
	for _, line := range []string{`plait_lock_home 1`, `plait_lock_home_total{result="granted"} 1`, `plait_lock_refused_total{code="lock-held"} 1`,
		`plait_lock_requests_total{outcome="acquired"} 1`, `plait_lock_writes_total{result="confirmed"} 2`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics has no line %s", line)
		}
	}
}

// TestLockRequiredInFencedTable: in a fenced table a write without a token is refused
// lock-required and nothing is written; one under a live token is taken.
func TestLockRequiredInFencedTable(t *testing.T) {
	n, api, _ := lockNode(t, "A", 10, time.Second)
	if _, err := n.PublishMap([]byte(`{"generation":1,"nodes":[{"name":"A"}],"lock_homes":["A"],"fenced_tables":["f"]}`)); err != nil {
		t.Fatal(err)
	}
	a := api.URL
	wantCode(t, "put without a token", send(t, "PUT", a+"/v1/tables/f/records/k", "", "v"), 409, "lock-required")
	wantCode(t, "delete without a token", send(t, "DELETE", a+"/v1/tables/f/records/k", "", ""), 409, "lock-required")
	wantCode(t, "batch without a token", send(t, "POST", a+"/v1/tables/f/batch", "application/json", `{"ops":[{"op":"put","key":"k","value":"v"}]}`), 409, "lock-required")
	if got := send(t, "PUT", a+"/v1/tables/other/records/k", "", "v"); got.status != 200 {
		t.Errorf("a table not fenced: %d %s", got.status, got.body)
	}
	if got := send(t, "GET", a+"/v1/tables/f/records/k", "", ""); got.status != 404 {
		t.Errorf("after refused writes: %d %s", got.status, got.body)
	}
	g := acquire(t, a, "f", "k", 2000)
	if got := send(t, "PUT", a+"/v1/tables/f/records/k", "", "v", "Plait-Lock", g.Token); got.status != 200 {
		t.Errorf("put under a token: %d %s", got.status, got.body)
	}
}

// TestLockedWriteConfirmedByHome: A writes under a lock whose home is B, and answers only
// once B has applied the write: B serves it the moment A's answer comes.
func TestLockedWriteConfirmedByHome(t *testing.T) {
	_, bAPI, bURL := lockNode(t, "B", 10, time.Second)
	aNode, aAPI, _ := lockNode(t, "A", 10, time.Second, node.Peer{Name: "B", URL: bURL})
	publishWhenV4(t, aNode, `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"lock_homes":["B"]}`)
	waitFor(t, "B to hold the map", func() bool { return statusOf(t, bAPI.URL).ClusterMap.Generation == 1 })
	g := acquire(t, aAPI.URL, "t", "k", 2000)
	for i := range 20 {
		v := "v" + itoa(i)
		got := send(t, "PUT", aAPI.URL+"/v1/tables/t/records/k", "", v, "Plait-Lock", g.Token)
		if got.status != 200 {
			t.Fatalf("write %d under the lock: %d %s", i, got.status, got.body)
		}
		if got := send(t, "GET", bAPI.URL+"/v1/tables/t/records/k", "", ""); got.status != 200 || got.body != v {
			t.Fatalf("the home answered %d %q right after write %d was acknowledged, want %q", got.status, got.body, i, v)
		}
	}
	if a, b := statusOf(t, aAPI.URL).Locks, statusOf(t, bAPI.URL).Locks; a.Home || !b.Home || b.Granted != 1 || a.Held != 1 || a.Caller.Writes != 20 || a.Caller.WritesLost != 0 {
		t.Errorf("locks status: A %+v, B %+v", a, b)
	}
}

// TestLockedReadWaitsForFence: B takes nothing from A (its link is send-only), so a read
// on B under a lease granted after A's write waits for A's entry and answers
// fence-timeout; once B receives from A, the same read answers the write.
func TestLockedReadWaitsForFence(t *testing.T) {
	_, aAPI, aURL := lockNode(t, "A", 10, time.Second)
	cfg := node.Config{Name: "B", Peers: []node.Peer{{Name: "A", URL: aURL}}}
	cfg.Locks.MaxTTL, cfg.MaxClockOffset = 2*time.Second, 100*time.Millisecond
	cfg.Links = map[string]replica.LinkSettings{"A": {Mode: wire.LinkSend}}
	bNode, bAPI, _ := startNodeAPI(t, cfg, httpapi.Limits{LockFenceWait: 300 * time.Millisecond})
	publishWhenV4(t, bNode, `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"lock_homes":["A"]}`)
	waitFor(t, "A to hold the map", func() bool { return statusOf(t, aAPI.URL).ClusterMap.Generation == 1 })
	if got := send(t, "PUT", aAPI.URL+"/v1/tables/t/records/k", "", "from A"); got.status != 200 {
		t.Fatal(got.status, got.body)
	}
	g := acquire(t, bAPI.URL, "t", "k", 2000)
	wantCode(t, "a read on B behind the fence", send(t, "GET", bAPI.URL+"/v1/tables/t/records/k", "", "", "Plait-Lock", g.Token), 503, "fence-timeout")
	if got := send(t, "GET", bAPI.URL+"/v1/tables/t/records/k", "", ""); got.status != 404 {
		t.Errorf("a read on B without the token: %d %s (B should hold nothing of A's)", got.status, got.body)
	}
	if got := send(t, "PUT", bAPI.URL+"/v1/peers/A", "application/json", `{"mode":"both"}`); got.status != 200 {
		t.Fatal(got.status, got.body)
	}
	waitFor(t, "the read under the token to answer A's write", func() bool {
		got := send(t, "GET", bAPI.URL+"/v1/tables/t/records/k", "", "", "Plait-Lock", g.Token)
		if got.status == 503 && strings.Contains(got.body, "fence-timeout") {
			return false
		}
		if got.status != 200 || got.body != "from A" {
			t.Fatalf("a read on B under the token: %d %s", got.status, got.body)
		}
		return true
	})
	if c := statusOf(t, bAPI.URL).Locks.Caller; c.FenceWaits < 1 || c.FenceTimeouts < 1 || c.Refused["fence-timeout"] < 1 {
		t.Errorf("B's caller status after a fence-timeout and a wait: %+v", c)
	}
}

// publishWhenV4 publishes doc on n once its peers are known to speak version 4.
func publishWhenV4(t *testing.T, n *node.Node, doc string) {
	t.Helper()
	waitFor(t, "the members to speak version 4", func() bool {
		_, err := n.PublishMap([]byte(doc))
		if err != nil && !strings.Contains(err.Error(), "cluster-not-v4") {
			t.Fatal(err)
		}
		return err == nil
	})
}

// TestLockClusterNotV4: A is its own lock home; a map that keeps its homes and lists B,
// a peer at protocol version 3, is adopted (it turns nothing on), and from then on every
// lock request on A, and a write under the token it granted before, answers 503
// cluster-not-v4 naming B: locks are whole-cluster (docs/design.md §25.2). Nothing is
// written.
func TestLockClusterNotV4(t *testing.T) {
	aNode, aAPI, aURL := lockNode(t, "A", 10, time.Second)
	a := aAPI.URL
	if _, err := aNode.PublishMap([]byte(`{"generation":1,"nodes":[{"name":"A"}],"lock_homes":["A"]}`)); err != nil {
		t.Fatal(err)
	}
	g := acquire(t, a, "t", "k", 2000)
	cfg := node.Config{Name: "B", Peers: []node.Peer{{Name: "A", URL: aURL}}}
	cfg.MaxVersion = 3
	startNodeAPI(t, cfg, httpapi.Limits{})
	waitFor(t, "A to know B at version 3", func() bool {
		for _, p := range statusOf(t, a).Peers {
			if p.Name == "B" && p.Version == 3 {
				return true
			}
		}
		return false
	})
	if _, err := aNode.PublishMap([]byte(`{"generation":2,"nodes":[{"name":"A"},{"name":"B"}],"lock_homes":["A"]}`)); err != nil {
		t.Fatal(err)
	}
	if below := statusOf(t, a).ClusterMap.MembersBelowV4; len(below) != 1 || below[0] != "B" {
		t.Fatalf("members_below_v4 %v, want [B]", below)
	}
	lockURL := a + "/v1/tables/t/locks/k"
	for _, c := range []struct {
		what string
		got  answer
	}{
		{"an acquire", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000}`)},
		{"an acquire of another key", send(t, "POST", a+"/v1/tables/t/locks/j", "application/json", `{"ttl_ms":1000}`)},
		{"a renew", send(t, "PUT", lockURL, "application/json", `{"ttl_ms":1000}`, "Plait-Lock", g.Token)},
		{"a write under the token", send(t, "PUT", a+"/v1/tables/t/records/k", "", "v", "Plait-Lock", g.Token)},
		{"a release", send(t, "DELETE", lockURL, "", "", "Plait-Lock", g.Token)},
	} {
		wantCode(t, c.what, c.got, 503, "cluster-not-v4")
		if !strings.Contains(c.got.body, "B") {
			t.Errorf("%s: %s does not name B", c.what, c.got.body)
		}
	}
	if got := send(t, "GET", a+"/v1/tables/t/records/k", "", ""); got.status != 404 {
		t.Errorf("after a refused write under the token: %d %s", got.status, got.body)
	}
	if c := statusOf(t, a).Locks.Caller; c.Refused["cluster-not-v4"] != 5 || c.Writes != 0 {
		t.Errorf("the caller's locks status: %+v", c)
	}
}

// TestLockTooManyWaiters: a home whose queue holds 2 requests (MaxWaiters) queues two
// acquires of a held key and refuses the third 503 too-many-waiters; once the holder
// releases, the two queued are granted in turn, each releasing.
func TestLockTooManyWaiters(t *testing.T) {
	cfg := node.Config{Name: "A"}
	cfg.Locks.MaxTTL, cfg.Locks.MaxWaiters, cfg.MaxClockOffset = 2*time.Second, 2, 100*time.Millisecond
	n, api, _ := startNodeAPI(t, cfg, httpapi.Limits{LockFenceWait: time.Second})
	if _, err := n.PublishMap([]byte(`{"generation":1,"nodes":[{"name":"A"}],"lock_homes":["A"]}`)); err != nil {
		t.Fatal(err)
	}
	a := api.URL
	lockURL := a + "/v1/tables/t/locks/k"
	g := acquire(t, a, "t", "k", 2000)
	results := make(chan answer, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest("POST", lockURL, strings.NewReader(`{"ttl_ms":1000,"wait_ms":1900}`))
			got := answer{}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got.body = err.Error()
				results <- got
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got.status, got.body = resp.StatusCode, string(b)
			var w grant
			if json.Unmarshal(b, &w) == nil && w.Token != "" {
				rel, _ := http.NewRequest("DELETE", lockURL, nil)
				rel.Header.Set("Plait-Lock", w.Token)
				if resp, err := http.DefaultClient.Do(rel); err == nil {
					resp.Body.Close()
				}
			}
			results <- got
		}()
	}
	waitFor(t, "two requests waiting at the home", func() bool { return statusOf(t, a).Locks.Waiting == 2 })
	wantCode(t, "a third waiter", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000,"wait_ms":1900}`), 503, "too-many-waiters")
	if got := send(t, "DELETE", lockURL, "", "", "Plait-Lock", g.Token); got.status != 204 {
		t.Fatalf("release: %d %s", got.status, got.body)
	}
	for range 2 {
		if got := <-results; got.status != 200 {
			t.Errorf("a queued acquire: %d %s, want a grant", got.status, got.body)
		}
	}
	l := statusOf(t, a).Locks
	if l.Refused["too-many-waiters"] != 1 || l.Queued != 2 || l.Granted != 3 || l.Caller.Refused["too-many-waiters"] != 1 {
		t.Errorf("the locks status: %+v", l)
	}
}

// TestLockExchangeFailures: what a lock request answers when its home does not answer, as
// the request exchange gives it (docs/contract.md §22.7, §22.9). A takes B's entries but
// sends B none (its link to B is receive), and B is the home: a write under a lock on A is
// written and its confirm waits at B for an entry that never comes, so it answers 504
// request-timeout at A's request deadline (2 s here) and the home forgets it. An acquire
// waiting at B when B stops answers 502 unreachable (the connection closed before the
// answer); one made after answers 502 no-route.
func TestLockExchangeFailures(t *testing.T) {
	bNode, bAPI, bURL := lockNode(t, "B", 10, time.Second)
	cfg := node.Config{Name: "A", Peers: []node.Peer{{Name: "B", URL: bURL}}}
	cfg.Locks.MaxTTL, cfg.MaxClockOffset, cfg.RequestTimeout = 2*time.Second, 100*time.Millisecond, 2*time.Second
	cfg.Links = map[string]replica.LinkSettings{"B": {Mode: wire.LinkReceive}}
	_, aAPI, _ := startNodeAPI(t, cfg, httpapi.Limits{LockFenceWait: time.Second})
	publishWhenV4(t, bNode, `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"lock_homes":["B"]}`)
	waitFor(t, "A to hold the map", func() bool { return statusOf(t, aAPI.URL).ClusterMap.Generation == 1 })
	a := aAPI.URL
	lockURL := a + "/v1/tables/t/locks/k"

	g := acquire(t, a, "t", "k", 2000)
	wantCode(t, "a write whose confirm the home cannot give", send(t, "PUT", a+"/v1/tables/t/records/k", "", "v", "Plait-Lock", g.Token), 504, "request-timeout")
	if c := statusOf(t, a).Locks.Caller; c.Writes != 1 || c.WritesLost != 0 || c.Refused["request-timeout"] != 1 {
		t.Errorf("A's caller status after a confirm's timeout: %+v", c)
	}
	waitFor(t, "the home to forget the confirm", func() bool { return statusOf(t, bAPI.URL).Locks.ConfirmsWaiting == 0 })

	// The lease of k may have ended while the confirm waited: j is held now, and waited for.
	held := acquire(t, a, "t", "j", 2000)
	lockURL = a + "/v1/tables/t/locks/j"
	waiting := make(chan answer, 1)
	go func() {
		resp, err := http.Post(lockURL, "application/json", strings.NewReader(`{"ttl_ms":1000,"wait_ms":1400}`))
		if err != nil {
			waiting <- answer{body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		waiting <- answer{status: resp.StatusCode, body: string(b)}
	}()
	waitFor(t, "an acquire waiting at B", func() bool { return statusOf(t, bAPI.URL).Locks.Waiting == 1 })
	if err := bNode.Stop(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "an acquire waiting at the home when it stopped", <-waiting, 502, "unreachable")
	waitFor(t, "A to see B gone", func() bool { return !statusOf(t, a).Connected("B") })
	wantCode(t, "an acquire with the home down", send(t, "POST", lockURL, "application/json", `{"ttl_ms":1000}`), 502, "no-route")
	wantCode(t, "a release with the home down", send(t, "DELETE", lockURL, "", "", "Plait-Lock", held.Token), 502, "no-route")
	if c := statusOf(t, a).Locks.Caller; c.Refused["unreachable"] != 1 || c.Refused["no-route"] != 2 {
		t.Errorf("A's caller status: %+v", c)
	}
}

// TestLockedReadFenceUnreachable: B, the home, wrote and purged its log (retention of
// 200 ms) before A ever met it, and serves no copy (MaxCopies -1). A, connected to B alone,
// is below every fence B grants and nothing can bring it there: a read on A under a lease
// B granted answers 503 fence-unreachable, not fence-timeout (no fence wait timed out),
// never B's earlier value or a 404; the read on B, which holds the lease's fence, answers
// the record.
func TestLockedReadFenceUnreachable(t *testing.T) {
	cfgB := node.Config{Name: "B"}
	cfgB.Locks.MaxTTL, cfgB.MaxClockOffset = 2*time.Second, 100*time.Millisecond
	cfgB.RetainAge, cfgB.RetentionInterval, cfgB.MaxCopies = 200*time.Millisecond, 50*time.Millisecond, -1
	bNode, bAPI, bURL := startNodeAPI(t, cfgB, httpapi.Limits{LockFenceWait: 10 * time.Second})
	b := bAPI.URL
	for i := range 20 {
		if got := send(t, "PUT", b+"/v1/tables/t/records/k", "", "v"+itoa(i)); got.status != 200 {
			t.Fatal(got.status, got.body)
		}
	}
	waitFor(t, "B to purge its log", func() bool {
		for _, o := range statusOf(t, b).Origins {
			if o.Name == "B" {
				return o.FloorSeq >= 10
			}
		}
		return false
	})
	cfgA := node.Config{Name: "A", Peers: []node.Peer{{Name: "B", URL: bURL}}}
	cfgA.Locks.MaxTTL, cfgA.MaxClockOffset = 2*time.Second, 100*time.Millisecond
	_, aAPI, _ := startNodeAPI(t, cfgA, httpapi.Limits{LockFenceWait: 10 * time.Second})
	a := aAPI.URL
	publishWhenV4(t, bNode, `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"lock_homes":["B"]}`)
	waitFor(t, "A to hold the map", func() bool { return statusOf(t, a).ClusterMap.Generation == 1 })
	g := acquire(t, a, "t", "k", 2000)
	wantCode(t, "a read on A under the lease", send(t, "GET", a+"/v1/tables/t/records/k", "", "", "Plait-Lock", g.Token), 503, "fence-unreachable")
	if got := send(t, "GET", b+"/v1/tables/t/records/k", "", "", "Plait-Lock", g.Token); got.status != 200 || got.body != "v19" {
		t.Errorf("the read on B under the lease: %d %s", got.status, got.body)
	}
	if c := statusOf(t, a).Locks.Caller; c.Refused["fence-unreachable"] != 1 || c.FenceTimeouts != 0 {
		t.Errorf("A's caller status: %+v", c)
	}
}

// TestLeafNoLocks: a leaf (docs/contract.md §26.4) answers a lock request and a write under
// a token 409 leaf-no-locks, nothing written; its other writes are taken as any node's.
func TestLeafNoLocks(t *testing.T) {
	// The hub is never reached: the leaf refuses locks by itself.
	cfg := node.Config{Name: "L", Peers: []node.Peer{{Name: "H", URL: "ws://127.0.0.1:1"}}}
	cfg.Hub = "H"
	_, api, _ := startNodeAPI(t, cfg, httpapi.Limits{})
	wantCode(t, "acquire at a leaf", send(t, "POST", api.URL+"/v1/tables/t/locks/k", "application/json", `{"ttl_ms":1000}`), 409, "leaf-no-locks")
	put, err := http.NewRequest("PUT", api.URL+"/v1/tables/t/records/k", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	put.Header.Set("Plait-Lock", strings.Repeat("0a", 40))
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantCode(t, "a write under a token at a leaf", answer{status: resp.StatusCode, body: string(body)}, 409, "leaf-no-locks")
	if status, body := do(t, "GET", api.URL+"/v1/tables/t/records/k", ""); status != 404 {
		t.Errorf("the refused write: GET %d %s, want 404", status, body)
	}
	if status, body := do(t, "PUT", api.URL+"/v1/tables/t/records/k", "v"); status != 200 {
		t.Errorf("a write without a token at a leaf: %d %s, want 200", status, body)
	}
}
