package bench

import (
	"path/filepath"
	"testing"

	"plait/protocol/lock"
	"plait/shells/native/node"
)

// TestLockCycles: the lock measures' cycles on a mesh of 3 run through package client
// (acquire, read and write under the token, release) and count every cycle's write once
// (lockCycles fails on a count written twice); the times are not judged.
func TestLockCycles(t *testing.T) {
	r := &run{Config: Config{LockCycles: 3, Sync: node.SyncOrigin}, dir: t.TempDir(), locks: lock.Config{MaxTTL: lockTTL}}
	res, err := r.lockMesh(filepath.Join(r.dir, "locks-3"), 3)
	if err != nil {
		t.Fatal(err)
	}
	for what, tm := range map[string]lockTiming{"through the home": res.viaHome, "through another": res.viaOther, "contended": res.contend} {
		if tm.acquire[0] <= 0 || tm.cycle[0] < tm.acquire[0] {
			t.Errorf("%s: %+v", what, tm)
		}
	}
}
