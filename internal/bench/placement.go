package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/linxGnu/grocksdb"

	"plait/internal/cluster"
	"plait/protocol/clustermap"
	"plait/protocol/replica"
	"plait/protocol/wire"
)

// The placement measures (docs/design.md §24): what placing each table on half the nodes
// saves on disk against the same data on every node, what a read costs when the node asked
// forwards it to a carrier against the carrier answering it, and how long a table takes to
// reach a node a map adds to it, and what it sends.

// placedValue is the bytes of a placement measure's record value: 1 KiB, each record's its
// own random text, so that neither RocksDB's compression nor the HTTP API's text answer
// makes one figure of another's data.
const placedValue = 1024

// placedTables is the disk measure's tables and the nodes each is placed on: four tables
// over four nodes, each on two of them, each node carrying two; a table is written on its
// first carrier.
var placedTables = []struct {
	name     string
	carriers []string
}{{"p1", []string{"A", "B"}}, {"p2", []string{"B", "C"}}, {"p3", []string{"C", "D"}}, {"p4", []string{"D", "A"}}}

// placementResult is what the placement measures found.
type placementResult struct {
	placed, full     []int64          // each node's bytes on disk after compaction, A to D
	local, forwarded [2]time.Duration // GET p50 and p99, on a carrier and on a node that forwards it
	moved            time.Duration    // the map's publication until the new carrier filled the table
	moveBytes        uint64           // the fill's chunk bytes (fill_bytes)
	moveRecords      int
}

// mean is the mean of bytes per node.
func mean(b []int64) float64 {
	var sum int64
	for _, n := range b {
		sum += n
	}
	return float64(sum) / float64(len(b))
}

// placement runs the three measures: the disk and the reads on 4 nodes, the move on 3.
func (c *run) placement() (placementResult, error) {
	res := placementResult{moveRecords: c.moveRecords()}
	var err error
	if res.placed, err = c.placedCluster(filepath.Join(c.dir, "placed"), true, &res); err != nil {
		return res, fmt.Errorf("placed tables: %w", err)
	}
	if res.full, err = c.placedCluster(filepath.Join(c.dir, "replicated"), false, nil); err != nil {
		return res, fmt.Errorf("the same tables on every node: %w", err)
	}
	if res.moved, res.moveBytes, err = c.moveTable(filepath.Join(c.dir, "move"), res.moveRecords); err != nil {
		return res, fmt.Errorf("moving a table: %w", err)
	}
	return res, nil
}

// moveRecords is the moved table's records: --move-records, else --placement-records.
func (c *run) moveRecords() int {
	if c.Move > 0 {
		return c.Move
	}
	return c.Placement
}

// startMesh starts the named nodes in dir, each serving its HTTP API and dialing every
// node before it, and publishes doc on the first once all are connected; it returns once
// every node holds the map. done stops them all.
func (c *run) startMesh(dir, doc string, names ...string) (nodes map[string]*cluster.Node, done func(), err error) {
	nodes = map[string]*cluster.Node{}
	var started []*cluster.Node
	done = func() {
		for _, n := range slices.Backward(started) {
			stop(n)
		}
	}
	for _, name := range names {
		n, err := c.startNode(dir, name, true, started...)
		if err != nil {
			done()
			return nil, nil, err
		}
		nodes[name] = n
		started = append(started, n)
	}
	if err := cluster.WaitEvery("the nodes connected", time.Minute, pollEvery, func() bool {
		return !slices.ContainsFunc(started, func(n *cluster.Node) bool {
			return !connected(n, slices.DeleteFunc(slices.Clone(started), func(p *cluster.Node) bool { return p == n })...)
		})
	}); err != nil {
		done()
		return nil, nil, err
	}
	if err := c.publish(started[0], doc, started...); err != nil {
		done()
		return nil, nil, err
	}
	return nodes, done, nil
}

