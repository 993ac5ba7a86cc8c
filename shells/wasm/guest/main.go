//go:build wasip1

// Command guest is plait's protocol core as a WASM reactor module (GOOS=wasip1,
// -buildmode=c-shared): one instance runs one Session, driven through the batch ABI of
// shells/wasm/ABI.md. Hosts run _initialize first, then call the exports below.
package main

import (
	"unsafe"

	"plait/protocol/abi"
)

func main() {}

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
