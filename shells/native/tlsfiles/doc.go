// Package tlsfiles owns the certificate files a node serves and dials with: loading and
// checking them, reloading them on request or when they change on disk, and the tls.Configs
// built from each loaded generation. A generation's configurations are built once, when it
// is loaded, and reused by every connection until the next reload: building TLS state per
// connection turns a reconnect storm into a memory storm.
//
// Two kinds of files are loaded. A peer set (Cert, Key and CA) is a node certificate of
// internal/certs' form, for mutual TLS 1.3 between peers; a server pair (Cert and Key only)
// is any certificate, for the HTTP API.
//
// # The jobs, by file
//
//   - tlsfiles.go: Source, one set of files (LoadPeer, LoadServer), its generations and
//     reloads; the listener's, dialer's and HTTPS server's configurations; the
//     verification of a peer's certificate and the node name it carries (PeerName); and
//     the refusal codes of a failed TLS handshake (RefusalCode, docs/contract.md §8.5).
//   - inode_unix.go and inode_other.go: a file's inode where the platform has one, so that
//     a file replaced by a rename counts as changed even when its size and time are not.
package tlsfiles
