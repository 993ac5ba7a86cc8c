#!/usr/bin/env bash
# scripts/fuzz.sh — the engine of `make fuzz`: runs every fuzz target of ./fuzz in turn.
#
# Usage:
#   scripts/fuzz.sh [FUZZTIME]            FUZZTIME per target (default $FUZZTIME, else 30s)
#   TARGETS=FuzzDecode scripts/fuzz.sh 10s   only the named targets (space or comma separated)
#   FUZZTIME=1h scripts/fuzz.sh           long runs: no state is kept beyond the corpus files
#
# Targets are discovered as the `func Fuzz...` declarations in fuzz/*_test.go. Each runs as
#   go test ./fuzz -run='^$' -fuzz="^${t}\$" -fuzztime=$FUZZTIME -fuzzminimizetime=$FUZZMINIMIZETIME
# FUZZMINIMIZETIME (default 10s) bounds the minimizing of each new interesting input: Go's
# default of 60s makes session targets spend most of a run minimizing.
#
# On the first failure the script stops, prints the reproducer Go wrote under
# fuzz/testdata/fuzz/<Target>/ (leave it there: committed, it is a regression seed that
# `go test ./fuzz` replays) and exits non-zero.
#
# After each target that passes, new interesting inputs from Go's fuzz cache
# ($(go env GOCACHE)/fuzz/<package>/<Target>/) join fuzz/testdata/fuzz/<Target>/:
# only inputs of at most MAX_INPUT_BYTES decoded bytes, at most MAX_NEW per target and run,
# smallest first, skipping any whose file name or decoded content is already there. The
# cache entries need no minimizing here: the Go fuzzer minimizes each new interesting
# input when it finds it, before writing it to the cache.
set -euo pipefail

FUZZTIME="${1:-${FUZZTIME:-30s}}"
MAX_NEW="${MAX_NEW:-20}"                  # new corpus files per target per run
MAX_INPUT_BYTES="${MAX_INPUT_BYTES:-4096}" # size cap on a copied input, decoded
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-10s}"
PKG_DIR=fuzz

cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() { echo "fuzz.sh: $*" >&2; exit 2; }

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

# collect TARGET: copy new interesting inputs from the fuzz cache into the corpus.
collect() {
	local t=$1 cache dest size sum path name copied=0
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
		((copied < MAX_NEW)) || break
		((size <= MAX_INPUT_BYTES)) || continue
		name=$(basename "$path")
		[[ -e "$dest/$name" || -n "${have[$sum]:-}" ]] && continue
		cp "$path" "$dest/$name"
		have[$sum]=1
		copied=$((copied + 1))
		echo "  + $dest/$name ($size bytes)"
	done < <(info "$cache")
	echo "  $t: $copied new corpus file(s) (cap $MAX_INPUT_BYTES bytes, at most $MAX_NEW per run)"
}

for t in "${targets[@]}"; do
	echo "=== $t for $FUZZTIME"
	corpus="$PKG_DIR/testdata/fuzz/$t"
	ls "$corpus" 2>/dev/null | sort >"$tmp/before" || true
	log="$tmp/$t.log"
	if go test "./$PKG_DIR" -run='^$' -fuzz="^${t}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" 2>&1 | tee "$log"; then
		collect "$t"
		continue
	fi
	# The reproducer: Go names it in its output; else any new file in the corpus directory.
	repro=$(grep -o "testdata/fuzz/$t/[^ ]*" "$log" | head -n1 || true)
	if [[ -n "$repro" ]]; then
		repro="$PKG_DIR/$repro"
	else
		ls "$corpus" 2>/dev/null | sort >"$tmp/after" || true
		new=$(comm -13 "$tmp/before" "$tmp/after" | head -n1)
		[[ -n "$new" ]] && repro="$corpus/$new"
	fi
	if [[ -n "$repro" && -f "$repro" ]]; then
		echo "FAIL: $t: reproducer $repro (keep it: committed, it is a regression seed)" >&2
		echo "re-run: go test ./$PKG_DIR -run='^$t/$(basename "$repro")\$' -v" >&2
	elif entry=$(grep -oE -- "(seed corpus entry: |--- FAIL: )$t/[^ ]+" "$log" | head -n1) && [[ -n "$entry" ]]; then
		echo "FAIL: $t: a committed corpus entry or seed fails: ${entry##* } (no new reproducer)" >&2
	else
		echo "FAIL: $t: no reproducer written (see the output above: a build error?)" >&2
	fi
	exit 1
done
echo "fuzz.sh: ${#targets[@]} target(s) passed, $FUZZTIME each"
