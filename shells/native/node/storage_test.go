package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// defaultReserve is --storage-reserve 0 on a file system of 128 MiB or more
// (docs/contract.md §2.1), written out rather than read from node.DefaultStorageReserve, so
// that a default that drifts, to 0 above all, fails here.
const defaultReserve = 16 << 20

// fakeFS stands for the data directory's file system: its free bytes and size, set by the
// test, so that the free-space guard trips without filling a disk (no tmpfs, no root).
type fakeFS struct {
	avail, size atomic.Uint64
	calls       atomic.Int64 // statfs calls, for the guard's count
}

func (f *fakeFS) statfs() (uint64, uint64, error) {
	f.calls.Add(1)
	return f.avail.Load(), f.size.Load(), nil
}

// fakeClock is the storage recovery's clock, moved by the test only.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func startOnFS(t *testing.T, fs *fakeFS, clock *fakeClock, reserve int64) *testNode {
	t.Helper()
	return startOnFSWith(t, fs, clock, node.Config{StorageReserve: reserve})
}

// startOnFSWith starts node A on fs (and clock, when not nil) with cfg's storage settings.
func startOnFSWith(t *testing.T, fs *fakeFS, clock *fakeClock, cfg node.Config) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name, cfg.DataDir, cfg.Listener = "A", t.TempDir(), l
	cfg.Secret = []byte("node test secret of enough bytes")
	cfg = node.WithFreeSpace(cfg, fs.statfs)
	if clock != nil {
		cfg = node.WithStorageClock(cfg, clock.Now)
	}
	return run(t, cfg, "ws://")
}

func put(n *testNode, key string) error {
	_, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(key), Value: []byte("v")}})
	return err
}

func storageOf(t *testing.T, n *testNode) replica.StorageStatus {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st.Node.Storage
}

// TestFreeSpaceGuardDefaultReserve: with --storage-reserve 0 (the default) the guard is on,
// at 16 MiB, or an eighth of a file system smaller than 128 MiB, or 16 MiB when the size
// is not known: a write that meets one byte less free is refused storage-full, one that
// meets the reserve exactly is taken. With -1 there is no guard. The file system is
// simulated (no root, no tmpfs).
func TestFreeSpaceGuardDefaultReserve(t *testing.T) {
	for _, c := range []struct {
		name    string
		reserve int64  // --storage-reserve
		size    uint64 // the file system's size
		want    uint64 // the reserve in effect (0: no guard)
	}{
		{"a large file system", 0, 1 << 40, defaultReserve},
		{"at 128 MiB", 0, 128 << 20, defaultReserve},
		{"a 64 MiB file system", 0, 64 << 20, 8 << 20},
		{"a size not known", 0, 0, defaultReserve},
		{"a reserve given", 1 << 20, 1 << 40, 1 << 20},
		{"no guard", -1, 1 << 40, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := &fakeFS{}
			fs.size.Store(c.size)
			fs.avail.Store(c.want)
			n := startOnFS(t, fs, nil, c.reserve)
			if err := put(n, "at the reserve"); err != nil {
				t.Fatalf("a write with the reserve free (%d bytes): %v", c.want, err)
			}
			if c.want == 0 {
				fs.avail.Store(0)
				if err := put(n, "nothing free"); err != nil {
					t.Fatalf("a write with no guard and nothing free: %v", err)
				}
				if s := storageOf(t, n); s.Degraded {
					t.Fatalf("degraded with no guard: %+v", s)
				}
				return
			}
			fs.avail.Store(c.want - 1)
			var se *store.StorageError
			if err := put(n, "one byte short"); !errors.As(err, &se) || se.Code != wire.CodeStorageFull {
				t.Fatalf("a write with %d bytes free, one below the reserve: %v; want storage-full", c.want-1, err)
			}
			s := storageOf(t, n)
			if want := fmt.Sprintf("below the reserve of %d", c.want); !s.Degraded || s.Code != wire.CodeStorageFull || !strings.Contains(s.Message, want) {
				t.Errorf("storage %+v; want degraded storage-full, %q", s, want)
			}
		})
	}
}

