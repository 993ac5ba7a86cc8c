// Package apitoken owns who may call a node's HTTP API: the token file of
// `plait serve --api-token-file` (one `TOKEN SCOPE` a line), its checks, its reload, and the
// comparison of a presented bearer token with the tokens it holds (docs/contract.md §6.4).
// It knows nothing of HTTP: which endpoint needs which scope, and the answers to a request
// refused, are httpapi's.
//
// Tokens are compared by their SHA-256, in constant time and against every token of the
// set whatever matched before, so that neither the time of a refusal nor the length of a
// guess tells anything about the tokens held.
//
// # The jobs, by file
//
// apitoken.go holds them all: Scope and the order of scopes; Set, one parsed file, and its
// Lookup; Parse and ParseFile, the file's rules, each broken one a LineError; and File,
// the file a node serves with, whose Reload swaps in a new Set only when the whole file
// parses, so a bad edit leaves the tokens in force.
package apitoken
