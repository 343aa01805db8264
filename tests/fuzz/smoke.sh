#!/bin/sh
# Short libFuzzer smoke run of one target from its seed corpus: bounded time,
# fails on any crash, leak or sanitizer report.
set -eu
target=$1
seeds=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$seeds"/. "$work"/
"$target" -max_total_time="${AG_FUZZ_SECONDS:-20}" -rss_limit_mb=2048 -max_len=65536 \
          -timeout=10 -print_final_stats=1 "$work"
