package wire

import "crypto/sha256"

// sum256 computes the chain hash; nil: crypto/sha256. Only a shell sets it, once, before
// any session exists (SetSum256).
var sum256 func([]byte) Hash

// Sum256 is the chain hash of a transaction encoding: its SHA-256. Every hash of the chain
// the core computes goes through it, so that a shell can give the core a faster
// implementation of the same function (SetSum256).
func Sum256(b []byte) Hash {
	if sum256 != nil {
		return sum256(b)
	}
	return sha256.Sum256(b)
}

// SetSum256 makes f compute Sum256. f must be SHA-256: SetSum256 checks it on a few inputs
// and refuses (returns false, keeping crypto/sha256) a function that answers otherwise. It
// exists for the WASM guest, where Go's SHA-256 has no hardware instructions and runs many
// times slower than the host's (docs/design.md §12): the guest hands hashing to its host.
// Call it once, before any session exists; it is not safe with concurrent hashing.
func SetSum256(f func([]byte) Hash) bool {
	for _, probe := range [][]byte{{}, []byte("abc"), make([]byte, 1000)} {
		if f(probe) != sha256.Sum256(probe) {
			return false
		}
	}
	sum256 = f
	return true
}
