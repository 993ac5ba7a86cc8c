package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// namedFeed is a named feed's document as GET /v1/feeds/{name} answers it.
func namedFeed(t *testing.T, what string, status int, body string, wantStatus int) httpapi.NamedFeedDoc {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: %d %s, want %d", what, status, body, wantStatus)
	}
	var d httpapi.NamedFeedDoc
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("%s: %v in %s", what, err, body)
	}
	return d
}

// wantError checks an error answer's status and code.
func wantError(t *testing.T, what string, status int, body string, wantStatus int, code string) {
	t.Helper()
	if c := errorCode(t, answer{status: status, body: body}); status != wantStatus || c != code {
		t.Errorf("%s: %d %s, want %d %s", what, status, body, wantStatus, code)
	}
}

// TestNamedFeedEndpoints: every endpoint of named feeds and each refusal: a feed made at
// the node's position streams from it and then from each ack (a request's Last-Event-ID
// not read), acks move forward only and never ahead of the node, --max-named-feeds feeds
// are kept and one more is refused and counted, a delete makes room; the status and the
// metrics list the feeds.
func TestNamedFeedEndpoints(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A", Config: replica.Config{MaxNamedFeeds: 2}}, httpapi.Limits{})
	origin := statusOf(t, a.URL).Node.Origin
	put(t, a.URL, "t", "k1", "v1")
	put(t, a.URL, "t", "k2", "v2")

	code, body := do(t, http.MethodPut, a.URL+"/v1/feeds/f1", `{"table":"t","hold_bytes":1000000}`)
	d := namedFeed(t, "PUT f1", code, body, http.StatusCreated)
	if d.Name != "f1" || d.Table != "t" || d.Position != origin+":2" || d.HoldBytes != 1000000 || d.LagEntries != 0 || d.Lapsed {
		t.Fatalf("PUT f1: %+v, want f1 of t at %s:2 with the cap, no lag", d, origin)
	}
	code, body = do(t, http.MethodPut, a.URL+"/v1/feeds/f1", `{"table":"t","hold_bytes":500000}`)
	if d = namedFeed(t, "PUT f1 again", code, body, http.StatusOK); d.HoldBytes != 500000 || d.Position != origin+":2" {
		t.Fatalf("PUT f1 again: %+v, want the cap set and the position kept", d)
	}
	for _, c := range []struct{ what, path, body, code string }{
		{"another table", "f1", `{"table":"u","hold_bytes":1}`, "feed-exists"},
		{"a bad name", "F1", `{"table":"t","hold_bytes":1}`, "bad-name"},
		{"a bad table", "f9", `{"table":"t/x","hold_bytes":1}`, "bad-table"},
		{"no hold_bytes", "f9", `{"table":"t"}`, "bad-json"},
		{"a negative hold_bytes", "f9", `{"table":"t","hold_bytes":-1}`, "bad-json"},
		{"an unknown field", "f9", `{"table":"t","hold_bytes":1,"x":1}`, "bad-json"},
	} {
		code, body := do(t, http.MethodPut, a.URL+"/v1/feeds/"+c.path, c.body)
		status := map[string]int{"feed-exists": http.StatusConflict}[c.code]
		if status == 0 {
			status = http.StatusBadRequest
		}
		wantError(t, "PUT of "+c.what, code, body, status, c.code)
	}

	for i := 3; i <= 5; i++ {
		put(t, a.URL, "t", fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	code, body = do(t, http.MethodGet, a.URL+"/v1/feeds/f1", "")
	if d = namedFeed(t, "GET f1", code, body, http.StatusOK); d.LagEntries != 3 || d.LagBytes == 0 {
		t.Fatalf("GET f1 after 3 writes: %+v, want 3 entries behind", d)
	}
	code, body = do(t, http.MethodGet, a.URL+"/v1/feeds/nope", "")
	wantError(t, "GET of no feed", code, body, http.StatusNotFound, "not-found")

	f, got := openFeed(t, a.URL+"/v1/feeds/f1/changes")
	if f == nil {
		t.Fatalf("streaming f1: %d %s", got.status, got.body)
	}
	var seen []changeEvent
	for range 3 {
		seen = append(seen, f.change(t))
	}
	f.close()
	if seen[0].Seq != 3 || seen[2].Seq != 5 {
		t.Fatalf("f1 streamed seqs %d..%d, want 3..5 (after its position 2)", seen[0].Seq, seen[2].Seq)
	}
	code, body = do(t, http.MethodPost, a.URL+"/v1/feeds/f1/ack", `{"position":"`+seen[1].Position+`"}`)
	if d = namedFeed(t, "ack of 4", code, body, http.StatusOK); d.Position != origin+":4" || d.LagEntries != 1 {
		t.Fatalf("ack of 4: %+v, want position %s:4, 1 entry behind", d, origin)
	}
	code, body = do(t, http.MethodPost, a.URL+"/v1/feeds/f1/ack", `{"position":"`+origin+`:3"}`)
	if d = namedFeed(t, "ack of 3", code, body, http.StatusOK); d.Position != origin+":4" {
		t.Fatalf("ack below the position: %+v, want it left at 4", d)
	}
	for _, c := range []struct {
		what, path, body string
		status           int
		code             string
	}{
		{"ahead", "f1", `{"position":"` + origin + `:99"}`, http.StatusConflict, "ahead"},
		{"a bad position", "f1", `{"position":"` + origin + `:04"}`, http.StatusBadRequest, "bad-position"},
		{"no position", "f1", `{}`, http.StatusBadRequest, "bad-json"},
		{"no feed", "nope", `{"position":""}`, http.StatusNotFound, "not-found"},
	} {
		code, body := do(t, http.MethodPost, a.URL+"/v1/feeds/"+c.path+"/ack", c.body)
		wantError(t, "ack of "+c.what, code, body, c.status, c.code)
	}
	// Streamed again, f1 starts after its ack, whatever the request's Last-Event-ID says.
	f, got = openFeed(t, a.URL+"/v1/feeds/f1/changes", "Last-Event-ID", origin+":5")
	if f == nil {
		t.Fatalf("streaming f1 again: %d %s", got.status, got.body)
	}
	if ev := f.change(t); ev.Seq != 5 {
		t.Fatalf("f1 after an ack of 4 streamed seq %d first, want 5", ev.Seq)
	}
	f.close()
	_, got = openFeed(t, a.URL+"/v1/feeds/nope/changes")
	wantError(t, "streaming no feed", got.status, got.body, http.StatusNotFound, "not-found")

	code, body = do(t, http.MethodPut, a.URL+"/v1/feeds/f2", `{"table":"t","hold_bytes":1}`)
	namedFeed(t, "PUT f2", code, body, http.StatusCreated)
	code, body = do(t, http.MethodPut, a.URL+"/v1/feeds/f3", `{"table":"t","hold_bytes":1}`)
	wantError(t, "a third feed with --max-named-feeds 2", code, body, http.StatusServiceUnavailable, "too-many-named-feeds")
	st := statusOf(t, a.URL)
	if c := st.Counters; c.NamedFeedsRefused != 1 || c.NamedFeedAcks != 1 || c.NamedFeedAcksAhead != 1 {
		t.Errorf("counters: %d refused, %d acks, %d ahead; want 1, 1, 1", c.NamedFeedsRefused, c.NamedFeedAcks, c.NamedFeedAcksAhead)
	}
	if len(st.NamedFeeds) != 2 || st.NamedFeeds[0].Name != "f1" || st.NamedFeeds[0].Position != origin+":4" || st.NamedFeeds[1].Name != "f2" {
		t.Errorf("status named_feeds %+v, want f1 at 4 and f2", st.NamedFeeds)
	}
	if v, ok := metric(t, metricsOf(t, a.URL), `plait_named_feed_lag_entries{feed="f1",table="t"}`); !ok || v != 1 {
		t.Errorf("plait_named_feed_lag_entries of f1: %v %v, want 1", v, ok)
	}
	code, body = do(t, http.MethodDelete, a.URL+"/v1/feeds/f2", "")
	if code != http.StatusNoContent {
		t.Fatalf("DELETE f2: %d %s", code, body)
	}
	code, body = do(t, http.MethodDelete, a.URL+"/v1/feeds/f2", "")
	wantError(t, "DELETE f2 again", code, body, http.StatusNotFound, "not-found")
	code, body = do(t, http.MethodPut, a.URL+"/v1/feeds/f3", `{"table":"t","hold_bytes":1}`)
	namedFeed(t, "PUT f3 after a delete", code, body, http.StatusCreated)
}

// TestNamedFeedRetention: on a node whose retention purges all it may, a named feed under
// its cap keeps every entry above its position; its cap lowered under its bytes, the hold
// lapses (counted, shown), retention purges past it, and the feed meets purged.
func TestNamedFeedRetention(t *testing.T) {
	cfg := node.Config{Name: "A", Config: replica.Config{RetainBytes: 1, RetentionInterval: 20 * time.Millisecond}}
	_, a, _ := startNodeAPI(t, cfg, httpapi.Limits{})
	put(t, a.URL, "t", "k0", "v")
	code, body := do(t, http.MethodPut, a.URL+"/v1/feeds/f", `{"table":"t","hold_bytes":1000000}`)
	namedFeed(t, "PUT f", code, body, http.StatusCreated)
	for i := 1; i <= 5; i++ {
		put(t, a.URL, "t", fmt.Sprint("k", i), "v")
	}
	floor := func() uint64 { return statusOf(t, a.URL).Origins[0].FloorSeq }
	var d httpapi.NamedFeedDoc
	waitFor(t, "a retention step holding entries for f", func() bool {
		code, body := do(t, http.MethodGet, a.URL+"/v1/feeds/f", "")
		d = namedFeed(t, "GET f", code, body, http.StatusOK)
		return d.HeldBytes > 0
	})
	if f := floor(); f != 1 || d.Lapsed || d.LagEntries != 5 {
		t.Fatalf("held: floor %d, feed %+v; want the floor at the feed's position 1, not lapsed, 5 behind", f, d)
	}
	code, body = do(t, http.MethodPut, a.URL+"/v1/feeds/f", `{"table":"t","hold_bytes":1}`)
	namedFeed(t, "PUT f's cap down", code, body, http.StatusOK)
	waitFor(t, "f's hold lapsed and A's log purged past it", func() bool { return floor() == 5 })
	code, body = do(t, http.MethodGet, a.URL+"/v1/feeds/f", "")
	if d = namedFeed(t, "GET f lapsed", code, body, http.StatusOK); !d.Lapsed || d.HeldBytes != 0 {
		t.Fatalf("after the lapse: %+v, want lapsed, holding nothing", d)
	}
	if n := statusOf(t, a.URL).Counters.NamedFeedHoldsLapsed; n != 1 {
		t.Errorf("named_feed_holds_lapsed %d, want 1", n)
	}
	if v, ok := metric(t, metricsOf(t, a.URL), `plait_named_feed_lapsed{feed="f",table="t"}`); !ok || v != 1 {
		t.Errorf("plait_named_feed_lapsed of f: %v %v, want 1", v, ok)
	}
	_, got := openFeed(t, a.URL+"/v1/feeds/f/changes")
	if got.status != http.StatusGone || errorCode(t, got) != "purged" || !strings.Contains(got.body, `"floor":5`) {
		t.Fatalf("streaming f past its lapse: %d %s, want 410 purged at floor 5", got.status, got.body)
	}
}

// TestNamedFeedRestart: a named feed, its cap, acknowledged position and lapse come back
// after the node stops and starts again on its data directory (its control documents in
// RocksDB), its lag counted again from the logs; a deleted one does not.
func TestNamedFeedRestart(t *testing.T) {
	dir := t.TempDir()
	_, a, _, stop := linkNode(t, node.Config{Name: "A"}, dir)
	origin := statusOf(t, a.URL).Node.Origin
	put(t, a.URL, "t", "k0", "v")
	// gone is made and deleted first, so that keep's own creation is what lists it.
	for _, f := range []string{"gone", "keep"} {
		code, body := do(t, http.MethodPut, a.URL+"/v1/feeds/"+f, `{"table":"t","hold_bytes":777}`)
		namedFeed(t, "PUT "+f, code, body, http.StatusCreated)
		if f == "gone" {
			if code, body = do(t, http.MethodDelete, a.URL+"/v1/feeds/gone", ""); code != http.StatusNoContent {
				t.Fatalf("DELETE gone: %d %s", code, body)
			}
		}
	}
	for i := 1; i <= 4; i++ {
		put(t, a.URL, "t", fmt.Sprint("k", i), "v")
	}
	code, body := do(t, http.MethodPost, a.URL+"/v1/feeds/keep/ack", `{"position":"`+origin+`:3"}`)
	before := namedFeed(t, "ack keep", code, body, http.StatusOK)
	stop()
	_, a, _, stop = linkNode(t, node.Config{Name: "A"}, dir)
	code, body = do(t, http.MethodGet, a.URL+"/v1/feeds/keep", "")
	after := namedFeed(t, "GET keep after a restart", code, body, http.StatusOK)
	if after.Position != origin+":3" || after.HoldBytes != 777 || after.Table != "t" || after.LagEntries != 2 || after.LagBytes != before.LagBytes || after.LagBytes == 0 {
		t.Fatalf("after a restart: %+v, want %+v (its held_bytes aside)", after, before)
	}
	code, body = do(t, http.MethodGet, a.URL+"/v1/feeds/gone", "")
	wantError(t, "GET of the deleted feed after a restart", code, body, http.StatusNotFound, "not-found")
	// The last feed deleted: its deletion alone is what unlists it.
	if code, body = do(t, http.MethodDelete, a.URL+"/v1/feeds/keep", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE keep: %d %s", code, body)
	}
	stop()
	_, a, _, _ = linkNode(t, node.Config{Name: "A"}, dir)
	if st := statusOf(t, a.URL); len(st.NamedFeeds) != 0 {
		t.Fatalf("after deleting every feed and a restart: %+v", st.NamedFeeds)
	}
}
