# scripts/replay-cost.sh BIN TPL [K] [N] : the CPU of one one-shot `runlog unit`
# call on a run whose tail is empty against one whose tail holds K records
# (default 47, half the 16 KiB delta step), and of `runlog --version`; each
# call on a fresh copy of its template, N times (default 150), medians
# (`perf stat -e task-clock`). TPL is compacted first, so the empty tail is
# right after a snapshot.
set -eu
B=$1; T=$2; K=${3:-47}; N=${4:-150}
W=${TMPDIR:-/tmp}/replay-cost.$$
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"; cp -a "$T" "$W/t0"
"$B" --dir "$W/t0/root" compact scale >/dev/null
cp -a "$W/t0" "$W/tk"
for i in $(seq 1 "$K"); do "$B" --dir "$W/tk/root" unit scale tail-$i in_progress >/dev/null; done
: > "$W/0"; : > "$W/k"; : > "$W/v"
for i in $(seq 1 "$N"); do
  for t in 0 k; do
    rm -rf "$W/x"; cp -a "$W/t$t" "$W/x"; sync -f "$W/x"
    perf stat -x, -e task-clock -- "$B" --dir "$W/x/root" unit scale call-$i in_progress 2>&1 >/dev/null | awk -F, '{print $1}' >> "$W/$t"
  done
  perf stat -x, -e task-clock -- "$B" --version 2>&1 >/dev/null | awk -F, '{print $1}' >> "$W/v"
done
med() { sort -n "$1" | awk '{a[NR] = $1} END {printf "%.0f", a[int((NR + 1) / 2)] * 1000}'; }
echo "unit, empty tail: $(med "$W/0") us; unit, $K-record tail: $(med "$W/k") us; --version: $(med "$W/v") us (CPU, medians of $N)"
