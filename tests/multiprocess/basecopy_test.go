//go:build multiprocess || scale

package multiprocess

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/shells/native/httpapi"
)

// op is one op of a batch (POST /v1/tables/{t}/batch); a nil Value is a delete.
type op struct {
	Key   string
	Value *string
}

// batchBody is the JSON body of a batch of ops.
func batchBody(ops []op) []byte {
	type jsonOp struct {
		Op    string  `json:"op"`
		Key   string  `json:"key"`
		Value *string `json:"value,omitempty"`
	}
	body := struct {
		Ops []jsonOp `json:"ops"`
	}{Ops: make([]jsonOp, len(ops))}
	for i, o := range ops {
		body.Ops[i] = jsonOp{Op: "put", Key: o.Key, Value: o.Value}
		if o.Value == nil {
			body.Ops[i].Op = "delete"
		}
	}
	b, _ := json.Marshal(body) // plain strings and pointers to them: it cannot fail
	return b
}

// postBatch writes ops to table t as one transaction. It returns the status code, 0 with
// the error when no answer came (the node is down, or died under the request); a refusal's
// body is in the error.
func (p *proc) postBatch(client *http.Client, ops []op) (int, error) {
	resp, err := client.Post("http://"+p.HTTP+"/v1/tables/t/batch", "application/json", bytes.NewReader(batchBody(ops)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body) // {"origin_seq":N} when it was taken
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("answered %d: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, nil
}

// baseKey is the key of base record i.
func baseKey(i int) string { return fmt.Sprintf("b-%07d", i) }

// loadKeys writes the base records from to to-1 (baseKey, a 16-byte value of the index) to
// table t, perBatch to a transaction.
func (p *proc) loadKeys(from, to, perBatch int) {
	p.t.Helper()
	client := &http.Client{Timeout: time.Minute}
	for i := from; i < to; i += perBatch {
		ops := make([]op, 0, perBatch)
		for j := i; j < min(i+perBatch, to); j++ {
			v := fmt.Sprintf("%016d", j)
			ops = append(ops, op{baseKey(j), &v})
		}
		if code, err := p.postBatch(client, ops); code != http.StatusOK {
			p.t.Fatalf("%s: loading base records %d..: %d %v", p.Name, i, code, err)
		}
	}
}

// listAll is every live record of table t on p whose key starts with prefix (a key equal
// to the prefix excepted), key to value. The listing starts after the prefix itself: the
// node scans from there, not through every key before it.
func (p *proc) listAll(prefix string) map[string]string {
	p.t.Helper()
	out := map[string]string{}
	after := prefix
	for {
		q := url.Values{"prefix": {prefix}, "limit": {"1000"}, "after": {after}}
		code, body := p.get("/v1/tables/t/records?" + q.Encode())
		if code != http.StatusOK {
			p.t.Fatalf("%s: listing %q: %d %s", p.Name, prefix, code, body)
		}
		var page struct {
			Records []struct{ Key, Value string }
			Next    *string
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			p.t.Fatalf("%s: listing %q: %v", p.Name, prefix, err)
		}
		for _, r := range page.Records {
			out[r.Key] = r.Value
		}
		if page.Next == nil {
			return out
		}
		after = *page.Next
	}
}

// taking is the copy p is taking now (a peers[] copy in state receiving), nil when none.
func taking(st httpapi.StatusDoc) *httpapi.CopyDoc {
	for _, pd := range st.Peers {
		if pd.Copy != nil && pd.Copy.State == "receiving" {
			return pd.Copy
		}
	}
	return nil
}

// A copyWriter writes batches to one node until stopped, each of new keys, updates of base
// records and deletes of base records, and keeps what the node acknowledged. Every key it
// writes, it writes once, so an acknowledged value is the one the key must end with: base
// keys are shared out among the writers by share, and no other write touches them after
// the base load.
type copyWriter struct {
	p       *proc
	share   int // this writer's base keys: 6s+2·share (updated) and 6s+2·share+1 (deleted)
	maxRuns int // a bound on the batches

	batches atomic.Int64 // acknowledged
	failed  atomic.Int64 // no answer (the node was down or died under the request)

	// Read after done only.
	firstErr string             // the first batch that had no answer, and why
	slowest  time.Duration      // the longest an acknowledged batch took
	acked    map[string]*string // key → the acknowledged value; nil: deleted
	tried    map[string]bool    // every key a batch carried, acknowledged or not
	done     chan struct{}
}

// Base-key slots: a writer's m-th update and delete go to slot (m·slotStride) mod slots,
// which spreads them over the whole key space (stride and slots are coprime).
const (
	slots      = 166_666 // 6·slots ≤ the base records
	slotStride = 104_729
)

// startCopyWriters starts a copyWriter on each node, share i on the i-th, and returns
// them with the function that stops them and waits until each is done (safe to call again).
// everyWriteEverywhere checks that the nodes' digests equal the first one's, and that every
// acknowledged batch of every writer reads back on every node.
func everyWriteEverywhere(t *testing.T, writers []*copyWriter, nodes ...*proc) {
	t.Helper()
	first := nodes[0].digest("t")
	for _, p := range nodes[1:] {
		if d := p.digest("t"); d != first {
			t.Errorf("digests differ: %s %s, %s %s", nodes[0].Name, first, p.Name, d)
		}
	}
	for _, p := range nodes {
		listed := p.listAll("w-")
		for _, w := range writers {
			w.verify(t, p, listed, 300)
		}
	}
}

// moreBatches waits until every writer has n more batches acknowledged than now.
func moreBatches(t *testing.T, writers []*copyWriter, n int64, when string) {
	t.Helper()
	before := make([]int64, len(writers))
	for i, w := range writers {
		before[i] = w.batches.Load()
	}
	waitFor(t, fmt.Sprintf("%d more batches on every node %s", n, when), 30*time.Second, func() bool {
		for i, w := range writers {
			if w.batches.Load() < before[i]+n {
				return false
			}
		}
		return true
	})
}

func startCopyWriters(t *testing.T, maxRuns int, nodes ...*proc) ([]*copyWriter, func()) {
	stop := make(chan struct{})
	var writers []*copyWriter
	for i, p := range nodes {
		writers = append(writers, startCopyWriter(t, p, i, maxRuns, stop))
	}
	var once sync.Once
	return writers, func() {
		once.Do(func() {
			close(stop)
			for _, w := range writers {
				<-w.done
			}
		})
	}
}

func startCopyWriter(t *testing.T, p *proc, share, maxRuns int, stop <-chan struct{}) *copyWriter {
	w := &copyWriter{p: p, share: share, maxRuns: maxRuns, acked: map[string]*string{}, tried: map[string]bool{},
		done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// A batch acknowledged later than this is a failure of the test: the bound is far
		// above what a write takes under this load (about 2 s at the slowest).
		client := &http.Client{Timeout: 30 * time.Second}
		m := 0
		for run := 0; run < w.maxRuns; run++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond): // the pace of the load, not a wait for anything
			}
			var ops []op
			for j := range 6 {
				v := fmt.Sprintf("%s%015d", p.Name, run*6+j)
				ops = append(ops, op{fmt.Sprintf("w-%s-%07d", p.Name, run*6+j), &v})
			}
			for range 3 {
				s := m * slotStride % slots
				m++
				v := fmt.Sprintf("%s%015d", p.Name, s)
				ops = append(ops, op{baseKey(6*s + 2*share), &v})
			}
			ops = append(ops, op{baseKey(6*(m*slotStride%slots) + 2*share + 1), nil})
			m++
			for _, o := range ops {
				w.tried[o.Key] = true
			}
			sent := time.Now()
			code, err := p.postBatch(client, ops)
			switch {
			case code != 0 && code != http.StatusOK:
				t.Errorf("%s: a batch %v", p.Name, err)
			case err != nil:
				if w.failed.Add(1) == 1 {
					w.firstErr = fmt.Sprintf("batch %d, %v after it was sent: %v", run, time.Since(sent).Round(time.Millisecond), err)
				}
			default:
				w.slowest = max(w.slowest, time.Since(sent))
				w.batches.Add(1)
				for _, o := range ops {
					w.acked[o.Key] = o.Value
				}
			}
		}
	}()
	return w
}

