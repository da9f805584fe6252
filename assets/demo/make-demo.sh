#!/usr/bin/env bash
# Re-records assets/demo.xtop (as root, from the repository root, after cargo build --release):
# 60 s of the workload in workload.c plus a distro dd without frame pointers.
set -euo pipefail
tmp=$(mktemp -d /var/tmp/xtop-demo.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait; rm -rf "$tmp"' EXIT
gcc -O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread \
    -o "$tmp/minidb" assets/demo/workload.c
dd if=/dev/urandom of="$tmp/table" bs=1M count=16 status=none
(cd "$tmp" && exec ./minidb table journal) &
pids+=($!)
(while :; do dd if="$tmp/table" of=/dev/null bs=4k iflag=direct status=none; done) &
pids+=($!)
sleep 2
rm -f assets/demo.xtop
timeout -s INT 60 ./target/release/xtop record -o assets/demo.xtop -i 1s || true
ls -l assets/demo.xtop
