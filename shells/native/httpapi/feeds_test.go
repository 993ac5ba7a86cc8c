package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"plait/protocol/feed"
	"plait/protocol/replica"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// sseMessage is one message of a feed: an SSE message (event, id and data lines, or a
// comment) or an NDJSON line (data alone).
type sseMessage struct {
	comment string
	event   string
	id      string
	hasID   bool
	data    string
}

// feedConn is an open feed: its messages arrive on msgs as the test's reader reads them.
type feedConn struct {
	resp   *http.Response
	msgs   chan sseMessage
	cancel context.CancelFunc
}

// openFeed opens a feed at u with the headers given as name, value pairs. A refusal
// (anything but 200) is returned as its answer, with a nil feed.
func openFeed(t *testing.T, u string, header ...string) (*feedConn, answer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return nil, answer{resp.StatusCode, resp.Header, b.String()}
	}
	f := &feedConn{resp: resp, msgs: make(chan sseMessage, 1024), cancel: cancel}
	ndjson := resp.Header.Get("Content-Type") == "application/x-ndjson"
	go func() {
		defer close(f.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		var m sseMessage
		for sc.Scan() {
			line := sc.Text()
			switch {
			case ndjson:
				f.msgs <- sseMessage{data: line}
			case line == "":
				f.msgs <- m
				m = sseMessage{}
			case strings.HasPrefix(line, ":"):
				m.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				m.event = line[len("event: "):]
			case strings.HasPrefix(line, "id: ") || line == "id:":
				m.id, m.hasID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " "), true
			case strings.HasPrefix(line, "data: "):
				m.data = line[len("data: "):]
			}
		}
	}()
	t.Cleanup(f.close)
	return f, answer{status: resp.StatusCode, header: resp.Header}
}

func (f *feedConn) close() {
	f.cancel()
	f.resp.Body.Close()
}

// next is the feed's next event (change, reread or close) within 10 s: heartbeats, their
// id-only messages and NDJSON heartbeat lines are passed over (and do not extend the 10 s).
func (f *feedConn) next(t *testing.T) sseMessage {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no event from the feed in 10 s, heartbeats alone")
		}
		m := f.nextAny(t)
		if m.event == "" && m.data == "" || strings.HasPrefix(m.data, `{"event":"heartbeat"`) {
			continue
		}
		return m
	}
}

