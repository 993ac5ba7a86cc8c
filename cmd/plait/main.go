package main

import (
	"fmt"
	"os"

	"plait/internal/demo"
)

const usage = `usage: plait <command> [flags]

commands:
  serve   run a node (plait serve -h lists the flags)
  status  a node's /v1/status as tables (--http HOST:PORT [--token-file FILE] [--ca FILE])
  map     the cluster map: plait map get [--node NAME], plait map set FILE|-
          (the flags of status)
  lock    a lock of a key: plait lock acquire|renew|release TABLE KEY
          [--ttl D] [--wait D] [--token T] (and the flags of status)
  check   audit a stopped node's data directory (--data DIR); exit 0 iff all holds
  reseed  give a stopped node restored from a backup a new origin id (--data DIR),
          its entries re-issued under it: the way out of origin-rewound
  bench   replication beside raw RocksDB and raw WebSocket, in one run (BENCHMARKS.md)
  cert    certificates for mutual TLS: plait cert ca --dir DIR, then
          plait cert node --dir DIR --name NAME [--host HOST]...
  demo    four nodes in one process, a relay failover; exit 0 iff every node ends
          with the same digest and nothing was delivered twice
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:], os.Stderr))
	case "status":
		os.Exit(status(os.Args[2:], os.Stdout, os.Stderr))
	case "map":
		os.Exit(clusterMap(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	case "lock":
		os.Exit(lockCommand(os.Args[2:], os.Stdout, os.Stderr))
	case "check":
		os.Exit(check(os.Args[2:], os.Stdout, os.Stderr))
	case "reseed":
		os.Exit(reseed(os.Args[2:], os.Stdout, os.Stderr))
	case "bench":
		os.Exit(benchmark(os.Args[2:], os.Stdout, os.Stderr))
	case "cert":
		os.Exit(cert(os.Args[2:], os.Stdout, os.Stderr))
	case "demo":
		if err := demo.Run(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "plait demo:", err)
			os.Exit(1)
		}
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "plait: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