// verify checks, on p, every new key the writer had acknowledged, no new key it never
// wrote, and up to sample of its acknowledged updates and deletes of base records.
func (w *copyWriter) verify(t *testing.T, p *proc, listed map[string]string, sample int) {
	t.Helper()
	prefix := "w-" + w.p.Name + "-"
	var base []string
	for k, v := range w.acked {
		if k[:2] == "b-" {
			base = append(base, k)
			continue
		}
		if got, ok := listed[k]; !ok || got != *v {
			t.Errorf("%s: %s written on %s and acknowledged as %q, but reads %q (present %v)", p.Name, k, w.p.Name, *v, got, ok)
		}
	}
	for k := range listed {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix && !w.tried[k] {
			t.Errorf("%s: holds %s, which %s never wrote", p.Name, k, w.p.Name)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(w.share), 7))
	rng.Shuffle(len(base), func(i, j int) { base[i], base[j] = base[j], base[i] })
	for _, k := range base[:min(sample, len(base))] {
		code, body := p.get("/v1/tables/t/records/" + k)
		if v := w.acked[k]; v == nil && code != http.StatusNotFound {
			t.Errorf("%s: %s deleted on %s (acknowledged), but reads %d %q", p.Name, k, w.p.Name, code, body)
		} else if v != nil && (code != http.StatusOK || body != *v) {
			t.Errorf("%s: %s updated on %s to %q (acknowledged), but reads %d %q", p.Name, k, w.p.Name, *v, code, body)
		}
	}
}

