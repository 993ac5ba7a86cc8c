// Package httpapi owns a node's HTTP API (docs/contract.md §6 and §8):
// records, batches (JSON or CBOR bodies), listing, digests, status, the cluster map
// (§22), Prometheus metrics and health, answered as JSON over a node.Node. It decides nothing about replication; it
// checks requests against the contract's bounds and turns them into node calls. StatusDoc
// is its status document, which ReadStatus reads from a node for this package's tests;
// programs, the commands and the cluster harness call a node through package client
// (plait/client), which imports none of this.
//
// With RequireTokens, it also decides which endpoint needs which token scope and answers
// the requests it refuses (401 and 403, §6.4); the tokens themselves, and their comparison,
// are apitoken's.
//
// # The jobs, by file
//
//   - httpapi.go: the API (New), its bounds (Limits), the one table of routes and the
//     scope each needs, the bearer-token check, the handlers of records, batches, listing,
//     digests, status, peers and /healthz, and the errors' JSON form.
//   - clustermap.go: GET and PUT /v1/cluster/map, a request to another node for its map,
//     and the HTTP statuses of a request's refusals (docs/contract.md §22).
//   - namedfeeds.go: named feeds (docs/contract.md §24.6): PUT, GET and DELETE
//     /v1/feeds/{name}, its acks, and its stream, the table's feed (feeds.go) from the
//     acknowledged position; NamedFeedDoc, its document in both answers and the status.
//   - statusdoc.go: StatusDoc and LagDoc, the documents of GET /v1/status and GET
//     /v1/status/lag, built from the replica's status; ReadStatus, their client side.
//   - client.go: what package client does not cover, for this package's tests: Call
//     (one call with a token) and APIError.
//   - counters.go: the document's counters, one per field of replica.Counters, named by
//     its tag (docs/contract.md §8.4).
//   - metrics.go: the plait_* metrics of GET /metrics (docs/contract.md §9), read from the
//     node's status at each scrape, and the API's own (refusals, reloads, expiry).
//   - snapshots.go: a listing's pinned snapshot as the API shows it: as_of's position
//     text, the status document's snapshots and their metrics (docs/contract.md §24.5).
package httpapi
