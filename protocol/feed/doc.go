// Package feed is the pure core of a table's change feed (docs/design.md §26): the feed
// position and its text (docs/contract.md §24.2), where a feed may start on a node (Start),
// and the Reader, which turns a node's origin logs into the table's events: its changes,
// per origin in seq order and across origins by HLC then origin id, and a Reread where the
// logs cannot say what changed (a run naming the table held as a skip, a copy that raised
// the floors past the reader, records written around the log).
//
// The store is passed in at every call and read only; what the logs do not hold (how many
// records the replica wrote around the log, how many copies ended) comes in as Inputs, so
// that the decision to send a reread lives here and not in a shell. Like the rest of
// protocol/, the package does no I/O, reads no clock, draws no random number and starts no
// goroutine: the same store and the same inputs give the same events.
package feed