// TestStorageRecoveryBacksOff: while too little space stays free, the recovery looks at
// the free space 1 s after the node degraded, then 2 s, 4 s, 8 s, 16 s after the attempt
// before, and every 30 s from then on (docs/contract.md §2.2), each attempt counted in
// node.storage.retries; once three times the reserve is free the next attempt reopens
// the store, and retries is 0 again. The recovery's clock is the test's: nothing sleeps.
func TestStorageRecoveryBacksOff(t *testing.T) {
	fs := &fakeFS{}
	fs.size.Store(1 << 40)
	fs.avail.Store(1 << 30)
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := startOnFS(t, fs, clock, 0)
	if err := put(n, "k1"); err != nil {
		t.Fatal(err)
	}
	fs.avail.Store(defaultReserve - 1)
	clock.advance(node.DefaultFreeSpaceEvery) // the guard's last measure has aged out
	if err := put(n, "k2"); err == nil {
		t.Fatal("a write below the reserve was taken")
	}
	degradedAt := clock.Now()
	if s := storageOf(t, n); !s.Degraded || s.Retries != 0 {
		t.Fatalf("storage after the guard tripped: %+v; want degraded, 0 retries", s)
	}
	// The loop looks at the schedule after each input that is no read: a refused write runs
	// it at the clock's time (the loop's own timer would wait for the real clock), then a
	// status reads what it did.
	look := func() replica.StorageStatus {
		_ = put(n, "poke")
		return storageOf(t, n)
	}
	const step = 250 * time.Millisecond
	var at []time.Duration // when each attempt was, after the degradation
	for clock.Now().Sub(degradedAt) < 95*time.Second {
		clock.advance(step)
		s := look()
		if !s.Degraded {
			t.Fatalf("recovered with too little free: %+v", s)
		}
		switch {
		case s.Retries == uint64(len(at))+1:
			at = append(at, clock.Now().Sub(degradedAt))
		case s.Retries != uint64(len(at)):
			t.Fatalf("retries %d at %v after degrading, after %d attempts seen: more than one attempt in %v",
				s.Retries, clock.Now().Sub(degradedAt), len(at), step)
		}
	}
	if len(at) == 0 {
		t.Fatalf("node.storage.retries stayed 0 through %v of degraded storage with too little free", clock.Now().Sub(degradedAt))
	}
	var gaps []time.Duration
	for i, a := range at {
		if i == 0 {
			gaps = append(gaps, a)
		} else {
			gaps = append(gaps, a-at[i-1])
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if fmt.Sprint(gaps) != fmt.Sprint(want) {
		t.Fatalf("the recovery's attempts came %v apart (at %v after degrading); want %v", gaps, at, want)
	}
	// Space comes back: the next attempt, 30 s after the last, reopens the store.
	fs.avail.Store(3 * defaultReserve)
	last := at[len(at)-1]
	for clock.Now().Sub(degradedAt) < last+30*time.Second-step {
		clock.advance(step)
		if s := look(); !s.Degraded {
			t.Fatalf("recovered %v after the last attempt, before the next was due (30 s)", clock.Now().Sub(degradedAt)-last)
		}
	}
	clock.advance(step)
	waitFor(t, "the store reopened", func() bool { return !look().Degraded })
	if s := storageOf(t, n); s.Retries != 0 || s.Code != "" {
		t.Errorf("storage after the recovery: %+v; want ok and 0 retries", s)
	}
	if err := put(n, "k3"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
}

// TestFreeSpaceGuardCountsWrites: the guard measures the free space (statfs) again only
// when its last measure no longer holds: FreeSpaceEvery after it, once FreeSpaceBytes
// were written since, or once what was written since, counted twice, could have brought
// the free space to the reserve; between, inputs cost no system call. Space another
// process takes is noticed within FreeSpaceEvery.
func TestFreeSpaceGuardCountsWrites(t *testing.T) {
	const reserve = 1 << 20
	const every, bytes = 50 * time.Millisecond, 64 << 10
	fs := &fakeFS{}
	fs.size.Store(1 << 40)
	fs.avail.Store(1 << 30)
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := startOnFSWith(t, fs, clock, node.Config{StorageReserve: reserve, FreeSpaceEvery: every, FreeSpaceBytes: bytes})
	value := func(n *testNode, key string, size int) error {
		_, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(key), Value: make([]byte, size)}})
		return err
	}
	if err := put(n, "first"); err != nil {
		t.Fatal(err)
	}
	calls := fs.calls.Load()
	for i := range 20 {
		if err := put(n, fmt.Sprint("small-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fs.calls.Load() - calls; got != 0 {
		t.Errorf("20 small writes within %v of the last measure: %d statfs; want 0", every, got)
	}
	clock.advance(every - time.Nanosecond)
	_ = put(n, "just before")
	if got := fs.calls.Load() - calls; got != 0 {
		t.Errorf("a write 1 ns before the measure ages out: %d statfs; want 0", got)
	}
	clock.advance(time.Nanosecond)
	_ = put(n, "at the age")
	if got := fs.calls.Load() - calls; got != 1 {
		t.Errorf("a write as the measure ages out: %d statfs; want 1", got)
	}

	// FreeSpaceBytes written since the last measure: the next input measures again. A put
	// writes its value twice (the record, and the log entry that carries it) and a few
	// hundred bytes more.
	calls = fs.calls.Load()
	for i := range 3 {
		if err := value(n, fmt.Sprint("eighth-", i), bytes/8); err != nil {
			t.Fatal(err)
		}
	}
	if got := fs.calls.Load() - calls; got != 0 {
		t.Errorf("writes of about %d bytes in all, under %d: %d statfs; want 0", 3*(2*bytes/8+300), bytes, got)
	}
	_ = value(n, "past the bytes", bytes/8)
	_ = put(n, "next")
	if got := fs.calls.Load() - calls; got != 1 {
		t.Errorf("after %d bytes written: %d statfs; want 1", bytes, got)
	}

	// Close to the reserve: what was written, counted twice, reaching the margin measures.
	clock.advance(every)
	fs.avail.Store(reserve + 10_000)
	_ = put(n, "measure near the reserve")
	calls = fs.calls.Load()
	_ = value(n, "within the margin", 2000) // about 4,300 bytes written, counted 8,600: under 10,000
	if got := fs.calls.Load() - calls; got != 0 {
		t.Errorf("a write within the margin above the reserve: %d statfs; want 0", got)
	}
	_ = value(n, "past the margin", 1000)
	_ = put(n, "next")
	if got := fs.calls.Load() - calls; got < 1 {
		t.Errorf("writes that may have used the margin above the reserve: %d statfs; want at least 1", got)
	}

	// Space taken by another process: noticed once the measure ages out, not before.
	clock.advance(every)
	fs.avail.Store(1 << 30)
	_ = put(n, "measure")
	fs.avail.Store(reserve - 1)
	if err := put(n, "within the age"); err != nil {
		t.Errorf("a write within %v of a measure that found room: %v", every, err)
	}
	clock.advance(every)
	var se *store.StorageError
	if err := put(n, "after the age"); !errors.As(err, &se) || se.Code != wire.CodeStorageFull {
		t.Errorf("a write %v after the last measure, one byte below the reserve free: %v; want storage-full", every, err)
	}
}

// TestStorageRecoveryReleasesSnapshots: the store reopened after degraded storage is a
// new database, so the listing's pinned snapshots of the old one are released before it
// closes: a page of one after answers ErrSnapshotExpired, and none is left open. A
// snapshot taken before the degradation serves pages while the storage is degraded
// (reads go on).
func TestStorageRecoveryReleasesSnapshots(t *testing.T) {
	fs := &fakeFS{}
	fs.size.Store(1 << 40)
	fs.avail.Store(1 << 30)
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := startOnFS(t, fs, clock, 0)
	for _, k := range []string{"k1", "k2", "k3"} {
		if err := put(n, k); err != nil {
			t.Fatal(err)
		}
	}
	first, err := n.OpenSnapshot(context.Background(), []byte("t"), nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	fs.avail.Store(defaultReserve - 1)
	clock.advance(node.DefaultFreeSpaceEvery)
	if err := put(n, "k4"); err == nil {
		t.Fatal("a write below the reserve was taken")
	}
	if p, err := n.SnapshotPage(first.ID, []byte("t"), nil, []byte("k1"), 1); err != nil || len(p.Records) != 1 || string(p.Records[0].Key) != "k2" {
		t.Fatalf("a page while degraded: %+v, %v; want k2", p, err)
	}
	fs.avail.Store(3 * defaultReserve)
	waitFor(t, "the store reopened", func() bool {
		clock.advance(time.Second)
		_ = put(n, "poke") // the loop looks at the recovery's schedule after an input that is no read
		return !storageOf(t, n).Degraded
	})
	if _, err := n.SnapshotPage(first.ID, []byte("t"), nil, []byte("k2"), 1); !errors.Is(err, node.ErrSnapshotExpired) {
		t.Errorf("a page after the store reopened: %v; want ErrSnapshotExpired", err)
	}
	if st, err := n.Snapshots(); err != nil || st.Open != 0 {
		t.Errorf("snapshots after the store reopened: %+v, %v; want none open", st, err)
	}
}

// TestStorageRecoveryKeepsTraffic: the replica a storage recovery builds takes over the
// peers' traffic totals (the metrics' plait_peer_*_total): A's count of DATA frames sent
// to B goes on from the entry sent before A degraded, it does not start again at 0.
func TestStorageRecoveryKeepsTraffic(t *testing.T) {
	fs := &fakeFS{}
	fs.size.Store(1 << 40)
	fs.avail.Store(1 << 30)
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := startOnFS(t, fs, clock, 0)
	b := start(t, "B", a)
	dataOut := func() (uint64, replica.Traffic) {
		st, err := a.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Traffic {
			if p.Name == "B" {
				return p.FramesOutByType.Of(wire.TypeData), p.Traffic
			}
		}
		return 0, replica.Traffic{}
	}
	if err := put(a, "k1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B holding A's first entry", func() bool { return origin(t, b, "A").AppliedSeq == 1 })
	waitFor(t, "A counting its DATA frame to B", func() bool { n, _ := dataOut(); return n == 1 })
	_, before := dataOut()

	fs.avail.Store(defaultReserve - 1)
	clock.advance(node.DefaultFreeSpaceEvery)
	if err := put(a, "k2"); err == nil {
		t.Fatal("a write below the reserve was taken")
	}
	fs.avail.Store(3 * defaultReserve)
	waitFor(t, "the store reopened", func() bool {
		clock.advance(time.Second)
		_ = put(a, "poke") // refused while degraded; the loop looks at the recovery's schedule after it
		return !storageOf(t, a).Degraded
	})
	_, after := dataOut()
	if after.BytesOut < before.BytesOut || after.BytesIn < before.BytesIn || after.FramesOut < before.FramesOut || after.FramesIn < before.FramesIn {
		t.Fatalf("A's traffic with B went back in the recovery: before %+v\nafter %+v", before, after)
	}
	if err := put(a, "k3"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
	seq := origin(t, a, "A").AppliedSeq // k1 and k3: the refused writes took no seq
	waitFor(t, "B holding A's entries written after the recovery", func() bool { return origin(t, b, "A").AppliedSeq == seq })
	if n, _ := dataOut(); n != seq {
		t.Errorf("A's DATA frames to B over the recovery: %d, want one per entry, %d", n, seq)
	}
}
