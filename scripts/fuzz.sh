#!/usr/bin/env bash
# scripts/fuzz.sh — the engine of `make fuzz`: runs every fuzz target of ./fuzz in turn,
# once or in rounds for hours.
#
# Usage:
#   scripts/fuzz.sh [FUZZTIME]              every target once, FUZZTIME each (default
#                                           $FUZZTIME, else 30s)
#   TARGETS=FuzzDecode scripts/fuzz.sh 10s  only the named targets (space or comma separated)
#   DURATION=2h FUZZTIME=5m scripts/fuzz.sh unattended: cycle through the targets, FUZZTIME
#                                           each, and start no target once DURATION has
#                                           passed since the start (the first round always
#                                           runs every target; a run ends at most one
#                                           FUZZTIME, plus minimizing, after DURATION)
#   ROUNDS=4 scripts/fuzz.sh 10m            exactly 4 rounds (with DURATION: whichever ends first)
#   MAX_NEW=0 FUZZTIME=10s scripts/fuzz.sh  CI mode: fuzz each target, collect nothing; the
#                                           corpus is left exactly as it was, even on failure
#
# DURATION is a Go-style duration (2h, 90m, 1h30m, 45s) or seconds.
#
# Targets are discovered as the `func Fuzz...` declarations in fuzz/*_test.go. Each runs as
#   go test ./fuzz -run='^$' -fuzz="^${t}\$" -fuzztime=$FUZZTIME -fuzzminimizetime=$FUZZMINIMIZETIME
# FUZZMINIMIZETIME (default 10s) bounds the minimizing of each new interesting input: Go's
# default of 60s makes session targets spend most of a run minimizing.
#
# On the first failure the script stops, prints the reproducer Go wrote under
# fuzz/testdata/fuzz/<Target>/ (leave it there: committed, it is a regression seed that
# `go test ./fuzz` replays) and exits 1. In CI mode (MAX_NEW=0) the reproducer is moved out
# of the tree instead, to $REPRO_DIR (default: a new directory under ${TMPDIR:-/tmp}, kept),
# and its content is printed, so that the log alone is enough to reproduce the failure.
#
# After each target that passes, new interesting inputs from Go's fuzz cache
# ($(go env GOCACHE)/fuzz/<package>/<Target>/) join fuzz/testdata/fuzz/<Target>/:
# only inputs of at most MAX_INPUT_BYTES decoded bytes, at most MAX_NEW per target over the
# whole invocation (all rounds), smallest first, skipping any whose file name or decoded
# content is already there. The cache entries need no minimizing here: the Go fuzzer
# minimizes each new interesting input when it finds it, before writing it to the cache.
#
# After each run of a target, passed or failed, its figures (execs, seconds of fuzzing, new
# interesting inputs, corpus files added, and a crash if it failed) are added to the
# cumulative totals in $TOTALS_FILE (default fuzz/TOTALS.md; commit it with the corpus), by
# tools/fuzztotals from the run's output. CI mode adds nothing: CI fuzzes a fresh clone and
# commits nothing, so its figures would be lost anyway and the tree must stay unchanged.
#
# FuzzDiff runs WASM modules under wazero: the script keeps one compilation cache for all
# its rounds ($PLAIT_WAZERO_CACHE, unless set), so that only the first round compiles them.
#
# Exit status: 0 when every run passed, 1 on a fuzz failure, 2 on a usage or setup error.
set -euo pipefail

FUZZTIME="${1:-${FUZZTIME:-30s}}"
MAX_NEW="${MAX_NEW:-20}"                   # new corpus files per target per invocation
MAX_INPUT_BYTES="${MAX_INPUT_BYTES:-4096}" # size cap on a copied input, decoded
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-10s}"
DURATION="${DURATION:-}"
: "${TOTALS_FILE:=fuzz/TOTALS.md}"
ROUNDS="${ROUNDS:-}"
PKG_DIR=fuzz

cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "fuzz.sh: $*" >&2; exit 2; }

