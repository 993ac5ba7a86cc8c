package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/client"
)

const origin = "0123456789abcdef0123456789abcdef"

// pos is the position after seq entries of origin.
func pos(seq int) string { return fmt.Sprintf("%s:%d", origin, seq) }

// change is the NDJSON line of a change of seq, a put of k<seq>.
func change(seq int) string {
	return fmt.Sprintf(`{"event":"change","table":"t","origin":%q,"origin_name":"A","seq":%d,"hlc":%d,"ops":[{"op":"put","key":"k%d","value_b64":"AP8=","won":true}],"position":%q}`,
		origin, seq, 1000+seq, seq, pos(seq))
}

// feedServer answers connection i of a feed with script[i] (the last again past the end),
// and records each connection's since.
type feedServer struct {
	mu     sync.Mutex
	sinces []string
	script []func(w http.ResponseWriter, since string)
}

func (f *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/tables/t/changes" || r.Header.Get("Accept") != "application/x-ndjson" {
		http.Error(w, "not a feed request: "+r.URL.String(), 400)
		return
	}
	f.mu.Lock()
	i := min(len(f.sinces), len(f.script)-1)
	f.sinces = append(f.sinces, r.URL.Query().Get("since"))
	f.mu.Unlock()
	f.script[i](w, r.URL.Query().Get("since"))
}

// lines sends lines, then ends as end says: "drop" (the connection closes mid-stream),
// "hang" (nothing more is sent until the client goes), or "" (the response ends).
func lines(end string, ls ...string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, _ string) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range ls {
			io.WriteString(w, l+"\n")
		}
		w.(http.Flusher).Flush()
		switch end {
		case "drop":
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case "hang":
			time.Sleep(time.Second)
		}
	}
}

