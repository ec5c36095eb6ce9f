# scripts/paired-cpu.sh BIN_A BIN_B TPL [N] [UNITS] : the CPU of one-shot
# `runlog unit` calls by two builds, paired call by call (A then B, N times,
# default 200; the order alternates), each build on its own copy of the run template TPL (`scale
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
# The counter's running time (ns, the field after the name): finer than the
# task-clock's own figure, printed in ms to two decimals.
cpu() { perf stat -x, -e task-clock -- "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $4 / 1e6}'; }
one() {
  local bin=$A; [ "$1" = b ] && bin=$B
  cpu "$bin" --dir "$W/$1/root" unit scale "$(name "$2")" in_progress >> "$W/$1.unit"
  cpu "$bin" --version >> "$W/$1.ver"
}
# A then B on odd calls, B then A on even ones: neither build always goes first.
for i in $(seq 1 "$N"); do
  if [ $((i % 2)) = 1 ]; then one a "$i"; one b "$i"; else one b "$i"; one a "$i"; fi
done
med() { sort -n "$1" | awk '{a[NR] = $1} END {printf "%.0f", a[int((NR + 1) / 2)] * 1000}'; }
for x in a b; do
  u=$(med "$W/$x.unit"); v=$(med "$W/$x.ver")
  bin=$A; [ "$x" = b ] && bin=$B
  echo "$(basename "$bin"): unit $u us, --version $v us, lone-call ratio $(awk -v u="$u" -v v="$v" 'BEGIN {printf "%.3f", v / u}') (CPU, medians of $N pairs)"
done