// publish publishes doc on n and waits until every node of all holds its generation. A map
// that turns locks on is refused cluster-not-v4 until n has heard from every member that
// it speaks version 4 (their member entries travel after the connections open), so that
// refusal is tried again.
func (c *run) publish(n *cluster.Node, doc string, all ...*cluster.Node) error {
	var st replica.MapStatus
	var err error
	if werr := cluster.WaitEvery("a map publication every member's version admits", time.Minute, pollEvery, func() bool {
		st, err = n.Local.PublishMap([]byte(doc))
		var ce *clustermap.Error
		return !errors.As(err, &ce) || ce.Code != clustermap.CodeClusterNotV4
	}); werr != nil {
		return fmt.Errorf("%w (%v)", werr, err)
	}
	if err != nil {
		return err
	}
	return cluster.WaitEvery("every node holds the map", time.Minute, pollEvery, func() bool {
		return !slices.ContainsFunc(all, func(m *cluster.Node) bool {
			s, err := m.Status()
			return err != nil || s.ClusterMap.Generation != st.Generation
		})
	})
}

// writePlaced writes records 0..count-1 of table on n through the Go API, PerTxn to a
// transaction, from writers concurrent writers, each record's value 1 KiB of its own. It
// returns the transactions written.
func (c *run) writePlaced(n *cluster.Node, table string, count, writers int) (uint64, error) {
	var starts []int
	for k := 0; k < count; k += c.PerTxn {
		starts = append(starts, k)
	}
	err := fanOut(writers, starts, func(k int) error {
		raw := make([]byte, placedValue/2)
		ops := make([]wire.Op, 0, c.PerTxn)
		for j := k; j < min(k+c.PerTxn, count); j++ {
			_, _ = rand.Read(raw) // crypto/rand.Read never fails (it crashes the program instead)
			ops = append(ops, wire.Op{Kind: wire.OpPut, Table: []byte(table), Key: benchKey(j), Value: []byte(hex.EncodeToString(raw))})
		}
		_, err := n.Local.Write(context.Background(), ops)
		return err
	})
	return uint64(len(starts)), err
}

// sameTable checks that every node of has holds what from holds of table, digest for
// digest, and that it holds count records.
func sameTable(table string, count int, from *cluster.Node, has ...*cluster.Node) error {
	n, d, err := from.Local.Digest(table)
	if err != nil {
		return err
	}
	if n != count {
		return fmt.Errorf("%s holds %d records of %s, want %d", from.Name, n, table, count)
	}
	for _, o := range has {
		on, od, err := o.Local.Digest(table)
		if err != nil {
			return err
		}
		if on != n || od != d {
			return fmt.Errorf("%s holds %d records of %s (digest %s), %s %d (%s)", o.Name, on, table, od, from.Name, n, d)
		}
	}
	return nil
}

