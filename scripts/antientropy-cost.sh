#!/bin/bash
# Two plait serve processes, 10,000 records of 100 B written on A, nothing differing;
# the anti-entropy bytes on B's connection over 60 s at the default pace.
set -e
BIN=${BIN:-build/plait}
D=$(mktemp -d)
export PLAIT_SECRET=measure-secret-of-at-least-32-bytes-x
$BIN serve --name A --data $D/a --listen 127.0.0.1:17400 --http 127.0.0.1:17401 >$D/a.log 2>&1 &
PA=$!
$BIN serve --name B --data $D/b --listen 127.0.0.1:17410 --http 127.0.0.1:17411 --peer A=ws://127.0.0.1:17400 >$D/b.log 2>&1 &
PB=$!
trap 'kill $PA $PB 2>/dev/null; wait 2>/dev/null; rm -rf $D' EXIT
for i in $(seq 1 50); do curl -sf http://127.0.0.1:17401/healthz >/dev/null && curl -sf http://127.0.0.1:17411/healthz >/dev/null && break; sleep 0.2; done
v=$(head -c 100 /dev/zero | tr '\0' v)
for b in $(seq 0 99); do
  ops=$(for i in $(seq 0 99); do printf '{"op":"put","key":"key-%05d","value":"%s"},' $((b*100+i)) $v; done)
  curl -sf -X POST --data-binary "{\"ops\":[${ops%,}]}" http://127.0.0.1:17401/v1/tables/t/batch >/dev/null
done
for i in $(seq 1 100); do
  [ "$(curl -sf http://127.0.0.1:17401/v1/tables/t/digest)" = "$(curl -sf http://127.0.0.1:17411/v1/tables/t/digest)" ] && break; sleep 0.2
done
peer() { curl -sf http://127.0.0.1:17411/v1/status | python3 -c 'import json,sys; d=json.load(sys.stdin); p=[p for p in d["peers"] if p["name"]=="A"][0]; c=d["counters"]; print(p["antientropy_bytes_in"]+p["antientropy_bytes_out"], c["antientropy_ranges_compared"], c["antientropy_ranges_differing"], c["antientropy_passes"])'; }
read b0 r0 x0 p0 < <(peer)
sleep 60
read b1 r1 x1 p1 < <(peer)
echo "records: 10000 x 100 B values (1,090,000 key and value bytes)"
echo "anti-entropy on B's connection to A over 60 s: $((b1-b0)) bytes ($(( (b1-b0)/60 )) B/s), B compared $((r1-r0)) ranges, $((x1-x0)) differing, passes $p0 -> $p1"
