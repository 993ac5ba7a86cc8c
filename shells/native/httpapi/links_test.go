package httpapi_test

import (
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// linkNode runs a node of cfg in the data directory dir, with its API, until stop (or the
// test's end): the links' tests stop a node and start it again on its directory.
func linkNode(t *testing.T, cfg node.Config, dir string) (n *node.Node, api *httptest.Server, url string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.Listener, cfg.Secret = dir, l, []byte("http api test secret, long enough")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if n, err = node.Start(cfg); err != nil {
		t.Fatal(err)
	}
	api = httptest.NewServer(httpapi.New(n, httpapi.Limits{}))
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		api.Close()
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return n, api, "ws://" + l.Addr().String(), stop
}

// appliedOf is how far the node of api has applied the origin named origin (0: unknown).
func appliedOf(t *testing.T, api, origin string) uint64 {
	t.Helper()
	for _, o := range statusOf(t, api).Origins {
		if o.Name == origin {
			return o.AppliedSeq
		}
	}
	return 0
}

// peerDoc is the peers[] entry of name in the status of api, nil when none.
func peerDoc(t *testing.T, api, name string) *httpapi.PeerDoc {
	t.Helper()
	for _, p := range statusOf(t, api).Peers {
		if p.Name == name {
			return &p
		}
	}
	return nil
}

// linkedPair is A dialing B, both fresh, streaming on version 4; A writes t/k and B has it.
func linkedPair(t *testing.T) (aAPI, bAPI string) {
	t.Helper()
	_, b, bURL, _ := linkNode(t, node.Config{Name: "B"}, t.TempDir())
	_, a, _, _ := linkNode(t, node.Config{Name: "A", Peers: []node.Peer{{Name: "B", URL: bURL}}}, t.TempDir())
	waitFor(t, "A streaming to B on version 4", func() bool {
		p := peerDoc(t, a.URL, "B")
		return p != nil && p.Connected && p.Version == 4
	})
	if got := send(t, "PUT", a.URL+"/v1/tables/t/records/k", "", "before"); got.status != 200 {
		t.Fatalf("PUT on A: %d %s", got.status, got.body)
	}
	waitFor(t, "B to apply A's first write", func() bool { return appliedOf(t, b.URL, "A") == 1 })
	return a.URL, b.URL
}

// roundTrip writes key on B and waits until A has applied it: the link from B to A
// carries what B wrote after whatever was written on A before.
func roundTrip(t *testing.T, a, b, key string) {
	t.Helper()
	seq := appliedOf(t, b, "B") + 1
	if got := send(t, "PUT", b+"/v1/tables/t/records/"+key, "", "from B"); got.status != 200 {
		t.Fatalf("PUT on B: %d %s", got.status, got.body)
	}
	waitFor(t, "A to apply B's write "+key, func() bool { return appliedOf(t, a, "B") >= seq })
}

// TestPutPeerReceiveLive: PUT /v1/peers/B {"mode":"receive"} on A turns A's live link to B
// into one A only receives on, without a restart: A's writes after it never reach B (B's
// position in A's origin and B's records stay where they were), while B's writes still
// reach A; the status shows the setting. Back to both, A's writes flow again.
func TestPutPeerReceiveLive(t *testing.T) {
	a, b := linkedPair(t)
	got := send(t, "PUT", a+"/v1/peers/B", "application/json", `{"mode":"receive"}`)
	if want := `{"name":"B","url":"` + peerDoc(t, a, "B").URL + `","mode":"receive","exclude":[]}` + "\n"; got.status != 200 || got.body != want {
		t.Fatalf("PUT /v1/peers/B: %d %s; want 200 %s", got.status, got.body, want)
	}
	if p := peerDoc(t, a, "B"); p.Mode != "receive" || len(p.Exclude) != 0 || p.Exclude == nil {
		t.Errorf("A's peers[] B: mode %q, exclude %v; want receive, []", p.Mode, p.Exclude)
	}
	for i, k := range []string{"k2", "k3"} {
		if got := send(t, "PUT", a+"/v1/tables/t/records/"+k, "", "after"); got.status != 200 {
			t.Fatalf("PUT on A: %d %s", got.status, got.body)
		}
		roundTrip(t, a, b, "b"+string(rune('1'+i)))
	}
	if seq := appliedOf(t, b, "A"); seq != 1 {
		t.Errorf("B applied A's origin to seq %d; want 1: A only receives from B", seq)
	}
	if got := send(t, "GET", b+"/v1/tables/t/records/k2", "", ""); got.status != 404 {
		t.Errorf("B's t/k2: %d %q; want 404", got.status, got.body)
	}
	// Both ways again: what A held back reaches B.
	if got := send(t, "PUT", a+"/v1/peers/B", "application/json", `{"mode":"both"}`); got.status != 200 {
		t.Fatalf("PUT /v1/peers/B both: %d %s", got.status, got.body)
	}
	waitFor(t, "B to apply A's writes once the link is both ways", func() bool { return appliedOf(t, b, "A") == 3 })
}

// TestPutPeerExcludeLive: PUT /v1/peers/B {"exclude":["secret"]} on A keeps table secret
// off the link both ways, live: A's write of secret goes to B as a run, which B refuses
// (it carries secret: skips_refused), and B's write of secret likewise on A; neither holds
// the other's secret record. Since each has seen the other write secret, and the link is
// its only way to the other, each stays behind on the other's origin from there (the
// strict rule, docs/contract.md §23.7): a later write of t shows as lag, never applied.
func TestPutPeerExcludeLive(t *testing.T) {
	a, b := linkedPair(t)
	got := send(t, "PUT", a+"/v1/peers/B", "application/json", `{"exclude":["secret"]}`)
	if got.status != 200 || !strings.HasSuffix(got.body, `"mode":"both","exclude":["secret"]}`+"\n") {
		t.Fatalf("PUT /v1/peers/B: %d %s", got.status, got.body)
	}
	roundTrip(t, a, b, "b1") // B has A's LINK: what it sends after is judged under it
	for _, w := range []struct{ table, key string }{{"t", "k2"}, {"secret", "s"}} {
		if got := send(t, "PUT", a+"/v1/tables/"+w.table+"/records/"+w.key, "", "from A"); got.status != 200 {
			t.Fatalf("PUT on A: %d %s", got.status, got.body)
		}
	}
	waitFor(t, "B to refuse A's run of secret", func() bool { return statusOf(t, b).Counters.SkipsRefused == 1 })
	if seq := appliedOf(t, b, "A"); seq != 2 {
		t.Errorf("B applied A's origin to seq %d; want 2: the run of secret at 3 refused", seq)
	}
	if got := send(t, "GET", b+"/v1/tables/secret/records/s", "", ""); got.status != 404 {
		t.Errorf("B's secret/s: %d %q; want 404: the link excludes secret", got.status, got.body)
	}
	if got := send(t, "GET", b+"/v1/tables/t/records/k2", "", ""); got.status != 200 || got.body != "from A" {
		t.Errorf("B's t/k2: %d %q; want 200 from A", got.status, got.body)
	}
	// B's write of secret: B learned A's exclusion from its LINK, and A refuses its run.
	if got := send(t, "PUT", b+"/v1/tables/secret/records/b", "", "from B"); got.status != 200 {
		t.Fatalf("PUT on B: %d %s", got.status, got.body)
	}
	waitFor(t, "A to refuse B's run of secret", func() bool { return statusOf(t, a).Counters.SkipsRefused == 1 })
	if got := send(t, "GET", a+"/v1/tables/secret/records/b", "", ""); got.status != 404 {
		t.Errorf("A's secret/b: %d %q; want 404: the link excludes secret", got.status, got.body)
	}
	// A writes t again: B sees A's head move and stays where it is.
	if got := send(t, "PUT", a+"/v1/tables/t/records/k4", "", "from A"); got.status != 200 {
		t.Fatalf("PUT on A: %d %s", got.status, got.body)
	}
	waitFor(t, "B to show A's origin behind by 2", func() bool {
		for _, o := range statusOf(t, b).Origins {
			if o.Name == "A" {
				return o.LagSeq == 2
			}
		}
		return false
	})
	if seq := appliedOf(t, b, "A"); seq != 2 {
		t.Errorf("B applied A's origin to seq %d; want 2: the only link to A hides secret, which A writes", seq)
	}
}

// TestPutPeerKeptAcrossRestart: a peer added by PUT /v1/peers/{name} with link settings is
// kept in the data directory with them: after a restart with no peer configured, A dials
// B again under the same settings (the status shows them, and A's writes do not reach B).
// PUT answers 201 for a peer it adds, 200 for one it changes. Started again with the
// peer's link in its configuration (as --peer-mode gives it), A runs with that one.
func TestPutPeerKeptAcrossRestart(t *testing.T) {
	_, b, bURL, _ := linkNode(t, node.Config{Name: "B"}, t.TempDir())
	dir := t.TempDir()
	_, a, _, stop := linkNode(t, node.Config{Name: "A"}, dir)
	body := `{"url":"` + bURL + `","mode":"receive","exclude":["zeta","audit"]}`
	want := `{"name":"B","url":"` + bURL + `","mode":"receive","exclude":["audit","zeta"]}` + "\n"
	if got := send(t, "PUT", a.URL+"/v1/peers/B", "application/json", body); got.status != 201 || got.body != want {
		t.Fatalf("PUT /v1/peers/B adding B: %d %s; want 201 %s", got.status, got.body, want)
	}
	if got := send(t, "PUT", a.URL+"/v1/peers/B", "application/json", body); got.status != 200 || got.body != want {
		t.Fatalf("PUT /v1/peers/B again: %d %s; want 200 %s", got.status, got.body, want)
	}
	waitFor(t, "B to apply B's own write and A to take it", func() bool {
		p := peerDoc(t, a.URL, "B")
		return p != nil && p.Connected
	})
	stop()

	_, a2, _, stop2 := linkNode(t, node.Config{Name: "A"}, dir)
	waitFor(t, "the restarted A streaming to B", func() bool {
		p := peerDoc(t, a2.URL, "B")
		return p != nil && p.Connected && p.Version == 4
	})
	if p := peerDoc(t, a2.URL, "B"); p.URL != bURL || p.Mode != "receive" || strings.Join(p.Exclude, ",") != "audit,zeta" {
		t.Errorf("the restarted A's peers[] B: url %q, mode %q, exclude %v; want %s, receive, [audit zeta]", p.URL, p.Mode, p.Exclude, bURL)
	}
	if got := send(t, "PUT", a2.URL+"/v1/tables/t/records/k", "", "from A"); got.status != 200 {
		t.Fatalf("PUT on A: %d %s", got.status, got.body)
	}
	roundTrip(t, a2.URL, b.URL, "b1")
	if seq := appliedOf(t, b.URL, "A"); seq != 0 {
		t.Errorf("B applied A's origin to seq %d; want 0: A only receives from B", seq)
	}
	stop2()

	// Settings the configuration gives for the peer (the flags) win whole over the kept
	// ones: send, and no table excluded, since the configuration excludes none.
	cfg := node.Config{Name: "A"}
	cfg.Links = map[string]replica.LinkSettings{"B": {Mode: wire.LinkSend}}
	_, a3, _, _ := linkNode(t, cfg, dir)
	if p := peerDoc(t, a3.URL, "B"); p == nil || p.Mode != "send" || len(p.Exclude) != 0 {
		t.Errorf("A started with B's link set to send: peers[] B %+v; want mode send, nothing excluded", p)
	}
	waitFor(t, "B to apply A's write once A sends to it", func() bool { return appliedOf(t, b.URL, "A") == 1 })
}

// TestPutPeerRefusals: PUT /v1/peers/{name} refuses each bad body with its code, before
// anything changes: a mode that is none of the three, more tables than a link excludes (64
// are taken, 65 refused), a table outside the name rule or named twice, an unknown field,
// a peer name outside the rule, a URL outside the peer URL rule, a peer not configured
// without a URL.
func TestPutPeerRefusals(t *testing.T) {
	_, a, _, _ := linkNode(t, node.Config{Name: "A"}, t.TempDir())
	tables := func(n int) string {
		var ts []string
		for i := range n {
			ts = append(ts, `"t`+string(rune('a'+i/26))+string(rune('a'+i%26))+`"`)
		}
		return strings.Join(ts, ",")
	}
	const url = `"url":"ws://127.0.0.1:1"`
	for _, c := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"B", `{` + url + `,"mode":"sideways"}`, 400, "bad-mode"},
		{"B", `{` + url + `,"mode":""}`, 400, "bad-mode"},
		{"B", `{` + url + `,"exclude":[` + tables(65) + `]}`, 400, "too-many-tables"},
		{"B", `{` + url + `,"exclude":["a/b"]}`, 400, "bad-table"},
		{"B", `{` + url + `,"exclude":["a","a"]}`, 400, "bad-table"},
		{"B", `{` + url + `,"colour":"red"}`, 400, "bad-json"},
		{"B", `{"mode":"receive"}`, 400, "bad-peer"},
		{"B", `{"url":"http://127.0.0.1:1"}`, 400, "bad-peer"},
		{"B%20C", `{` + url + `}`, 400, "bad-peer"},
		{"B", `{` + url + `,"exclude":[` + tables(64) + `]}`, 201, ""},
	} {
		got := send(t, "PUT", a.URL+"/v1/peers/"+c.path, "application/json", c.body)
		if got.status != c.status || c.code != "" && !strings.HasPrefix(got.body, `{"error":{"code":"`+c.code+`"`) {
			t.Errorf("PUT /v1/peers/%s %.60s: %d %s; want %d %s", c.path, c.body, got.status, got.body, c.status, c.code)
		}
	}
	if p := peerDoc(t, a.URL, "B"); p == nil || len(p.Exclude) != 64 || p.Mode != "both" {
		t.Errorf("A's peers[] B after the refusals and one PUT of 64 tables: %+v", p)
	}
}
