package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"plait/protocol/wire"
	"plait/shells/native/node"
)

// TestPlacementAnswers: a write a node refuses because its tables are not placed alike
// answers 409 mixed-placement, one of a table it does not carry 409 not-carried; each is
// counted in the status and the metrics, and the status shows the placement and the tables
// this node carries. No endpoint writes two tables in one transaction yet (a batch is one
// table's), and the endpoints forward a table this node does not carry, so the writes go
// through the node, as the API's own writes do, and their errors through the API's one
// error answer.
func TestPlacementAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.Config{Name: "A", DataDir: t.TempDir(), Listener: l, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Secret = []byte("http api test secret, long enough")
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(New(n, Limits{}))
	t.Cleanup(func() {
		api.Close()
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	if _, err := n.PublishMap([]byte(`{"generation":1,"nodes":[{"name":"A"},{"name":"B"}],"placement":{"orders":["A"],"lines":["B"],"stock":["A"]}}`)); err != nil {
		t.Fatal(err)
	}
	put := func(table string) wire.Op {
		return wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: []byte("k"), Value: []byte("v")}
	}
	_, err = n.Write(context.Background(), []wire.Op{put("orders"), put("lines")})
	rec := httptest.NewRecorder()
	fail(rec, err)
	if body := rec.Body.String(); rec.Code != http.StatusConflict || !strings.HasPrefix(body, `{"error":{"code":"mixed-placement","message":"the tables \"orders\"`) {
		t.Fatalf("a write of orders and lines: %v, answered %d %s; want 409 mixed-placement", err, rec.Code, body)
	}
	if _, err := n.Write(context.Background(), []wire.Op{put("orders"), put("stock")}); err != nil {
		t.Fatalf("a write of two tables placed alike: %v", err)
	}

	// A write of a table this node does not carry that reaches the node (the API forwards
	// its own, docs/contract.md §23.4): 409 not-carried, nothing written, counted.
	_, err = n.Write(context.Background(), []wire.Op{put("lines")})
	rec = httptest.NewRecorder()
	fail(rec, err)
	if body := rec.Body.String(); rec.Code != http.StatusConflict || !strings.HasPrefix(body, `{"error":{"code":"not-carried","message":"this node (A) does not carry table lines: its carriers are B`) {
		t.Fatalf("a write of a table placed on B: %v, answered %d %s; want 409 not-carried naming B", err, rec.Code, body)
	}

	resp, err := http.Get(api.URL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st StatusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	wantPlacement := map[string][]string{"lines": {"B"}, "orders": {"A"}, "stock": {"A"}}
	if m := st.ClusterMap; !maps.EqualFunc(m.Placement, wantPlacement, slices.Equal) || m.Carried == nil || !slices.Equal(*m.Carried, []string{"orders", "stock"}) {
		t.Errorf("cluster_map: placement %v, carried %v; want %v, [orders stock]", m.Placement, m.Carried, wantPlacement)
	}
	if got := st.Counters.WritesRefusedMixedPlacement; got != 1 {
		t.Errorf("counters.writes_refused_mixed_placement = %d, want 1", got)
	}
	if got := st.Counters.WritesRefusedNotCarried; got != 1 {
		t.Errorf("counters.writes_refused_not_carried = %d, want 1", got)
	}
	resp, err = http.Get(api.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(metrics), "\nplait_writes_refused_mixed_placement_total 1\n") {
		t.Errorf("the metrics lack plait_writes_refused_mixed_placement_total 1")
	}
}
