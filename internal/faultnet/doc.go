// Package faultnet owns the faulty network between the processes of a test cluster: one
// Shopify toxiproxy proxy per link, embedded in the test's own process, and the toxics
// (latency with jitter, bandwidth limits, timeouts, resets, slow closes, partitions) set on
// it. A link has one dialing side, which dials the proxy instead of the listener, so every
// byte of the link passes the proxy; a toxic applies to both directions unless it is set on
// one.
//
// Why embedded rather than toxiproxy's server: the test needs no binary beside plait's,
// no port for an API, and a toxic takes effect before the call that sets it returns.
//
// # The jobs, by file
//
// faultnet.go holds them all: Net, the embedded toxiproxy; Link, one proxied link, its
// toxics (Add, Remove) and partitions (Partition, Heal); and the toxics (Latency,
// Bandwidth, Timeout, Reset, SlowClose).
package faultnet
