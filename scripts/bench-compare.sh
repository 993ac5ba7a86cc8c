#!/usr/bin/env bash
# scripts/bench-compare.sh — the engine of `make bench-compare BASE=REF`: builds REF (in a
# temporary worktree) and HEAD, runs their plait bench alternately ROUNDS times (default 5)
# on this machine, and prints for each measure the median of each, HEAD's ratio to REF and
# the range of the per-round ratios (tools/benchcompare). Each side gets only the flags of
# BENCH_FLAGS that its own `plait bench -h` lists (default: --stalled-records 0
# --copy-records 0 --feed-stall 0, the three slow measures off). REF is built from the local module cache
# only: when its modules are not there, it says so and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${BASE:-}
if [ -z "$ref" ]; then
	echo "usage: make bench-compare BASE=REF [ROUNDS=5] [BENCH_FLAGS='--records 200000 ...']" >&2
	exit 2
fi
rounds=${ROUNDS:-5}
flags=${BENCH_FLAGS:---stalled-records 0 --copy-records 0 --feed-stall 0}
if ! rev=$(git rev-parse --verify --quiet "$ref^{commit}"); then
	echo "bench-compare: $ref is no commit of this repository" >&2
	exit 2
fi
tmp=$(mktemp -d)
cleanup() {
	git worktree remove --force "$tmp/ref" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --detach --quiet "$tmp/ref" "$rev"
if ! (cd "$tmp/ref" && GOFLAGS=-mod=mod GOPROXY=off go build -o "$tmp/plait-ref" ./cmd/plait) >"$tmp/build.log" 2>&1; then
	if grep -qE 'GOPROXY=off|module lookup disabled|cannot find module' "$tmp/build.log"; then
		echo "bench-compare: the modules $ref needs are not in the local module cache; fetch them once with" >&2
		echo "  git worktree add /tmp/plait-$ref $rev && (cd /tmp/plait-$ref && go mod download)" >&2
	else
		cat "$tmp/build.log" >&2
	fi
	exit 1
fi
go build -o "$tmp/plait-head" ./cmd/plait

# args BIN: the flags of BENCH_FLAGS that BIN's plait bench -h lists, each with its value
# unless it is a boolean there (listed without a value's type).
args() {
	local help out=() name takes
	help=$("$1" bench -h 2>&1 || true)
	set -- $flags
	while [ $# -gt 0 ]; do
		name=${1#--}
		name=${name#-}
		local given=""
		case "$name" in *=*) given=${name#*=}; name=${name%%=*} ;; esac
		shift
		takes=$(printf '%s\n' "$help" | grep -E "^ +--?$name( |$)" | head -1 || true)
		if [ -z "$takes" ]; then
			# not a flag of this build: drop it and its value
			[ -z "$given" ] && [ $# -gt 0 ] && case "$1" in -*) ;; *) shift ;; esac
			echo "bench-compare: $(basename "$bin") has no --$name; not passed" >&2
			continue
		fi
		if printf '%s\n' "$takes" | grep -qE "^ +--?$name +[A-Za-z]"; then
			if [ -n "$given" ]; then out+=("--$name" "$given"); else out+=("--$name" "$1"); shift; fi
		else
			out+=("--$name${given:+=$given}")
		fi
	done
	printf '%s\n' "${out[@]}"
}
bin=$tmp/plait-ref
mapfile -t refargs < <(args "$tmp/plait-ref")
bin=$tmp/plait-head
mapfile -t headargs < <(args "$tmp/plait-head")
echo "bench-compare: $ref ($rev) against HEAD ($(git rev-parse --short HEAD)), $rounds alternated rounds"
echo "  $ref: plait bench ${refargs[*]}"
echo "  HEAD: plait bench ${headargs[*]}"
reflist="" headlist=""
for r in $(seq 1 "$rounds"); do
	echo "round $r of $rounds ..." >&2
	# Each run starts with the disk's dirty pages written: the last run's writeback would
	# slow the next, always the other build's.
	sync
	"$tmp/plait-ref" bench "${refargs[@]}" >"$tmp/ref-$r.txt"
	sync
	"$tmp/plait-head" bench "${headargs[@]}" >"$tmp/head-$r.txt"
	reflist+="${reflist:+,}$tmp/ref-$r.txt"
	headlist+="${headlist:+,}$tmp/head-$r.txt"
done
echo
go run ./tools/benchcompare -name "$ref" -base "$reflist" -head "$headlist"