// converged reports whether every node applied every origin of the nodes up to the
// origin's own applied seq, and shows it with a lag of 0.
func converged(nodes ...*proc) bool {
	sts := make([]httpapi.StatusDoc, len(nodes))
	for i, p := range nodes {
		sts[i] = p.status()
	}
	for i, owner := range nodes {
		own, _ := sts[i].Origin(owner.Name)
		for j := range nodes {
			o, ok := sts[j].Origin(owner.Name)
			if !ok || o.AppliedSeq != own.AppliedSeq || o.LagSeq != 0 {
				return false
			}
		}
	}
	return true
}

// logsPurged reports whether every node's log of every origin of the nodes is purged
// (floor_seq above 0): a node that applied none of them cannot stream them from seq 1.
func logsPurged(nodes ...*proc) bool {
	for _, p := range nodes {
		st := p.status()
		for _, q := range nodes {
			if o, ok := st.Origin(q.Name); !ok || o.FloorSeq == 0 {
				return false
			}
		}
	}
	return true
}

// TestCopyJoinsAPurgedCluster: A and B hold 1,000,000 records, and their logs are purged.
// An empty node C joins them and takes a base copy while A, B and C all go on writing
// (new keys, updates and deletes of base records). C is killed (kill -9) twice while it
// receives the copy, and each time resumes it after restarting, from where it was: the
// copy completes, every node converges (lag 0, equal digests), every acknowledged write
// reads back on every node, and plait check passes on every data directory.
func TestCopyJoinsAPurgedCluster(t *testing.T) {
	const records, perBatch = 1_000_000, 1000
	// --retain-age 10s: the load's first entries are purged by its end (it takes longer),
	// and a node lagging behind an origin by less than that under this load can take the
	// origin from the other node when its source dies (with 1s, a lag past it when C is
	// killed made B take a copy of A: a relay keeps a relayed origin only for the peers it
	// sends it to). --retain-hold 1m: the first sender keeps the copy's positions while C
	// resumes from the other one (the merged positions are the lower ones, the first
	// sender's). 64 KiB chunks: the copy lasts long enough to be killed twice.
	flags := []string{"--retain-age", "10s", "--retain-hold", "1m", "--copy-chunk", "65536"}
	a := serve(t, "A", flags...)
	b := serve(t, "B", append([]string{"--peer", a.PeerFlag()}, flags...)...)
	waitFor(t, "B connected to A", 20*time.Second, func() bool { return b.connected("A") })

	loadStart := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.loadKeys(0, records/2, perBatch) }()
	go func() { defer wg.Done(); b.loadKeys(records/2, records, perBatch) }()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, "A and B converged on the base records", time.Minute, func() bool { return converged(a, b) })
	waitFor(t, "A's and B's logs purged", 30*time.Second, func() bool { return logsPurged(a, b) })
	loaded := time.Since(loadStart)
	if da, db := a.digest("t"), b.digest("t"); da != db {
		t.Fatalf("after the load, digests differ: A %s, B %s", da, db)
	}

	c := serve(t, "C", append([]string{"--peer", a.PeerFlag(), "--peer", b.PeerFlag()}, flags...)...)
	copyStart := time.Now()
	// C's first write, before any other: once A and B applied it they hold C's log, so the
	// writes that follow stay on C until they took them (with a short --retain-age, a log no
	// peer holds yet is purged before a slow peer subscribes, and that peer needs a copy).
	c.put("t", "first-C", "C")
	waitFor(t, "A and B applied C's first write", 30*time.Second, func() bool {
		return a.origin("C").AppliedSeq > 0 && b.origin("C").AppliedSeq > 0
	})
	writers, stopWriters := startCopyWriters(t, 20_000, a, b, c)
	defer stopWriters()

	// Twice: wait until C has made part of the copy durable in this run, then kill it.
	var atKill uint64 // the records C showed copied just before the last kill
	for kill := 1; kill <= 2; kill++ {
		var cp httpapi.CopyDoc
		waitFor(t, fmt.Sprintf("C receiving the copy before kill %d", kill), time.Minute, func() bool {
			st := c.status()
			if st.Counters.CopiesCompleted > 0 {
				t.Fatalf("the copy completed before kill %d: make it longer", kill)
			}
			if p := taking(st); p != nil && p.Records > 0 && st.Counters.CopyRecords > 0 {
				cp = *p
				if kill > 1 && st.Counters.CopiesResumed == 0 {
					t.Errorf("C took chunks after restart %d, but copies_resumed is 0", kill-1)
				}
				return true
			}
			return false
		})
		// The status shows what is durable: a resumed run that took a chunk is past it.
		if kill > 1 && cp.Records <= atKill {
			t.Errorf("after restart %d the copy shows %d records, no more than the %d before the kill: it started over", kill-1, cp.Records, atKill)
		}
		if cp.Resumes != uint64(kill-1) {
			t.Errorf("before kill %d the copy shows %d resumes, want %d", kill, cp.Resumes, kill-1)
		}
		atKill = cp.Records
		t.Logf("kill %d at %d of about %d records (%d bytes), %.0f bytes/s, %d resumes", kill, cp.Records,
			cp.TotalRecords, cp.Bytes, cp.Rate, cp.Resumes)
		c.kill()
		c.start()
	}
	lastRun := time.Now()

	// After the second restart: the copy resumes once more (resumes 2 in its state, one
	// resume counted by this process) and completes.
	var last httpapi.CopyDoc
	var resumed uint64
	waitFor(t, "C completing the copy", 2*time.Minute, func() bool {
		st := c.status()
		if p := taking(st); p != nil {
			last = *p
		}
		resumed = st.Counters.CopiesResumed
		return st.Counters.CopiesCompleted > 0
	})
	copyTime, lastRunTime := time.Since(copyStart), time.Since(lastRun)
	if resumed < 1 {
		t.Errorf("C's copies_resumed after the second restart is %d, want at least 1", resumed)
	}
	if last.Resumes < 2 {
		t.Errorf("C's copy showed %d resumes after the second restart, want 2", last.Resumes)
	}
	if cst := c.status().Counters; cst.CopiesStarted != 0 || cst.CopiesCompleted != 1 {
		t.Errorf("after the second restart C started %d copies and completed %d; want the one copy resumed and completed, "+
			"its positions streamed from", cst.CopiesStarted, cst.CopiesCompleted)
	}
	if last.Records <= atKill {
		t.Errorf("after the second restart the copy showed %d records, no more than the %d before the kill", last.Records, atKill)
	}

	// Writes go on past the copy's end: each writer has 20 more batches acknowledged.
	moreBatches(t, writers, 20, "after the copy")
	stopWriters()
	nodes := []*proc{a, b, c}
	waitFor(t, "A, B and C converged", time.Minute, func() bool { return converged(nodes...) })

	convergedAt := time.Since(copyStart)
	everyWriteEverywhere(t, writers, nodes...)
	t.Logf("converged %v after C started; verified %v after", convergedAt.Round(time.Millisecond), (time.Since(copyStart) - convergedAt).Round(time.Millisecond))
	cst := c.status()
	for _, w := range writers {
		t.Logf("%s: %d batches acknowledged (the slowest in %v), %d unanswered", w.p.Name, w.batches.Load(),
			w.slowest.Round(time.Millisecond), w.failed.Load())
		if w.p != c && w.failed.Load() > 0 {
			t.Errorf("%s: %d batches unanswered (the first: %s); only C was killed", w.p.Name, w.failed.Load(), w.firstErr)
		}
	}
	t.Logf("load of %d records: %v; the copy, from C's start, two kills included: %v, its last run %v; last seen %d of "+
		"about %d records, %d bytes; C's last run: copy_records %d, copy_bytes %d, copies_resumed %d, copies_completed %d; digest %s",
		records, loaded.Round(time.Millisecond), copyTime.Round(time.Millisecond), lastRunTime.Round(time.Millisecond),
		last.Records, last.TotalRecords, last.Bytes, cst.Counters.CopyRecords, cst.Counters.CopyBytes,
		cst.Counters.CopiesResumed, cst.Counters.CopiesCompleted, a.digest("t"))
	for _, p := range nodes {
		ct := p.status().Counters
		if p != c && ct.CopiesStarted != 0 {
			t.Errorf("%s started %d copies; it was never cut off", p.Name, ct.CopiesStarted)
		}
		t.Logf("%s: copies_served %d, copies_busy %d, copies_started %d, bad_chunks %d, tombstones_dropped %d, entries_purged %d",
			p.Name, ct.CopiesServed, ct.CopiesBusy, ct.CopiesStarted, ct.BadChunks, ct.TombstonesDropped, ct.EntriesPurged)
	}
	for _, p := range nodes {
		p.stop()
		t.Logf("%s: data directory %d bytes", p.Name, dirBytes(t, p.DataDir))
		p.check()
	}
}

