#!/usr/bin/env bash
# README's first command, as a newcomer runs it: the demo in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release --quiet --features cli -- demo
cargo run --release --quiet --features cli -- demo --json --units 20000 --workers 16 --kills 5 | tail -n 1
