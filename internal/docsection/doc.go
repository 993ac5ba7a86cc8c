// Package docsection reads a numbered section of the repository's docs (docs/contract.md,
// docs/operations.md, ...) for the tests that keep the docs and the code in step: a flag
// table against the flags, the scope table against the routes, an example against the
// type it shows.
//
// # The jobs, by file
//
// docsection.go holds them all: Section, a numbered section of a doc, or a failed test
// when the file or the section is not there.
package docsection
