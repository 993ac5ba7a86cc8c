package replica

import "time"

// HubStatus is a leaf's view of its hub (docs/design.md §27.5, /v1/status "hub"): what the
// hub's last LEAFSTATE said. A client that wrote at the leaf waits on CoreSeq at or above
// its write's origin_seq: only then has every member of the core the write.
type HubStatus struct {
	Name      string // Config.Hub
	Connected bool   // a version-4 link with the leaf capability is established to the hub
	// ReoriginatedSeq is the highest own seq the hub re-originated (or refused), durably at
	// the hub; HubSeq the hub's own seq of the entry carrying it; CoreSeq the highest own
	// seq whose carrying entry every member of the hub's map has applied.
	ReoriginatedSeq uint64
	HubSeq          uint64
	CoreSeq         uint64
	// Horizon is the tombstone horizon the hub advertises (zero: none told yet): a write
	// older than the hub's leaf window is refused too-old.
	Horizon time.Time
	// Refused is how many of this leaf's writes the hub refused (they stay on the leaf
	// only); LastRefusedSeq and LastRefusedReason name the newest (0 and "": none).
	Refused           uint64
	LastRefusedSeq    uint64
	LastRefusedReason string
}

// LeavesStatus is a hub's leaves (docs/design.md §27.7, /v1/status "leaves"), bounded
// whatever the number of leaves: counts, a lag histogram and at most MaxSlowestLeaves rows.
type LeavesStatus struct {
	Max       int // Config.MaxLeaves
	Connected int // leaf links established
	Marks     int // leaf marks this node's store keeps (leaves it re-originated or saw re-originated)
	// Held is how many connected leaves' channels are held back: for the clock (a leaf entry
	// too far ahead of this node's wall clock) or the gate (the cluster is not ready for
	// leaves).
	Held int
	// Lag is the connected leaves by how far the hub is behind each (LeafLagBuckets), and
	// Slowest the leaves furthest behind, most behind first.
	Lag     []LeafLag
	Slowest []LeafBehind
	// LeavesRefusedByCode counts the leaves refused by close code (leaves_refused), and
	// WritesRefusedByReason the leaf writes not re-originated by reason
	// (leaf_writes_refused: too-old, not-carried, fenced, too-large); each sorted by code.
	LeavesRefusedByCode   []CodeCount
	WritesRefusedByReason []CodeCount
}

// LeafLag is one bucket of the leaves' lag: how many connected leaves the hub is behind by
// at most LeMs milliseconds and more than the bucket before's (LeMs 0: the last bucket,
// with no bound; le_ms null in the document).
type LeafLag struct {
	LeMs   uint64
	Leaves int
}

// LeafBehind is one leaf the hub is behind: its name, the highest of its seqs the hub
// re-originated (its mark), and the milliseconds between the newest entry the leaf
// advertised and the entry at its mark (HLC time).
type LeafBehind struct {
	Name     string
	Seq      uint64
	BehindMs uint64
}

// LeafLagBuckets are the bounds of LeavesStatus.Lag's buckets, in milliseconds; a last
// bucket without a bound follows. MaxSlowestLeaves bounds LeavesStatus.Slowest.
var LeafLagBuckets = []uint64{100, 1000, 10000}

// MaxSlowestLeaves bounds LeavesStatus.Slowest.
const MaxSlowestLeaves = 10