func refuse(status int, code string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, _ string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"the test refuses"}}`, code)
	}
}

// TestChangesResume: a feed that drops, closes stalled, goes idle, is refused for a while
// and is answered behind goes on from the last position it delivered (a heartbeat's
// too), each event delivered once and in order, and ends on purged with the origin and
// floor.
func TestChangesResume(t *testing.T) {
	f := &feedServer{script: []func(http.ResponseWriter, string){
		lines("drop", `{"event":"heartbeat","position":""}`),
		lines("drop", `{"event":"heartbeat","position":`+fmt.Sprintf("%q", pos(0))+`}`),
		lines("drop", change(1), change(2)),
		lines("", change(3), `{"event":"close","reason":"stalled","message":"the client read too slowly"}`),
		refuse(503, "too-many-feeds"),
		refuse(409, "behind"),
		lines("hang", change(4)),
		lines("", `{"event":"heartbeat","position":`+fmt.Sprintf("%q", pos(5))+`}`, `{"event":"something-new","position":"x"}`),
		lines("", change(6), `{"event":"close","reason":"purged","message":"below the floor","origin":"`+origin+`","floor":9,"position":"`+pos(6)+`"}`),
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := fast(t, srv.URL, client.WithFeedIdleTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seqs []uint64
	var end error
	for e, err := range c.Changes(ctx, "t", "") {
		if err != nil {
			end = err
			break
		}
		if e.Kind != "change" || e.Position != pos(int(e.Seq)) || len(e.Ops) != 1 || string(e.Ops[0].Value) != "\x00\xff" || !e.Ops[0].Won {
			t.Errorf("event %+v", e)
		}
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 6]" {
		t.Errorf("delivered %v, want [1 2 3 4 6]", seqs)
	}
	var fc *client.FeedClosedError
	if !errors.Is(end, client.ErrPurged) || !errors.As(end, &fc) || fc.Origin != origin || fc.Floor != 9 {
		t.Errorf("the feed ended with %v, want purged of %s at 9", end, origin)
	}
	want := []string{"now", "", pos(0), pos(2), pos(3), pos(3), pos(3), pos(4), pos(5)}
	if got := fmt.Sprint(f.sinces); got != fmt.Sprint(want) {
		t.Errorf("the connections' since:\n got %v\nwant %v", got, want)
	}
}

// TestChangesEnds: a refusal a new connection would meet again ends the feed at once
// (purged, not-carried, bad-position), as does the caller's break; WithFeedReconnects
// bounds the failures in a row.
func TestChangesEnds(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{410, "purged"}, {409, "not-carried"}, {400, "bad-position"}, {401, "unauthorized"}} {
		f := &feedServer{script: []func(http.ResponseWriter, string){refuse(tc.status, tc.code)}}
		srv := httptest.NewServer(f)
		_, err := firstErr(fast(t, srv.URL).Changes(context.Background(), "t", "oldest"))
		sentinel, _ := client.Sentinel(tc.code)
		if !errors.Is(err, sentinel) || len(f.sinces) != 1 || f.sinces[0] != "oldest" {
			t.Errorf("%d %s: %v after %v, want it after one connection", tc.status, tc.code, err, f.sinces)
		}
		srv.Close()
	}
	f := &feedServer{script: []func(http.ResponseWriter, string){lines("", `{"event":"close","reason":"not-carried","message":"ask B"}`)}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	if _, err := firstErr(fast(t, srv.URL).Changes(context.Background(), "t", pos(3))); !errors.Is(err, client.ErrNotCarried) || len(f.sinces) != 1 {
		t.Errorf("closed not-carried: %v after %d connections", err, len(f.sinces))
	}

	f = &feedServer{script: []func(http.ResponseWriter, string){refuse(503, "too-many-feeds")}}
	srv2 := httptest.NewServer(f)
	defer srv2.Close()
	_, err := firstErr(fast(t, srv2.URL, client.WithFeedReconnects(3)).Changes(context.Background(), "t", "now"))
	if !errors.Is(err, client.ErrTooManyFeeds) || len(f.sinces) != 4 {
		t.Errorf("always too-many-feeds: %v after %d connections, want it after 4", err, len(f.sinces))
	}

	f = &feedServer{script: []func(http.ResponseWriter, string){lines("", change(1), change(2))}}
	srv3 := httptest.NewServer(f)
	defer srv3.Close()
	n := 0
	for range fast(t, srv3.URL).Changes(context.Background(), "t", "now") {
		n++
		break
	}
	if n != 1 || len(f.sinces) != 1 {
		t.Errorf("a break: %d events, %d connections", n, len(f.sinces))
	}
}

// TestListPinned: against a node that pins listings, the first page asks snapshot=new
// and the later ones pass the snapshot and the previous page's next; every page carries
// the first's as_of.
func TestListPinned(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		queries = append(queries, r.URL.RawQuery)
		switch {
		case q.Get("snapshot") == "new":
			io.WriteString(w, `{"records":[{"key":"a","value":"1"}],"next":"a","snapshot":"s1","as_of":"`+pos(4)+`"}`)
		case q.Get("snapshot") == "s1" && q.Get("after") == "a":
			io.WriteString(w, `{"records":[{"key":"b","value_b64":"AP8="}],"next":"b","snapshot":"s1"}`)
		case q.Get("snapshot") == "s1" && q.Get("after") == "b":
			w.WriteHeader(410)
			io.WriteString(w, `{"error":{"code":"snapshot-expired","message":"gone"}}`)
		default:
			w.WriteHeader(400)
		}
	}))
	defer srv.Close()
	var got []string
	var end error
	for p, err := range fast(t, srv.URL).List(context.Background(), "t", client.ListOptions{Prefix: "p", Limit: 1}) {
		if err != nil {
			end = err
			break
		}
		for _, r := range p.Records {
			got = append(got, fmt.Sprintf("%s=%x@%s/%s", r.Key, r.Value, p.Snapshot, strings.TrimPrefix(p.AsOf, origin)))
		}
	}
	if fmt.Sprint(got) != "[a=31@s1/:4 b=00ff@s1/:4]" {
		t.Errorf("pages %v", got)
	}
	wantAPIError(t, "an expired snapshot", end, client.ErrSnapshotExpired, 410, client.ClassConflict)
	want := "[limit=1&prefix=p&snapshot=new after=a&limit=1&prefix=p&snapshot=s1 after=b&limit=1&prefix=p&snapshot=s1]"
	if fmt.Sprint(queries) != want {
		t.Errorf("queries\n got %v\nwant %s", queries, want)
	}
}

// TestChangesLeaf: a change a hub re-originated names the leaf's origin and seq
// (docs/contract.md §24.3); any other change names none.
func TestChangesLeaf(t *testing.T) {
	const leaf = "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
	withLeaf := strings.Replace(change(2), `"ops"`, `"leaf":"`+leaf+`","leaf_seq":41,"ops"`, 1)
	f := &feedServer{script: []func(http.ResponseWriter, string){lines("hang", change(1), withLeaf)}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := fast(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for e, err := range c.Changes(ctx, "t", "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %q %d", e.Seq, e.Leaf, e.LeafSeq))
		if len(got) == 2 {
			break
		}
	}
	if want := []string{`1 "" 0`, `2 "` + leaf + `" 41`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes %q, want %q", got, want)
	}
}
