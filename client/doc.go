// Package client is a Go client of a plait node's HTTP API (docs/contract.md §6, §8, §22,
// §24): records, batches, pinned listings, digests, status, change feeds, locks and the
// cluster map, with the API's errors as typed values and retries that never write twice
// what may have been written once. Its promises are docs/contract.md §25; its design
// docs/design.md §26.6.
//
// It imports the standard library and the CBOR library (github.com/fxamacker/cbor/v2)
// alone and builds with CGO_ENABLED=0, so a program that only talks to nodes does not link
// RocksDB or anything else of plait.
//
// # Using it from another module
//
// The module is plait (not a fetchable path), so another module requires it and
// replaces it with a checkout of the repository:
//
//	require plait v0.0.0
//	replace plait => ../plait
//
// or puts both in one workspace (go work init ./app ./plait). Then
//
//	import "plait/client"
//
//	c, err := client.New("https://node-a:7401", client.WithTokenFile("token"), client.WithCAFile("ca.pem"))
//	seq, err := c.Put(ctx, "orders", []byte("k"), []byte("v"))
//	v, err := c.Get(ctx, "orders", []byte("k"))
//	if errors.Is(err, client.ErrNotFound) { ... }
//
// Only this package is for use outside the repository; the others are plait's own and
// change without notice.
//
// # Versions
//
// It speaks the HTTP API /v1 as this build serves it. The API is only added to
// (docs/contract.md §19), so an older node answers the calls it has as this one does: a
// path it lacks answers ErrNotFound, a CBOR batch (sent only for keys that are not
// UTF-8) ErrBadJSON. The change feed (Changes) and pinned listings need a node that has
// them (docs/contract.md §25.4); List falls back to plain paging, one page at a time
// from the live table, against a node that answers without a snapshot (Page.Snapshot is
// then ""). Locks need a cluster of version-4 nodes with lock homes (§22.8).
//
// # Errors and retries
//
// A refusal of the API is an *Error (status, code, Class, message); every code of
// §6.3 has a sentinel, matched with errors.Is (client.ErrLockHeld). A call that got no
// answer is a *TransportError, whose Sent says whether the request had gone whole.
// Reads are sent again after any failure but a 4xx refusal, at most WithMaxAttempts
// times, with WithBackoff's backoff. A write (Put, Delete, Batch, the lock calls) is
// sent again only when it was not sent whole, or when its refusal says nothing was
// applied and that it heals: clock-offset, storage-full and storage-failed for records
// (not no-carrier: a write forwarded to a carrier may have applied there; not
// unavailable, request-timeout or unreachable, after which the write may have applied),
// and for locks the home's refusals that granted nothing (quarantined, move-pending, the
// too-many-* and no-route).
//
// # The files
//
//   - client.go: New and its options, and the one way a call is sent and sent again.
//   - errors.go: Error, TransportError, Class and the sentinels of the API's codes.
//   - records.go: Put, Get, Delete, Batch (JSON, or CBOR for keys that are not UTF-8),
//     List (pinned pages) and Digest.
//   - status.go: Status, the status document's main fields.
//   - changes.go: Changes, a change feed that resumes by itself.
//   - locks.go: the lock calls and the cluster map's.
package client
