#!/usr/bin/env bash
# scripts/sim.sh — the engine of `make sim`: runs SEEDS random simulator seeds from
# SEED_BASE (default: the current Unix time, so every run explores new schedules) and
# prints every failing seed with the command that replays it exactly.
#
# Usage:
#   scripts/sim.sh [SEEDS] [SEED_BASE]
#   SEEDS=5000 SEED_BASE=1 scripts/sim.sh
#   NODES=16 scripts/sim.sh 200      every run with 16 nodes instead of 3 to 8
#   LEAVES=1000 scripts/sim.sh 2     every run with fan-in hubs and 1,000 leaves behind them
set -euo pipefail
cd "$(dirname "$0")/.."

SEEDS="${1:-${SEEDS:-1000}}"
SEED_BASE="${2:-${SEED_BASE:-$(date +%s)}}"
NODES="${NODES:-0}"
LEAVES="${LEAVES:-0}"
echo "simulating $SEEDS seeds from $SEED_BASE (nodes: ${NODES/#0/3 to 8}; leaves: ${LEAVES/#0/a tenth of the seeds, up to 20})"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test ./conformance -run 'TestSim$' -count=1 -timeout 0 -v \
	-seeds="$SEEDS" -seed-base="$SEED_BASE" -sim.nodes="$NODES" -sim.leaves="$LEAVES" >"$out" 2>&1 || status=$?
grep -E -A1 'FAILING SEED' "$out" || true
grep -E 'seeds from|with links|with locks|feeds:|hubs:|traffic:|schedules per second' "$out" || true
if [ "$status" -ne 0 ] && ! grep -q 'FAILING SEED' "$out"; then
	cat "$out" # the test failed another way: show all of it
fi
exit "$status"
