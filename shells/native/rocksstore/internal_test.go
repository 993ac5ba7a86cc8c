package rocksstore

import (
	"testing"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/replica"
	"plait/protocol/replica/storetest"
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
		s, err = Open(dir, replica.Identity{}, Options{})
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
