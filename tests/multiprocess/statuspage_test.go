//go:build multiprocess

package multiprocess

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plait/internal/testnet"
)

// chromium is Debian's chromium, which the browser test drives (scripts/deps.sh test
// installs it).
const chromium = "/usr/bin/chromium"

// TestStatusPage: the status page of a real 3-node cluster of the binary, in headless
// Chromium driven by playwright-core (web/statuspage/test/page.test.mjs): it shows the
// node, its two peers and the three origins, healthy at lag 0, the topology's three nodes,
// and the cluster map published on A with the three nodes' protocol versions; with B stopped (SIGSTOP) under writes on A, B's health changes within the
// liveness timeout and the chart of B's lag behind A rises; resumed, it falls back and B is
// healthy; a node whose API needs a token is served the page, which asks for the token and
// then shows the node. Screenshots of each state go to build/screenshots (or
// $PLAIT_SCREENSHOTS). Where Chromium or the page's npm packages are missing it skips,
// saying so, unless PLAIT_REQUIRE_BROWSER=1 (make test sets it: CI installs both).
func TestStatusPage(t *testing.T) {
	web, _ := filepath.Abs("../../web/statuspage")
	if why := browserMissing(web); why != "" {
		if os.Getenv("PLAIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("the browser test cannot run: %s", why)
		}
		t.Skipf("needs Debian's chromium and web/statuspage's npm packages (make page): %s", why)
	}
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", a.PeerFlag(), "--peer", b.PeerFlag())
	for _, p := range []*proc{a, b, c} {
		p.put("t", "from-"+p.Name, "v")
	}
	waitFor(t, "every node holding every origin", 30*time.Second, func() bool {
		for _, p := range []*proc{a, b, c} {
			for _, o := range []string{"A", "B", "C"} {
				if p.origin(o).AppliedSeq != 1 {
					return false
				}
			}
		}
		return true
	})
	// A cluster map published on A, held by every node, each knowing the three versions.
	req, _ := http.NewRequest("PUT", "http://"+a.HTTP+"/v1/cluster/map", strings.NewReader(`{"generation":1,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}]}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("publishing the map on A: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	waitFor(t, "every node holding the map and knowing every node's version", 30*time.Second, func() bool {
		for _, p := range []*proc{a, b, c} {
			if m := p.status().ClusterMap; m.Generation != 1 || len(m.Versions) != 3 {
				return false
			}
		}
		return true
	})

	// D also dials a peer nobody listens for, whose row shows its last dial error.
	d, _ := serveTokens(t, "D", apiReadToken+" read\n", "--peer", "Gone=ws://"+testnet.FreeAddr(t))
	if s, _ := request(t, http.DefaultClient, "GET", "http://"+d.HTTP+"/", ""); s != 200 {
		t.Fatalf("D's page without a token: %d, want 200 (the page holds no data)", s)
	}

	shots := os.Getenv("PLAIT_SCREENSHOTS")
	if shots == "" {
		shots, _ = filepath.Abs("../../build/screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "test", "page.test.mjs"))
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"PLAIT_PAGE_URL=http://"+a.HTTP+"/", "PLAIT_API_URL=http://"+a.HTTP,
		"PLAIT_STOP_PID="+strconv.Itoa(b.Pid()), "PLAIT_STOP_NAME=B",
		"PLAIT_TOKEN_URL=http://"+d.HTTP+"/", "PLAIT_TOKEN="+apiReadToken,
		"PLAIT_SCREENSHOTS="+shots, "PLAIT_CHROMIUM="+chromium,
		"PLAIT_LIVENESS_MS="+strconv.Itoa(int((5*time.Second).Milliseconds())))
	out, err := cmd.CombinedOutput()
	t.Logf("page.test.mjs:\n%s", out)
	_ = b.Signal(syscall.SIGCONT) // whatever the script reached, B runs again
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	res := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					res[k] = v
				}
			}
		}
	}
	atoi := func(k string) int {
		n, err := strconv.Atoi(res[k])
		if err != nil {
			t.Errorf("RESULT %s = %q: %v", k, res[k], err)
		}
		return n
	}
	if res["nodes"] != "A,B,C" || res["graph"] != "A,B,C" {
		t.Errorf("the page showed origins %q and a graph of %q, want A,B,C both", res["nodes"], res["graph"])
	}
	if v := a.status().Node.Protocol.Max; res["map_generation"] != "1" || res["versions"] != fmt.Sprintf("A:%d,B:%d,C:%d", v, v, v) {
		t.Errorf("the page showed map generation %q and versions %q, want 1 and A, B and C at %d", res["map_generation"], res["versions"], v)
	}
	if res["health_changed_to"] == "healthy" || atoi("health_changed_after_ms") > 5000+1500 {
		t.Errorf("B's health became %s %s ms after it stopped, want another within the 5 s liveness timeout (and a refresh)",
			res["health_changed_to"], res["health_changed_after_ms"])
	}
	if atoi("lag_while_stopped") <= 10 || atoi("lag_max") < atoi("lag_while_stopped") || atoi("lag_last") >= 5 || atoi("writes") < 20 {
		t.Errorf("B's lag on the chart: %s while stopped, %s at most, %s at the end, over %s writes; want a rise above 10 and a fall below 5",
			res["lag_while_stopped"], res["lag_max"], res["lag_last"], res["writes"])
	}
	if res["dial_error"] != "dial-refused" {
		t.Errorf("D's page showed the last dial error of its peer Gone as %q, want dial-refused", res["dial_error"])
	}
	if res["token_page_node"] != "D" || res["token_kept_in_browser"] != "true" {
		t.Errorf("the token page showed %q (token kept: %s), want D", res["token_page_node"], res["token_kept_in_browser"])
	}
	for _, f := range []string{"1-cluster.png", "2-peer-stopped.png", "3-peer-resumed.png", "4-token-asked.png", "5-token-given.png"} {
		if st, err := os.Stat(filepath.Join(shots, f)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// browserMissing says what the browser test lacks, or "".
func browserMissing(web string) string {
	if _, err := os.Stat(chromium); err != nil {
		return err.Error()
	}
	if _, err := exec.LookPath("node"); err != nil {
		return err.Error()
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		return err.Error()
	}
	return ""
}

// feedWriteToken is the write token of TestStatusPageFeed's node with tokens: the page
// gets apiReadToken, the script's writes this one.
const feedWriteToken = "multi-process-feed-write-token"

// TestStatusPageFeed: the status page's view of one table's changes
// (web/statuspage/test/feed.test.mjs), in headless Chromium, against a node without API
// tokens (the page reads the feed through EventSource) and one with them (through fetch,
// NDJSON, with the token): records written through the API show as events with their
// origin, seq, op, key and won, only the watched table's, newest first; the position shown
// advances to the last write's seq; the view keeps its bound of events; changing the table
// and closing the view close the node's stream (its status counts its open feeds); when
// the node restarts (SIGTERM, started again on its data and addresses when the script asks
// on its stdout) the page opens the feed again from its position and shows the next write
// once and no earlier one again. Then,
// against a stand-in node that drops and closes its streams on demand, a dropped stream is
// opened again from the last position with no event shown twice, a close for
// shutting-down is reconnected and one for purged stops the view with its reason. It skips
// as TestStatusPage does where the browser is missing.
func TestStatusPageFeed(t *testing.T) {
	web, _ := filepath.Abs("../../web/statuspage")
	if why := browserMissing(web); why != "" {
		if os.Getenv("PLAIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("the browser test cannot run: %s", why)
		}
		t.Skipf("needs Debian's chromium and web/statuspage's npm packages (make page): %s", why)
	}
	e := serve(t, "E")
	f, tokens := serveTokens(t, "F", apiReadToken+" read\n"+feedWriteToken+" write\n")
	restart := map[string]func() error{
		"E": func() error {
			if err := e.Stop(); err != nil {
				return err
			}
			return e.Restart(e.args...)
		},
		"F": func() error {
			if err := f.Stop(); err != nil {
				return err
			}
			return f.Restart("--api-token-file", tokens)
		},
	}

	shots := os.Getenv("PLAIT_SCREENSHOTS")
	if shots == "" {
		shots, _ = filepath.Abs("../../build/screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "test", "feed.test.mjs"))
	cmd.Dir = web
	cmd.Env = append(os.Environ(),
		"PLAIT_FEED_URL=http://"+e.HTTP+"/", "PLAIT_FEED_TOKEN_URL=http://"+f.HTTP+"/",
		"PLAIT_FEED_READ_TOKEN="+apiReadToken, "PLAIT_FEED_WRITE_TOKEN="+feedWriteToken,
		"PLAIT_SCREENSHOTS="+shots, "PLAIT_CHROMIUM="+chromium)
	// The script's stdout is read as it comes, for its RESTART lines; its stderr (the
	// reason of a failed check) after.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if name, ok := strings.CutPrefix(line, "RESTART "); ok {
			reply := "restarted"
			if r, known := restart[name]; !known {
				reply = "no node " + name
			} else if err := r(); err != nil {
				reply = strings.ReplaceAll(err.Error(), "\n", " ")
			}
			lines = append(lines, "(restart of "+name+": "+reply+")")
			fmt.Fprintln(stdin, reply)
		}
	}
	err = cmd.Wait()
	t.Logf("feed.test.mjs:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	res := map[string]string{}
	for _, line := range lines {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					res[k] = v
				}
			}
		}
	}
	// The script checks each state as it goes; here, that each part ran to its end on the
	// node it was meant for, in the way it was meant to read.
	want := map[string]string{
		"sse_name": "E", "sse_mode": "EventSource", "sse_events": "5", "sse_open_after_switch": "1", "sse_open_after_close": "0",
		"sse_after_restart": "2", "ndjson_after_restart": "2",
		"ndjson_name": "F", "ndjson_mode": "fetch", "ndjson_events": "5", "ndjson_open_after_switch": "1", "ndjson_open_after_close": "0",
		"fake_sse_closed": "purged", "fake_ndjson_closed": "purged", "done": "ok",
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("RESULT %s = %q, want %q", k, res[k], v)
		}
	}
	if res["sse_kept"] != res["sse_max"] || res["ndjson_kept"] != res["ndjson_max"] || res["sse_max"] == "" {
		t.Errorf("the views kept %s and %s events, want their bound %s", res["sse_kept"], res["ndjson_kept"], res["sse_max"])
	}
}

// TestStatusPageHubs: the status page of a hub and of its leaf (docs/contract.md §6.5,
// §26.6) in headless Chromium (web/statuspage/test/hubs.test.mjs), on a core A and a hub H
// under a map with a leaf window, and a leaf L of H that wrote 3 records: H's page shows
// the one leaf in the four lag bands; L's page shows its hub and the write checkpoint at
// its own seq 3, every write in the core.
func TestStatusPageHubs(t *testing.T) {
	web, _ := filepath.Abs("../../web/statuspage")
	if why := browserMissing(web); why != "" {
		if os.Getenv("PLAIT_REQUIRE_BROWSER") == "1" {
			t.Fatalf("the browser test cannot run: %s", why)
		}
		t.Skipf("needs Debian's chromium and web/statuspage's npm packages (make page): %s", why)
	}
	a := serve(t, "A")
	h := serve(t, "H", "--max-leaves", "4", "--peer", a.PeerFlag())
	waitFor(t, "H connected to A", 30*time.Second, func() bool { return h.connected("A") })
	a.publishMap(hubMap(1, []*proc{a, h}))
	waitFor(t, "A and H holding the map, each knowing the other at version 4", 30*time.Second, func() bool {
		for _, p := range []*proc{a, h} {
			if m := p.mapStatus(); m.Generation != 1 || len(m.MembersBelowV4) != 0 {
				return false
			}
		}
		return true
	})
	l := serve(t, "L", "--hub", h.PeerFlag())
	for i := range 3 {
		l.put("t", fmt.Sprint("k", i), "v")
	}
	shots := os.Getenv("PLAIT_SCREENSHOTS")
	if shots == "" {
		shots, _ = filepath.Abs("../../build/screenshots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "test", "hubs.test.mjs"))
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "PLAIT_HUB_URL=http://"+h.HTTP+"/", "PLAIT_LEAF_URL=http://"+l.HTTP+"/", "PLAIT_LEAF_WRITES=3",
		"PLAIT_SCREENSHOTS="+shots, "PLAIT_CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("hubs.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	res := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					res[k] = v
				}
			}
		}
	}
	if res["hub_connected"] != "1" || res["leaf_own"] != "3" || res["leaf_core"] != "3" {
		t.Errorf("the pages showed %v; want one leaf at the hub, the leaf's own seq and core seq 3", res)
	}
	// What the pages showed is what the documents say.
	if st := l.status(); st.Hub == nil || st.Hub.CoreSeq != 3 {
		t.Errorf("L's hub: %+v, want core_seq 3", st.Hub)
	}
}
