package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"plait/protocol/store"
	"plait/protocol/vector"
)

// The listing's pinned snapshots (docs/design.md §26.4, docs/contract.md §24.5): a
// listing opened with a snapshot reads every page from one RocksDB snapshot, taken in the
// same loop step as the store's vector, so that a client can list a table whole as it was
// at one position and follow its change feed from there. The snapshots are the memory
// bound: at most MaxSnapshots at once, each released at the page that ends its listing,
// or SnapshotTTL after the last page asked, at the node's stop, and when the store
// reopens after degraded storage. Every use of them
// runs on the loop (and in Stop once the loop has ended): no lock.

// Defaults of Config.MaxSnapshots and Config.SnapshotTTL (--max-snapshots, --snapshot-ttl).
const (
	DefaultMaxSnapshots = 64
	DefaultSnapshotTTL  = time.Minute
)

// Errors of OpenSnapshot and SnapshotPage.
var (
	// ErrTooManySnapshots: MaxSnapshots snapshots are open (the API's 503 too-many-snapshots).
	ErrTooManySnapshots = errors.New("node: --max-snapshots snapshots are open; finish or abandon one, or retry once one expires")
	// ErrSnapshotExpired: no snapshot of that id is open, because its time ran out, the
	// node released it, or it was never opened here (the API's 410 snapshot-expired).
	ErrSnapshotExpired = errors.New("node: no snapshot of that id is open here (expired, released, or never opened on this node); list again with snapshot=new")
)

// SnapshotTableError refuses a page of a snapshot opened for another table.
type SnapshotTableError struct{ ID, Table string }

func (e *SnapshotTableError) Error() string {
	return fmt.Sprintf("node: snapshot %s was opened for table %q", e.ID, e.Table)
}

// SnapshotIDLen is the length of a snapshot id: 128 random bits in lowercase hex.
const SnapshotIDLen = 32