# seconds DURATION: a Go-style duration (1h30m, 90m, 45s) or plain seconds, in seconds.
seconds() {
	local d=$1 total=0 n u
	[[ "$d" =~ ^[0-9]+$ ]] && { echo "$d"; return; }
	[[ "$d" =~ ^([0-9]+[hms])+$ ]] || return 1
	while [[ "$d" =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=$((10#${BASH_REMATCH[1]})) u=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $u in h) total=$((total + n * 3600)) ;; m) total=$((total + n * 60)) ;; s) total=$((total + n)) ;; esac
	done
	echo "$total"
}

[[ "$MAX_NEW" =~ ^[0-9]+$ ]] || die "MAX_NEW=$MAX_NEW is not a count"
[[ -z "$ROUNDS" || "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$ROUNDS is not a positive count"
duration_s=
if [[ -n "$DURATION" ]]; then
	duration_s=$(seconds "$DURATION") || die "DURATION=$DURATION is not a duration (2h, 90m, 1h30m, 45s, or seconds)"
fi
if [[ -z "$ROUNDS" && -z "$duration_s" ]]; then
	ROUNDS=1
fi
ci=false
((MAX_NEW > 0)) || ci=true

# Every target declared in the package's test files.
mapfile -t all_targets < <(grep -h '^func Fuzz' "$PKG_DIR"/*_test.go |
	sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' | sort -u)
((${#all_targets[@]} > 0)) || die "no fuzz targets in $PKG_DIR/*_test.go"

if [[ -n "${TARGETS:-}" ]]; then
	read -r -a targets <<<"${TARGETS//,/ }"
	for t in "${targets[@]}"; do
		printf '%s\n' "${all_targets[@]}" | grep -qx -- "$t" ||
			die "no fuzz target $t in $PKG_DIR (have: ${all_targets[*]})"
	done
else
	targets=("${all_targets[@]}")
fi

pkg=$(go list "./$PKG_DIR")
gocache=$(go env GOCACHE)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -z "${PLAIT_WAZERO_CACHE:-}" ]]; then
	export PLAIT_WAZERO_CACHE="$tmp/wazero-cache"
	mkdir -p "$PLAIT_WAZERO_CACHE"
fi

# corpus_state prints "<sha256> <path>" of every corpus file of every target, sorted.
corpus_state() {
	find "$PKG_DIR/testdata/fuzz" -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum
}
corpus_before="$tmp/corpus-before"
corpus_state >"$corpus_before"

# corpusinfo prints "<decoded size> <sha256 of the decoded values> <path>" for each Go fuzz
# corpus file ("go test fuzz v1", then one value per line, []byte(...) or string(...)
# quoted as Go literals; other values count as written).
corpusinfo="$tmp/corpusinfo"
build_corpusinfo() {
	mkdir -p "$tmp/src"
	cat >"$tmp/src/main.go" <<'EOF'
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	for _, path := range os.Args[1:] {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if lines[0] != "go test fuzz v1" {
			fmt.Fprintln(os.Stderr, "corpusinfo: not a corpus file:", path)
			continue
		}
		h, n := sha256.New(), 0
		for _, l := range lines[1:] {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			v := l
			for _, pre := range []string{"[]byte(", "string("} {
				if strings.HasPrefix(l, pre) && strings.HasSuffix(l, ")") {
					if s, err := strconv.Unquote(l[len(pre) : len(l)-1]); err == nil {
						v = s
					}
				}
			}
			n += len(v)
			h.Write(binary.AppendUvarint(nil, uint64(len(v))))
			h.Write([]byte(v))
		}
		fmt.Printf("%d %x %s\n", n, h.Sum(nil), path)
	}
}
EOF
	printf 'module corpusinfo\n\ngo 1.21\n' >"$tmp/src/go.mod"
	(cd "$tmp/src" && GOFLAGS= GOWORK=off go build -o "$corpusinfo" .)
}

# info DIR: corpusinfo of every file in DIR, smallest first (then by name).
info() {
	find "$1" -maxdepth 1 -type f -print0 | xargs -0 -r "$corpusinfo" | sort -k1,1n -k3,3
}

declare -A added=() runs=() execs=()

# record TARGET LOG ADDED [crashed]: add the run's figures to $TOTALS_FILE (not in CI mode).
fuzztotals="$tmp/fuzztotals"
record() {
	$ci && return 0
	[[ -x "$fuzztotals" ]] || go build -o "$fuzztotals" ./tools/fuzztotals
	"$fuzztotals" -file "$TOTALS_FILE" -target "$1" -log "$2" -added "$3" ${4:+-crashed} ||
		echo "fuzz.sh: $1: could not add the run to $TOTALS_FILE" >&2
}

# collect TARGET: copy new interesting inputs from the fuzz cache into the corpus.
collect() {
	local t=$1 cache dest size sum path name copied=0 room
	room=$((MAX_NEW - ${added[$t]:-0}))
	if ((room <= 0)); then
		$ci || echo "  $t: corpus cap reached ($MAX_NEW new files this invocation): nothing collected"
		return 0
	fi
	[[ "$gocache" != off && -n "$gocache" ]] || { echo "  GOCACHE is off: nothing to collect"; return 0; }
	cache="$gocache/fuzz/$pkg/$t"
	dest="$PKG_DIR/testdata/fuzz/$t"
	[[ -d "$cache" ]] || { echo "  no fuzz cache at $cache"; return 0; }
	[[ -x "$corpusinfo" ]] || build_corpusinfo
	mkdir -p "$dest"
	local -A have=()
	while read -r size sum path; do
		have[$sum]=1
	done < <(info "$dest")
	while read -r size sum path; do
		((copied < room)) || break
		((size <= MAX_INPUT_BYTES)) || continue
		name=$(basename "$path")
		[[ -e "$dest/$name" || -n "${have[$sum]:-}" ]] && continue
		cp "$path" "$dest/$name"
		have[$sum]=1
		copied=$((copied + 1))
		echo "  + $dest/$name ($size bytes)"
	done < <(info "$cache")
	added[$t]=$((${added[$t]:-0} + copied))
	echo "  $t: $copied new corpus file(s) (cap $MAX_INPUT_BYTES bytes, at most $MAX_NEW per target per invocation)"
}

# report_failure TARGET LOG BEFORE: name the reproducer (moved out of the tree in CI mode).
report_failure() {
	local t=$1 log=$2 before=$3 corpus repro new entry dir
	corpus="$PKG_DIR/testdata/fuzz/$t"
	# The reproducer: Go names it in its output; else any new file in the corpus directory.
	repro=$(grep -o "testdata/fuzz/$t/[^ ]*" "$log" | head -n1 || true)
	if [[ -n "$repro" ]]; then
		repro="$PKG_DIR/$repro"
	else
		ls "$corpus" 2>/dev/null | sort >"$tmp/after" || true
		new=$(comm -13 "$before" "$tmp/after" | head -n1)
		[[ -n "$new" ]] && repro="$corpus/$new"
	fi
	if [[ -n "$repro" && -f "$repro" ]]; then
		if $ci; then
			dir="${REPRO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/plait-fuzz-repro.XXXXXX")}"
			mkdir -p "$dir/$t"
			mv "$repro" "$dir/$t/"
			echo "FAIL: $t: reproducer moved out of the tree to $dir/$t/$(basename "$repro"); its content:" >&2
			sed 's/^/    /' "$dir/$t/$(basename "$repro")" >&2
			echo "to reproduce: save it as $repro, then run" >&2
		else
			echo "FAIL: $t: reproducer $repro (keep it: committed, it is a regression seed)" >&2
			echo "re-run:" >&2
		fi
		echo "  go test ./$PKG_DIR -run='^$t/$(basename "$repro")\$' -v" >&2
	elif entry=$(grep -oE -- "(seed corpus entry: |--- FAIL: )$t/[^ ]+" "$log" | head -n1) && [[ -n "$entry" ]]; then
		echo "FAIL: $t: a committed corpus entry or seed fails: ${entry##* } (no new reproducer)" >&2
	else
		echo "FAIL: $t: no reproducer written (see the output above: a build error?)" >&2
	fi
}

# deadline_race TARGET LOG BEFORE: whether a failed run is Go's own fuzz-coordinator race at
# the end of -fuzztime (golang/go#75804, fixed in go1.27, not in the go1.26 this project
# pins): the target's only failure is a bare "context deadline exceeded" right after its
# FAIL line, Go named no failing input, and no file joined the corpus. Any other failure,
# and any written input, is a failure.
deadline_race() {
	local t=$1 log=$2 before=$3
	grep -q "testdata/fuzz/$t/" "$log" && return 1
	ls "$PKG_DIR/testdata/fuzz/$t" 2>/dev/null | sort >"$tmp/after" || true
	[[ -z "$(comm -13 "$before" "$tmp/after")" ]] || return 1
	[[ $(grep -c -- '--- FAIL' "$log") -eq 1 ]] || return 1
	grep -A1 -- "^--- FAIL: $t (" "$log" | tail -n1 | grep -qxE '[[:space:]]+context deadline exceeded'
}

# passed TARGET LOG: count a passed run and its execs, and collect its new corpus files.
passed() {
	local t=$1 log=$2 n
	runs[$t]=$((${runs[$t]:-0} + 1))
	n=$(grep -oE '^fuzz: elapsed: [^,]+, execs: [0-9]+' "$log" | tail -n1 | grep -oE '[0-9]+$' || true)
	execs[$t]=$((${execs[$t]:-0} + ${n:-0}))
	local before=${added[$t]:-0}
	collect "$t"
	record "$t" "$log" $((${added[$t]:-0} - before))
}

# summary: one line per target: runs, execs, corpus files added.
summary() {
	local t
	for t in "${targets[@]}"; do
		printf '  %-14s %3d run(s), %9d execs, %2d new corpus file(s)\n' "$t" "${runs[$t]:-0}" "${execs[$t]:-0}" "${added[$t]:-0}"
	done
}

# check_corpus_unchanged: in CI mode, the corpus must be as it was.
check_corpus_unchanged() {
	$ci || return 0
	if corpus_state | cmp -s - "$corpus_before"; then
		echo "fuzz.sh: CI mode (MAX_NEW=0): the corpus is unchanged"
	else
		echo "fuzz.sh: CI mode (MAX_NEW=0): the corpus changed:" >&2
		corpus_state | diff "$corpus_before" - >&2 || true
		return 1
	fi
}

start=$(date +%s)
mode="every target once"
[[ -n "$ROUNDS" ]] && mode="$ROUNDS round(s)"
[[ -n "$duration_s" ]] && mode="rounds for $DURATION${ROUNDS:+ (at most $ROUNDS)}"
$ci && mode="$mode, CI mode: nothing collected"
echo "fuzz.sh: ${targets[*]}: $FUZZTIME each, $mode"

round=1 completed=0
while :; do
	for t in "${targets[@]}"; do
		if ((round > 1)) && [[ -n "$duration_s" ]] && (($(date +%s) - start >= duration_s)); then
			break 2
		fi
		echo "=== round $round: $t for $FUZZTIME ($(($(date +%s) - start))s elapsed)"
		corpus="$PKG_DIR/testdata/fuzz/$t"
		ls "$corpus" 2>/dev/null | sort >"$tmp/before" || true
		log="$tmp/$t.log"
		if go test "./$PKG_DIR" -run='^$' -fuzz="^${t}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" 2>&1 | tee "$log"; then
			passed "$t" "$log"
			continue
		fi
		if deadline_race "$t" "$log" "$tmp/before"; then
			echo "fuzz.sh: $t: Go's fuzz coordinator reported its own -fuzztime deadline (golang/go#75804); no input failed, so the run counts as passed" >&2
			passed "$t" "$log"
			continue
		fi
		record "$t" "$log" 0 crashed
		report_failure "$t" "$log" "$tmp/before"
		echo "fuzz.sh: stopped in round $round after $(($(date +%s) - start))s:" >&2
		summary >&2
		check_corpus_unchanged || true
		exit 1
	done
	completed=$round
	if [[ -n "$ROUNDS" ]] && ((round >= ROUNDS)); then
		break
	fi
	if [[ -n "$duration_s" ]] && (($(date +%s) - start >= duration_s)); then
		break
	fi
	round=$((round + 1))
done
partial=
((completed < round)) && partial=" and part of round $round"
echo "fuzz.sh: passed: ${#targets[@]} target(s), $FUZZTIME each, $completed round(s)$partial in $(($(date +%s) - start))s"
summary
$ci || echo "fuzz.sh: the runs are added to $TOTALS_FILE (commit it)"
check_corpus_unchanged || exit 1
