// Package cluster owns running plait nodes for the demo, the benchmarks and the
// multi-process tests: starting a node, in this process (node.Start) or as a `plait serve`
// process of a given binary; waiting until it is healthy; reading its status document;
// a client of its HTTP API (package client, Node.Client); stopping it, and killing it when it is a process. Both kinds stand behind one Node, and
// WaitFor is the one bounded wait they poll with.
//
// # The jobs, by file
//
//   - cluster.go: Node, its status and its API's client, Stop, Kill and Signal; WaitFor and WaitEvery, the
//     bounded polling waits.
//   - local.go: StartLocal, a node in this process (node.Start); process.go:
//     StartProcess, a plait serve process of a given binary, its restart and its memory
//     (RSS, read from /proc); sockets.go: a process's TCP connections and their states.
package cluster
