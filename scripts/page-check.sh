#!/usr/bin/env bash
# scripts/page-check.sh — the engine of `make page-check` (in `make test`): installs the
# status page's npm packages from its lockfile (npm ci), builds the page into a temporary
# directory and fails if it differs from the build committed in
# shells/native/statuspage/dist, which `go build` embeds. `make page` rebuilds the
# committed one after a change to web/statuspage.
set -euo pipefail
cd "$(dirname "$0")/.."
web=web/statuspage
committed=shells/native/statuspage/dist
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$web" && npm ci --no-audit --no-fund --loglevel=error && PLAIT_PAGE_OUT="$out" npx vite build --logLevel warn)
if ! diff -r "$out" "$committed"; then
	echo "page-check: the page built from $web differs from $committed: run make page and commit the result" >&2
	exit 1
fi
echo "page-check: the committed page is the build of $web ($(find "$committed" -type f | wc -l) files)"
