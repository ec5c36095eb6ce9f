# scripts/fsync-segments.sh [ROUNDS] [CONTENDER...] : where one commit's time
# goes, for `bench/examples/compare`'s one-thread contenders (default
# runlog_sync_1t and okaywal_1t), each run ROUNDS times (default 3), the
# contenders alternating. Each run is traced for 2 s with perf's block and
# fdatasync tracepoints, and the medians over its commits are printed, in us:
#   op     one fdatasync's start to the next (a commit)
#   wr     the data write's request: issued to completed
#   kw     the write completed to the cache flush issued (the kernel's hand-off)
#   fl     the flush's request: issued to completed
#   user   the flush completed to the next fdatasync (the process's own work)
# and the requests per fdatasync, by kind (WS data, FF flush, WSM metadata).
# Needs root and perf; build first: cargo build --release -p runlog-bench --example compare.
set -eu
ROUNDS=${1:-3}; shift || true
[ $# -gt 0 ] || set -- runlog_sync_1t okaywal_1t
BIN=${COMPARE:-target/release/examples/compare}
W=${TMPDIR:-/tmp}/fsync-segments.$$
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"
for r in $(seq 1 "$ROUNDS"); do
  for c in "$@"; do
    perf record -q -a -o "$W/p.data" \
      -e block:block_rq_issue,block:block_rq_complete,syscalls:sys_enter_fdatasync \
      -- "$BIN" --only "$c" --reps 1 --secs 2 >/dev/null 2>&1
    perf script -i "$W/p.data" 2>/dev/null | python3 -c '
import re, statistics, sys
name = sys.argv[1]
seg = {k: [] for k in ("op", "wr", "kw", "fl", "user")}
kinds = {}
prev = done = w_at = w_done = f_at = None
syncs = 0
for line in sys.stdin:
    m = re.search(r"\s(\d+\.\d+):\s+(\S+)", line)
    if not m:
        continue
    t, ev = float(m.group(1)) * 1e6, m.group(2)
    if "sys_enter_fdatasync" in ev:
        syncs += 1
        if prev is not None:
            seg["op"].append(t - prev)
        if done is not None:
            seg["user"].append(t - done)
        prev, done = t, None
        continue
    k = re.search(r"254,0 (\w+) ", line) or re.search(r"\d+,\d+ (\w+) ", line)
    if not k:
        continue
    kind = k.group(1)
    if "block_rq_issue" in ev:
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "WS":
            w_at = t
        elif kind == "FF":
            f_at = t
            if w_done is not None:
                seg["kw"].append(t - w_done)
                w_done = None
    elif "block_rq_complete" in ev:
        if kind == "WS" and " () 0 + 0 " in line:
            done = t  # the flush sequence ends: fdatasync returns
        elif kind == "WS" and w_at is not None:
            seg["wr"].append(t - w_at)
            w_done, w_at = t, None
        elif kind == "FF" and f_at is not None:
            seg["fl"].append(t - f_at)
            f_at = None
med = "  ".join(
    f"{k} {statistics.median(v):5.1f}" if v else f"{k}   n/a" for k, v in seg.items())
per = "  ".join(f"{k} {n / max(syncs, 1):.2f}" for k, n in sorted(kinds.items()))
print(f"{name:16s} {syncs:6d} fdatasyncs  {med}   requests per fdatasync: {per}")
' "$c"
  done
done
