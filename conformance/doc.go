// Package conformance owns the frozen builds of released protocol cores
// (releases/<version>/core.wasm, recorded in RELEASES.md) and the tests that hold the
// current build to them. The deterministic simulator and the version matrix join it.
package conformance
