#!/usr/bin/env bash
# scripts/freeze.sh — the engine of `make freeze` and `make releases-check` (docs/design.md §8,
# conformance/RELEASES.md).
#
#   scripts/freeze.sh RELEASE COMMIT   freeze a new release: build the core at COMMIT in a
#                                      temporary worktree with the pinned command, commit-ready
#                                      under conformance/releases/RELEASE/core.wasm, and add its
#                                      row to conformance/RELEASES.md's table
#   scripts/freeze.sh --check          rebuild every release of conformance/RELEASES.md at its recorded
#                                      commit and check the SHA-256 reproduces
#
# The build runs in `git worktree add --detach` of the commit, so nothing of the working
# checkout leaks into it, with the Go version the release records (a new release: the
# one installed). It refuses a commit that is not reachable from HEAD: a release must name
# a commit main keeps forever, and a recorded commit that is no longer reachable is
# reported as such, with the row that names it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RELEASES=conformance/RELEASES.md
die() { echo "freeze.sh: $*" >&2; exit 1; }

gover=$(go env GOVERSION)

# build COMMIT OUT: the core at COMMIT, built with the release command into OUT.
build() {
	local commit=$1 out=$2 wt
	wt=$(mktemp -d)
	git worktree add --quiet --detach "$wt" "$commit" >/dev/null
	# shellcheck disable=SC2064
	trap "git worktree remove --force '$wt' >/dev/null 2>&1 || true; rm -rf '$wt'" RETURN
	(cd "$wt" && GOFLAGS= CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false \
		-buildmode=c-shared -o "$out" ./shells/wasm/guest)
}

# reachable COMMIT: the commit exists here and is an ancestor of HEAD.
reachable() {
	git cat-file -e "$1^{commit}" 2>/dev/null && git merge-base --is-ancestor "$1" HEAD
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

if [[ "${1:-}" == "--check" ]]; then
	[[ "$(git rev-parse --is-shallow-repository)" == "false" ]] ||
		die "a shallow clone does not hold the releases' commits: fetch the whole history (git fetch --unshallow)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	fail=0 n=0
	while IFS='|' read -r _ name protos abi commit gov sum _; do
		name=$(echo "$name" | xargs) commit=$(echo "$commit" | tr -d '` ') gov=$(echo "$gov" | xargs)
		sum=$(echo "$sum" | tr -d '` ')
		[[ "$name" =~ ^[0-9]+\.[0-9]+$ ]] || continue
		n=$((n + 1))
		if ! reachable "$commit"; then
			echo "release $name: its commit $commit is not reachable from HEAD (history rewritten, or not fetched): cannot rebuild it" >&2
			fail=1
			continue
		fi
		if [[ "$gov" != "$gover" ]]; then
			echo "release $name: recorded with $gov, this machine has $gover: install $gov to rebuild it" >&2
			fail=1
			continue
		fi
		build "$commit" "$tmp/$name.wasm"
		got=$(sha "$tmp/$name.wasm")
		committed=$(sha "conformance/releases/$name/core.wasm")
		if [[ "$got" == "$sum" && "$committed" == "$sum" ]]; then
			echo "release $name: rebuilt at $commit with $gov: sha256 $got, as recorded and committed"
		else
			echo "release $name: rebuilt at $commit: sha256 $got; recorded $sum; committed file $committed" >&2
			fail=1
		fi
	done <"$RELEASES"
	((n > 0)) || die "no release rows in $RELEASES"
	exit $fail
fi

release=${1:-} commit=${2:-}
[[ "$release" =~ ^[0-9]+\.[0-9]+$ && -n "$commit" ]] || die "usage: scripts/freeze.sh RELEASE COMMIT | --check"
commit=$(git rev-parse --verify "$commit^{commit}" 2>/dev/null) || die "$2 is not a commit here"
reachable "$commit" || die "commit $commit is not reachable from HEAD: a release names a commit of main's history"
grep -q "^| $release |" "$RELEASES" && die "release $release is already in $RELEASES (check it with --check)"
dest="conformance/releases/$release/core.wasm"
[[ -e "$dest" ]] && die "$dest exists"
mkdir -p "$(dirname "$dest")"
build "$commit" "$PWD/$dest"
sum=$(sha "$dest")
# The ABI version and protocol range the module reports, read by the conformance tests'
# loader: ask the module itself.
info=$(go run ./conformance/cmd/coreinfo "$dest")
abi=$(echo "$info" | sed -n 's/^abi //p') protos=$(echo "$info" | sed -n 's/^versions //p')
row="| $release | $protos | $abi | \`$commit\` | $gover | \`$sum\` |"
# The row goes after the table's last row.
last=$(grep -n '^| [0-9]' "$RELEASES" | tail -n1 | cut -d: -f1)
sed -i "${last}a\\$row" "$RELEASES"
echo "froze release $release: $dest, sha256 $sum"
echo "$row"
echo "now: describe it in a '## $release' section of $RELEASES, then commit the module and the table"
