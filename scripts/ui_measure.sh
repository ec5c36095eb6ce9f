#!/usr/bin/env bash
# What `runlog ui` costs against run size: builds a run of N units with
# `runlog apply` (N pending, then a tail: 1,000 done, 100 retried, 50 blocked
# with a note), starts `runlog ui` on it, and measures with curl:
#   - first page load: the page, its script and style and the run's summary,
#     each server started fresh (the summary's first read starts the watcher);
#     median of REPS restarts, time and bytes;
#   - one live update: from a `runlog unit` returning to its event arriving on
#     the event stream (includes the 300 ms poll), median of REPS, and bytes;
#   - a tail step: the time the watcher took to bring the lists forward from
#     the log's tail for those updates (the summary's tail.stepUs / steps,
#     mean and longest, as the server measured it), once the first scan is done;
#   - the server's memory from /proc: VmRSS (with RssAnon, what it holds, and
#     RssFile, the run's mapped table pages) once the lists' scan is done,
#     and VmHWM, the peak.
#
#   scripts/ui_measure.sh N BIN [REPS]     e.g. scripts/ui_measure.sh 10000000 target/release/runlog
#
# Prints one JSON line. Needs curl and awk.
set -euo pipefail
n="${1:?usage: ui_measure.sh N BIN [REPS]}"
bin="${2:?usage: ui_measure.sh N BIN [REPS]}"
reps="${3:-5}"
root="$(mktemp -d "${TMPDIR:-/tmp}/runlog-ui-measure.XXXXXX")"
pid=""
feed=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  [ -n "$feed" ] && pkill -P "$feed" 2>/dev/null
  true
  rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
say() { printf 'ui_measure: %s\n' "$*" >&2; }
r() { "$bin" --dir "$root" "$@"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

t0=$(now)
r init --id big --task "ui measure: $n units" >/dev/null
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"pending\"}\n", i }' \
  | r apply big >/dev/null
awk -v n="$n" 'BEGIN {
  for (i = 0; i < 1000 && i < n; i++) {
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"in_progress\"}\n", i
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"done\"}\n", i }
  for (i = 1000; i < 1100 && i < n; i++) {
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"in_progress\"}\n", i
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"pending\",\"note\":\"lost the worker\"}\n", i
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"in_progress\"}\n", i }
  for (i = 1100; i < 1150 && i < n; i++)
    printf "{\"op\":\"unit\",\"unit\":\"u%010d\",\"status\":\"blocked\",\"note\":\"exit 137: out of memory\"}\n", i
}' | r apply big >/dev/null
build_secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
say "built $n units in ${build_secs}s ($(du -sh "$root" | cut -f1) on disk)"

start() {
  "$bin" --dir "$root" ui big >"$root/url" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do [ -s "$root/url" ] && break; sleep 0.05; done
  url="$(head -1 "$root/url")"
  base="${url%/run/big}"
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }
get() { curl -s -o /dev/null -w '%{time_total} %{size_download}\n' "$1"; }

# First page load, each on a fresh server.
: >"$root/load"
for _ in $(seq "$reps"); do
  start
  t=0; b=0
  for p in /run/big /assets/app.js /assets/app.css /api/runs/big; do
    read -r tt bb < <(get "$base$p")
    t=$(awk -v a="$t" -v b="$tt" 'BEGIN { print a + b }'); b=$((b + bb))
  done
  echo "$t $b" >>"$root/load"
  stop
done
load_ms=$(awk '{ print $1 * 1000 }' "$root/load" | median)
load_bytes=$(awk '{ print $2 }' "$root/load" | median)

# Live updates, tail steps and memory, on one server.
start
curl -s "$base/api/runs/big" >/dev/null
# The tail is followed once the first scan is done: wait for it first.
for _ in $(seq 1200); do
  curl -s "$base/api/runs/big" | grep -q '"lists":{' && break
  sleep 0.5
done
( curl -sN "$base/api/runs/big/events" | while IFS= read -r line; do
    case "$line" in data:*) printf '%s %s\n' "$(now)" "${#line}" ;; esac
  done >"$root/events" ) &
feed=$!
sleep 1
: >"$root/live"
for i in $(seq "$reps"); do
  r unit big "u$(printf %010d $((1200 + i)))" done >/dev/null
  t=$(now)
  for _ in $(seq 100); do
    hit=$(awk -v t="$t" '$1 > t { print ($1 - t) * 1000, $2; exit }' "$root/events")
    [ -n "$hit" ] && break
    sleep 0.02
  done
  [ -n "$hit" ] || { say "no event after update $i"; exit 1; }
  echo "$hit" >>"$root/live"
  sleep 0.7
done
say "live updates: $(tr '\n' ' ' <"$root/live")"
sleep 0.5
tail_json=$(curl -s "$base/api/runs/big" | sed -n 's/.*"tail":\({[^}]*}\).*/\1/p')
say "tail: $tail_json"
field() { printf '%s' "$tail_json" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
tail_steps=$(field steps); tail_us=$(field stepUs); tail_max_us=$(field maxStepUs)
tail_ms=$(awk -v s="${tail_steps:-0}" -v u="${tail_us:-0}" 'BEGIN { if (s > 0) printf "%.2f", u / s / 1000; else print "null" }')
tail_max_ms=$(awk -v u="${tail_max_us:-0}" 'BEGIN { printf "%.2f", u / 1000 }')
live_ms=$(awk '{ print $1 }' "$root/live" | median)
live_bytes=$(awk '{ print $2 }' "$root/live" | median)

# Wait for the lists' scan, then read the server's memory.
t1=$(now)
for _ in $(seq 1200); do
  curl -s "$base/api/runs/big" | grep -q '"lists":{' && break
  sleep 0.5
done
scan_secs=$(curl -s "$base/api/runs/big" | sed -n 's/.*"tookMs":\([0-9]*\).*/\1/p' | awk '{ printf "%.1f", $1 / 1000 }')
sleep 1
kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
rss=$(kb VmRSS); anon=$(kb RssAnon); file=$(kb RssFile); hwm=$(kb VmHWM)
kill "$feed" 2>/dev/null || true
stop
printf '{"units":%s,"buildSecs":%s,"firstLoadMs":%.1f,"firstLoadBytes":%s,"liveUpdateMs":%.1f,"liveUpdateBytes":%s,"tailSteps":%s,"tailStepMs":%s,"tailStepMaxMs":%s,"scanSecs":%s,"rssMiB":%.1f,"rssAnonMiB":%.1f,"rssFileMiB":%.1f,"peakRssMiB":%.1f,"reps":%s}\n' \
  "$n" "$build_secs" "$load_ms" "$load_bytes" "$live_ms" "$live_bytes" "${tail_steps:-0}" "$tail_ms" "$tail_max_ms" "${scan_secs:-null}" \
  "$(echo "$rss/1024" | bc -l)" "$(echo "$anon/1024" | bc -l)" "$(echo "$file/1024" | bc -l)" "$(echo "$hwm/1024" | bc -l)" "$reps"
