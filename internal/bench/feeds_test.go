package bench

import (
	"strings"
	"testing"
	"time"

	"plait/shells/native/node"
)

// TestBenchFeeds: a small run of the change feed measures. Each measure checks what its
// consumer was delivered (every entry once, each write's event in order), so the test is
// that they run and report numbers that fit: rates of records that are the events' times
// --per-txn, latencies that order, memory that idle feeds grow, and a stall whose buffers
// filled before it ended. The figures themselves are not judged.
func TestBenchFeeds(t *testing.T) {
	// Values of 2,000 bytes fill the stalled consumer's socket buffers within the short
	// stall (a transaction every 10 ms).
	r := &run{Config: Config{PerTxn: 100, Writers: 4, Sync: node.SyncOrigin, FeedRecords: 1600, FeedSamples: 5,
		FeedIdle: 20, FeedStall: 5 * time.Second}, dir: t.TempDir(), value: []byte(strings.Repeat("v", 2000)),
		arrivalBound: 10 * time.Second}

	ft, err := r.feedThroughput()
	if err != nil {
		t.Fatal(err)
	}
	for what, fr := range map[string]feedRate{"client": ft.client, "raw": ft.raw} {
		if fr.events <= 0 || fr.records/fr.events < 99.9 || fr.records/fr.events > 100.1 {
			t.Errorf("%s: %+v: want records at 100 an event", what, fr)
		}
	}
	t.Logf("apply %.0f records/s; client %+v; raw %+v", ft.apply, ft.client, ft.raw)
	if ft.apply <= 0 {
		t.Errorf("apply rate %v", ft.apply)
	}

	lat, err := r.latencyOf(r.FeedSamples, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("latencies %+v", lat)
	if lat.b[0] <= 0 || lat.feed[0] <= 0 || lat.feed[1] < lat.feed[0] || lat.feedAfter[1] < lat.feedAfter[0] {
		t.Errorf("latencies %+v", lat)
	}

	grew, err := r.idleFeeds()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d idle feeds: %d bytes", r.FeedIdle, grew)
	if grew <= 0 {
		t.Errorf("%d idle feeds grew the heap and stacks by %d bytes", r.FeedIdle, grew)
	}

	st, err := r.feedStall()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stall %+v", st)
	if st.entries <= 0 || st.sent == 0 || st.fillAt >= r.FeedStall || st.before <= 0 || st.end <= 0 {
		t.Errorf("stall %+v", st)
	}
}