// placedCluster starts A, B, C and D in dir under a map that places each of the four
// tables on two of them (placed) or places none, writes c.Placement records of each table
// on its first carrier, and waits until every node applied every write and each carrier
// of a table holds it whole. With reads, it then times the GETs of one record on a carrier
// and on a node that forwards them (into res). It stops the nodes, flushes and compacts
// each data directory and returns each one's size, A to D.
func (c *run) placedCluster(dir string, placed bool, res *placementResult) ([]int64, error) {
	names := []string{"A", "B", "C", "D"}
	doc := `{"generation":1,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"},{"name":"D"}]`
	if placed {
		var ps []string
		for _, t := range placedTables {
			ps = append(ps, fmt.Sprintf(`"%s":["%s"]`, t.name, strings.Join(t.carriers, `","`)))
		}
		doc += `,"placement":{` + strings.Join(ps, ",") + "}"
	}
	nodes, done, err := c.startMesh(dir, doc+"}", names...)
	if err != nil {
		return nil, err
	}
	defer done()
	want := map[string]uint64{}
	var mu sync.Mutex
	errs := make(chan error, len(placedTables))
	for _, t := range placedTables {
		go func() {
			txns, err := c.writePlaced(nodes[t.carriers[0]], t.name, c.Placement, max(1, c.Writers/len(placedTables)))
			mu.Lock()
			want[t.carriers[0]] = txns
			mu.Unlock()
			errs <- err
		}()
	}
	for range placedTables {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	if err := cluster.WaitEvery("every node applied every write", benchBound, pollEvery, func() bool {
		return !slices.ContainsFunc(names, func(n string) bool { return !hasAll(nodes[n], want) })
	}); err != nil {
		return nil, err
	}
	for _, t := range placedTables {
		holders := names
		if placed {
			holders = t.carriers
		}
		var others []*cluster.Node
		for _, h := range holders[1:] {
			others = append(others, nodes[h])
		}
		if err := sameTable(t.name, c.Placement, nodes[holders[0]], others...); err != nil {
			return nil, err
		}
		if placed {
			for _, n := range names {
				if cnt, _, err := nodes[n].Local.Digest(t.name); err != nil || !slices.Contains(t.carriers, n) && cnt != 0 {
					return nil, fmt.Errorf("%s, which does not carry %s, holds %d records of it (%v)", n, t.name, cnt, err)
				}
			}
		}
	}
	if res != nil {
		// p1 is on A, which wrote it, and B; C forwards its reads to one of them.
		if res.local, res.forwarded, err = c.forwardedReads(nodes["B"], nodes["C"], "p1"); err != nil {
			return nil, err
		}
	}
	done()
	sizes := make([]int64, len(names))
	for i, n := range names {
		if sizes[i], err = compactedSize(nodes[n].DataDir); err != nil {
			return nil, err
		}
	}
	return sizes, nil
}

// forwardedReads times c.Samples GETs of a record of table through the HTTP API of
// carrier, which answers it, and through that of other, which does not carry it and
// forwards it, alternated, each pair of the same record. It returns the p50 and p99 of
// each.
func (c *run) forwardedReads(carrier, other *cluster.Node, table string) (local, forwarded [2]time.Duration, err error) {
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	get := func(n *cluster.Node, key []byte, wantBy string) (time.Duration, []byte, error) {
		t0 := time.Now()
		resp, err := client.Get("http://" + n.HTTP + "/v1/tables/" + table + "/records/" + string(key))
		if err != nil {
			return 0, nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		switch {
		case err != nil:
			return 0, nil, err
		case resp.StatusCode != http.StatusOK:
			return 0, nil, fmt.Errorf("GET %s/%s on %s: %s: %s", table, key, n.Name, resp.Status, body)
		case resp.Header.Get("Plait-Forwarded-By") != wantBy:
			return 0, nil, fmt.Errorf("GET %s/%s on %s: forwarded by %q, want %q", table, key, n.Name, resp.Header.Get("Plait-Forwarded-By"), wantBy)
		}
		return took, body, nil
	}
	var atCarrier, atOther []time.Duration
	for i := range c.Samples {
		key := benchKey(i % c.Placement)
		var dl, df time.Duration
		var bl, bf []byte
		// Alternated, so that neither GET is always the one that follows the other.
		if i%2 == 0 {
			if dl, bl, err = get(carrier, key, ""); err == nil {
				df, bf, err = get(other, key, other.Name)
			}
		} else {
			if df, bf, err = get(other, key, other.Name); err == nil {
				dl, bl, err = get(carrier, key, "")
			}
		}
		if err != nil {
			return local, forwarded, err
		}
		if len(bl) != placedValue || string(bl) != string(bf) {
			return local, forwarded, fmt.Errorf("GET %s/%s: %d bytes on %s, %d forwarded by %s, not the same record", table, key, len(bl), carrier.Name, len(bf), other.Name)
		}
		atCarrier, atOther = append(atCarrier, dl), append(atOther, df)
	}
	return percentiles(atCarrier), percentiles(atOther), nil
}

// compactedSize opens a stopped node's data directory, flushes and compacts it whole, and
// returns the bytes of its files: RocksDB's tables, write-ahead log and manifest, without
// its text logs (LOG, LOG.old.*, which each open adds to) or the storage reserve's ballast
// (plait-reserve), neither of which is data.
func compactedSize(dir string) (int64, error) {
	o := grocksdb.NewDefaultOptions()
	defer o.Destroy()
	db, err := grocksdb.OpenDb(o, dir)
	if err != nil {
		return 0, err
	}
	fo := grocksdb.NewDefaultFlushOptions()
	fo.SetWait(true)
	err = db.Flush(fo)
	fo.Destroy()
	if err == nil {
		db.CompactRange(grocksdb.Range{})
	}
	db.Close()
	if err != nil {
		return 0, err
	}
	var size int64
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if n := d.Name(); n == "LOG" || strings.HasPrefix(n, "LOG.old.") || n == "plait-reserve" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		return nil
	})
	return size, err
}

