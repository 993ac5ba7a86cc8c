package store_test

import (
	"strings"
	"testing"

	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/store/storetest"
	"plait/protocol/wire"
)

// TestAudit: a store written by the rules passes; records that are not what
// last-writer-wins makes of the logs are reported.
func TestAudit(t *testing.T) {
	build := func(t *testing.T, mutate func(b *store.Batch, i int)) *memstore.Store {
		t.Helper()
		s := memstore.New(storetest.Identity)
		a, b := storetest.Chain(t, storetest.Origin(1), 3), storetest.Chain(t, storetest.Origin(2), 3)
		for i, batch := range []*store.Batch{a[0], b[0], a[1], b[1], a[2], b[2]} {
			if mutate != nil {
				mutate(batch, i)
			}
			if _, err := s.Apply(batch); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	if problems, err := store.Audit(build(t, nil), 0); err != nil || len(problems) != 0 {
		t.Fatalf("a clean store: %v, %v", problems, err)
	}
	// Purged: origin 1 to 2 (positions 1 and 3, the arrival floor at 3: origin 2's first
	// entry stays in its log below it). The records origin 1's purged entries wrote stand.
	purged := build(t, nil)
	if err := purged.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: storetest.Origin(1), To: 2}}, ArrivalFloor: 3}); err != nil {
		t.Fatal(err)
	}
	if problems, err := store.Audit(purged, 0); err != nil || len(problems) != 0 {
		t.Fatalf("a clean store with a purged log: %v, %v", problems, err)
	}
	for _, c := range []struct {
		name   string
		mutate func(b *store.Batch, i int)
		want   string
	}{
		{"a value no log wrote", func(b *store.Batch, i int) {
			if i == 2 {
				b.Records[0].Value = []byte("forged")
			}
		}, "is not what last-writer-wins makes"},
		{"a record no log wrote", func(b *store.Batch, i int) {
			if i == 3 {
				extra := b.Records[0]
				extra.Key = []byte("extra")
				b.Records = append(b.Records, extra)
			}
		}, "is in no log"},
		{"a write not applied", func(b *store.Batch, i int) {
			if i == 4 {
				b.Records = nil
			}
		}, "records that the logs write are missing"},
	} {
		problems, err := store.Audit(build(t, c.mutate), 0)
		if err != nil || len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), c.want) {
			t.Errorf("%s: %v, %v; want a problem saying %q", c.name, problems, err, c.want)
		}
	}
}

// TestAuditLeafWrites: the audit replays a hub's format-3 entries by their leaf blocks (the
// conflict identity) and explains each record by the entry that delivered it (its via):
// a store written by the rules passes, with the hub's log whole or purged; a leaf record
// that the hub's kept log does not write, a forged leaf value, and a leaf write recorded
// with the hub's identity are reported.
func TestAuditLeafWrites(t *testing.T) {
	hub, leaf := storetest.Origin(0xd4), storetest.Origin(0x1e)
	build := func(t *testing.T, mutate func(b *store.Batch, i int)) *memstore.Store {
		t.Helper()
		s := memstore.New(storetest.Identity)
		h, a := storetest.LeafChain(t, hub, leaf, 3), storetest.Chain(t, storetest.Origin(1), 2)
		for i, batch := range []*store.Batch{h[0], a[0], h[1], a[1], h[2]} {
			if mutate != nil {
				mutate(batch, i)
			}
			if _, err := s.Apply(batch); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	if problems, err := store.Audit(build(t, nil), 0); err != nil || len(problems) != 0 {
		t.Fatalf("a clean store with leaf writes: %v, %v", problems, err)
	}
	purged := build(t, nil)
	if err := purged.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: hub, To: 2}}, ArrivalFloor: 3}); err != nil {
		t.Fatal(err)
	}
	if problems, err := store.Audit(purged, 0); err != nil || len(problems) != 0 {
		t.Fatalf("a clean store with the hub's log purged: %v, %v", problems, err)
	}
	for _, c := range []struct {
		name   string
		mutate func(b *store.Batch, i int)
		want   string
	}{
		{"a leaf record the hub's log does not write", func(b *store.Batch, i int) {
			if i == 2 {
				extra := b.Records[0]
				extra.Key = []byte("extra")
				b.Records = append(b.Records, extra)
			}
		}, "record t/\"extra\" is in no log"},
		{"a leaf value no log wrote", func(b *store.Batch, i int) {
			if i == 2 {
				b.Records[0].Value = []byte("forged")
			}
		}, "is not what last-writer-wins makes"},
		{"a leaf write recorded with the hub's identity", func(b *store.Batch, i int) {
			if i == 2 {
				r := &b.Records[0]
				r.Origin, r.HLC, r.Via, r.ViaHLC = r.Via, r.ViaHLC, wire.OriginID{}, 0
			}
		}, "is not what last-writer-wins makes"},
	} {
		problems, err := store.Audit(build(t, c.mutate), 0)
		if err != nil || len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), c.want) {
			t.Errorf("%s: %v, %v; want a problem saying %q", c.name, problems, err, c.want)
		}
	}
}
