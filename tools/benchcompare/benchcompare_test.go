package main

import (
	"bytes"
	"strings"
	"testing"
)

// An older build's table (its HTTP row named before CBOR came) and today's.
const (
	older = `plait bench: 16 B keys, 100 B values, 100 records per transaction, --sync origin, 16 writers

| measure | result | ratio |
|---|---|---|
| raw RocksDB, 200000 records in batches of 100, no fsync (the limit) | 800000 records/s | 1 |
| replication A -> B, 200000 records written through the Go API | 160000 records/s | 0.20 of raw RocksDB |
| replication A -> B, 200000 records written as HTTP batches | 100000 records/s | 0.13 of raw RocksDB |
| write -> visible on B (one hop), p50 / p99 of 1000 single writes | 500µs / 900µs |  |
| receiver RSS when stopped / peak after it resumed and caught up | 40 MiB / 60 MiB |  |
`
	today = `| measure | result | ratio |
|---|---|---|
| raw RocksDB, 200000 records in batches of 100, no fsync (the limit) | 700000 records/s | 1 |
| replication A -> B, 200000 records written through the Go API | 160000 records/s | 0.23 of raw RocksDB |
| replication A -> B, 200000 records written as HTTP batches (JSON) | 88000 records/s | 0.13 of raw RocksDB |
| replication A -> B, the same as HTTP batches of CBOR (application/cbor) | 90000 records/s | 0.13 of raw RocksDB |
| write -> visible on B (one hop), p50 / p99 of 1000 single writes | 600µs / 1.2ms |  |
| an empty node's catch-up by that base copy, start to caught up | 2.50 s |  |
| node heap and stacks grown by 100 idle change feeds, after a GC | +2.35 MiB | 24.1 KiB a feed |
`
)

func mustParse(t *testing.T, s string) table {
	t.Helper()
	tb, err := parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestParse: rates, times and sizes are read with their direction, a p50 / p99 pair as two
// measures, other pairs numbered, and numbers in names set aside.
func TestParse(t *testing.T) {
	tb := mustParse(t, older)
	for k, want := range map[string]value{
		"replication a -> b, N records written through the go api":            {160000, true, "records/s"},
		"write -> visible on b (one hop), p99 of N single writes":             {900e-6, false, "s"},
		"receiver rss when stopped / peak after it resumed and caught up (2)": {60, false, "MiB"},
		"replication a -> b, N records written as http batches (json)":        {100000, true, "records/s"},
	} {
		if got, ok := tb[k]; !ok || got.higher != want.higher || got.unit != want.unit || got.n < want.n*0.999 || got.n > want.n*1.001 {
			t.Errorf("%q: %+v (present %v); want %+v", k, got, ok, want)
		}
	}
	if v := tb["replication a -> b, N records written through the go api (of raw rocksdb)"]; v.n != 0.20 || !v.higher {
		t.Errorf("the Go API's ratio to raw RocksDB: %+v; want 0.20, higher better", v)
	}
	if len(tb) != 9 {
		t.Errorf("%d measures read, want 9 (two of them ratios to raw RocksDB): %v", len(tb), tb)
	}
}

// TestCompare: measures pair across builds (the renamed HTTP row by its alias), the
// medians and their ratio say better or worse by each measure's direction, the per-round
// ratios' range is printed, and a measure one build lacks is absent there.
func TestCompare(t *testing.T) {
	var out bytes.Buffer
	compare(&out, "0.3", []table{mustParse(t, older), mustParse(t, older)}, []table{mustParse(t, today), mustParse(t, today)})
	got := out.String()
	for _, want := range []string{
		"| replication a -> b, N records written as http batches (json) | 100000 records/s | 88000 records/s | 0.88 | 0.88 – 0.88 | worse |",
		"| write -> visible on b (one hop), p50 of N single writes | 500 µs | 600 µs | 1.20 | 1.20 – 1.20 | worse |",
		"| replication a -> b, the same as http batches of cbor (application/cbor) | absent | 90000 records/s | | | |",
		"| receiver rss when stopped / peak after it resumed and caught up (1) | 40 MiB | absent | | | |",
		"| node heap and stacks grown by N idle change feeds, after a gc | absent | 2.35 MiB | | | |", // a few MiB to two decimals
		"| replication a -> b, N records written through the go api | 160000 records/s | 160000 records/s | 1.00 | 1.00 – 1.00 | same |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the comparison lacks\n%s\nin\n%s", want, got)
		}
	}
}
