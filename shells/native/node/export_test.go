package node

// WithSyncGate returns cfg with gate called at the start of every group-commit fsync, on
// the fsync's goroutine: the tests hold a sync back with it.
func WithSyncGate(cfg Config, gate func()) Config {
	cfg.beforeSync = gate
	return cfg
}
