package node

import "time"

// WithSyncGate returns cfg with gate called at the start of every group-commit fsync, on
// the fsync's goroutine: the tests hold a sync back with it.
func WithSyncGate(cfg Config, gate func()) Config {
	cfg.beforeSync = gate
	return cfg
}

// WithBackgroundErrors returns cfg with count standing for RocksDB's count of background
// errors (rocksstore.Options.BackgroundErrors): a flush or compaction failing on demand.
func WithBackgroundErrors(cfg Config, count func() uint64) Config {
	cfg.backgroundErrors = count
	return cfg
}

// WithFreeSpace returns cfg with statfs standing for the data directory's file system: the
// free-space guard, the reserve's default and the recovery read it instead.
func WithFreeSpace(cfg Config, statfs func() (avail, size uint64, err error)) Config {
	cfg.statfs = statfs
	return cfg
}

// WithStorageClock returns cfg with now as the clock of the storage recovery's schedule
// (when it degraded, when the next attempt is due).
func WithStorageClock(cfg Config, now func() time.Time) Config {
	cfg.storageClock = now
	return cfg
}
