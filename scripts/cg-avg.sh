# scripts/cg-avg.sh BIN TPL [WARM] [N] [UNITS] : user-space instructions of a
# one-shot `runlog unit` call, averaged over N calls (default 40) after WARM
# warm-up calls (default 100), on a copy of the run template TPL (`scale
# --child build TPL/root UNITS jsonl 1000 1000`): the average takes in the
# calls that replay a long tail, a short one, or write a delta. Also the
# average of a few phases (inclusive). Each call names a new unit (`c…`,
# `w…`: keys that sort before every unit of the template), or, given UNITS
# (the template's unit count), one of the template's pending units spread over
# the whole table (`u%010d` from 500 up), as a run whose units are worked in
# no particular order would. Needs valgrind.
set -eu
B=$1; T=$2; WARM=${3:-100}; N=${4:-40}; UNITS=${5:-}
name() {
  if [ -n "$UNITS" ]; then printf "u%010d" $(( ($2 * 104729) % (UNITS - 500) + 500 ));
  else printf "%s%07d" "$1" $(( $2 * $3 % 9999991 )); fi
}
W=${TMPDIR:-/tmp}/cg-avg.$$
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"; cp -a "$T" "$W/run"
for i in $(seq 1 "$WARM"); do "$B" --dir "$W/run/root" unit scale "$(name w $((i + 100000)) 7919)" in_progress >/dev/null; done
: > "$W/sum"
for i in $(seq 1 "$N"); do
  valgrind --tool=callgrind --callgrind-out-file="$W/cg" "$B" --dir "$W/run/root" unit scale "$(name c "$i" 104729)" in_progress >/dev/null 2>&1
  callgrind_annotate --inclusive=yes "$W/cg" 2>/dev/null > "$W/txt"
  for f in "PROGRAM TOTALS" "args::parse \[" "open_deferred \[" "scan::scan_segment_tracked \[" "load::replay_one \[" "read::Table::get \[" "codec::decode_payload \[" "frame::decode_record \[" "check_block_with \[" "check_page \["; do
    v=$(grep "$f" "$W/txt" | head -1 | awk '{gsub(",", "", $1); print $1}')
    echo "$f|${v:-0}" >> "$W/sum"
  done
done
echo "$(basename "$B") on $(basename "$T"), average of $N calls after $WARM:"
awk -F'|' -v n="$N" '{s[$1] += $2; o[$1] = NR} END {for (k in s) printf "%d|  %-32s %10d\n", o[k], k, s[k] / n}' "$W/sum" | sort -n | cut -d'|' -f2 | sed 's/ \\\[//'
