// Command abigen writes protocol/abi/compact_gen.go, the compact codec of the ABI's RESULT,
// EVENT and STATUS records (shells/wasm/ABI.md, "Compact records"), from the message structs
// of protocol/abi: ResultMsg, EventMsg, StatusMsg and the structs their fields nest. Those
// structs are the one table of the records' fields: a field's name, its Go type and its key
// (the `cbor` tag's, or a `compact` tag's where the compact key differs) are written there
// once, and the CBOR encoding (by the cbor package's reflection) and the compact one (by the
// code generated here, without reflection, as a WASM guest needs) both follow from them.
//
//	go generate ./protocol/abi      (runs: go run ../../tools/abigen)
//	go run ./tools/abigen -dir protocol/abi -check
//
// A field is written as its type says (the layout of shells/wasm/ABI.md): a uint8 or uint64
// as a uvarint, an int64 as a zigzag varint, each left out when zero; a *int64 as a zigzag
// varint whenever it is set, zero included; a bool as an empty value when true; a string or
// []byte as its bytes when not empty; a []string as one field per element; a wire.OriginID
// as its 16 bytes when not zero (a `compact:",always"` tag writes it zero too); a
// *wire.OriginID or *wire.Hash as its bytes whenever set; a struct of the package as a
// nested message of its own fields (a pointer whenever set, a value when not zero, a slice
// one field per element); and a pointer tagged `compact:",cbor"` as its CBOR encoding. A
// reader skips a key it does not know. A type outside this list is an error, so that a new
// field never goes unencoded silently.
//
// `-check` compares instead of writing, and fails when the file is not what the structs
// give; the test of this package does the same on every `go test ./...`.
//
// # The jobs, by file
//
// main.go holds them all: Generate, which reads the structs of protocol/abi's abi.go and
// writes each message's compact writer and reader; Check, the comparison -check and the
// test run; and main.
package main
