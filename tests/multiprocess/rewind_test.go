//go:build multiprocess || scale

package multiprocess

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"plait/shells/native/httpapi"
)

// putCode writes one record and returns the answer's status and error code ("" for 200).
func (p *proc) putCode(key, value string) (int, string) {
	p.t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+p.HTTP+"/v1/tables/t/records/"+key, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s: put: %v", p.Name, err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body) // a 200's body has no error
	return resp.StatusCode, body.Error.Code
}

// originByID is p's status of the origin with that hex id.
func originByID(st httpapi.StatusDoc, id string) (httpapi.OriginDoc, bool) {
	for _, o := range st.Origins {
		if o.Origin == id {
			return o, true
		}
	}
	return httpapi.OriginDoc{}, false
}

// TestRestoredBackupReseed: A's data directory, copied while A is stopped, is restored after
// A wrote more that B and C hold. Started, A is found rewound: its writes are refused with
// 503 origin-rewound, node.rewound names the peer, B shows A rewound and keeps A's entries.
// Stopped, `plait reseed` gives A a new origin id; started again, A converges with B and C:
// equal digests, every acknowledged record present, the old origin's entries streamed back
// to A, and A writes again.
func TestRestoredBackupReseed(t *testing.T) {
	a := serve(t, "A")
	b := serve(t, "B", "--peer", a.PeerFlag())
	c := serve(t, "C", "--peer", b.PeerFlag())
	acked := map[string]string{}
	put := func(p *proc, k, v string) {
		p.put("t", k, v)
		acked[k] = v
	}
	for i := range 20 {
		put(a, fmt.Sprint("a", i), "v")
		put(b, fmt.Sprint("b", i), "v")
	}
	waitFor(t, "C holding A's 20", 30*time.Second, func() bool { return c.origin("A").AppliedSeq == 20 })

	a.stop()
	backup := t.TempDir() + "/a-backup"
	if out, err := exec.Command("cp", "-a", a.DataDir, backup).CombinedOutput(); err != nil {
		t.Fatalf("copying A's directory: %v\n%s", err, out)
	}
	a.start()
	for i := range 5 { // what the backup misses (10 entries): B and C hold it
		put(a, fmt.Sprint("late", i), "old timeline")
		put(a, "b3", fmt.Sprint("A's late ", i))
	}
	waitFor(t, "C holding A's 30", 30*time.Second, func() bool { return c.origin("A").AppliedSeq == 30 })

	a.stop()
	if out, err := exec.Command("sh", "-c", `rm -rf "$1" && cp -a "$2" "$1"`, "restore", a.DataDir, backup).CombinedOutput(); err != nil {
		t.Fatalf("restoring A's directory: %v\n%s", err, out)
	}
	a.start()
	oldID := a.status().Node.Origin
	// A write made at once may land before B's position reaches A (it is kept, re-issued by
	// the reseed) or after (refused): either way nothing acknowledged may be lost.
	if code, _ := a.putCode("restored0", "new timeline"); code == http.StatusOK {
		acked["restored0"] = "new timeline"
	}
	waitFor(t, "A found rewound", 30*time.Second, func() bool { return a.status().Node.Rewound != nil })
	rw := a.status().Node.Rewound
	if rw.Peer != "B" || rw.Seq != 30 || rw.How == "" {
		t.Errorf("A's node.rewound = %+v, want peer B at seq 30", rw)
	}
	if code, ec := a.putCode("refused", "x"); code != http.StatusServiceUnavailable || ec != "origin-rewound" {
		t.Errorf("A's write while rewound: %d %q, want 503 origin-rewound", code, ec)
	}
	waitFor(t, "B showing A rewound", 30*time.Second, func() bool {
		o, _ := originByID(b.status(), oldID)
		return o.Rewound
	})
	if o, _ := originByID(b.status(), oldID); o.AppliedSeq != 30 || o.Diverged {
		t.Errorf("B's status of A: %+v, want its 30 entries kept, not diverged", o)
	}
	if d := b.status().Counters.Divergences; d != 0 {
		t.Errorf("B counted %d divergences", d)
	}

	a.stop()
	out, err := exec.Command(binary, "reseed", "--data", a.DataDir).CombinedOutput()
	if err != nil {
		t.Fatalf("plait reseed: %v\n%s", err, out)
	}
	t.Logf("plait reseed: %s", out)
	a.check()
	a.start()
	if st := a.status(); st.Node.Origin == oldID || st.Node.Rewound != nil {
		t.Fatalf("A after the reseed: origin %s (old %s), rewound %+v", st.Node.Origin, oldID, st.Node.Rewound)
	}
	put(a, "after-reseed", "v")
	waitFor(t, "equal digests", 30*time.Second, func() bool {
		da := a.digest("t")
		return da == b.digest("t") && da == c.digest("t")
	})
	if o, _ := originByID(a.status(), oldID); o.AppliedSeq != 30 {
		t.Errorf("A's status of its old origin: %+v, want the peers' 30 streamed back", o)
	}
	for k, v := range acked {
		for _, p := range []*proc{a, b, c} {
			if code, body := p.get("/v1/tables/t/records/" + k); code != http.StatusOK || body != v {
				t.Errorf("%s: %s = %d %q, want the acknowledged %q", p.Name, k, code, body, v)
			}
		}
	}
	for _, p := range []*proc{a, b, c} {
		p.stop()
		p.check()
	}
}
