// Command purity enforces docs/design.md §2 on the protocol core: no package it checks imports
// anything of the one forbidden list (I/O, concurrency, randomness, logging, unsafe, cgo),
// reads a clock, or starts a goroutine. It checks the direct imports and the code of each
// package's non-test files, as `go list` selects them for the current platform.
//
//	go run ./tools/purity ./protocol/...
//
// # The jobs, by file
//
//   - main.go: the packages to check, and their files, as go list gives them.
//   - check.go: the forbidden list and the check of one package's files: its imports,
//     clock reads and go statements.
package main
