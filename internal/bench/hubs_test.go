package bench

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"plait/internal/cluster"
	"plait/shells/native/node"
)

// TestHubMeasures: a small run of the hub measures on the tree of C, H and L, whose data is
// the test: every write of L reaches C as one of H's entries (C's origins are C and H
// alone, and C holds every record written on H and on L), L's write checkpoint covers
// every write it took, and every latency sample was seen on C and on H; the rates and
// times are not judged.
func TestHubMeasures(t *testing.T) {
	r := &run{Config: Config{PerTxn: 100, Writers: 4, Sync: node.SyncOrigin, HubRecords: 400, HubSamples: 3}, dir: t.TempDir(),
		value: []byte(strings.Repeat("v", benchValue))}
	core, hub, leaf, done, err := r.hubTree(filepath.Join(r.dir, "hubs"))
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	local, reoriginated, err := r.hubRates(hub, leaf)
	if err != nil || local <= 0 || reoriginated <= 0 {
		t.Fatalf("rates: %v, %v, %v", local, reoriginated, err)
	}
	lc, hc, lh, err := r.hubLatency(core, hub, leaf)
	if err != nil || lc[0] <= 0 || hc[0] <= 0 || lh[0] <= 0 {
		t.Fatalf("latencies: %v, %v, %v, %v", lc, hc, lh, err)
	}
	// H's entries: 4 transactions of its own, 4 re-originated from L, and the samples: 3
	// of each.
	if err := cluster.WaitEvery("C applied H's entries", time.Minute, pollEvery, func() bool {
		return hasAll(core, map[string]uint64{"H": 4 + 4 + 3 + 3})
	}); err != nil {
		t.Fatal(err)
	}
	st, err := core.Status()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range st.Origins {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "C,H" {
		t.Errorf("C's origins: %v, want C and H alone (L's writes are H's entries there)", names)
	}
	// L wrote 4 transactions and the 3 samples, every one on the core by its hub's word.
	if err := cluster.WaitEvery("L's write checkpoint at its 7 writes", time.Minute, pollEvery, func() bool {
		ls, err := leaf.Status()
		own, _ := ls.Origin("L")
		return err == nil && own.AppliedSeq == 7 && ls.Hub != nil && ls.Hub.CoreSeq == 7
	}); err != nil {
		ls, _ := leaf.Status()
		own, _ := ls.Origin("L")
		t.Fatalf("%v: L's own seq %d, its hub %+v", err, own.AppliedSeq, ls.Hub)
	}
	if count, _, err := core.Local.Digest("t"); err != nil || count != 800 {
		t.Errorf("C holds %d records of t (%v), want the 400 written on H and the 400 on L", count, err)
	}
}
