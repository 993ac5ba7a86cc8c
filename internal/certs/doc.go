// Package certs makes the certificates of a plait cluster's mutual TLS (docs/contract.md
// §17): a certificate authority, and node certificates it signs whose one URI SAN
// plait://node/NAME names the node, for serverAuth and clientAuth. It writes PEM files,
// keys with mode 0600, and never replaces a file unless told to.
//
// # The jobs, by file
//
// certs.go holds them all: NewCA and NewNode, the files they write and their options
// (key algorithm, lifetime, --overwrite); LoadCA; and the node name a certificate carries
// (NodeURI, NodeName), which tlsfiles reads to tell a peer's name.
package certs
