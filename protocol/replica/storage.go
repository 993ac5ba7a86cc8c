package replica

import (
	"errors"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// Degraded storage: a write or sync of the store that failed for the storage itself (a
// full file system, an I/O error), as opposed to a store that refused a batch or found
// its data damaged. Such a failure does not stop the replica: it degrades. A degraded
// replica refuses local writes with the storage error, applies nothing it receives (no
// cursor moves, nothing acknowledged), unsubscribes every version-2 channel and closes
// version-1 connections (going-away: they redial, and are not subscribed while it lasts),
// runs no retention step and takes no copy. Reads and status go on. It never leaves the
// state by itself: a store that failed a write may be unusable until it is reopened (the
// RocksDB store is), so the shell recovers by opening the store again and building a new
// replica on it (New), which resumes from what the store holds.

// storageState is the replica's degradation: the first storage error and when it came.
type storageState struct {
	err   *store.StorageError
	since time.Time
}

// StorageStatus is node.storage of /v1/status: "ok", or "degraded" with the first
// storage error's code, message and time. The shell, which retries, adds Retries.
type StorageStatus struct {
	Degraded bool
	Code     wire.Code
	Message  string
	Since    time.Time
	Retries  uint64
}

// Degraded is the storage error the replica degraded for, nil while its storage is fine.
func (r *Replica) Degraded() *store.StorageError { return r.storage.err }

// StorageFailed tells the replica that a storage operation the shell ran failed: a Sync of
// the group commit, a compaction, or the shell's own check of free space. A StorageError
// (wrapped or not) degrades the replica; any other error stops it, as a failure of the
// store inside the replica does.
func (r *Replica) StorageFailed(now time.Time, err error) error {
	if r.fatal != nil {
		return r.fatal
	}
	r.setNow(now)
	var se *store.StorageError
	if !errors.As(err, &se) {
		r.check(err)
		return r.fatal
	}
	r.degrade(se)
	return r.settle()
}

// degrade enters degraded storage once (the first error is the one reported): it stops
// every stream in, so that nothing more is received to apply.
func (r *Replica) degrade(se *store.StorageError) {
	if r.storage.err != nil {
		return
	}
	r.storage = storageState{err: se, since: r.now}
	for _, c := range r.connList {
		if !c.established {
			continue
		}
		if c.version == 1 {
			// Version 1 has no unsubscribe: the connection goes, and its redial is not
			// subscribed while the storage is degraded.
			r.closeConn(c, wire.CodeGoingAway, "this node's storage is degraded: "+se.Error())
			continue
		}
		for _, o := range r.originOrder {
			r.unsubscribe(c, o)
		}
	}
	for _, o := range r.originOrder {
		r.origins[o].source, r.origins[o].srcHead = 0, 0 // routing chooses none while degraded (route)
	}
	r.stopTaking(wire.NewError(se.Code, se.Error()))
}

// storageRefusal is the error a local write is refused with while the storage is
// degraded: the StorageError itself, whose code the HTTP API answers.
func (r *Replica) storageRefusal() error {
	if r.storage.err == nil {
		return nil
	}
	return r.storage.err
}

// settleFailed ends an input that failed inside the replica, unless the replica stopped:
// it settles, as every input does before it returns. A failure that degraded the storage
// closed the version-1 connections (degrade); settling handles their sessions' EventClosed,
// so each connection is dropped and its close is in this input's Output. Without it the
// replica would hold connections whose sessions are closed until some later input settled:
// no close would go out, and a message arriving on one would be refused (Receive on a
// closed session) instead of answered ErrUnknownConn.
func (r *Replica) settleFailed() error {
	if r.fatal != nil {
		return r.fatal
	}
	return r.settle()
}

// failure is why an input failed inside the replica: the fatal error, or else the storage
// error it degraded for.
func (r *Replica) failure() error {
	if r.fatal != nil {
		return r.fatal
	}
	if r.storage.err != nil {
		return r.storage.err
	}
	return nil
}

func (r *Replica) storageStatus() StorageStatus {
	se := r.storage.err
	if se == nil {
		return StorageStatus{}
	}
	return StorageStatus{Degraded: true, Code: se.Code, Message: se.Error(), Since: r.storage.since}
}

// syncNow makes everything applied durable at once, as a group commit would later, and
// says so to the peers (the own origin's synced position): for what must survive a power
// loss before another node acts on it. It reports false when the store failed.
func (r *Replica) syncNow() bool {
	if !r.check(r.store.Sync()) {
		return false
	}
	own := r.origin(r.id.Origin)
	r.synced, r.syncedHLC, r.syncedArrive = own.applied.Seq, own.appliedHLC, r.arrivals
	r.headsDirty[r.id.Origin] = true
	return true
}
