package store

import (
	"errors"
	"strconv"
)

// Control documents are small durable documents outside the records and the logs: the
// cluster map and the member entries of protocol versions (docs/design.md §23.2). They are
// no record: no origin log carries them, and nothing of the records' and logs' (Scan,
// Tables, Snapshot and so the base copy, the digest, the audit, anti-entropy, a reseed)
// reads or changes them. Each is a whole document under a key, written in one atomic write.

const (
	// MaxControlKey bounds a control key: 1 to 64 bytes of [a-z0-9-].
	MaxControlKey = 64
	// MaxControlValue bounds a control document: a cluster map is at most 64 KiB and the
	// member entries less; the bound leaves room without letting one grow without limit.
	MaxControlValue = 1 << 20
)

// ErrBadControl is the error of Control and PutControl for a key outside the rule, or a
// value over MaxControlValue; nothing is written.
var ErrBadControl = errors.New("store: a control key or document the store does not allow")

// CheckControlKey checks a control key: 1 to MaxControlKey bytes of [a-z0-9-]. The rule is
// narrow so that a key is safe in any store's layout and in any message.
func CheckControlKey(key string) error {
	if len(key) == 0 || len(key) > MaxControlKey {
		return errorf("the control key %s is %d bytes, not 1 to %d: %w", quoteKey(key), len(key), MaxControlKey, ErrBadControl)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return errorf("the control key %s has %s, outside [a-z0-9-]: %w", quoteKey(key), strconv.QuoteRune(rune(c)), ErrBadControl)
		}
	}
	return nil
}

// CheckControl checks what PutControl is given: the key, and a value of at most
// MaxControlValue bytes (empty is a value: Control returns it as an empty, non-nil slice).
func CheckControl(key string, value []byte) error {
	if err := CheckControlKey(key); err != nil {
		return err
	}
	if len(value) > MaxControlValue {
		return errorf("the control document %s is %d bytes, over the %d allowed: %w", key, len(value), MaxControlValue, ErrBadControl)
	}
	return nil
}

func quoteKey(key string) string {
	if len(key) > 2*MaxControlKey {
		return strconv.Quote(key[:2*MaxControlKey]) + "..."
	}
	return strconv.Quote(key)
}
