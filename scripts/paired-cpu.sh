# scripts/paired-cpu.sh BIN_A BIN_B TPL [N] [UNITS] : the CPU of one-shot
# `runlog unit` calls by two builds, paired call by call (A then B, N times,
# default 200), each build on its own copy of the run template TPL (`scale
# --child build TPL/root N jsonl 1000 1000`), warmed with 100 calls first; and
# of `runlog --version` by each, the process floor. Medians of
# `perf stat -e task-clock`, and the lone-call ratio (--version / unit) of
# each. Calls name new units (`p…`, before the template's), or with UNITS (the
# template's unit count) its own pending units spread over the table.
set -eu
A=$1; B=$2; T=$3; N=${4:-200}; UNITS=${5:-}
W=${TMPDIR:-/tmp}/paired-cpu.$$
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"
name() {
  if [ -n "$UNITS" ]; then printf "u%010d" $(( ($1 * 104729) % (UNITS - 500) + 500 ));
  else printf "p%07d" "$1"; fi
}
for x in a b; do
  cp -a "$T" "$W/$x"
  bin=$A; [ "$x" = b ] && bin=$B
  for i in $(seq 1 100); do "$bin" --dir "$W/$x/root" unit scale "warm-$x-$i" in_progress >/dev/null; done
  : > "$W/$x.unit"; : > "$W/$x.ver"
done
cpu() { perf stat -x, -e task-clock -- "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
for i in $(seq 1 "$N"); do
  cpu "$A" --dir "$W/a/root" unit scale "$(name "$i")" in_progress >> "$W/a.unit"
  cpu "$B" --dir "$W/b/root" unit scale "$(name "$i")" in_progress >> "$W/b.unit"
  cpu "$A" --version >> "$W/a.ver"
  cpu "$B" --version >> "$W/b.ver"
done
med() { sort -n "$1" | awk '{a[NR] = $1} END {printf "%.0f", a[int((NR + 1) / 2)] * 1000}'; }
for x in a b; do
  u=$(med "$W/$x.unit"); v=$(med "$W/$x.ver")
  bin=$A; [ "$x" = b ] && bin=$B
  echo "$(basename "$bin"): unit $u us, --version $v us, lone-call ratio $(awk -v u="$u" -v v="$v" 'BEGIN {printf "%.3f", v / u}') (CPU, medians of $N pairs)"
done
