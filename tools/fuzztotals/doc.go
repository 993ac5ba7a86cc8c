// Command fuzztotals keeps fuzz/TOTALS.md, the cumulative fuzzing of each target: how many
// runs, inputs executed, seconds of fuzzing, new interesting inputs, corpus files added and
// crashes every `make fuzz` run so far has added. scripts/fuzz.sh calls it after each run of
// a target with that run's `go test -fuzz` output:
//
//	fuzztotals -file fuzz/TOTALS.md -target FuzzDecode -log run.log -added 3 [-crashed]
//
// The figures come from the last progress line Go's fuzz coordinator printed,
//
//	fuzz: elapsed: 1m30s, execs: 169673 (16967/sec), new interesting: 3 (total: 120)
//
// (elapsed: the time since fuzzing started, baseline coverage included; execs: inputs run,
// minimizing included; new interesting: inputs that widened coverage, written to the fuzz
// cache). The corpus files a run adds come from the fuzz cache, which keeps earlier runs'
// finds too, so they can outnumber its new interesting inputs. A run that fails before its first progress line adds no execs and no time, but
// still a run and, with -crashed, a crash.
//
// The file is a Markdown table that this command rewrites whole; a row it cannot read is an
// error, so a hand edit that breaks the format is not silently dropped.
//
// # The jobs, by file
//
// main.go holds them all: the run's figures read from its output (parseRun), the table
// read and written whole (parseTotals, render), and a run added to its target's row.
package main
