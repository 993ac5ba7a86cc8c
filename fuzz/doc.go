// Package fuzz owns the fuzz targets of the protocol core's decode loop: the bytes of one
// received message, decoded by the wire layer (wire.DecodeMessage) and fed to an established
// session (protocol.Session.Receive).
//
// Each target states the properties it checks next to its code. The committed corpus under
// testdata/fuzz/<Target>/ (seeds, and regression inputs the fuzzer found) is replayed by a
// plain `go test ./fuzz`; `make fuzz` (scripts/fuzz.sh) runs every target in turn and adds
// the new interesting inputs it finds.
package fuzz
