//go:build multiprocess || scale

package multiprocess

import (
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"plait/internal/cluster"
)

// A full disk on the real binary: node F runs on a small tmpfs, P on an ordinary data
// directory. F is written until its free-space guard degrades it (docs/design.md §18); it
// must stay up, refuse writes with 507 storage-full, serve reads and say so everywhere,
// while P goes on. Once the tmpfs grows, F recovers by itself, and the two converge with
// every acknowledged write on both.

// storageFS is the tmpfs's size, before and after it grows: the reserve on 24 MiB is an
// eighth, 3 MiB, and recovery needs three times that free, which only the grown one has.
const (
	storageFSSmall = "24m"
	storageFSLarge = "96m"
	bigValue       = 150_000 // bytes of each written value
)

// mountTmpfs mounts a tmpfs of size in a new directory of the test's and unmounts it at the
// test's end, after the processes started later are killed (cleanups run last first). It
// skips the test when it cannot mount: that needs root.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs this suite as root)")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "plait-test", dir).CombinedOutput(); err != nil {
		t.Skipf("mounting a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// serveOnTmpfs serves node name on a new tmpfs of storageFSSmall (its data directory the
// tmpfs's name subdirectory), and returns it with the tmpfs; a failed test shows the head
// of its log.
func serveOnTmpfs(t *testing.T, name string, args ...string) (*proc, string) {
	t.Helper()
	fs := mountTmpfs(t, storageFSSmall)
	p, log := serveAt(t, name, filepath.Join(fs, name), args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, logHead(log, 6000))
		}
	})
	return p, fs
}

// growTmpfs grows a tmpfs of mountTmpfs to storageFSLarge.
func growTmpfs(t *testing.T, fs string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+storageFSLarge, fs).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
}

// serveAt is serve with the data directory dataDir; it also returns the log file's path.
func serveAt(t *testing.T, name, dataDir string, args ...string) (*proc, string) {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	n, err := cluster.StartProcess(cluster.Process{Binary: binary, Name: name, DataDir: dataDir,
		Secret: secret, Args: args, Output: log})
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{Node: n, t: t, args: args}
	t.Cleanup(p.kill)
	return p, log.Name()
}

// bigVal is the value written under key i by node name: bigValue bytes of hex of a
// pseudo-random stream (RocksDB's compression leaves most of it), the key's own.
func bigVal(name string, i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(len(name))<<32|uint64(name[0])))
	raw := make([]byte, bigValue/2)
	for j := range raw {
		raw[j] = byte(rng.Uint32())
	}
	return hex.EncodeToString(raw)
}

// bigKey is the key of node name's i-th big write.
func bigKey(name string, i int) string { return fmt.Sprintf("%s-%04d", name, i) }

// tryPut writes value under key in table t and returns the status code and the body (0
// and the error when no answer came).
func (p *proc) tryPut(client *http.Client, key, value string) (int, string) {
	req, _ := http.NewRequest("PUT", "http://"+p.HTTP+"/v1/tables/t/records/"+key, strings.NewReader(value))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// logHead is a node's log for a failure's message: up to the end of the first goroutine's
// stack when the process died of a signal (the Go runtime's dump: the signal, then the
// goroutine in cgo, RocksDB's assertion just before), else its last n bytes.
func logHead(path string, n int) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if i := strings.Index(s, "\ngoroutine "); i >= 0 {
		if j := strings.Index(s[i+1:], "\ngoroutine "); j >= 0 {
			s = s[:i+1+j]
		}
	}
	return s[max(len(s)-n, 0):]
}

