package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"plait/protocol/clustermap"
	"plait/shells/native/httpapi"
	"plait/shells/native/node"
)

// statusOf reads a node's status document from its API.
func statusOf(t *testing.T, api string) httpapi.StatusDoc {
	t.Helper()
	st, err := httpapi.ReadStatus(http.DefaultClient, strings.TrimPrefix(api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestClusterMapPublish: PUT /v1/cluster/map adopts a map and answers it in canonical
// form, the same map again (other key order and spacing) answers 200, a generation at or
// below the node's 409 stale-generation, and each document the API refuses 400 with its
// code; the body's bound is 64 KiB exactly: a valid document of 64 KiB is adopted, one
// byte more is map-too-large. GET answers the map (and ?node=A, through the request path,
// {"generation":0} before any), the status and the metrics show it.
func TestClusterMapPublish(t *testing.T) {
	a, _ := startNode(t, "A")
	s, ct, body := doTyped(t, "GET", a.URL+"/v1/cluster/map", "")
	if s != 200 || ct != "application/json" || body != "{\"generation\":0}\n" {
		t.Fatalf("GET before any map: %d %q %q; want 200 application/json {\"generation\":0}", s, ct, body)
	}
	s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map?node=A", "")
	want(t, "GET ?node=A before any map (the answer of a node that holds none)", s, body, 200, "{\"generation\":0}\n")

	const two = `{"generation":2,"nodes":[{"api":"http://a.example:7401","name":"A"},{"name":"B"}]}` + "\n"
	s, ct, body = doTyped(t, "PUT", a.URL+"/v1/cluster/map", ` { "nodes": [ {"name":"A", "api":"http://a.example:7401"}, {"name":"B"} ], "generation": 2 } `)
	if s != 200 || ct != "application/json" || body != two {
		t.Fatalf("PUT generation 2: %d %q %q; want 200 %q", s, ct, body, two)
	}
	s, _, body = doTyped(t, "PUT", a.URL+"/v1/cluster/map", `{"generation":2,"nodes":[{"name":"A","api":"http://a.example:7401"},{"name":"B"}]}`)
	want(t, "the same map again, keys in another order", s, body, 200, two)
	s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map", "")
	want(t, "GET after the PUT", s, body, 200, two)

	for _, c := range []struct {
		what, doc string
		status    int
		code      string
	}{
		{"another map of the same generation", `{"generation":2}`, 409, "stale-generation"},
		{"a lower generation", `{"generation":1}`, 409, "stale-generation"},
		{"not an object", `[1]`, 400, clustermap.CodeBadJSON},
		{"an empty body", ``, 400, clustermap.CodeBadJSON},
		{"a key twice", `{"generation":3,"generation":4}`, 400, clustermap.CodeBadJSON},
		{"an unknown field", `{"generation":3,"lock_home":["A"]}`, 400, clustermap.CodeUnknownField},
		{"lock homes not an array", `{"generation":3,"lock_homes":{},"nodes":[{"name":"A"}]}`, 400, clustermap.CodeBadLockHomes},
		{"a lock home not a member", `{"generation":3,"lock_homes":["B"],"nodes":[{"name":"A"}]}`, 400, clustermap.CodeBadLockHomes},
		{"a fenced table twice", `{"fenced_tables":["t","t"],"generation":3}`, 400, clustermap.CodeBadFencedTables},
		{"a placement without nodes", `{"generation":3,"placement":{"t":["A"]}}`, 400, clustermap.CodeBadPlacement},
		{"a placement of a node not a member", `{"generation":3,"nodes":[{"name":"A"}],"placement":{"t":["B"]}}`, 400, clustermap.CodeBadPlacement},
		{"generation 0", `{"generation":0}`, 400, clustermap.CodeBadGeneration},
		{"generation 1.0", `{"generation":1.0}`, 400, clustermap.CodeBadGeneration},
		{"a bad name", `{"generation":3,"nodes":[{"name":"a b"}]}`, 400, clustermap.CodeBadName},
		{"a bad api", `{"generation":3,"nodes":[{"name":"A","api":"ftp://a.example"}]}`, 400, clustermap.CodeBadURL},
		{"a node twice", `{"generation":3,"nodes":[{"name":"A"},{"name":"A"}]}`, 400, clustermap.CodeDuplicateNode},
		{"no nodes", `{"generation":3,"nodes":[]}`, 400, clustermap.CodeTooManyNodes},
		{"one byte over 64 KiB", `{"generation":3}` + strings.Repeat(" ", clustermap.MaxBytes+1-len(`{"generation":3}`)), 400, clustermap.CodeMapTooLarge},
	} {
		s, ct, body := doTyped(t, "PUT", a.URL+"/v1/cluster/map", c.doc)
		want(t, c.what, s, body, c.status, `{"error":{"code":"`+c.code+`"`)
		if ct != "application/json" {
			t.Errorf("%s: content type %q", c.what, ct)
		}
	}
	s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map", "")
	want(t, "GET after the refusals", s, body, 200, two)

	at64 := `{"generation":3}` + strings.Repeat(" ", clustermap.MaxBytes-len(`{"generation":3}`))
	if len(at64) != 64<<10 {
		t.Fatalf("the document at the bound is %d bytes", len(at64))
	}
	s, _, body = doTyped(t, "PUT", a.URL+"/v1/cluster/map", at64)
	want(t, "a document of 64 KiB exactly", s, body, 200, "{\"generation\":3}\n")

	st := statusOf(t, a.URL)
	m := st.ClusterMap
	if m.Generation != 3 || m.Publisher != "A" || m.Members != nil || m.MembersBelowV4 != nil || m.Conflict != nil ||
		st.Counters.ClusterMapAdopted != 2 || st.Counters.ClusterMapConflicts != 0 {
		t.Errorf("status after generations 2 and 3: %+v, adopted %d, conflicts %d; want generation 3 of A, no member list, 2 adopted",
			m, st.Counters.ClusterMapAdopted, st.Counters.ClusterMapConflicts)
	}
	if at, err := time.Parse(time.RFC3339Nano, m.AppliedAt); err != nil || time.Since(at) > time.Minute {
		t.Errorf("cluster_map.applied_at %q: %v", m.AppliedAt, err)
	}
	if len(m.Versions) != 1 || m.Versions[0].Name != "A" || m.Versions[0].MaxVersion != st.Node.Protocol.Max {
		t.Errorf("cluster_map.versions %+v; want A's own at its protocol max %d", m.Versions, st.Node.Protocol.Max)
	}
	_, body = do(t, "GET", a.URL+"/metrics", "")
	for _, series := range []string{"\nplait_cluster_map_generation 3\n", "\nplait_cluster_map_adopted_total 2\n", "\nplait_cluster_map_conflicts_total 0\n"} {
		if !strings.Contains(body, series) {
			t.Errorf("metrics lack %q", strings.TrimSpace(series))
		}
	}
}

// TestClusterMapUnfenced: PUT /v1/cluster/map of a higher generation that does not fence
// a table the node's map fences answers 409 unfenced naming the table, and the node keeps
// its map; one that fences it still is adopted.
func TestClusterMapUnfenced(t *testing.T) {
	a, _ := startNode(t, "A")
	const fenced = `{"fenced_tables":["t"],"generation":1,"lock_homes":["A"],"nodes":[{"name":"A"}]}`
	s, body := do(t, "PUT", a.URL+"/v1/cluster/map", fenced)
	want(t, "a map fencing t", s, body, 200, fenced+"\n")
	s, body = do(t, "PUT", a.URL+"/v1/cluster/map", `{"fenced_tables":["u"],"generation":2}`)
	want(t, "a map that unfences t", s, body, 409, `{"error":{"code":"unfenced","message":"the cluster map generation 1 fences the table \"t\" and generation 2 does not`)
	s, body = do(t, "GET", a.URL+"/v1/cluster/map", "")
	want(t, "GET after the refusal", s, body, 200, fenced+"\n")
	s, body = do(t, "PUT", a.URL+"/v1/cluster/map", `{"fenced_tables":["u","t"],"generation":2}`)
	want(t, "a map fencing u with no member list", s, body, 503, `{"error":{"code":"cluster-not-v4","message":"the cluster map (generation 2) has no member list (nodes)"}}`)
	const still = `{"fenced_tables":["u","t"],"generation":2,"lock_homes":["A"],"nodes":[{"name":"A"}]}`
	s, body = do(t, "PUT", a.URL+"/v1/cluster/map", still)
	want(t, "a map fencing t still", s, body, 200, still+"\n")
}

// TestClusterMapOfNode: ?node=NAME answers the map node NAME holds, asked over the peer
// connection: A and B publish different maps of one generation before they meet, so each
// keeps its own (a conflict, shown and counted on both), and A's API answers B's map for
// ?node=B and its own for ?node=A. A name outside the rule is 400 bad-name; a node no
// route reaches 502 no-route, counted as refused.
func TestClusterMapOfNode(t *testing.T) {
	a, aURL := startNode(t, "A")
	b, _ := startNode(t, "B")
	const mapA, mapB = `{"generation":1,"nodes":[{"name":"A"},{"name":"B"}]}`, `{"generation":1,"nodes":[{"name":"B"}]}`
	s, body := do(t, "PUT", a.URL+"/v1/cluster/map", mapA)
	want(t, "A's map", s, body, 200, mapA)
	s, body = do(t, "PUT", b.URL+"/v1/cluster/map", mapB)
	want(t, "B's map", s, body, 200, mapB)
	s, body = do(t, "POST", b.URL+"/v1/peers", `{"name":"A","url":"`+aURL+`"}`)
	want(t, "B dials A", s, body, 201, `"name":"A"`)

	deadline := time.Now().Add(20 * time.Second)
	for {
		sa, sb := statusOf(t, a.URL), statusOf(t, b.URL)
		if c := sa.ClusterMap.Conflict; c != nil && c.Publisher == "B" && c.Generation == 1 && sb.ClusterMap.Conflict != nil &&
			sa.Counters.ClusterMapConflicts == 1 && sb.Counters.ClusterMapConflicts == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A and B never showed the conflict: A %+v (%d), B %+v (%d)", sa.ClusterMap, sa.Counters.ClusterMapConflicts,
				sb.ClusterMap, sb.Counters.ClusterMapConflicts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, ct, body := doTyped(t, "GET", a.URL+"/v1/cluster/map?node=B", "")
	if s != 200 || ct != "application/json" || body != mapB+"\n" {
		t.Errorf("A's API, ?node=B: %d %q %q; want 200 with B's map %s", s, ct, body, mapB)
	}
	s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map?node=A", "")
	want(t, "A's API, ?node=A", s, body, 200, mapA+"\n")
	if st := statusOf(t, a.URL); st.Counters.RequestsSent != 1 || st.Counters.RequestsServed != 1 {
		t.Errorf("A's requests: sent %d, served %d; want 1 sent (to B), 1 served (its own)", st.Counters.RequestsSent, st.Counters.RequestsServed)
	}
	if st := statusOf(t, b.URL); st.Counters.RequestsServed != 1 {
		t.Errorf("B served %d requests, want 1", st.Counters.RequestsServed)
	}

	for _, q := range []string{"?node=", "?node=a%20b", "?node=" + strings.Repeat("n", 65)} {
		s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map"+q, "")
		want(t, "A's API, "+q, s, body, 400, `{"error":{"code":"bad-name"`)
	}
	before := statusOf(t, a.URL).Counters.RequestsRefused
	s, _, body = doTyped(t, "GET", a.URL+"/v1/cluster/map?node=Z", "")
	want(t, "A's API, ?node=Z (no such node)", s, body, 502, `{"error":{"code":"no-route"`)
	if after := statusOf(t, a.URL).Counters.RequestsRefused; after != before+1 {
		t.Errorf("requests_refused %d after no-route, want %d", after, before+1)
	}
}

// TestClusterMapScopes: with tokens, a read token reads the map, its own node's and
// another's (the request carries the caller's scope, which the target checks), and may
// not publish one; an admin token publishes.
func TestClusterMapScopes(t *testing.T) {
	tokens, _ := tokenFile(t, readToken+" read\n"+adminToken+" admin\n")
	a, _ := startNodeWith(t, node.Config{Name: "A"}, httpapi.RequireTokens(tokens))
	s, _, body := call(t, "PUT", a.URL+"/v1/cluster/map", `{"generation":1}`, "Bearer "+readToken)
	want(t, "PUT with a read token", s, body, 403, `"code":"forbidden"`)
	s, _, body = call(t, "GET", a.URL+"/v1/cluster/map", "", "Bearer "+readToken)
	want(t, "GET with a read token, before any map", s, body, 200, `{"generation":0}`)
	s, _, body = call(t, "PUT", a.URL+"/v1/cluster/map", `{"generation":1}`, "Bearer "+adminToken)
	want(t, "PUT with an admin token", s, body, 200, `{"generation":1}`)
	s, _, body = call(t, "GET", a.URL+"/v1/cluster/map?node=A", "", "Bearer "+readToken)
	want(t, "GET ?node=A with a read token", s, body, 200, `{"generation":1}`)
	s, _, body = call(t, "GET", a.URL+"/v1/cluster/map", "")
	want(t, "GET without a token", s, body, 401, `"code":"unauthorized"`)
	var doc httpapi.StatusDoc
	_, _, body = call(t, "GET", a.URL+"/v1/status", "", "Bearer "+readToken)
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.ClusterMap.Generation != 1 {
		t.Errorf("status after the admin's PUT: generation %d, %v", doc.ClusterMap.Generation, err)
	}
}