// batch writes ops to table t as one transaction; the node must acknowledge it.
func (p *proc) batch(ops ...op) {
	p.t.Helper()
	if code, err := p.postBatch(http.DefaultClient, ops); code != http.StatusOK {
		p.t.Fatalf("%s: batch: %d %v", p.Name, code, err)
	}
}

// put and del are the ops of a batch.
func put(key, value string) op { return op{key, &value} }
func del(key string) op        { return op{Key: key} }

// record is p's value of key in table t: ok false when it has none (missing or deleted).
func (p *proc) record(key string) (value string, ok bool) {
	p.t.Helper()
	code, body := p.get("/v1/tables/t/records/" + key)
	switch code {
	case http.StatusOK:
		return body, true
	case http.StatusNotFound:
		return "", false
	}
	p.t.Fatalf("%s: GET %s: %d %s", p.Name, key, code, body)
	return "", false
}

// TestCopyKeepsLocalWritesOfAReturningNode: B replicates with A, then is cut off (restarted
// without --peer) for longer than A's --retain-hold, while both write: new keys, updates
// and deletes of the records they shared, and the same keys on both sides. A's log is
// purged past B's position, so B, given A as a peer again, takes a base copy, while both go
// on writing. The copy merges and never replaces: every write B made while away or during
// the copy is still B's after it and reaches A, A's writes reach B, and each key written on
// both sides holds the later write on both (last-writer-wins, one clock). In the variant
// where B's retention is as short as A's, B's log is purged past A's position too, and A
// takes a copy of B as well, at the same time.
func TestCopyKeepsLocalWritesOfAReturningNode(t *testing.T) {
	short := []string{"--retain-age", "1s", "--retain-hold", "2s"}
	chunk := []string{"--copy-chunk", "4096"} // small chunks: the copy lasts while both write
	for _, c := range []struct {
		name   string
		flagsB []string
	}{{"B keeps its log", chunk}, {"B purges its log too", append(chunk, short...)}} {
		t.Run(c.name, func(t *testing.T) {
			a := serve(t, "A", append(chunk, short...)...)
			b := serve(t, "B", append([]string{"--peer", a.PeerFlag()}, c.flagsB...)...)
			waitFor(t, "B connected to A", 20*time.Second, func() bool { return b.connected("A") })
			const base = 100_000
			a.loadKeys(0, base/2, 1000)
			b.loadKeys(base/2, base, 1000)
			waitFor(t, "A and B converged on the base records", 30*time.Second, func() bool { return converged(a, b) })

			// B is cut off: restarted without its --peer, so neither side dials the other.
			b.stop()
			b.args = c.flagsB
			b.start()
			left := b.origin("A")

			// Apart, before A's log is purged past B: new keys, updates and deletes of base
			// records, and the first writes of four keys both write. The base records apart
			// are 12j+4 (A updates), 12j+10 (A deletes), 12j+5 (B updates) and 12j+11 (B
			// deletes): the copy writers below take the others (6s to 6s+3).
			want := map[string]*string{} // key → the value both must end with; nil: deleted
			apart := func(p *proc, ops ...op) {
				p.batch(ops...)
				for _, o := range ops {
					want[o.Key] = o.Value
				}
			}
			for i := range 20 {
				var opsA, opsB []op
				for j := range 10 {
					n := i*10 + j
					opsA = append(opsA, put(fmt.Sprintf("away-A-%03d", n), fmt.Sprint("A", n)))
					opsB = append(opsB, put(fmt.Sprintf("away-B-%03d", n), fmt.Sprint("B", n)))
				}
				k := 12 * (i * 397 % (base / 12)) // spread over both halves of the load
				opsA = append(opsA, put(baseKey(k+4), "A-updated"), del(baseKey(k+10)))
				opsB = append(opsB, put(baseKey(k+5), "B-updated"), del(baseKey(k+11)))
				apart(a, opsA...)
				apart(b, opsB...)
			}
			a.batch(put("both-1", "A first"), put("both-3", "A put first"))
			b.batch(put("both-2", "B first"), del("both-4"))

			waitFor(t, "A's log purged past B's position", 30*time.Second, func() bool {
				return a.origin("A").FloorSeq > left.AppliedSeq
			})
			if c.flagsB[len(c.flagsB)-1] != chunk[len(chunk)-1] {
				waitFor(t, "B's log purged past A's position", 30*time.Second, func() bool {
					return b.origin("B").FloorSeq > a.origin("B").AppliedSeq
				})
			}
			// The second writes of the keys both write, a second or more after the first
			// ones (the purge waited on the 1 s --retain-age): the later write must win.
			apart(b, put("both-1", "B later"), del("both-3"))
			apart(a, put("both-2", "A later"), put("both-4", "A put later"))
			bAway := b.origin("B").AppliedSeq

			// B returns, and both write while the copy runs (and a little after it).
			writers, stopWriters := startCopyWriters(t, 5000, a, b)
			defer stopWriters()
			returned := time.Now()
			before := writers[1].batches.Load()
			b.addPeer(a)
			waitFor(t, "B completed a copy of A", time.Minute, func() bool { return b.status().Counters.CopiesCompleted > 0 })
			copied := time.Since(returned)
			during := writers[1].batches.Load() - before
			if c.flagsB[len(c.flagsB)-1] != chunk[len(chunk)-1] {
				waitFor(t, "A completed a copy of B", time.Minute, func() bool { return a.status().Counters.CopiesCompleted > 0 })
			}
			if during == 0 {
				t.Errorf("B wrote nothing while it took the copy (%v): the copy must be longer", copied)
			}
			for _, w := range writers {
				n := w.batches.Load()
				waitFor(t, "20 more batches on "+w.p.Name, 30*time.Second, func() bool { return w.batches.Load() >= n+20 })
			}
			stopWriters()
			waitFor(t, "A and B converged", time.Minute, func() bool { return converged(a, b) })

			if got := a.origin("B").AppliedSeq; got < bAway {
				t.Errorf("A applied B up to %d, below the %d B wrote while away", got, bAway)
			}
			for _, p := range []*proc{a, b} {
				for k, v := range want {
					got, ok := p.record(k)
					switch {
					case v == nil && ok:
						t.Errorf("%s: %s was deleted last, but reads %q", p.Name, k, got)
					case v != nil && (!ok || got != *v):
						t.Errorf("%s: %s was last written %q, but reads %q (present %v)", p.Name, k, *v, got, ok)
					}
				}
				listed := p.listAll("w-")
				for _, w := range writers {
					w.verify(t, p, listed, 300)
				}
			}
			if da, db := a.digest("t"), b.digest("t"); da != db {
				t.Errorf("digests differ: A %s, B %s", da, db)
			}
			t.Logf("B's copy: %v from its return, %d of B's batches acknowledged meanwhile", copied.Round(time.Millisecond), during)
			for _, w := range writers {
				t.Logf("%s: %d batches acknowledged (the slowest in %v), %d unanswered", w.p.Name, w.batches.Load(),
					w.slowest.Round(time.Millisecond), w.failed.Load())
				if w.failed.Load() > 0 {
					t.Errorf("%s: %d batches unanswered (the first: %s); no node was killed", w.p.Name, w.failed.Load(), w.firstErr)
				}
			}
			for _, p := range []*proc{a, b} {
				ct := p.status().Counters
				t.Logf("%s: copies_started %d, copies_completed %d, copies_served %d, copy_records %d, copy_bytes %d, bad_chunks %d, copies_busy %d, purged_answers %d",
					p.Name, ct.CopiesStarted, ct.CopiesCompleted, ct.CopiesServed, ct.CopyRecords, ct.CopyBytes, ct.BadChunks, ct.CopiesBusy, ct.PurgedAnswers)
			}
			if c.flagsB[len(c.flagsB)-1] == chunk[len(chunk)-1] {
				if n := a.status().Counters.CopiesStarted; n != 0 {
					t.Errorf("A started %d copies; B's log held everything A needed", n)
				}
			}
			for _, p := range []*proc{a, b} {
				p.stop()
				p.check()
			}
		})
	}
}
