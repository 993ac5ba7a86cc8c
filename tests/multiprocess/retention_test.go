//go:build multiprocess || scale

package multiprocess

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// dirBytes is the size of the files under dir, but for the ballast file plait-reserve: the
// free-space reserve the node keeps there (docs/contract.md §2), of a fixed size, not data.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "plait-reserve" {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// updateKeys writes total updates of keys 0 to keys-1 (round robin) as batches of
// perBatch ops, each value 16 bytes.
func (p *proc) updateKeys(total, keys, perBatch int) {
	p.t.Helper()
	client := &http.Client{Timeout: time.Minute}
	for done := 0; done < total; done += perBatch {
		var body bytes.Buffer
		body.WriteString(`{"ops":[`)
		for j := range perBatch {
			if j > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"op":"put","key":"key-%03d","value":"%016d"}`, (done+j)%keys, done+j)
		}
		body.WriteString(`]}`)
		resp, err := client.Post("http://"+p.HTTP+"/v1/tables/t/batch", "application/json", &body)
		if err != nil {
			p.t.Fatalf("%s: batch: %v", p.Name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			p.t.Fatalf("%s: batch: %s", p.Name, resp.Status)
		}
	}
}

// TestRetentionBoundsTheDataDirectory: 1,000,000 updates of 100 keys on a node with a
// 1 MiB --retain-bytes, replicated to a second node with the same bound, leave both data
// directories bounded (the logs purged, the purged ranges compacted); both hold the same
// records and pass plait check.
func TestRetentionBoundsTheDataDirectory(t *testing.T) {
	const bound = 1 << 20
	retain := []string{"--retain-bytes", strconv.Itoa(bound), "--sync", "none"}
	a := serve(t, "A", retain...)
	b := serve(t, "B", append([]string{"--peer", a.PeerFlag()}, retain...)...)
	waitFor(t, "B connected to A", 20*time.Second, func() bool { return b.connected("A") })
	const updates, perBatch = 1_000_000, 1000
	a.updateKeys(updates, 100, perBatch)
	txns := uint64(updates / perBatch)
	waitFor(t, "B applied every batch", 2*time.Minute, func() bool { return b.origin("A").AppliedSeq == txns })
	for _, p := range []*proc{a, b} {
		waitFor(t, p.Name+" within its retention bound", time.Minute, func() bool {
			o := p.origin("A")
			return o.LogBytes <= bound && o.FloorSeq > 0 && p.status().Counters.EntriesPurged > 0
		})
	}
	if da, db := a.digest("t"), b.digest("t"); da != db {
		t.Fatalf("digests differ: %s %s", da, db)
	}
	a.stop()
	b.stop()
	for _, p := range []*proc{a, b} {
		size := dirBytes(t, p.DataDir)
		t.Logf("%s: data directory %d bytes after %d updates of 100 keys", p.Name, size, updates)
		// Unbounded (retention's defaults), the same updates leave about 34 MB here; with the
		// bound, about 0.3 MB.
		if size > 8<<20 {
			t.Errorf("%s: the data directory holds %d bytes; retention should have kept it near %d of logs", p.Name, size, bound)
		}
		p.check()
	}
}

// TestRetentionPurgedAnswer: a node that stays away past --retain-hold while its peer's
// logs purge by --retain-age comes back below the floor of the peer's own origin. A
// version-2 node is answered purged, which it shows as its last error, and which the peer
// counts; a version-3 node is answered PURGED on its channel of the origin (it subscribes to
// a peer's own origin at once, before the peer's heads tell the floor), keeps its
// connection, and, with the peer serving no copies (--max-copies 0), shows the origin with
// no source and its lag.
func TestRetentionPurgedAnswer(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
	}{{"version 2", []string{"--protocol-max", "2"}}, {"version 3", nil}} {
		t.Run(c.name, func(t *testing.T) {
			a := serve(t, "A", "--retain-age", "1s", "--retain-hold", "2s", "--max-copies", "0")
			b := serve(t, "B", append([]string{"--peer", a.PeerFlag()}, c.extra...)...)
			waitFor(t, "B connected to A", 20*time.Second, func() bool { return b.connected("A") })
			a.put("t", "k1", "v1")
			waitFor(t, "B applied A's first write", 20*time.Second, func() bool { return b.origin("A").AppliedSeq == 1 })
			b.stop()
			for i := 2; i <= 5; i++ {
				a.put("t", fmt.Sprint("k", i), "v")
			}
			waitFor(t, "A purged its log past B's position", 30*time.Second, func() bool { return a.origin("A").FloorSeq == 4 })
			b.start()
			if c.extra != nil {
				waitFor(t, "A answered B purged", 30*time.Second, func() bool { return a.status().Counters.PurgedAnswers > 0 })
				waitFor(t, "B shows the purged answer", 30*time.Second, func() bool {
					for _, p := range b.status().Peers {
						if p.Name == "A" && p.LastError != nil && p.LastError.Code == "purged" && p.LastError.Class == "unsupported" {
							return true
						}
					}
					return false
				})
			} else {
				// A's heads may reach B before its answer purged does: B drops A as the
				// source only on the answer, so both are waited for.
				waitFor(t, "B connected to A again, seeing A's head, with no source and a lag of 4", 30*time.Second, func() bool {
					o := b.origin("A")
					return b.connected("A") && o.HeadSeq == 5 && o.SourcePeer == "" && o.LagSeq == 4
				})
				if got := a.status().Counters.PurgedAnswers; got != 1 {
					t.Errorf("A answered purged %d times, want 1 (a PURGED, then B knows the floor)", got)
				}
				for _, p := range b.status().Peers {
					if p.Name == "A" && p.LastError != nil && p.LastError.Code == "purged" {
						t.Errorf("B's connection to A closed with purged; version 3 answers on the channel")
					}
				}
			}
			if got := b.origin("A").AppliedSeq; got != 1 {
				t.Errorf("B applied A up to %d, want 1: nothing below a floor is streamed", got)
			}
		})
	}
}
