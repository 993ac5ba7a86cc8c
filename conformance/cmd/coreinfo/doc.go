// Command coreinfo prints what a core module reports of itself: its ABI version and the
// protocol versions its sessions offer (scripts/freeze.sh writes them into RELEASES.md).
//
//	go run ./conformance/cmd/coreinfo CORE.wasm    (prints: abi N, then versions MIN..MAX)
//
// # Versions
//
// It reads a module of any released ABI the same way, from the STATUS record of a session
// configured with no version bound, so the range it prints is every protocol version the
// build implements: 1..1 for release 0.1, 1..2 for 0.2, 1..3 for 0.3 and this build.
//
// # The jobs, by file
//
// main.go holds them all: it loads the module under shells/wasm/host, configures one
// session and prints the module's ABI version and its session's version range.
package main
