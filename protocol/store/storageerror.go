package store

import "plait/protocol/wire"

// StorageError is a write or sync of the store that failed for the storage itself. A store
// returns it (wrapped or not) for such failures; Code is CodeStorageFull when the file
// system is full, CodeStorageFailed for any other failure of a write or an fsync. Op
// names what failed ("apply", "sync", "purge", a shell's "free-space guard").
type StorageError struct {
	Code wire.Code
	Op   string
	Err  error
}

func (e *StorageError) Error() string {
	msg := "storage " + string(e.Code) + " in " + e.Op
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *StorageError) Unwrap() error { return e.Err }
