//go:build wasip1

package main

import (
	"unsafe"

	"plait/protocol/abi"
	"plait/protocol/wire"
)

func main() {}

// hostSHA256 (ABI 4) is the host's SHA-256: it writes the 32-byte hash of the n bytes at
// data to out. Go's SHA-256 compiled to WASM has no hardware instructions and runs many
// times slower than the host's, and every received frame needs its chain hash
// (docs/design.md §12).
//
//go:wasmimport plait sha256
func hostSHA256(data unsafe.Pointer, n uint32, out unsafe.Pointer)

func init() {
	// SetSum256 checks the host's answers against crypto/sha256 before it uses them.
	wire.SetSum256(func(b []byte) wire.Hash {
		var h wire.Hash
		if len(b) == 0 {
			hostSHA256(unsafe.Pointer(&h[0]), 0, unsafe.Pointer(&h[0]))
			return h
		}
		hostSHA256(unsafe.Pointer(&b[0]), uint32(len(b)), unsafe.Pointer(&h[0]))
		return h
	})
}

var (
	driver abi.Driver
	input  []byte // the guest-owned buffer the host writes a batch into
	output []byte // the last reply, kept alive until the next call
)

//go:wasmexport abi_version
func abiVersion() int32 { return abi.Version }

// alloc makes the input buffer at least n bytes long and returns its address, or 0 when n
// is negative or above abi.MaxBatch.
//
//go:wasmexport alloc
func alloc(n int32) int32 {
	if n < 0 || int64(n) > abi.MaxBatch {
		return 0
	}
	if n < 1 {
		n = 1
	}
	if cap(input) < int(n) {
		input = make([]byte, n)
	}
	input = input[:n]
	return int32(uintptr(unsafe.Pointer(&input[0])))
}

// step runs the batch held in the first n bytes of the input buffer and returns the
// reply's address in the high 32 bits and its length in the low 32 bits.
//
//go:wasmexport step
func step(n int32) int64 {
	if n < 0 || int(n) > len(input) {
		output = driver.Reject("step: batch length outside the buffer given by alloc")
	} else {
		output = driver.Step(input[:n])
	}
	if len(output) == 0 {
		return 0
	}
	return int64(uintptr(unsafe.Pointer(&output[0])))<<32 | int64(len(output))
}
