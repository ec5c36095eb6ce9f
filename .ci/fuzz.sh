#!/usr/bin/env bash
# Builds every fuzz target and runs each for ${FUZZ_SECONDS:-60} seconds on
# stable Rust (no sanitizer: `-s none`), starting from the committed seed corpus.
# New inputs go to a scratch copy, so the committed corpus stays small.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
cargo fuzz build -s none
secs="${FUZZ_SECONDS:-60}"
for target in $(cargo fuzz list); do
    work="$(mktemp -d)"
    cp -r "corpus/$target/." "$work/"
    echo "== $target: ${secs}s"
    log="$work.log"
    if ! cargo fuzz run -s none "$target" "$work" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz target $target failed (crash input in fuzz/artifacts/$target/)"
        exit 1
    fi
    grep -E '^Done [0-9]+ runs|DONE' "$log" || tail -n 3 "$log"
    rm -f "$log"
    rm -rf "$work"
done
