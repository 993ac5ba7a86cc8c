package main

import (
	"fmt"
	"io"
	"strings"

	"plait/internal/certs"
	"plait/protocol/wire"
)

// hostList is a repeatable --host.
type hostList []string

func (h *hostList) String() string     { return strings.Join(*h, ",") }
func (h *hostList) Set(v string) error { *h = append(*h, v); return nil }

// cert is plait cert ca|node: the certificates of mutual TLS between nodes
// (docs/contract.md §17). Exit 0 when written; 1 when refused or failed (a file exists
// without --overwrite, no CA, an I/O error); 2 for a bad command line.
func cert(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "ca" && args[0] != "node" {
		fmt.Fprintln(stderr, "usage: plait cert ca --dir DIR | plait cert node --dir DIR --name NAME [--host HOST]...")
		return 2
	}
	kind := args[0]
	fs := newFlags("plait cert "+kind, stderr)
	dir := fs.String("dir", "", "the directory of the CA's files (ca.crt, ca.key) and the nodes' (NAME.crt, NAME.key)")
	alg := fs.String("key", string(certs.ECDSAP256), "the key algorithm: ecdsa-p256 or ed25519")
	lifetime := fs.Duration("lifetime", 0, "how long the certificate is valid (0: 87600h for a CA, 17520h for a node)")
	overwrite := fs.Bool("overwrite", false, "replace files that exist")
	var name string
	var hosts hostList
	if kind == "node" {
		fs.StringVar(&name, "name", "", "the node's --name, written as the URI SAN plait://node/NAME")
		fs.Var(&hosts, "host", "an IP address or DNS name peers dial this node by; repeatable")
	}
	if !parseFlags(fs, args[1:]) {
		return 2
	}
	switch {
	case *dir == "":
		fmt.Fprintf(stderr, "plait cert %s: --dir is required\n", kind)
		return 2
	case *alg != string(certs.ECDSAP256) && *alg != string(certs.Ed25519):
		fmt.Fprintf(stderr, "plait cert %s: --key %q: want ecdsa-p256 or ed25519\n", kind, *alg)
		return 2
	case *lifetime < 0:
		fmt.Fprintf(stderr, "plait cert %s: --lifetime %s is negative\n", kind, *lifetime)
		return 2
	case kind == "node" && (!wire.ValidName(name) || name == certs.CAName):
		fmt.Fprintf(stderr, "plait cert node: --name %q: 1 to 64 bytes of [A-Za-z0-9_.-], and not %q (the CA's files)\n", name, certs.CAName)
		return 2
	}
	for _, h := range hosts {
		if !certs.ValidHost(h) {
			fmt.Fprintf(stderr, "plait cert node: --host %q is neither an IP address nor a DNS name\n", h)
			return 2
		}
	}
	o := certs.Options{Dir: *dir, Algorithm: certs.Algorithm(*alg), Lifetime: *lifetime, Overwrite: *overwrite}
	var err error
	if kind == "ca" {
		err = certs.NewCA(o)
	} else {
		err = certs.NewNode(o, name, hosts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "plait cert %s: %v\n", kind, err)
		return 1
	}
	stem := certs.CAName
	if kind == "node" {
		stem = name
	}
	fmt.Fprintf(stdout, "wrote %s/%s.crt and %s/%s.key\n", *dir, stem, *dir, stem)
	return 0
}
