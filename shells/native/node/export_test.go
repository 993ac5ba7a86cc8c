package node

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
