package bench

import (
	"path/filepath"
	"strings"
	"testing"

	"plait/shells/native/node"
)

func tlsRun(t testing.TB, records int) *run {
	return &run{Config: Config{Records: records, PerTxn: 100, Writers: 4, Sync: node.SyncOrigin, TLS: true}, dir: t.TempDir(),
		value: []byte(strings.Repeat("v", benchValue))}
}

// TestTLSMeasures: a small run of the --tls measures: the raw WebSocket over wss:// carries
// its messages, and the replication A -> B over wss:// delivers every record (timeAB
// waits for B to apply them); the rates are not judged.
func TestTLSMeasures(t *testing.T) {
	r := tlsRun(t, 1600)
	if m, err := r.rawWebSocketTLS(200, 1024); err != nil || m <= 0 {
		t.Fatalf("raw WebSocket over wss://: %v, %v", m, err)
	}
	a, b, done, err := r.pairAB(filepath.Join(r.dir, "ab"), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for _, n := range []string{a.URL, b.URL} {
		if !strings.HasPrefix(n, "wss://") {
			t.Errorf("a TLS node's URL is %s", n)
		}
	}
	st, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 || !strings.Contains(strings.Join(st.Peers[0].Capabilities, ","), "tls-exporter") {
		t.Fatalf("B's link to A is not TLS: %+v", st.Peers)
	}
	if rate, err := r.timeAB(a, b, r.Records, viaAPI); err != nil || rate <= 0 {
		t.Fatalf("replication over wss://: %v, %v", rate, err)
	}
}

// BenchmarkReplicationTransport: the replication A -> B of plait bench through the Go
// API, over ws:// and over wss:// (mutual TLS 1.3): an op is one transaction of 100
// records written on A (16 writers) until B applied it; records/s beside ns/op. Compare
// the two in one run (go test -run='^$' -bench=ReplicationTransport -count=5 ./internal/bench/).
func BenchmarkReplicationTransport(b *testing.B) {
	for _, secure := range []bool{false, true} {
		name := "ws"
		if secure {
			name = "wss"
		}
		b.Run(name, func(b *testing.B) {
			r := tlsRun(b, 0)
			r.Writers = 16
			benchAB(b, r, viaAPI, secure)
		})
	}
}
