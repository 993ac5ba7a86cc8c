// Package fuzz owns the fuzz targets of the protocol core's decode loop: the bytes of one
// received message, decoded by the wire layer (wire.DecodeMessage) and fed to an established
// session (protocol.Session.Receive).
//
// FuzzDecode and FuzzSession check the current core natively against the properties they
// state. FuzzDiff feeds the same message to every build the repository holds through the
// WASM ABI (shells/wasm/ABI.md): this commit's core natively and compiled to WASM, which must
// answer byte for byte the same, and each frozen release of conformance/RELEASES.md, which
// must agree with this build on what it accepts and rejects, unless
// testdata/known_differences.txt lists the difference with its reason.
//
// Each target states the properties it checks next to its code. The committed corpus under
// testdata/fuzz/<Target>/ (seeds, and regression inputs the fuzzer found) is replayed by a
// plain `go test ./fuzz`; `make fuzz` (scripts/fuzz.sh) runs every target in turn, adds
// the new interesting inputs it finds, and adds each run's figures to TOTALS.md, the
// cumulative fuzzing of each target.
package fuzz
