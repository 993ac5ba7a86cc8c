package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"plait/protocol/lock"
	"plait/protocol/replica"
	"plait/shells/native/httpapi"
)

// TestStatusAddr: --http takes HOST:PORT or an http(s) URL of a host and port, and refuses
// anything else with exit 2 before it dials (a host named "http" is never looked up).
func TestStatusAddr(t *testing.T) {
	for _, c := range []struct{ in, hostPort, scheme string }{
		{"127.0.0.1:7411", "127.0.0.1:7411", ""},
		{"[::1]:7411", "[::1]:7411", ""},
		{"http://127.0.0.1:7411", "127.0.0.1:7411", "http"},
		{"http://127.0.0.1:7411/", "127.0.0.1:7411", "http"},
		{"https://node.example", "node.example:443", "https"},
		{"http://node.example", "node.example:80", "http"},
	} {
		hp, scheme, err := apiAddr(c.in)
		if err != nil || hp != c.hostPort || scheme != c.scheme {
			t.Errorf("%q: %q %q %v; want %q %q", c.in, hp, scheme, err, c.hostPort, c.scheme)
		}
	}
	for _, in := range []string{"http", "127.0.0.1", "ftp://h:1", "http://h:1/v1/status", "http://u:p@h:1", "http://h:1?x=1", "http://", "ws://h:1"} {
		if _, _, err := apiAddr(in); err == nil || !strings.Contains(err.Error(), "--http") {
			t.Errorf("%q: %v; want a refusal naming --http", in, err)
		}
		var out bytes.Buffer
		if code := status([]string{"--http", in}, io.Discard, &out); code != 2 || strings.Count(out.String(), "\n") != 2 {
			t.Errorf("plait status --http %q: exit %d, %q; want 2 with the error and the -h line", in, code, out.String())
		}
	}
}