// ValidSnapshotID reports whether id has the form of a snapshot id (SnapshotIDLen
// lowercase hex digits); whether one of that id is open is another matter.
func ValidSnapshotID(id string) bool {
	if len(id) != SnapshotIDLen {
		return false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// SnapshotPage is one page of a listing from a pinned snapshot.
type SnapshotPage struct {
	ID      string
	AsOf    vector.Vector // the store's vector in the loop step that took the snapshot
	Records []store.Record
	More    bool
}

// SnapshotStatus is the node's pinned snapshots: how many are open, its bounds, and the
// counters since start.
type SnapshotStatus struct {
	Open     int
	Max      int           // Config.MaxSnapshots (0: none served)
	TTL      time.Duration // Config.SnapshotTTL
	Opened   uint64        // snapshots opened
	TimedOut uint64        // released because SnapshotTTL passed after their last page
	// RefusedTooMany and RefusedExpired count the answers ErrTooManySnapshots and
	// ErrSnapshotExpired.
	RefusedTooMany, RefusedExpired uint64
}

// pinned is one open snapshot.
type pinned struct {
	id       string
	table    []byte
	snap     store.Snapshot
	asOf     vector.Vector
	deadline time.Time   // SnapshotTTL after its last page
	timer    *time.Timer // releases it at the deadline (expireSnapshot)
}

// snapshots is the node's open snapshots and their counters (loop only).
type snapshots struct {
	open   map[string]*pinned
	status SnapshotStatus // its Open, Max and TTL are filled when read
}

// maxSnapshots is Config.MaxSnapshots with its default (0) and "none" (negative).
func (cfg *Config) maxSnapshots() int {
	switch {
	case cfg.MaxSnapshots == 0:
		return DefaultMaxSnapshots
	case cfg.MaxSnapshots < 0:
		return 0
	}
	return cfg.MaxSnapshots
}

func (cfg *Config) snapshotTTL() time.Duration {
	if cfg.SnapshotTTL <= 0 {
		return DefaultSnapshotTTL
	}
	return cfg.SnapshotTTL
}

// newSnapshotID is a fresh snapshot id: unguessable, so that a client cannot read
// through another's snapshot by naming it, and never repeated in practice.
func newSnapshotID() string {
	b := make([]byte, SnapshotIDLen/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}

// OpenSnapshot pins a snapshot of the store for table and answers its first page: the
// records the listing rules take (listPage) from the snapshot, after after. The snapshot
// and AsOf come from one loop step, so AsOf is exactly the applied positions the
// snapshot holds. ErrTooManySnapshots when MaxSnapshots are open. A listing that ends on
// its first page holds nothing: its snapshot is released at once.
//
// Unless Sync is SyncNone, the answer waits, as a local write's does, for the fsync that
// covers the node's own entries AsOf names: a power loss may take back an entry no fsync
// covers and give its seq to another write, and a client that listed the first and
// follows the feed after AsOf would never see the second. The snapshot is held from the
// first step on; a failed sync (degraded storage), ctx's end or the node's stop answers
// with that error and releases it.
func (n *Node) OpenSnapshot(ctx context.Context, table, prefix, after []byte, limit int) (page SnapshotPage, err error) {
	var synced chan writeResult // the fsync AsOf waits for; nil when none
	derr := n.read(func() {
		now := time.Now()
		n.expireSnapshots(now)
		if n.snaps.open == nil {
			n.snaps.open = map[string]*pinned{}
		}
		if len(n.snaps.open) >= n.cfg.maxSnapshots() {
			n.snaps.status.RefusedTooMany++
			err = ErrTooManySnapshots
			return
		}
		var snap store.Snapshot
		if snap, err = n.store.Snapshot(); err != nil {
			return
		}
		var asOf vector.Vector
		if asOf, err = n.store.Vector(); err != nil {
			snap.Release()
			return
		}
		p := &pinned{id: newSnapshotID(), table: bytes.Clone(table), snap: snap, asOf: asOf}
		if page, err = n.snapshotPage(p, prefix, after, limit); err != nil {
			snap.Release()
			return
		}
		n.snaps.status.Opened++
		if own := asOf.Get(n.rep.Identity().Origin).Seq; n.cfg.Sync != SyncNone && own > n.rep.SyncedSeq() {
			synced = make(chan writeResult, 1)
			n.waiters = append(n.waiters, waiter{seq: own, reply: synced}) // groupCommit answers it
		}
		if !page.More { // the listing ended on its first page: nothing to hold
			snap.Release()
			return
		}
		n.snaps.open[p.id] = p
		id := p.id
		p.timer = time.AfterFunc(n.cfg.snapshotTTL(), func() { n.expireSnapshot(id) })
	})
	if derr != nil {
		return SnapshotPage{}, derr
	}
	if err != nil || synced == nil {
		return page, err
	}
	select {
	case r := <-synced:
		err = r.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-n.stopped:
		return SnapshotPage{}, errStopped // Stop releases it
	}
	if err != nil {
		n.dropSnapshot(page.ID)
		return SnapshotPage{}, err
	}
	return page, nil
}

// dropSnapshot releases the snapshot id if it is still open.
func (n *Node) dropSnapshot(id string) {
	_ = n.read(func() { // fails once the node stops, whose Stop releases every snapshot
		if p := n.snaps.open[id]; p != nil {
			n.releaseSnapshot(p)
		}
	})
}

// SnapshotPage answers a later page of the snapshot id, for table: ErrSnapshotExpired
// when none of that id is open (its time ran out included), *SnapshotTableError when it
// was opened for another table. Each page holds the snapshot SnapshotTTL longer; the
// page that ends the listing (no More) releases it.
func (n *Node) SnapshotPage(id string, table, prefix, after []byte, limit int) (page SnapshotPage, err error) {
	derr := n.read(func() {
		n.expireSnapshots(time.Now())
		p := n.snaps.open[id]
		switch {
		case p == nil:
			n.snaps.status.RefusedExpired++
			err = ErrSnapshotExpired
			return
		case !bytes.Equal(p.table, table):
			err = &SnapshotTableError{ID: id, Table: string(p.table)}
			return
		}
		if page, err = n.snapshotPage(p, prefix, after, limit); err == nil && !page.More {
			n.releaseSnapshot(p) // the listing's last page
		}
	})
	if derr != nil {
		return SnapshotPage{}, derr
	}
	return page, err
}

// snapshotPage reads one page of p and holds p SnapshotTTL from now.
func (n *Node) snapshotPage(p *pinned, prefix, after []byte, limit int) (SnapshotPage, error) {
	page := SnapshotPage{ID: p.id, AsOf: p.asOf}
	var err error
	scan := func(fn func(store.Record) bool) error {
		// Records goes on into the tables after p.table: the page ends at the table's end.
		return p.snap.Records(p.table, after, func(r store.Record) bool {
			return bytes.Equal(r.Table, p.table) && fn(r)
		})
	}
	if page.Records, page.More, err = listPage(scan, prefix, limit); err != nil {
		return SnapshotPage{}, err
	}
	ttl := n.cfg.snapshotTTL()
	p.deadline = time.Now().Add(ttl)
	if p.timer != nil {
		p.timer.Reset(ttl)
	}
	return page, nil
}

// expireSnapshot is a snapshot's timer: it releases the snapshot if its deadline has
// passed (a later page may have moved it; its Reset fires this again).
func (n *Node) expireSnapshot(id string) {
	_ = n.read(func() { // fails once the node stops, whose Stop releases every snapshot
		if p := n.snaps.open[id]; p != nil && !time.Now().Before(p.deadline) {
			n.releaseSnapshot(p)
			n.snaps.status.TimedOut++
		}
	})
}

// expireSnapshots releases every snapshot whose deadline has passed at now: their timers
// may not have run yet, and a page or an open must never find one alive past it.
func (n *Node) expireSnapshots(now time.Time) {
	for _, p := range n.snaps.open {
		if !now.Before(p.deadline) {
			n.releaseSnapshot(p)
			n.snaps.status.TimedOut++
		}
	}
}

func (n *Node) releaseSnapshot(p *pinned) {
	p.timer.Stop()
	p.snap.Release()
	delete(n.snaps.open, p.id)
}

// releaseSnapshots releases every open snapshot: before the store closes (Stop, and the
// reopening after degraded storage), whose RocksDB snapshots must not outlive it. A page
// of one of them is answered ErrSnapshotExpired after.
func (n *Node) releaseSnapshots() {
	for _, p := range n.snaps.open {
		n.releaseSnapshot(p)
	}
}

// Snapshots reports the node's pinned snapshots.
func (n *Node) Snapshots() (SnapshotStatus, error) {
	var st SnapshotStatus
	err := n.read(func() {
		n.expireSnapshots(time.Now())
		st = n.snaps.status
		st.Open, st.Max, st.TTL = len(n.snaps.open), n.cfg.maxSnapshots(), n.cfg.snapshotTTL()
	})
	return st, err
}

// listPage is the listing's one rule, over the records scan gives in key order from the
// page's start (tombstones included): live records whose keys start with prefix, at most
// limit, and whether a live one of the prefix follows. The live listing (List) and a
// pinned snapshot's pages both take it, so that they can never list differently.
func listPage(scan func(fn func(store.Record) bool) error, prefix []byte, limit int) (recs []store.Record, more bool, err error) {
	err = scan(func(r store.Record) bool {
		switch {
		case bytes.Compare(r.Key, prefix) < 0:
			return true // before the prefix
		case !bytes.HasPrefix(r.Key, prefix):
			return false // past it
		case r.Deleted:
			return true
		case len(recs) == limit:
			more = true
			return false
		}
		recs = append(recs, r)
		return true
	})
	return recs, more, err
}
