//go:build multiprocess || scale

package multiprocess

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"plait/protocol/store"
	"plait/shells/native/rocksstore"
)

// TestAntiEntropyRepairsRocksDB: B's RocksDB directory is changed while B is stopped,
// around its log (a record's value altered at its version, one set back to an older
// version, one deleted); once B runs again, anti-entropy with A brings all three back, the
// tables' digests meet, the metrics count the repairs, and plait check passes on B.
func TestAntiEntropyRepairsRocksDB(t *testing.T) {
	a := serve(t, "A", "--antientropy-interval", "100ms")
	b := serve(t, "B", "--antientropy-interval", "100ms", "--peer", a.PeerFlag())
	for i := range 40 {
		a.put("t", fmt.Sprintf("k%02d", i), fmt.Sprintf("value-%d", i))
	}
	waitFor(t, "B holding A's 40 writes", 30*time.Second, func() bool { return b.origin("A").AppliedSeq == 40 })
	want := a.digest("t")
	if b.digest("t") != want {
		t.Fatal("digests differ before the change")
	}
	b.stop()

	s, err := rocksstore.Open(b.DataDir, store.Identity{}, rocksstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(key string) store.Record {
		r, ok, err := s.Get([]byte("t"), []byte(key))
		if err != nil || !ok {
			t.Fatalf("t/%s in B's store: %v %v", key, ok, err)
		}
		return r
	}
	altered, older, gone := get("k07"), get("k13"), get("k21")
	altered.Value = []byte("bit rot")
	older.Value, older.HLC = []byte("lost update"), older.HLC-1
	gone.Deleted, gone.Value = true, nil
	err = s.Repair([]store.Record{altered, older, gone})
	if err == nil {
		err = s.DropTombstones([]store.Record{gone}) // the record is gone, tombstone and all
	}
	s.Close()
	if err != nil {
		t.Fatal(err)
	}

	b.start()
	waitFor(t, "B's table t repaired", 30*time.Second, func() bool { return b.digest("t") == want })
	for key, value := range map[string]string{"k07": "value-7", "k13": "value-13", "k21": "value-21"} {
		if _, body := b.get("/v1/tables/t/records/" + key); body != value {
			t.Errorf("B's t/%s = %q, want %q", key, body, value)
		}
	}
	waitFor(t, "B's repairs in its metrics", 10*time.Second, func() bool {
		return b.metric("plait_antientropy_records_repaired_total") == "plait_antientropy_records_repaired_total 3"
	})
	for _, m := range []string{"plait_antientropy_ranges_compared_total", "plait_antientropy_ranges_differing_total"} {
		if line := b.metric(m); line == "" || strings.HasSuffix(line, " 0") {
			t.Errorf("B's %s: %q", m, line)
		}
	}
	st := b.status()
	if st.Counters.AntiEntropyRecordsRepaired != 3 || st.Counters.AntiEntropyConflicts != 0 || len(st.AntiEntropyConflicts) != 0 {
		t.Errorf("B's counters %+v, conflicts %v", st.Counters, st.AntiEntropyConflicts)
	}
	if line := a.metric("plait_antientropy_records_repaired_total"); line != "plait_antientropy_records_repaired_total 0" {
		t.Errorf("A repaired from B's changed records: %q", line)
	}
	b.stop()
	b.check()
	a.stop()
	a.check()
}
