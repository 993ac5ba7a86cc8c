package storetest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"plait/protocol/store"
)

// controlKeys are the control documents dump shows.
var controlKeys = []string{"cluster-map", "members", "empty"}

func control(t *testing.T, s store.Store, key string) []byte {
	t.Helper()
	v, err := s.Control(key)
	must(t, err)
	return v
}

// testControl: a control document is absent (nil) until written, is read back as written,
// is replaced whole by the next write, is the reader's and the writer's own copy, and an
// empty one is present; writing one changes nothing else the store shows.
func testControl(t *testing.T, s store.Store) {
	if v := control(t, s, "cluster-map"); v != nil {
		t.Errorf("Control of a key never written = %q, want nil", v)
	}
	c := &chain{origin: originA}
	apply(t, s, c.next(t, put("t", "k", "v"), put("u", "k", "w")), 1)
	apply(t, s, c.next(t, del("t", "k")), 2)
	before := dumpData(t, s, originA)
	_, sumBefore, err := store.Digest(s, []byte("t"))
	must(t, err)

	doc := []byte(`{"generation":1,"nodes":[{"name":"A"}]}`)
	must(t, s.PutControl("cluster-map", doc))
	must(t, s.PutControl("members", []byte("A=4")))
	doc[0] = 'X' // the caller's buffer, reused
	if v := control(t, s, "cluster-map"); string(v) != `{"generation":1,"nodes":[{"name":"A"}]}` {
		t.Errorf("Control(cluster-map) = %q, want the document as written", v)
	} else {
		v[0] = 'Y' // the reader's copy
	}
	if v := control(t, s, "cluster-map"); string(v) != `{"generation":1,"nodes":[{"name":"A"}]}` {
		t.Errorf("Control(cluster-map) after the caller changed its buffers = %q", v)
	}

	must(t, s.PutControl("cluster-map", []byte(`{"generation":2}`)))
	if v := control(t, s, "cluster-map"); string(v) != `{"generation":2}` {
		t.Errorf("Control(cluster-map) after a second write = %q, want the second document", v)
	}
	if v := control(t, s, "members"); string(v) != "A=4" {
		t.Errorf("Control(members) after another key's write = %q, want A=4", v)
	}
	must(t, s.PutControl("empty", nil))
	if v := control(t, s, "empty"); v == nil || len(v) != 0 {
		t.Errorf("Control of a document written empty = %#v, want an empty, non-nil slice", v)
	}

	if after := dumpData(t, s, originA); after != before {
		t.Errorf("writing control documents changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, sum, err := store.Digest(s, []byte("t")); err != nil || sum != sumBefore {
		t.Errorf("table t's digest after writing control documents = %s, %v; want %s", sum, err, sumBefore)
	}
	sn, err := s.Snapshot()
	must(t, err)
	defer sn.Release()
	if got := fmtRecords(snapshotRecords(t, sn, nil, nil)); got != fmtRecords(append(scan(t, s, "t", nil), scan(t, s, "u", nil)...)) {
		t.Errorf("a snapshot holds more than the records:\n%s", got)
	}
	if problems, err := store.Audit(s, 0); err != nil || len(problems) != 0 {
		t.Errorf("Audit after writing control documents = %q, %v", problems, err)
	}
}

// testControlBounds: keys of 1 to 64 bytes of [a-z0-9-] and documents of at most
// MaxControlValue bytes are taken; anything else is refused with ErrBadControl, writing
// nothing.
func testControlBounds(t *testing.T, s store.Store) {
	key64 := strings.Repeat("k", store.MaxControlKey)
	for _, key := range []string{"a", "0-9", key64, "abcdefghijklmnopqrstuvwxyz-0123456789"} {
		must(t, s.PutControl(key, []byte(key)))
		if v := control(t, s, key); string(v) != key {
			t.Errorf("Control(%q) = %q", key, v)
		}
	}
	for _, key := range []string{"", key64 + "k", "Map", "a_b", "a.b", "a/b", "a b", "é", "a\x00"} {
		if err := s.PutControl(key, []byte("x")); !errors.Is(err, store.ErrBadControl) {
			t.Errorf("PutControl(%q) = %v, want ErrBadControl", key, err)
		}
		if v, err := s.Control(key); !errors.Is(err, store.ErrBadControl) || v != nil {
			t.Errorf("Control(%q) = %q, %v; want ErrBadControl", key, v, err)
		}
	}
	most := bytes.Repeat([]byte{0xa5}, store.MaxControlValue)
	must(t, s.PutControl("big", most))
	if v := control(t, s, "big"); !bytes.Equal(v, most) {
		t.Errorf("Control(big) = %d bytes, want the %d written", len(v), len(most))
	}
	if err := s.PutControl("big", append(most, 0)); !errors.Is(err, store.ErrBadControl) {
		t.Errorf("PutControl of %d bytes = %v, want ErrBadControl", len(most)+1, err)
	}
	if v := control(t, s, "big"); !bytes.Equal(v, most) {
		t.Errorf("Control(big) after a refused write = %d bytes, want the %d written before", len(v), len(most))
	}
}

// testControlOutsideRecords: what the records and logs go through (applies, a purge, a
// repair, dropped tombstones, a base copy's chunk and end, a reseed) leaves the control
// documents as they were.
func testControlOutsideRecords(t *testing.T, s store.Store) {
	must(t, s.PutControl("cluster-map", []byte(`{"generation":3}`)))
	must(t, s.PutControl("members", []byte("A=4")))
	reseedable(t, s) // applies and a purge
	must(t, s.Repair([]store.Record{rec("t", "k1", "fixed", 1<<61, originB)}))
	must(t, s.DropTombstones([]store.Record{tomb("t", "nothing", 1, originA)}))
	must(t, s.ApplyCopy(&store.CopyBatch{Records: []store.Record{rec("u", "k", "v", 5, originC)},
		Deletes: []store.Record{{Table: []byte("t"), Key: []byte("other")}}, State: store.CopyState{Peer: "P"}}))
	must(t, s.EndCopy(&store.CopyEnd{}))
	_, err := store.ReseedStore(s, newOrigin)
	must(t, err)
	if v := control(t, s, "cluster-map"); string(v) != `{"generation":3}` {
		t.Errorf("Control(cluster-map) after the records' and logs' writes = %q", v)
	}
	if v := control(t, s, "members"); string(v) != "A=4" {
		t.Errorf("Control(members) after the records' and logs' writes = %q", v)
	}
}