// moveTable starts A, B and C with table m placed on A and B, writes records of m on A,
// and, once every node applied them and the background work settled, publishes on A a map
// that adds C to m: it returns the time from the publication until C holds the map and no
// longer fills m (its records then checked against A's), and the chunk bytes C's fill
// received.
func (c *run) moveTable(dir string, records int) (time.Duration, uint64, error) {
	const members = `{"generation":%d,"nodes":[{"name":"A"},{"name":"B"},{"name":"C"}],"placement":{"m":[%s]}}`
	nodes, done, err := c.startMesh(dir, fmt.Sprintf(members, 1, `"A","B"`), "A", "B", "C")
	if err != nil {
		return 0, 0, err
	}
	defer done()
	a, b, cn := nodes["A"], nodes["B"], nodes["C"]
	txns, err := c.writePlaced(a, "m", records, c.Writers)
	if err != nil {
		return 0, 0, err
	}
	want := map[string]uint64{"A": txns}
	if err := cluster.WaitEvery("every node applied A's writes", benchBound, pollEvery, func() bool {
		return hasAll(b, want) && hasAll(cn, want)
	}); err != nil {
		return 0, 0, err
	}
	if err := sameTable("m", records, a, b); err != nil {
		return 0, 0, err
	}
	if err := quiesce(); err != nil {
		return 0, 0, err
	}
	begin := time.Now()
	st, err := a.Local.PublishMap(fmt.Appendf(nil, members, 2, `"A","B","C"`))
	if err != nil {
		return 0, 0, err
	}
	if err := cluster.WaitEvery("C filled m", benchBound, pollEvery, func() bool {
		s, err := cn.Status()
		return err == nil && s.ClusterMap.Generation == st.Generation && len(s.ClusterMap.Filling) == 0
	}); err != nil {
		return 0, 0, err
	}
	took := time.Since(begin)
	if err := sameTable("m", records, a, cn); err != nil {
		return 0, 0, err
	}
	s, err := cn.Local.Status()
	if err != nil {
		return 0, 0, err
	}
	if s.Counters.TablesFilled != 1 {
		return 0, 0, errors.New("C holds m without having filled it")
	}
	return took, s.Counters.FillBytes, nil
}

// placedBytes is the size of records of the placement measures' tables: key and value.
func placedBytes(records int) uint64 { return uint64(records) * (16 + placedValue) }

// placementRows prints the placement measures' rows.
func (c *run) placementRows(row func(measure, result, ratio string), res placementResult) {
	mb := func(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }
	per := func(b []int64) string {
		return fmt.Sprintf("%s (%s – %s)", mb(mean(b)), mb(float64(slices.Min(b))), mb(float64(slices.Max(b))))
	}
	row(fmt.Sprintf("disk per node, 4 tables of %d records of 1 KiB on 4 nodes, every table on every node, flushed and compacted: mean (range)", c.Placement),
		per(res.full), "1")
	row("disk per node, the same with each table placed on 2 of the 4 nodes: mean (range)", per(res.placed),
		fmt.Sprintf("%.2f of every table on every node", mean(res.placed)/mean(res.full)))
	row(fmt.Sprintf("GET of a record through a carrier's HTTP API, p50 / p99 of %d", c.Samples),
		res.local[0].String()+" / "+res.local[1].String(), "1")
	row("GET of the same record through a node that does not carry it (forwarded to a carrier), p50 / p99",
		res.forwarded[0].String()+" / "+res.forwarded[1].String(),
		fmt.Sprintf("p50 %.2f, p99 %.2f of the carrier's", res.forwarded[0].Seconds()/res.local[0].Seconds(), res.forwarded[1].Seconds()/res.local[1].Seconds()))
	size := placedBytes(res.moveRecords)
	row(fmt.Sprintf("a table of %d records of 1 KiB (%.1f MB) moved to a node a map adds to it: publication until it filled the table", res.moveRecords, float64(size)/1e6),
		seconds(res.moved), fmt.Sprintf("%.0f MB/s of the table", float64(size)/1e6/res.moved.Seconds()))
	row("the fill's chunk bytes (fill_bytes), against the table's keys and values",
		fmt.Sprintf("%.1f MB", float64(res.moveBytes)/1e6), fmt.Sprintf("%.2f of the table's bytes", float64(res.moveBytes)/float64(size)))
}
