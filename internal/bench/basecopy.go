package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/linxGnu/grocksdb"

	"plait/internal/cluster"
	"plait/protocol/replica"
	"plait/shells/native/node"
)

// The base copy's measures: a node whose logs are purged serves an empty node a base copy
// over a loopback WebSocket, beside a raw RocksDB scan and write of the same records, the
// copy's limit on one machine; and the same empty node catching up by replaying the whole
// log of a node that purged nothing, from the same data.

// copyResult is what the copy measures found.
type copyResult struct {
	rawWrite, rawScan time.Duration // the raw pair: the records written in chunk-sized batches, then scanned
	copyTime          time.Duration // B's copy request (its "base copy started") to the copy's end
	records, bytes    uint64        // what the copy carried: records, and CHUNK bytes
	byCopy, byReplay  time.Duration // an empty node's start until it applied the origin's head
}

// copyLog is a node's log as the copy measure reads it: when the node began taking a base
// copy and when it completed one, and whether one stopped early.
type copyLog struct {
	mu                 sync.Mutex
	started, completed time.Time
	records, bytes     uint64
	stopped            []string
}

func (l *copyLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *copyLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *copyLog) WithGroup(string) slog.Handler            { return l }

func (l *copyLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch r.Message {
	case "base copy started":
		l.started = r.Time
	case "base copy completed":
		l.completed = r.Time
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "records":
				l.records = a.Value.Uint64()
			case "bytes":
				l.bytes = a.Value.Uint64()
			}
			return true
		})
	default:
		if r.Level >= slog.LevelWarn {
			l.stopped = append(l.stopped, r.Message)
		}
	}
	return nil
}

// copyChunkBytes is the raw pair's batch: about one default copy chunk of keys and values.
const copyChunkBytes = replica.DefaultCopyChunk

// rawCopyPair writes records in batches of about one copy chunk to a fresh RocksDB, closes
// and reopens it (so that its records are read from its tables, as a node's copy reads a
// store reopened), then scans it whole through a snapshot, copying every key and value out
// of RocksDB as a copy must: the copy's limit on this machine, one step then the other.
func rawCopyPair(dir string, records int, value []byte) (write, scan time.Duration, err error) {
	o := grocksdb.NewDefaultOptions()
	o.SetCreateIfMissing(true)
	defer o.Destroy()
	db, err := grocksdb.OpenDb(o, dir)
	if err != nil {
		return 0, 0, err
	}
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	per := copyChunkBytes / (16 + len(value))
	start := time.Now()
	for i := 0; i < records; i += per {
		wb := grocksdb.NewWriteBatch()
		for j := i; j < min(i+per, records); j++ {
			wb.Put(benchKey(j), value)
		}
		err = db.Write(wo, wb)
		wb.Destroy()
		if err != nil {
			db.Close()
			return 0, 0, err
		}
	}
	write = time.Since(start)
	db.Close()
	if db, err = grocksdb.OpenDb(o, dir); err != nil {
		return 0, 0, err
	}
	defer db.Close()
	start = time.Now()
	snap := db.NewSnapshot()
	defer db.ReleaseSnapshot(snap)
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	ro.SetSnapshot(snap)
	ro.SetFillCache(false)
	it := db.NewIterator(ro)
	defer it.Close()
	n := 0
	buf := make([]byte, 0, 2*copyChunkBytes)
	for it.SeekToFirst(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(buf)+k.Size()+v.Size() > copyChunkBytes {
			buf = buf[:0] // a chunk's worth taken out
		}
		buf = append(append(buf, k.Data()...), v.Data()...)
		k.Free()
		v.Free()
		n++
	}
	if err := it.Err(); err != nil {
		return 0, 0, err
	}
	scan = time.Since(start)
	if n != records {
		return 0, 0, fmt.Errorf("raw scan: %d records, want %d", n, records)
	}
	return write, scan, nil
}

// startCopyNode starts a node of this process in dir/name with --sync sync, retention
// bounded to retainBytes of logs (0: none) and its log to log (nil: discarded).
func startCopyNode(dir, name string, sync node.SyncMode, retainBytes uint64, log slog.Handler, peers ...*cluster.Node) (*cluster.Node, error) {
	var dial []node.Peer
	for _, p := range peers {
		dial = append(dial, p.Peer())
	}
	cfg := node.Config{Name: name, DataDir: filepath.Join(dir, name), Peers: dial,
		Sync: sync, Config: replica.Config{Secret: []byte(benchSecret), RetainBytes: retainBytes}}
	if log != nil {
		cfg.Logger = slog.New(log)
	}
	return cluster.StartLocal(cfg, false)
}

