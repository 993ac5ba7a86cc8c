package rocksstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/store/storetest"
)

// TestRecordHLCOfAnOlderDirectory opens a directory written before the record HLC was
// kept (its 'h' key deleted): the store finds the highest record HLC and keeps it.
func TestRecordHLCOfAnOlderDirectory(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	chain := storetest.Chain(t, storetest.Origin(0xa1), 3)
	for _, b := range chain {
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	want := chain[2].Records[0].HLC
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Delete(wo, []byte{pHLC}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 { // found, then read back
		s, err = Open(dir, store.Identity{}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.RecordHLC(); got != want {
			t.Errorf("RecordHLC = %d, want %d", got, want)
		}
		v, err := s.db.GetBytes(s.ro, []byte{pHLC})
		if err != nil || len(v) != 8 {
			t.Errorf("the 'h' key after open = %x, %v; want it written", v, err)
		}
		s.Close()
	}
}

// TestDamagedRecord: a record whose stored value does not decode is reported as
// store.ErrRecordDamaged, naming its table and key: an error of the entries that touch
// it (the replica's retry budget), not of the store.
func TestDamagedRecord(t *testing.T) {
	s, err := Open(t.TempDir(), storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chain := storetest.Chain(t, storetest.Origin(0xa1), 1)
	if _, err := s.Apply(chain[0]); err != nil {
		t.Fatal(err)
	}
	rec := chain[0].Records[0]
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	if err := s.db.Put(wo, append(tablePrefix(rec.Table), rec.Key...), []byte{7, 1, 2}); err != nil {
		t.Fatal(err)
	}
	_, found, err := s.Get(rec.Table, rec.Key)
	if found || !errors.Is(err, store.ErrRecordDamaged) || !strings.Contains(err.Error(), string(rec.Key)) {
		t.Errorf("Get of a damaged record: found %v, %v; want ErrRecordDamaged naming key %q", found, err, rec.Key)
	}
	if s.Failed() != nil {
		t.Errorf("a damaged record latched the store: %v", s.Failed())
	}
}
