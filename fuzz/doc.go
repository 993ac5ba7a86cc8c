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
//
// # Versions
//
// FuzzDecode's wire properties cover the frames of every version; its session is
// established at version 1 (prototest.ConfigV1), FuzzSession's at version 2
// (prototest.ConfigV2), so that each fuzzes the receive checks of its version. FuzzDiff
// runs each release's session at the release's newest version (0.1: 1, 0.2: 2, 0.3: 3)
// and this build's, native and WASM, at its newest and at each of those, so at 1, 2, 3 and
// 4, each against a native peer of this build held to that version; on DECODE it compares
// a release with this build only over the frame types both implement (version 4's frames
// only this build does, and on the releases' connections they are known differences).
//
// # The jobs, by file
//
//   - decode_test.go: FuzzDecode, its seeds and their expected outcomes; session_test.go:
//     FuzzSession, its setup, seeds and outcomes. -write-seeds and -write-session-seeds
//     write the seeds into the corpus.
//   - diff_test.go: FuzzDiff, its builds and setups, and the known differences;
//     diffwasm_test.go: the core modules FuzzDiff runs, whose state is saved once
//     established and restored before each input.
//   - bodies_test.go: each target's body as a benchmark over its inputs, for profiling,
//     since go test -fuzz takes no -cpuprofile.
package fuzz