// statusServer serves doc as /v1/status.
func statusServer(t *testing.T, doc string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// docWith is the zero status document with its node's, origins' and peers' fields set by
// edit, plus a field this build does not know (a newer node's), encoded as a node would.
func docWith(t *testing.T, edit func(*httpapi.StatusDoc)) string {
	t.Helper()
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Node.Name = "N"
	edit(&d)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["from_a_newer_node"] = map[string]any{"generation": 7}
	m["node"].(map[string]any)["newer_field"] = "kept"
	b, _ = json.Marshal(m)
	return string(b) + "\n"
}

// TestStatusCheck: --check exits 3, naming each reason on standard error, while the node
// refuses writes (degraded storage, a rewound origin, its clock) or an origin is stuck or
// diverged, and 0 otherwise; --json prints the document as the node sent it, the fields a
// newer node adds included.
func TestStatusCheck(t *testing.T) {
	stuck := "apply-failed"
	for _, c := range []struct {
		name string
		edit func(*httpapi.StatusDoc)
		want []string // the reasons; none: exit 0
	}{
		{"healthy", func(*httpapi.StatusDoc) {}, nil},
		{"storage full", func(d *httpapi.StatusDoc) {
			d.Node.Storage = httpapi.StorageDoc{State: "degraded", Code: "storage-full", Message: "m", Since: "2026-12-07T00:00:00.000Z"}
		}, []string{"refuses local writes: storage-full"}},
		{"rewound", func(d *httpapi.StatusDoc) {
			d.Node.Rewound = &httpapi.RewindDoc{Peer: "P", Seq: 9, OwnSeq: 4, How: "subscribe"}
		},
			[]string{"refuses local writes: origin-rewound"}},
		{"clock", func(d *httpapi.StatusDoc) { d.Node.Clock.RefusingWrites = true }, []string{"refuses local writes: clock-offset"}},
		{"stuck and diverged", func(d *httpapi.StatusDoc) {
			d.Origins = []httpapi.OriginDoc{{Name: "A", Stuck: &stuck}, {Name: "B", Diverged: true}, {Name: "C"}}
		}, []string{"origin A is stuck: apply-failed", "origin B diverged"}},
	} {
		doc := docWith(t, c.edit)
		url := statusServer(t, doc)
		for _, asJSON := range []bool{false, true} {
			args := []string{"--http", url, "--check"}
			if asJSON {
				args = append(args, "--json")
			}
			var out, errs bytes.Buffer
			code := status(args, &out, &errs)
			want := 0
			if len(c.want) > 0 {
				want = exitCheckFailed
			}
			if code != want {
				t.Errorf("%s %v: exit %d; want %d\n%s", c.name, args, code, want, errs.String())
			}
			for _, w := range c.want {
				if !strings.Contains(errs.String(), "plait status --check: ") || !strings.Contains(errs.String(), w) {
					t.Errorf("%s: standard error %q lacks %q", c.name, errs.String(), w)
				}
			}
			if asJSON && out.String() != doc {
				t.Errorf("%s: --json printed\n%s\nnot the node's document\n%s", c.name, out.String(), doc)
			}
		}
		var out bytes.Buffer
		if code := status([]string{"--http", url}, &out, io.Discard); code != 0 {
			t.Errorf("%s: plain plait status exits %d; want 0 whatever the node's state", c.name, code)
		}
	}
	if code := status([]string{"--check", "--watch"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("--check with --watch: exit %d; want 2", code)
	}
}

// TestPrintStatusWritesRefused: the node line says when and why local writes are refused,
// the storage and rewind lines follow it with what to do, then the clock and TLS lines,
// in the contract's order; the peers table shows the last dial error.
func TestPrintStatusWritesRefused(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Node.Name = "N"
	d.Node.Storage = httpapi.StorageDoc{State: "degraded", Code: "storage-full", Message: "3 bytes free", Since: "2026-12-07T00:00:00.000Z", Retries: 2}
	d.Node.Rewound = &httpapi.RewindDoc{Peer: "P", Seq: 9, OwnSeq: 4, How: "subscribe", At: "2026-12-07T00:00:01.000Z"}
	d.Node.Clock.RefusingWrites = true
	d.Peers = []httpapi.PeerDoc{{Name: "Q", State: replica.PeerBackoff, LastDialError: &httpapi.DialErrorDoc{Code: "dial-refused", Message: "connection refused"}}}
	var out bytes.Buffer
	printStatus(&out, d)
	lines := strings.Split(out.String(), "\n")
	for i, want := range []string{
		"node N  origin 00000000000000000000000000000000  protocol 0..0  authenticated false  WRITES REFUSED: storage-full, origin-rewound, clock-offset",
		"storage DEGRADED storage-full since 2026-12-07T00:00:00.000Z  retries 2: 3 bytes free",
		"origin REWOUND: peer P holds seq 9 of this node's origin (subscribe, 2026-12-07T00:00:01.000Z); this node's log ends at seq 4: stop it and run plait reseed",
		"clock not measured",
		"tls off",
	} {
		if i >= len(lines) || !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d: want it to start %q in:\n%s", i+1, want, out.String())
		}
	}
	if !strings.Contains(out.String(), "LAST DIAL ERROR") || !strings.Contains(out.String(), "dial-refused: connection refused") {
		t.Errorf("the peers table lacks the last dial error:\n%s", out.String())
	}
	d = httpapi.NewStatusDoc(replica.Status{})
	out.Reset()
	printStatus(&out, d)
	if strings.Contains(out.String(), "REFUSED") || strings.Contains(out.String(), "DEGRADED") || strings.Contains(out.String(), "REWOUND") {
		t.Errorf("a node that takes writes:\n%s", out.String())
	}
}

// TestPrintStatusFeeds: the feeds line says the open feeds, the opened, the events and
// bytes sent, the closes by reason and the refusals by code.
func TestPrintStatusFeeds(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Feeds = httpapi.FeedsDoc{Open: 2, Opened: 9, Events: 1200, Bytes: 345678,
		Closed: map[string]uint64{"stalled": 1, "client-gone": 6}, Refused: map[string]uint64{"behind": 3}}
	var out bytes.Buffer
	printStatus(&out, d)
	want := "feeds open 2  opened 9  events 1200  bytes 345678  closed client-gone=6,stalled=1  refused behind=3\n"
	if !strings.Contains(out.String(), "\n"+want) {
		t.Errorf("want the line %q in:\n%s", want, out.String())
	}
}

// TestPrintStatusLocks: the locks line says the home's leases, grants, waits and refusals
// by code and the caller's held leases and refusals; a home the map names that cannot be
// one says why; a status without a locks object (a node before locks) prints no line.
func TestPrintStatusLocks(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{})
	d.Locks = httpapi.NewLocksDoc(replica.LockStatus{Home: true, Held: 2, Table: lock.Stats{Leases: 12, Granted: 140, Waiting: 1,
		Refused: map[lock.Code]uint64{lock.CodeQuarantined: 4, lock.CodeHeld: 21}}})
	d.Locks.Caller.Refused["lock-held"] = 9
	var out bytes.Buffer
	printStatus(&out, d)
	want := "locks home yes  leases 12  granted 140  waiting 1  refused lock-held=21,quarantined=4  held 2  caller refused lock-held=9\n"
	if !strings.Contains(out.String(), "\n"+want) {
		t.Errorf("want the line %q in:\n%s", want, out.String())
	}

	d.Locks = httpapi.NewLocksDoc(replica.LockStatus{Err: "the clock-offset guard is off"})
	out.Reset()
	printStatus(&out, d)
	want = "locks home OFF (the clock-offset guard is off)  leases 0  granted 0  waiting 0  refused -  held 0  caller refused -\n"
	if !strings.Contains(out.String(), "\n"+want) {
		t.Errorf("want the line %q in:\n%s", want, out.String())
	}

	var old httpapi.StatusDoc
	if err := json.Unmarshal([]byte(`{"node":{"name":"N"}}`), &old); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	printStatus(&out, old)
	if strings.Contains(out.String(), "\nfeeds ") {
		t.Errorf("a status without feeds prints a feeds line:\n%s", out.String())
	}
	if strings.Contains(out.String(), "locks") {
		t.Errorf("a status without locks printed a locks line:\n%s", out.String())
	}
}

