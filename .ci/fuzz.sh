#!/usr/bin/env bash
# Builds every fuzz target and runs each for ${FUZZ_SECONDS:-60} seconds on
# stable Rust (no sanitizer: `-s none`), starting from the committed seed corpus,
# ${FUZZ_JOBS:-1} targets at a time (CI: 2, one per core; each target is one
# single-threaded libFuzzer process). New inputs go to a scratch copy, so the
# committed corpus stays small.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cargo fuzz build -s none
secs="${FUZZ_SECONDS:-60}"
jobs="${FUZZ_JOBS:-1}"
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT

# One target: its output in $results/<target>.log, its exit status in
# $results/<target>.rc.
one() {
    local target="$1" work log rc=0
    work="$(mktemp -d)"
    cp -r "corpus/$target/." "$work/"
    log="$results/$target.log"
    cargo fuzz run -s none "$target" "$work" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1 || rc=$?
    echo "$rc" >"$results/$target.rc"
    rm -rf "$work"
}

running=0
for target in $(cargo fuzz list); do
    echo "== $target: ${secs}s"
    one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

failed=0
for target in $(cargo fuzz list); do
    rc="$(cat "$results/$target.rc" 2>/dev/null || echo missing)"
    if [ "$rc" != 0 ]; then
        tail -n 60 "$results/$target.log" 2>/dev/null || true
        echo "fuzz target $target failed (exit $rc; crash input in fuzz/artifacts/$target/)"
        failed=1
    else
        printf '%s: ' "$target"
        grep -E '^Done [0-9]+ runs|DONE' "$results/$target.log" || tail -n 3 "$results/$target.log"
    fi
done
exit "$failed"
