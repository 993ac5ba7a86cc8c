package httpapi_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"plait/protocol/wire"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// page is a listing's answer, with the fields a pinned snapshot adds.
type page struct {
	Records []struct {
		Key      string  `json:"key"`
		Value    *string `json:"value"`
		ValueB64 *string `json:"value_b64"`
	} `json:"records"`
	Next     *string `json:"next"`
	AsOf     *string `json:"as_of"`
	Snapshot *string `json:"snapshot"`
}

// list asks a listing of table with query q and decodes it; it fails the test on any
// status but 200.
func list(t *testing.T, api *httptest.Server, table string, q url.Values) page {
	t.Helper()
	s, body := do(t, "GET", api.URL+"/v1/tables/"+table+"/records?"+q.Encode(), "")
	if s != 200 {
		t.Fatalf("listing %s?%s: %d %s", table, q.Encode(), s, body)
	}
	var p page
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("listing %s?%s: %v in %s", table, q.Encode(), err, body)
	}
	return p
}

// listAll follows a listing from q to its last page: the records as key=value lines, and
// the pages' as_of and snapshot (each page must repeat the first's).
func listAll(t *testing.T, api *httptest.Server, table string, q url.Values) (recs []string, asOf, id string) {
	t.Helper()
	for i := 0; ; i++ {
		p := list(t, api, table, q)
		for _, r := range p.Records {
			v := "b64:" + deref(r.ValueB64)
			if r.Value != nil {
				v = *r.Value
			}
			recs = append(recs, r.Key+"="+v)
		}
		if q.Has("snapshot") {
			if p.AsOf == nil || p.Snapshot == nil {
				t.Fatalf("page %d of a snapshot listing without as_of or snapshot", i)
			}
			if i == 0 {
				asOf, id = *p.AsOf, *p.Snapshot
				q.Set("snapshot", id)
			} else if *p.AsOf != asOf || *p.Snapshot != id {
				t.Fatalf("page %d: as_of %q, snapshot %s; the first page's were %q, %s", i, *p.AsOf, *p.Snapshot, asOf, id)
			}
		} else if p.AsOf != nil || p.Snapshot != nil {
			t.Fatalf("a listing without snapshot answered as_of %v, snapshot %v", p.AsOf, p.Snapshot)
		}
		if p.Next == nil {
			return recs, asOf, id
		}
		q.Set("after", *p.Next)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nodePut(t *testing.T, n *node.Node, table, key, value string) uint64 {
	t.Helper()
	seq, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte(table), Key: []byte(key), Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func del(t *testing.T, n *node.Node, table, key string) {
	t.Helper()
	if _, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpDelete, Table: []byte(table), Key: []byte(key)}}); err != nil {
		t.Fatal(err)
	}
}

// snapshotsDoc reads /v1/status's snapshots.
func snapshotsDoc(t *testing.T, api *httptest.Server) httpapi.SnapshotsDoc {
	t.Helper()
	s, body := do(t, "GET", api.URL+"/v1/status", "")
	var d httpapi.StatusDoc
	if err := json.Unmarshal([]byte(body), &d); s != 200 || err != nil {
		t.Fatalf("status: %d %v", s, err)
	}
	return d.Snapshots
}

