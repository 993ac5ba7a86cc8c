#!/usr/bin/env bash
# scripts/deps.sh — installs what the build needs beyond the Go toolchain, when missing:
# Debian's librocksdb-dev 7.8.3, the C library grocksdb v1.7.14 links against
# (docs/design.md §12). `scripts/deps.sh test` also installs what `make test` needs beyond
# the build: Debian's prometheus package, for promtool (the alert rules' checks), and
# Debian's chromium, the browser the status page's test drives (docs/testing.md §14). A fresh machine needs `apt-get update` first; it is run once when
# anything is missing.
set -euo pipefail
missing=()
if ! dpkg -s librocksdb-dev >/dev/null 2>&1; then
	missing+=(librocksdb-dev)
fi
if [ "${1:-}" = test ] && ! command -v promtool >/dev/null 2>&1; then
	missing+=(prometheus)
fi
if [ "${1:-}" = test ] && [ ! -x /usr/bin/chromium ]; then
	missing+=(chromium)
fi
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "installing ${missing[*]}"
$sudo apt-get update -qq
# prometheus's package starts no server here: only its promtool is used.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for p in "${missing[@]}"; do
	dpkg -s "$p" | grep '^Version' | sed "s/^/$p /"
done