// metric is the line of /metrics that starts with name and a space, "" when none.
func (p *proc) metric(name string) string {
	_, body := p.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

func TestStorageFullDegradesAndRecovers(t *testing.T) {
	start := time.Now()
	p := serve(t, "P")
	f, fs := serveOnTmpfs(t, "F", "--peer", p.PeerFlag())
	waitFor(t, "F and P connected", 30*time.Second, func() bool { return f.connected("P") && p.connected("F") })
	client := &http.Client{Timeout: 30 * time.Second}
	acked := map[string]string{} // key → value, every write F or P acknowledged
	refused := fillUntilRefused(t, f, client, acked)
	refusedKey := bigKey("F", refused)
	t.Logf("F: %d writes acknowledged, the next answered 507 after %s", refused, time.Since(start).Round(time.Millisecond))
	degradedAt := time.Now()

	// F stays up and says so: healthz, a read, status, metrics; another write is refused too.
	if code, b := f.get("/healthz"); code != http.StatusOK || b != "degraded: storage-full" {
		t.Errorf("F degraded: /healthz %d %q; wanted 200 \"degraded: storage-full\"", code, b)
	}
	if code, b := f.get("/v1/tables/t/records/" + bigKey("F", 0)); code != http.StatusOK || b != bigVal("F", 0) {
		t.Errorf("F degraded: reading its first write: %d, %d bytes; wanted 200 and its value", code, len(b))
	}
	if st := f.status().Node.Storage; st.State != "degraded" || st.Code != "storage-full" || st.Since == "" {
		t.Errorf("F degraded: node.storage %+v; wanted degraded, storage-full, since set", st)
	}
	if m := f.metric("plait_storage_degraded"); m != "plait_storage_degraded 1" {
		t.Errorf("F degraded: /metrics %q; wanted plait_storage_degraded 1", m)
	}
	if code, b := f.tryPut(client, "F-again", "small"); code != http.StatusInsufficientStorage {
		t.Errorf("F degraded: a small write answered %d %s; wanted 507", code, b)
	}

	// P goes on: healthy, writes, F's acknowledged writes all applied.
	for i := range 5 {
		k, v := bigKey("P", i), bigVal("P", i)
		if code, b := p.tryPut(client, k, v); code != http.StatusOK {
			t.Fatalf("P while F is degraded: write %d answered %d %s", i, code, b)
		}
		acked[k] = v
	}
	if code, b := p.get("/healthz"); code != http.StatusOK || b != "ok" {
		t.Errorf("P: /healthz %d %q while F is degraded", code, b)
	}
	if st := p.status().Node.Storage; st.State != "ok" {
		t.Errorf("P: node.storage %+v while F is degraded", st)
	}

	// Space back: F recovers by itself, at its next attempt.
	growTmpfs(t, fs)
	waitFor(t, "F recovering by itself", 45*time.Second, func() bool {
		code, b := f.get("/healthz")
		if code != http.StatusOK {
			t.Fatalf("F: /healthz %d %q while it should recover", code, b)
		}
		return b == "ok"
	})
	t.Logf("F: healthy again %s after the refusal", time.Since(degradedAt).Round(time.Millisecond))
	if st := f.status().Node.Storage; st.State != "ok" || st.Code != "" {
		t.Errorf("F recovered: node.storage %+v; wanted ok", st)
	}
	if m := f.metric("plait_storage_degraded"); m != "plait_storage_degraded 0" {
		t.Errorf("F recovered: /metrics %q; wanted plait_storage_degraded 0", m)
	}

	// Writes on both again, then convergence with every acknowledged write on both.
	for i := range 10 {
		for _, q := range []*proc{f, p} {
			k, v := bigKey(q.Name, 1000+i), bigVal(q.Name, 1000+i)
			if code, b := q.tryPut(client, k, v); code != http.StatusOK {
				t.Fatalf("%s after F recovered: write %d answered %d %s", q.Name, i, code, b)
			}
			acked[k] = v
		}
	}
	waitFor(t, "F and P converging", 30*time.Second, func() bool {
		return f.origin("P").AppliedSeq == p.origin("P").AppliedSeq && p.origin("F").AppliedSeq == f.origin("F").AppliedSeq
	})
	if df, dp := f.digest("t"), p.digest("t"); df != dp {
		t.Errorf("digests differ: F %s, P %s", df, dp)
	}
	for k, v := range acked {
		for _, q := range []*proc{f, p} {
			if code, b := q.get("/v1/tables/t/records/" + k); code != http.StatusOK || b != v {
				t.Errorf("%s: acknowledged %s reads %d, %d bytes; wanted 200 and its value", q.Name, k, code, len(b))
			}
		}
	}
	// The refused write may have reached F's store before the sync was refused (a write
	// whose answer was lost); either way both nodes agree (the digests), and it is whole.
	for _, q := range []*proc{f, p} {
		if code, b := q.get("/v1/tables/t/records/" + refusedKey); !(code == http.StatusNotFound || code == http.StatusOK && b == bigVal("F", refused)) {
			t.Errorf("%s: the refused write %s reads %d, %d bytes; wanted 404 or its whole value", q.Name, refusedKey, code, len(b))
		}
	}
	f.stop()
	f.check()
	p.stop()
	p.check()
	t.Logf("%d acknowledged writes on both; wall time %s", len(acked), time.Since(start).Round(time.Millisecond))
}

// fillUntilRefused writes big values to f until a write is refused, each acknowledged
// (kept in acked) or refused with 507 storage-full and nothing else; it returns the index
// of the refused write.
func fillUntilRefused(t *testing.T, f *proc, client *http.Client, acked map[string]string) int {
	t.Helper()
	for i := range 400 { // 400 × 150 kB is far past the 24 MiB
		k, v := bigKey(f.Name, i), bigVal(f.Name, i)
		code, b := f.tryPut(client, k, v)
		if code == http.StatusOK {
			acked[k] = v
			continue
		}
		if code != http.StatusInsufficientStorage {
			t.Fatalf("%s: write %d answered %d %s; wanted 200, or 507 storage-full once the disk fills", f.Name, i, code, b)
		}
		if !strings.Contains(b, `"code":"storage-full"`) {
			t.Errorf("%s: the refused write's answer %s; wanted the code storage-full", f.Name, b)
		}
		return i
	}
	t.Fatalf("%s: 400 writes of 150 kB on a 24 MiB tmpfs, none refused", f.Name)
	return -1
}

// TestStorageRecoveryReopenFails: a node whose store does not open again when it recovers
// from degraded storage (its CURRENT file damaged while it was degraded) stops, as the
// contract's §2.2 says: the process stays up for inspection, /healthz answers 503
// unavailable, writes are refused, and SIGTERM ends it with status 1.
func TestStorageRecoveryReopenFails(t *testing.T) {
	f, fs := serveOnTmpfs(t, "F")
	client := &http.Client{Timeout: 30 * time.Second}
	fillUntilRefused(t, f, client, map[string]string{})
	if code, b := f.get("/healthz"); code != http.StatusOK || b != "degraded: storage-full" {
		t.Fatalf("F degraded: /healthz %d %q", code, b)
	}
	// The store holds its files open; only the reopen reads CURRENT again.
	if err := os.WriteFile(filepath.Join(fs, "F", "CURRENT"), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	growTmpfs(t, fs)
	waitFor(t, "F stopping on the failed reopen", 45*time.Second, func() bool {
		code, b := f.get("/healthz")
		if code == http.StatusOK && b == "ok" {
			t.Fatal("F recovered on a store whose CURRENT file is damaged")
		}
		return code == http.StatusServiceUnavailable
	})
	if code, b := f.tryPut(client, "after", "x"); code < 500 {
		t.Errorf("F stopped: a write answered %d %s; wanted a 5xx refusal", code, b)
	}
	if err := f.Stop(); err == nil || !strings.Contains(err.Error(), "status 1") {
		t.Errorf("F stopped after a failed recovery: SIGTERM gave %v; wanted exit status 1", err)
	}
}

// TestStorageFullUnderConcurrentWrites: 64 clients write 150 kB values at once to a node on
// a small tmpfs, so that one batch of the node's loop carries several MiB, more than the
// 3 MiB reserve. Every write is acknowledged or refused with 507 and the node stays up:
// the guard runs before each input, not only before a batch (with the check per batch,
// RocksDB met ENOSPC inside the batch and aborted the process).
func TestStorageFullUnderConcurrentWrites(t *testing.T) {
	f, _ := serveOnTmpfs(t, "F")
	client := &http.Client{Timeout: 30 * time.Second}
	const writers = 64
	var mu sync.Mutex
	acked, refused := map[string]string{}, 0
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 { // 64 × 100 × 150 kB is far past the 24 MiB
				k, v := bigKey("F", w*1000+i), bigVal("F", w*1000+i)
				code, b := f.tryPut(client, k, v)
				mu.Lock()
				switch code {
				case http.StatusOK:
					acked[k] = v
				case http.StatusInsufficientStorage:
					refused++
				default:
					t.Errorf("F: writer %d, write %d answered %d %s; wanted 200 or 507", w, i, code, b)
				}
				mu.Unlock()
				if code != http.StatusOK {
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("F: %d writes acknowledged, %d refused with 507", len(acked), refused)
	if refused != writers {
		t.Errorf("F: %d writers saw 507; wanted all %d", refused, writers)
	}
	if code, b := f.get("/healthz"); code != http.StatusOK || b != "degraded: storage-full" {
		t.Fatalf("F: /healthz %d %q; wanted 200 \"degraded: storage-full\"", code, b)
	}
	for k, v := range acked {
		if code, b := f.get("/v1/tables/t/records/" + k); code != http.StatusOK || b != v {
			t.Errorf("F: acknowledged %s reads %d, %d bytes", k, code, len(b))
		}
	}
	f.stop()
	f.check()
}
