// Command plait is the plait replication node: `plait serve` runs one (docs/contract.md §2);
// status, map, check, reseed, bench, cert and demo are the README's other commands.
//
// It parses command lines and calls the shells and harnesses; it decides nothing
// (docs/design.md §1).
//
// # Versions
//
// plait serve offers protocol versions 1 to 4, or 1 to --protocol-max, which it refuses
// above the newest this build implements (docs/contract.md §2.1); the rest is the node's.
//
// # The jobs, by file
//
//   - main.go: the commands and their usage; flags.go: a command's flag set, its -h, and
//     a refused command line (exit 2); settings.go: a setting, one flag declared once with
//     its field, default, rule and help, from which the flag set and -h are made.
//   - serve.go: plait serve, its table of settings, the rules that join several, the
//     files it loads, and their reload on SIGHUP (docs/contract.md §2).
//   - status.go: plait status, its settings, its tables, --json, --watch and --check
//     (docs/contract.md §12).
//   - api.go: the flags of every command that calls a node's API (--http, --token-file,
//     --ca, --https), and the client they make; mapcmd.go: plait map get and set
//     (docs/contract.md §22.5).
//   - check.go, reseed.go, bench.go and cert.go: plait check, reseed, bench and cert
//     (docs/contract.md §13, §21, §14 and §17). plait demo is internal/demo's Run.
package main