// baseCopy runs the copy measures on c.Copy records:
//
//  1. the raw pair, in its own directory;
//  2. A writes the records (c.PerTxn to a transaction, --sync none: these writes are not
//     measured) and stops; its data directory is copied, so that two nodes start from the
//     same data, before any peer held anything;
//  3. replay: A starts again, keeping its whole log, and an empty node B dials it and
//     fetches every entry from seq 1;
//  4. copy: A starts from the copy of its directory with a one-byte bound on its logs, so
//     that retention purges each of them to its head; once its floor is the head's seq
//     less one, an empty node B dials it, is answered below that floor, and takes a base
//     copy. B's records are then checked against A's (the table's digest).
func (c *run) baseCopy() (copyResult, error) {
	var res copyResult
	dir := filepath.Join(c.dir, "copy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	var err error
	if res.rawWrite, res.rawScan, err = rawCopyPair(filepath.Join(dir, "raw"), c.Copy, c.value); err != nil {
		return res, fmt.Errorf("raw scan and write: %w", err)
	}

	// The source's data, written once.
	a, err := startCopyNode(filepath.Join(dir, "replay"), "A", node.SyncNone, 0, nil)
	if err != nil {
		return res, err
	}
	txns, err := c.writeRecords(a, 0, c.Copy, c.Writers, viaAPI)
	if err == nil {
		err = a.Stop()
	}
	if err != nil {
		stop(a)
		return res, err
	}
	if err := copyDir(filepath.Join(dir, "replay", "A"), filepath.Join(dir, "copy", "A")); err != nil {
		return res, err
	}
	want := map[string]uint64{"A": txns}

	// Replay: the whole log, from seq 1.
	if res.byReplay, err = c.catchUp(filepath.Join(dir, "replay"), 0, want, nil); err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}

	// Copy: the logs purged to their heads.
	log := &copyLog{}
	if res.byCopy, err = c.catchUp(filepath.Join(dir, "copy"), 1, want, log); err != nil {
		return res, fmt.Errorf("base copy: %w", err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	switch {
	case len(log.stopped) > 0:
		return res, fmt.Errorf("base copy: the receiver logged %q", log.stopped)
	case log.started.IsZero() || log.completed.IsZero():
		return res, errors.New("base copy: the receiver caught up without logging a copy started and completed")
	case log.records != uint64(c.Copy):
		return res, fmt.Errorf("base copy: %d records copied, want %d", log.records, c.Copy)
	}
	res.copyTime, res.records, res.bytes = log.completed.Sub(log.started), log.records, log.bytes
	return res, nil
}

// catchUp starts A from dir/A with retention bounded to retainBytes (0: none) and, once
// A's logs are purged to their heads when it is bounded, times an empty node dialing it
// (its log to log) from its start until it applied want. It checks that the node then
// holds A's table t, digest for digest.
func (c *run) catchUp(dir string, retainBytes uint64, want map[string]uint64, log slog.Handler) (time.Duration, error) {
	a, err := startCopyNode(dir, "A", c.Sync, retainBytes, nil)
	if err != nil {
		return 0, err
	}
	defer stop(a)
	if retainBytes > 0 {
		if err := cluster.WaitEvery("A purged its log to its head", benchBound, pollEvery, func() bool {
			st, err := a.Status()
			o, _ := st.Origin("A")
			return err == nil && o.FloorSeq+1 >= want["A"]
		}); err != nil {
			return 0, err
		}
	}
	// A's start (its write-ahead log replayed and flushed) and its purge (the purged ranges
	// compacted) run RocksDB work in the background: the catch-up is timed once it is done.
	if err := quiesce(); err != nil {
		return 0, err
	}
	begin := time.Now()
	b, err := startCopyNode(dir, "B", c.Sync, 0, log, a)
	if err != nil {
		return 0, err
	}
	defer stop(b)
	if err := cluster.WaitEvery("B caught up", benchBound, pollEvery, func() bool { return hasAll(b, want) }); err != nil {
		return 0, err
	}
	took := time.Since(begin)
	na, da, err := a.Local.Digest("t")
	if err != nil {
		return 0, err
	}
	nb, db, err := b.Local.Digest("t")
	if err != nil {
		return 0, err
	}
	if na != nb || da != db {
		return 0, fmt.Errorf("B holds %d records of table t (digest %s), A %d (%s)", nb, db, na, da)
	}
	return took, nil
}

// quiesce waits, for at most a minute, until this process used less than a tenth of a
// core over a quarter of a second: its nodes' background work, RocksDB's threads
// included, is done.
func quiesce() error {
	const every = 250 * time.Millisecond
	cpu := func() (time.Duration, error) {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, err
		}
		return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)), nil
	}
	last, err := cpu()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(every)
		now, err := cpu()
		if err != nil {
			return err
		}
		if now-last < every/10 {
			return nil
		}
		last = now
	}
	return errors.New("the nodes' background work did not settle within a minute")
}

// copyDir copies the files of the directory src (a stopped node's data directory) to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// copyRate is a rate of records and of bytes over d.
func copyRate(records, size uint64, d time.Duration) string {
	s := d.Seconds()
	return fmt.Sprintf("%.0f records/s, %.0f MB/s", float64(records)/s, float64(size)/s/1e6)
}