// TestPrintStatusNamedFeeds: a line per named feed says its table, its lag, what it holds
// against its cap, and LAPSED while its hold is.
func TestPrintStatusNamedFeeds(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{NamedFeeds: []replica.NamedFeedStatus{
		{Name: "audit", Table: "orders", HoldBytes: 1000, LagEntries: 12, LagBytes: 900, HeldBytes: 700},
		{Name: "search", Table: "stock", HoldBytes: 10, LagEntries: 3, LagBytes: 40, Lapsed: true}}})
	var out bytes.Buffer
	printStatus(&out, d)
	for _, want := range []string{
		"\nnamed feed audit  table orders  behind 12 entries 900 B  holds 700 B of 1000 B\n",
		"\nnamed feed search  table stock  behind 3 entries 40 B  holds 0 B of 10 B  LAPSED: retention purges past its position\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want the line %q in:\n%s", want, out.String())
		}
	}
}

// TestPrintStatusHubs: a leaf's status has a hub line (what the hub re-originated, what the
// core has, the last refused write), a hub's a leaves line (counts, the lag bands, the
// slowest); a node that is neither prints neither.
func TestPrintStatusHubs(t *testing.T) {
	d := httpapi.NewStatusDoc(replica.Status{
		Hub: &replica.HubStatus{Name: "H", Connected: true, ReoriginatedSeq: 40, HubSeq: 9001, CoreSeq: 38,
			Horizon: time.Date(2031, 5, 6, 5, 8, 9, 0, time.UTC), Refused: 2, LastRefusedSeq: 17, LastRefusedReason: "too-old"},
		Leaves: &replica.LeavesStatus{Max: 500, Connected: 120, Marks: 130, Held: 1,
			Lag:     []replica.LeafLag{{LeMs: 100, Leaves: 100}, {LeMs: 1000, Leaves: 15}, {LeMs: 10000, Leaves: 4}, {Leaves: 1}},
			Slowest: []replica.LeafBehind{{Name: "L7", Seq: 12, BehindMs: 60000}, {Name: "L3", Seq: 900, BehindMs: 2500}}}})
	var out bytes.Buffer
	printStatus(&out, d)
	for _, want := range []string{
		"\nhub H  connected true  re-originated 40 (hub seq 9001)  in the core 38  horizon 2031-05-06T05:08:09.000Z  refused 2 (last seq 17: too-old; a base copy from the hub brings this leaf back in line)\n",
		"\nleaves 120 of 500  marks 130  held 1  lag <=100ms 100 <=1000ms 15 <=10000ms 4 more 1  slowest L7 (seq 12, 60000 ms), L3 (seq 900, 2500 ms)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want the line %q in:\n%s", want, out.String())
		}
	}
	d = httpapi.NewStatusDoc(replica.Status{Hub: &replica.HubStatus{Name: "H"}, Leaves: &replica.LeavesStatus{Lag: []replica.LeafLag{{Leaves: 0}}}})
	out.Reset()
	printStatus(&out, d)
	for _, want := range []string{"\nhub H  connected false  re-originated 0 (hub seq 0)  in the core 0  horizon -  refused 0\n",
		"\nleaves 0 of 0  marks 0  held 0  lag more 0  slowest -\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("want the line %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	printStatus(&out, httpapi.NewStatusDoc(replica.Status{}))
	if strings.Contains(out.String(), "\nhub ") || strings.Contains(out.String(), "\nleaves ") {
		t.Errorf("a node that is neither leaf nor hub prints a hub or leaves line:\n%s", out.String())
	}
}