// nextAny is the feed's next message, heartbeats included, within 10 s.
func (f *feedConn) nextAny(t *testing.T) sseMessage {
	t.Helper()
	select {
	case m, ok := <-f.msgs:
		if !ok {
			t.Fatal("the feed ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message from the feed in 10 s")
	}
	return sseMessage{}
}

// changeEvent is a change event's data as a client reads it.
type changeEvent struct {
	Event      string `json:"event"`
	Table      string `json:"table"`
	Origin     string `json:"origin"`
	OriginName string `json:"origin_name"`
	Seq        uint64 `json:"seq"`
	HLC        uint64 `json:"hlc"`
	Token      string `json:"token"`
	Ops        []struct {
		Op       string  `json:"op"`
		Key      string  `json:"key"`
		Value    *string `json:"value"`
		ValueB64 *string `json:"value_b64"`
		Won      bool    `json:"won"`
	} `json:"ops"`
	Position string `json:"position"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

// change is the feed's next message, which must be a change event; it checks that the
// SSE id is the event's position.
func (f *feedConn) change(t *testing.T) changeEvent {
	t.Helper()
	m := f.next(t)
	var ev changeEvent
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
		t.Fatalf("message %+v: %v", m, err)
	}
	if m.event != "change" && ev.Event != "change" {
		t.Fatalf("want a change event, got %+v", m)
	}
	if m.event != "" && m.id != ev.Position {
		t.Fatalf("the SSE id %q is not the event's position %q", m.id, ev.Position)
	}
	return ev
}

// put writes key=value in table at api and returns the write's origin seq.
func put(t *testing.T, api, table, key, value string) uint64 {
	t.Helper()
	code, body := do(t, http.MethodPut, api+"/v1/tables/"+table+"/records/"+key, value)
	if code != http.StatusOK {
		t.Fatalf("put %s/%s: %d %s", table, key, code, body)
	}
	var ans struct {
		Seq uint64 `json:"origin_seq"`
	}
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		t.Fatal(err)
	}
	return ans.Seq
}

// feedsOf is a node's feeds in its status.
func feedsOf(t *testing.T, api string) httpapi.FeedsDoc {
	t.Helper()
	return statusOf(t, api).Feeds
}

// errorCode is an error answer's code.
func errorCode(t *testing.T, a answer) string {
	t.Helper()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	return e.Error.Code
}

// TestFeedAcrossNodes: a write on A is a change event on B's feed with A's identity, the
// write's seq and a position naming it; a consumer that resumes on A (by since, and by
// Last-Event-ID) after any event is given every change after it, once, in seq order.
func TestFeedAcrossNodes(t *testing.T) {
	a, aRepl := startNode(t, "A")
	b, _ := startNode(t, "B", node.Peer{Name: "A", URL: aRepl})
	aOrigin := statusOf(t, a.URL).Node.Origin
	waitFor(t, "B connected to A", func() bool {
		p := statusOf(t, b.URL).Peers
		return len(p) == 1 && p[0].Connected
	})
	f, _ := openFeed(t, b.URL+"/v1/tables/t/changes")
	if f.resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", f.resp.Header.Get("Content-Type"))
	}
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, put(t, a.URL, "t", fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
	}
	var positions []string
	for i, seq := range seqs {
		ev := f.change(t)
		want := fmt.Sprintf("%s:%d", aOrigin, seq)
		if ev.Table != "t" || ev.Origin != aOrigin || ev.OriginName != "A" || ev.Seq != seq || ev.HLC == 0 || ev.Token != "" ||
			len(ev.Ops) != 1 || ev.Ops[0].Op != "put" || ev.Ops[0].Key != fmt.Sprintf("k%d", i) ||
			ev.Ops[0].Value == nil || *ev.Ops[0].Value != fmt.Sprintf("v%d", i) || !ev.Ops[0].Won || ev.Position != want {
			t.Fatalf("event %d: %+v; want A's put of k%d at seq %d, position %s", i, ev, i, seq, want)
		}
		positions = append(positions, ev.Position)
	}
	// Resume on A after the second event, by since and by Last-Event-ID.
	for _, how := range []string{"since", "Last-Event-ID"} {
		var g *feedConn
		if how == "since" {
			g, _ = openFeed(t, a.URL+"/v1/tables/t/changes?since="+url.QueryEscape(positions[1]))
		} else {
			g, _ = openFeed(t, a.URL+"/v1/tables/t/changes", "Last-Event-ID", positions[1])
		}
		for _, seq := range seqs[2:] {
			// Read at once, these come in one chunk: each still carries its own position.
			if ev := g.change(t); ev.Seq != seq || ev.Origin != aOrigin || ev.Position != fmt.Sprintf("%s:%d", aOrigin, seq) {
				t.Fatalf("%s: resumed after %s, got seq %d of %s at position %s; want %d", how, positions[1], ev.Seq, ev.Origin, ev.Position, seq)
			}
		}
		// Nothing more: the next message is the change written now.
		seq := put(t, a.URL, "t", "after-"+how, "x")
		seqs = append(seqs, seq)
		if ev := g.change(t); ev.Seq != seq {
			t.Fatalf("%s: after the resumed events, got seq %d; want the new write's %d", how, ev.Seq, seq)
		}
		g.close()
	}
	waitFor(t, "A's feeds to close", func() bool { return feedsOf(t, a.URL).Open == 0 })
	fd := feedsOf(t, b.URL)
	waitFor(t, "B's feed to send the later writes", func() bool { return feedsOf(t, b.URL).Events == uint64(len(seqs)) })
	if fd.Open != 1 || fd.Opened != 1 || fd.Bytes == 0 {
		t.Errorf("B's feeds: %+v; want one open", fd)
	}
	if fd := feedsOf(t, a.URL); fd.Opened != 2 || fd.Closed["client-gone"] != 2 {
		t.Errorf("A's feeds: %+v; want 2 opened, 2 closed client-gone", fd)
	}
}

// TestFeedOldestAndNDJSON: since=oldest gives every change the logs hold, from seq 1;
// NDJSON carries the same events, one object a line with "event". A delete and a value
// that is not UTF-8 are encoded as the listing encodes them.
func TestFeedOldestAndNDJSON(t *testing.T) {
	a, _ := startNode(t, "A")
	origin := statusOf(t, a.URL).Node.Origin
	put(t, a.URL, "t", "k1", "one")
	put(t, a.URL, "u", "other", "table")
	put(t, a.URL, "t", "k2", "\xff\xfe")
	if code, body := do(t, http.MethodDelete, a.URL+"/v1/tables/t/records/k1", ""); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	f, _ := openFeed(t, a.URL+"/v1/tables/t/changes?since=oldest", "Accept", "application/x-ndjson")
	if ct := f.resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	e1, e3, e4 := f.change(t), f.change(t), f.change(t)
	if e1.Event != "change" || e1.Seq != 1 || e1.OriginName != "A" || *e1.Ops[0].Value != "one" || e1.Ops[0].Won {
		t.Errorf("first: %+v; want A's seq 1, put one, not won (deleted since)", e1)
	}
	if e3.Seq != 3 || e3.Ops[0].ValueB64 == nil || *e3.Ops[0].ValueB64 != "//4=" || e3.Ops[0].Value != nil || !e3.Ops[0].Won {
		t.Errorf("third: %+v; want seq 3 with value_b64 //4=", e3)
	}
	if e4.Seq != 4 || e4.Ops[0].Op != "delete" || e4.Ops[0].Value != nil || e4.Ops[0].ValueB64 != nil || e4.Position != origin+":4" {
		t.Errorf("fourth: %+v; want seq 4, a delete of k1, position %s:4", e4, origin)
	}
}

// TestFeedRefusals: a position that is no position is 400 bad-position (by since and by
// Last-Event-ID); one this node has not applied is waited for (--feed-catch-up), then 409
// behind with the node's position; --max-feeds open feeds refuse one more with 503
// too-many-feeds, and take one again once a feed closes. Each refusal is counted.
func TestFeedRefusals(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{FeedCatchUp: 2 * time.Second, MaxFeeds: 2})
	origin := statusOf(t, a.URL).Node.Origin
	seq := put(t, a.URL, "t", "k", "v")
	for _, bad := range []string{"?since=xyz", "?since=" + origin + ":01", "?since=" + strings.ToUpper(origin) + ":1", "?since=" + origin + ":0"} {
		if _, got := openFeed(t, a.URL+"/v1/tables/t/changes"+bad); got.status != http.StatusBadRequest || errorCode(t, got) != "bad-position" {
			t.Errorf("%s: %d %s; want 400 bad-position", bad, got.status, got.body)
		}
	}
	if _, got := openFeed(t, a.URL+"/v1/tables/t/changes", "Last-Event-ID", "nope"); got.status != http.StatusBadRequest || errorCode(t, got) != "bad-position" {
		t.Errorf("Last-Event-ID nope: %d %s; want 400 bad-position", got.status, got.body)
	}
	ahead := fmt.Sprintf("%s:%d", origin, seq+1)
	_, got := openFeed(t, a.URL+"/v1/tables/t/changes?since="+ahead)
	var behind struct{ Position string }
	_ = json.Unmarshal([]byte(got.body), &behind)
	if got.status != http.StatusConflict || errorCode(t, got) != "behind" || behind.Position != fmt.Sprintf("%s:%d", origin, seq) {
		t.Errorf("ahead: %d %s; want 409 behind at %s:%d", got.status, got.body, origin, seq)
	}
	// One position ahead, written while the feed waits: it starts.
	type opened struct {
		f   *feedConn
		got answer
	}
	done := make(chan opened, 1)
	go func() {
		f, got := openFeed(t, a.URL+"/v1/tables/t/changes?since="+ahead)
		done <- opened{f, got}
	}()
	waitFor(t, "the feed waiting for its position", func() bool { return feedsOf(t, a.URL).Open == 1 })
	seq2 := put(t, a.URL, "t", "k2", "v")
	o := <-done
	if o.f == nil {
		t.Fatalf("a position reached while the feed waits: %d %s; want the feed", o.got.status, o.got.body)
	}
	if seq3 := put(t, a.URL, "t", "k3", "v"); o.f.change(t).Seq != seq3 {
		t.Errorf("the feed started at seq %d gives another event than seq %d", seq2, seq3)
	}
	o.f.close()
	waitFor(t, "the feed started while waiting to close", func() bool { return feedsOf(t, a.URL).Open == 0 })

	f1, _ := openFeed(t, a.URL+"/v1/tables/t/changes")
	openFeed(t, a.URL+"/v1/tables/t/changes")
	if _, got := openFeed(t, a.URL+"/v1/tables/t/changes"); got.status != http.StatusServiceUnavailable || errorCode(t, got) != "too-many-feeds" {
		t.Errorf("a third feed of 2: %d %s; want 503 too-many-feeds", got.status, got.body)
	}
	f1.close()
	waitFor(t, "a feed's slot back", func() bool { return feedsOf(t, a.URL).Open == 1 })
	if f, got := openFeed(t, a.URL+"/v1/tables/t/changes"); f == nil {
		t.Errorf("a feed after one closed: %d %s", got.status, got.body)
	}
	fd := feedsOf(t, a.URL)
	if fd.Refused["bad-position"] != 5 || fd.Refused["behind"] != 1 || fd.Refused["too-many-feeds"] != 1 {
		t.Errorf("refusals: %v; want bad-position 5, behind 1, too-many-feeds 1", fd.Refused)
	}
	m := metricsOf(t, a.URL)
	for _, want := range []string{`plait_feeds_refused_total{code="too-many-feeds"} 1`, `plait_feeds_refused_total{code="bad-position"} 5`, "plait_feeds_open 2"} {
		if !strings.Contains(m, "\n"+want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// metricsOf is a node's /metrics text.
func metricsOf(t *testing.T, api string) string {
	t.Helper()
	code, body := do(t, http.MethodGet, api+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	return body
}

// TestFeedPurged: a position below an origin's floor is 410 purged, naming the origin and
// its floor.
func TestFeedPurged(t *testing.T) {
	cfg := node.Config{Name: "A", Config: replica.Config{RetainAge: 100 * time.Millisecond, RetentionInterval: 20 * time.Millisecond}}
	_, a, _ := startNodeAPI(t, cfg, httpapi.Limits{})
	origin := statusOf(t, a.URL).Node.Origin
	for i := range 5 {
		put(t, a.URL, "t", fmt.Sprintf("k%d", i), "v")
	}
	var floor uint64
	waitFor(t, "A's entries purged", func() bool {
		for _, o := range statusOf(t, a.URL).Origins {
			floor = o.FloorSeq
		}
		return floor >= 2
	})
	_, got := openFeed(t, a.URL+"/v1/tables/t/changes?since="+origin+":1")
	var body struct {
		Origin string
		Floor  uint64
	}
	_ = json.Unmarshal([]byte(got.body), &body)
	if got.status != http.StatusGone || errorCode(t, got) != "purged" || body.Origin != origin || body.Floor < floor {
		t.Errorf("below the floor %d: %d %s; want 410 purged naming %s and its floor", floor, got.status, got.body, origin)
	}
	if fd := feedsOf(t, a.URL); fd.Refused["purged"] != 1 {
		t.Errorf("refusals %v; want purged 1", fd.Refused)
	}
}

// TestFeedHeartbeat: an idle feed sends heartbeats; one whose position moved with no event
// (a write of another table) sends an id-only message with the new position, and an NDJSON
// heartbeat carries the position.
func TestFeedHeartbeat(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{FeedHeartbeat: 50 * time.Millisecond})
	origin := statusOf(t, a.URL).Node.Origin
	f, _ := openFeed(t, a.URL+"/v1/tables/t/changes")
	if m := f.nextAny(t); m.comment != "heartbeat" || m.hasID {
		t.Fatalf("first message %+v; want a heartbeat alone (the position has not moved)", m)
	}
	seq := put(t, a.URL, "u", "k", "v")
	want := fmt.Sprintf("%s:%d", origin, seq)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no id-only message with %s in 10 s of heartbeats", want)
		}
		m := f.nextAny(t)
		if m.event != "" || m.data != "" {
			t.Fatalf("message %+v: a write of table u is no event of t", m)
		}
		if m.hasID {
			if m.id != want {
				t.Fatalf("id-only message %q; want %q", m.id, want)
			}
			break
		}
	}
	g, _ := openFeed(t, a.URL+"/v1/tables/t/changes", "Accept", "application/x-ndjson")
	var hb struct{ Event, Position string }
	if err := json.Unmarshal([]byte(g.nextAny(t).data), &hb); err != nil || hb.Event != "heartbeat" || hb.Position != want {
		t.Errorf("NDJSON heartbeat %+v (%v); want position %s", hb, err, want)
	}
}

// TestFeedStalled: a consumer that stops reading while changes come is closed stalled
// once a write to it blocks for --feed-stall-timeout, and counted.
func TestFeedStalled(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{FeedStallTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(a.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // a small window: the node's writes block sooner
	}
	fmt.Fprintf(conn, "GET /v1/tables/t/changes HTTP/1.1\r\nHost: a\r\n\r\n")
	waitFor(t, "the feed open", func() bool { return feedsOf(t, a.URL).Open == 1 })
	value := strings.Repeat("x", 60<<10)
	for i := 0; feedsOf(t, a.URL).Closed["stalled"] == 0; i++ {
		if i == 2000 {
			t.Fatalf("no stall after %d writes of 60 KiB: %+v", i, feedsOf(t, a.URL))
		}
		put(t, a.URL, "t", fmt.Sprintf("k%d", i%50), value)
	}
	waitFor(t, "the stalled feed's slot back", func() bool { return feedsOf(t, a.URL).Open == 0 })
	if m := metricsOf(t, a.URL); !strings.Contains(m, "\n"+`plait_feeds_closed_total{reason="stalled"} 1`+"\n") {
		t.Errorf("metrics lack the stalled close")
	}
}

// TestFeedNotCarried: a node that does not carry a placed table answers its feed 409
// not-carried with the carriers, never forwarding it; a carrier serves it.
func TestFeedNotCarried(t *testing.T) {
	_, _, a, b := forwardPair(t, 0)
	_, got := openFeed(t, a.URL+"/v1/tables/t/changes")
	var body struct {
		Carriers []struct{ Name string }
	}
	_ = json.Unmarshal([]byte(got.body), &body)
	if got.status != http.StatusConflict || errorCode(t, got) != "not-carried" || len(body.Carriers) != 2 ||
		body.Carriers[0].Name != "B" || got.header.Get("Plait-Forwarded-By") != "" {
		t.Errorf("A's feed of t: %d %s; want 409 not-carried naming B and C, not forwarded", got.status, got.body)
	}
	if fd := feedsOf(t, a.URL); fd.Refused["not-carried"] != 1 {
		t.Errorf("A's refusals %v; want not-carried 1", fd.Refused)
	}
	if f, got := openFeed(t, b.URL+"/v1/tables/t/changes"); f == nil {
		t.Errorf("B's feed of t: %d %s", got.status, got.body)
	}
}

var _ = feed.MaxPositionOrigins

// closeEvent reads the feed's next message, which must be a close event, and returns its
// data.
func (f *feedConn) closeEvent(t *testing.T) changeEvent {
	t.Helper()
	m := f.next(t)
	var ev changeEvent
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil || m.event != "close" {
		t.Fatalf("want a close event, got %+v (%v)", m, err)
	}
	if m.id != ev.Position {
		t.Fatalf("the close's id %q is not its position %q", m.id, ev.Position)
	}
	return ev
}

// TestFeedCloses: a feed of a table a new cluster map takes from this node closes with
// reason not-carried; the server's shutdown (CloseFeeds) closes every feed with reason
// shutting-down and refuses new ones. Each close is counted by reason.
func TestFeedCloses(t *testing.T) {
	a, b, _, bAPI := forwardPair(t, 0)
	f, _ := openFeed(t, bAPI.URL+"/v1/tables/t/changes")
	doc := `{"generation":3,"nodes":[{"name":"A"},{"name":"B","api":"http://b.example:7411"},{"name":"C"}],` +
		`"placement":{"t":["C"],"w":["C"],"x":["A"]}}`
	if _, err := a.PublishMap([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	if ev := f.closeEvent(t); ev.Reason != "not-carried" || ev.Message == "" {
		t.Errorf("close %+v; want reason not-carried", ev)
	}
	// The close is counted before it is sent; the slot is given back after.
	waitFor(t, "B's feed's slot back", func() bool { return feedsOf(t, bAPI.URL).Open == 0 })
	if fd := feedsOf(t, bAPI.URL); fd.Closed["not-carried"] != 1 {
		t.Errorf("B's feeds %+v; want one closed not-carried", fd)
	}

	api := httpapi.New(b, httpapi.Limits{})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close) // after the feeds' own cleanups, which end their requests
	g, _ := openFeed(t, srv.URL+"/v1/tables/x2/changes")
	api.CloseFeeds()
	if ev := g.closeEvent(t); ev.Reason != "shutting-down" {
		t.Errorf("close %+v; want reason shutting-down", ev)
	}
	if _, got := openFeed(t, srv.URL+"/v1/tables/x2/changes"); got.status != http.StatusServiceUnavailable {
		t.Errorf("a feed after CloseFeeds: %d %s; want 503", got.status, got.body)
	}
	if fd := feedsOf(t, srv.URL); fd.Closed["shutting-down"] != 1 || fd.Refused["unavailable"] != 1 {
		t.Errorf("feeds %+v; want one closed shutting-down", fd)
	}
}

// TestFeedChunks: a feed behind the logs by more than a chunk (256 events) is given every
// change across the chunks, in seq order, none lost at a chunk's end. (That the next chunk
// is read at once, not at the loop's next step, is a matter of latency only: the idle
// loop ticks about once a second and wakes the feed then.)
func TestFeedChunks(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{})
	const n = 700 // beyond two chunks of 256 events
	var ops []string
	for i := range n {
		ops = append(ops, fmt.Sprintf(`{"op":"put","key":"k%d","value":"v"}`, i))
	}
	for i := range n {
		if code, body := do(t, http.MethodPost, a.URL+"/v1/tables/t/batch", `{"ops":[`+ops[i]+`]}`); code != http.StatusOK {
			t.Fatalf("write %d: %d %s", i, code, body)
		}
	}
	f, _ := openFeed(t, a.URL+"/v1/tables/t/changes?since=oldest")
	for i := range n {
		if ev := f.change(t); ev.Seq != uint64(i+1) {
			t.Fatalf("change %d is seq %d", i+1, ev.Seq)
		}
	}
}

// TestFeedStartsWithItsPosition: a feed's first message names the position it starts at (an
// id-only message in SSE, a heartbeat line in NDJSON), so that a consumer that started at
// now and drops before its first change resumes from there, not from a later now.
func TestFeedStartsWithItsPosition(t *testing.T) {
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{})
	origin := statusOf(t, a.URL).Node.Origin
	seq := put(t, a.URL, "t", "k", "v")
	want := fmt.Sprintf("%s:%d", origin, seq)
	f, _ := openFeed(t, a.URL+"/v1/tables/t/changes")
	for {
		m := f.nextAny(t)
		if m.comment != "" && !m.hasID {
			continue // the heartbeat comment before the id
		}
		if !m.hasID || m.id != want || m.data != "" {
			t.Fatalf("first message %+v; want an id-only message with %s", m, want)
		}
		break
	}
	n, _ := openFeed(t, a.URL+"/v1/tables/t/changes", "Accept", "application/x-ndjson")
	if m := n.nextAny(t); m.data != `{"event":"heartbeat","position":"`+want+`"}` {
		t.Fatalf("first NDJSON line %+v; want a heartbeat with %s", m, want)
	}
}

// TestFeedRereadsAcrossACopy: a feed open on an empty node that then takes a base copy
// (its peer's log purged below what it needs) is told to reread the table, reason copy,
// and goes on after the copy's position with the next write: the copied records are in no
// log it could read, and nothing of them comes as a change.
func TestFeedRereadsAcrossACopy(t *testing.T) {
	cfg := node.Config{Name: "A", Config: replica.Config{RetainAge: 100 * time.Millisecond, RetentionInterval: 20 * time.Millisecond}}
	_, a, aURL := startNodeAPI(t, cfg, httpapi.Limits{})
	for i := range 5 {
		put(t, a.URL, "t", fmt.Sprintf("k%d", i), "v")
	}
	waitFor(t, "A's entries purged", func() bool {
		o := statusOf(t, a.URL).Origins
		return len(o) > 0 && o[0].FloorSeq >= 2
	})
	_, b, _ := startNodeAPI(t, node.Config{Name: "B"}, httpapi.Limits{})
	f, _ := openFeed(t, b.URL+"/v1/tables/t/changes", "Accept", "application/x-ndjson")
	if code, body := do(t, http.MethodPost, b.URL+"/v1/peers", `{"name":"A","url":"`+aURL+`"}`); code != http.StatusCreated {
		t.Fatalf("add A to B: %d %s", code, body)
	}
	var ev changeEvent
	if err := json.Unmarshal([]byte(f.next(t).data), &ev); err != nil || ev.Event != "reread" || ev.Reason != "copy" {
		t.Fatalf("B's first event after its copy: %+v (%v); want a reread of reason copy", ev, err)
	}
	seq := put(t, a.URL, "t", "after", "the copy")
	for {
		if err := json.Unmarshal([]byte(f.next(t).data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "reread" && ev.Reason == "copy" {
			continue // the copy's chunks and its end may each be told
		}
		if ev.Event != "change" || ev.Seq != seq || len(ev.Ops) != 1 || ev.Ops[0].Key != "after" {
			t.Fatalf("B's next event: %+v; want the change of seq %d (nothing the copy brought)", ev, seq)
		}
		break
	}
}

// TestFeedEndsWhenItsTokenIsRevoked: a feed started with a read token is closed with reason
// unauthorized once the token file is reloaded without that token, at its next heartbeat,
// and counted; a feed of a token still in the file goes on.
func TestFeedEndsWhenItsTokenIsRevoked(t *testing.T) {
	const other = "another-read-token-of-the-feed-test"
	tokens, path := tokenFile(t, readToken+" read\n"+other+" read\n"+writeToken+" write\n")
	_, a, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{FeedHeartbeat: 50 * time.Millisecond}, httpapi.RequireTokens(tokens))
	f, got := openFeed(t, a.URL+"/v1/tables/t/changes", "Authorization", "Bearer "+readToken)
	if f == nil {
		t.Fatalf("a feed with a read token: %d %s", got.status, got.body)
	}
	g, _ := openFeed(t, a.URL+"/v1/tables/t/changes", "Authorization", "Bearer "+other)
	if err := os.WriteFile(path, []byte(other+" read\n"+writeToken+" write\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	m := f.next(t)
	if m.event != "close" || !strings.Contains(m.data, `"reason":"unauthorized"`) {
		t.Fatalf("the revoked token's feed: %+v; want a close of reason unauthorized", m)
	}
	if code, _, body := call(t, http.MethodPut, a.URL+"/v1/tables/t/records/k", "v", "Bearer "+writeToken); code != http.StatusOK {
		t.Fatalf("put: %d %s", code, body)
	}
	if m := g.next(t); m.event != "change" {
		t.Fatalf("the other token's feed: %+v; want the change", m)
	}
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+other)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st httpapi.StatusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Feeds.Closed["unauthorized"] != 1 {
		t.Errorf("closed %v; want unauthorized 1", st.Feeds.Closed)
	}
}