// TestSnapshotListing: the pages of a snapshot listing are the table as it was when the
// first page was answered, whatever is written after, and as_of is the node's applied
// position then; a listing without snapshot sees the writes. Before any write after, a
// snapshot's pages equal the live listing's for the same prefix and limit, page for page
// (tombstones left out, the page ending at the table's end with a table after it).
func TestSnapshotListing(t *testing.T) {
	n, api, _ := startNodeAPI(t, node.Config{Name: "A"}, httpapi.Limits{})
	for i := range 10 {
		nodePut(t, n, "t", fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	nodePut(t, n, "t", "z\xff", "\xff\x00")
	del(t, n, "t", "k3")
	nodePut(t, n, "u", "k0", "of another table")
	last := nodePut(t, n, "a", "k0", "of a table before")
	for _, c := range []struct{ prefix, limit string }{{"", "3"}, {"k", "2"}, {"k1", "1"}, {"", "1000"}, {"j", "5"}, {"k3", "1"}} {
		q := url.Values{"prefix": {c.prefix}, "limit": {c.limit}}
		live, _, _ := listAll(t, api, "t", q)
		q = url.Values{"prefix": {c.prefix}, "limit": {c.limit}, "snapshot": {"new"}}
		pinned, _, _ := listAll(t, api, "t", q)
		if strings.Join(live, " ") != strings.Join(pinned, " ") {
			t.Errorf("prefix %q limit %s: the live listing %v, the snapshot's %v", c.prefix, c.limit, live, pinned)
		}
	}

	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	first := list(t, api, "t", url.Values{"snapshot": {"new"}, "limit": {"4"}})
	wantAsOf := hex.EncodeToString(st.Node.Origin[:]) + ":" + fmt.Sprint(last)
	if first.AsOf == nil || *first.AsOf != wantAsOf || first.Snapshot == nil || first.Next == nil {
		t.Fatalf("the first page: as_of %v, snapshot %v, next %v; want as_of %q, an id, a next", first.AsOf, first.Snapshot, first.Next, wantAsOf)
	}
	nodePut(t, n, "t", "k1", "changed")
	del(t, n, "t", "k5")
	nodePut(t, n, "t", "k55", "new")
	nodePut(t, n, "t", "k2", "changed")

	var pinned []string
	for _, r := range first.Records {
		pinned = append(pinned, r.Key+"="+deref(r.Value))
	}
	rest, asOf, id := listAll(t, api, "t", url.Values{"snapshot": {*first.Snapshot}, "after": {*first.Next}, "limit": {"4"}})
	if asOf != wantAsOf || id != *first.Snapshot {
		t.Errorf("later pages: as_of %q, snapshot %s; want %q, %s", asOf, id, wantAsOf, *first.Snapshot)
	}
	pinned = append(pinned, rest...)
	wantPinned := "k0=v0 k1=v1 k2=v2 k4=v4 k5=v5 k6=v6 k7=v7 k8=v8 k9=v9 z\ufffd=b64:/wA="
	if got := strings.Join(pinned, " "); got != wantPinned {
		t.Errorf("the snapshot's pages, after the writes:\n got %s\nwant %s", got, wantPinned)
	}
	live, _, _ := listAll(t, api, "t", url.Values{"limit": {"4"}})
	wantLive := "k0=v0 k1=changed k2=changed k4=v4 k55=new k6=v6 k7=v7 k8=v8 k9=v9 z\ufffd=b64:/wA="
	if got := strings.Join(live, " "); got != wantLive {
		t.Errorf("the live listing, after the writes:\n got %s\nwant %s", got, wantLive)
	}
}

// TestSnapshotAsOfExact: snapshots opened while writes stream in hold exactly the writes
// their as_of names: write i puts key w<i> at seq i, so a snapshot whose as_of is seq S
// holds w<S> as its last record (w<S+1> is not in it) and w000001 as its first.
func TestSnapshotAsOfExact(t *testing.T) {
	n, api, _ := startNodeAPI(t, node.Config{Name: "A", Sync: node.SyncNone}, httpapi.Limits{})
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	origin := hex.EncodeToString(st.Node.Origin[:])
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for i := 1; ctx.Err() == nil; i++ {
			seq, err := n.Write(ctx, []wire.Op{{Kind: wire.OpPut, Table: []byte("w"), Key: []byte(fmt.Sprintf("w%06d", i)), Value: []byte("v")}})
			if (err != nil || seq != uint64(i)) && ctx.Err() == nil {
				done <- fmt.Errorf("write %d: seq %d, %v", i, seq, err)
				return
			}
		}
		done <- nil
	}()
	seen := map[string]bool{}
	for range 200 {
		first := list(t, api, "w", url.Values{"snapshot": {"new"}, "limit": {"1"}})
		asOf, id := deref(first.AsOf), deref(first.Snapshot)
		seq := uint64(0)
		if asOf != "" {
			if _, err := fmt.Sscanf(strings.TrimPrefix(asOf, origin+":"), "%d", &seq); err != nil || !strings.HasPrefix(asOf, origin+":") {
				t.Fatalf("as_of %q is not this node's origin at a seq", asOf)
			}
		}
		if seq == 0 {
			if len(first.Records) != 0 {
				t.Fatalf("a snapshot as of no write lists %s", first.Records[0].Key)
			}
			continue
		}
		if len(first.Records) != 1 || first.Records[0].Key != "w000001" || (first.Next == nil) != (seq == 1) {
			t.Fatalf("a snapshot as of seq %d: its first page %+v, next %v; want w000001, and more unless seq is 1", seq, first.Records, deref(first.Next))
		}
		if seq == 1 {
			continue // its listing ended on its first page
		}
		last := list(t, api, "w", url.Values{"snapshot": {id}, "after": {fmt.Sprintf("w%06d", seq-1)}, "limit": {"1"}})
		if len(last.Records) != 1 || last.Records[0].Key != fmt.Sprintf("w%06d", seq) || last.Next != nil {
			got := "none"
			if len(last.Records) > 0 {
				got = last.Records[0].Key
			}
			t.Fatalf("a snapshot as of seq %d: after w%06d it holds %s (next %v), want w%06d and nothing after", seq, seq-1, got, deref(last.Next), seq)
		}
		seen[asOf] = true
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d snapshots at distinct positions", len(seen))
}

// TestSnapshotBounds: --max-snapshots open at once, one more answered 503
// too-many-snapshots; the page that ends a listing releases its snapshot (a page of it
// after is 410 snapshot-expired, and one more opens); an id no snapshot has 410
// snapshot-expired; an id not of the
// form, or of a snapshot of another table, 400 bad-snapshot; each counted in status and
// /metrics.
func TestSnapshotBounds(t *testing.T) {
	n, api, _ := startNodeAPI(t, node.Config{Name: "A", MaxSnapshots: 2}, httpapi.Limits{})
	nodePut(t, n, "t", "k1", "v")
	nodePut(t, n, "t", "k2", "v")
	var ids []string
	for range 2 {
		p := list(t, api, "t", url.Values{"snapshot": {"new"}, "limit": {"1"}})
		ids = append(ids, deref(p.Snapshot))
	}
	if len(ids[0]) != 32 || ids[0] == ids[1] {
		t.Fatalf("snapshot ids %q", ids)
	}
	s, body := do(t, "GET", api.URL+"/v1/tables/t/records?snapshot=new", "")
	want(t, "a snapshot past --max-snapshots", s, body, 503, `"code":"too-many-snapshots"`)
	p := list(t, api, "t", url.Values{"snapshot": {ids[1]}, "after": {"k1"}, "limit": {"1"}})
	if deref(p.Snapshot) != ids[1] || len(p.Records) != 1 || p.Next != nil {
		t.Errorf("the last page of an open snapshot at the bound: snapshot %q, %d records, next %v", deref(p.Snapshot), len(p.Records), deref(p.Next))
	}
	// That page ended its listing: the snapshot is released, and one more may open.
	s, body = do(t, "GET", api.URL+"/v1/tables/t/records?snapshot="+ids[1], "")
	want(t, "a page of a snapshot whose listing ended", s, body, 410, `"code":"snapshot-expired"`)
	ids[1] = deref(list(t, api, "t", url.Values{"snapshot": {"new"}, "limit": {"1"}}).Snapshot)
	s, body = do(t, "GET", api.URL+"/v1/tables/t/records?snapshot=0123456789abcdef0123456789abcdef", "")
	want(t, "an unknown snapshot id", s, body, 410, `"code":"snapshot-expired"`)
	for _, bad := range []string{"", "0123456789ABCDEF0123456789ABCDEF", "0123", "old", ids[0] + "0"} {
		s, body = do(t, "GET", api.URL+"/v1/tables/t/records?snapshot="+bad, "")
		want(t, "snapshot id "+bad, s, body, 400, `"code":"bad-snapshot"`)
	}
	s, body = do(t, "GET", api.URL+"/v1/tables/u/records?snapshot="+ids[0], "")
	want(t, "a page of another table's snapshot", s, body, 400, `"code":"bad-snapshot"`)
	got := snapshotsDoc(t, api)
	if wantDoc := (httpapi.SnapshotsDoc{Open: 2, Opened: 3, RefusedTooMany: 1, RefusedExpired: 2}); got != wantDoc {
		t.Errorf("status snapshots %+v, want %+v", got, wantDoc)
	}
	s, body = do(t, "GET", api.URL+"/metrics", "")
	for _, line := range []string{"plait_snapshots_open 2", "plait_snapshots_opened_total 3", `plait_snapshots_refused_total{code="too-many-snapshots"} 1`,
		`plait_snapshots_refused_total{code="snapshot-expired"} 2`, "plait_snapshots_timed_out_total 0"} {
		want(t, "metrics", s, body, 200, line)
	}
}

// TestSnapshotExpiry: a snapshot is released --snapshot-ttl after its last page (status
// shows it closed and counted), and a page of it after that is answered 410
// snapshot-expired.
func TestSnapshotExpiry(t *testing.T) {
	n, api, _ := startNodeAPI(t, node.Config{Name: "A", SnapshotTTL: 100 * time.Millisecond}, httpapi.Limits{})
	nodePut(t, n, "t", "k1", "v")
	nodePut(t, n, "t", "k2", "v")
	p := list(t, api, "t", url.Values{"snapshot": {"new"}, "limit": {"1"}})
	deadline := time.Now().Add(20 * time.Second)
	for snapshotsDoc(t, api).Open != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot is still open 20s past its ttl")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, body := do(t, "GET", api.URL+"/v1/tables/t/records?snapshot="+deref(p.Snapshot), "")
	want(t, "a page of an expired snapshot", s, body, 410, `"code":"snapshot-expired"`)
	if got, wantDoc := snapshotsDoc(t, api), (httpapi.SnapshotsDoc{Opened: 1, TimedOut: 1, RefusedExpired: 1}); got != wantDoc {
		t.Errorf("status snapshots %+v, want %+v", got, wantDoc)
	}
}
