#!/usr/bin/env bash
# scripts/deps.sh — installs what the build needs beyond the Go toolchain, when missing:
# Debian's librocksdb-dev 7.8.3, the C library grocksdb v1.7.14 links against
# (docs/design.md §12). A fresh machine needs `apt-get update` first.
set -euo pipefail
if dpkg -s librocksdb-dev >/dev/null 2>&1; then
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "installing librocksdb-dev"
$sudo apt-get update -qq
$sudo apt-get install -y -qq librocksdb-dev >/dev/null
dpkg -s librocksdb-dev | grep '^Version'
