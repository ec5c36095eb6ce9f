# scripts/cg-one-shot-compacted.sh BIN TAG TPL... : callgrind of one one-shot `unit` call per run template (after 20 warm-up calls), but the template is copied
# by hard links (only files a call may change in place are copied: the newest
# segment of each directory and every file that is neither a snapshot nor a
# segment), and BIN first compacts the copy, so its tables are BIN's format.
B=$1; TAG=$2; shift 2
for T in "$@"; do
  W=${TMPDIR:-/tmp}/cgp-$TAG
  rm -rf $W; cp -al $T $W
  find $W -type f | while read f; do
    case "$f" in
      *.snap) ;;
      *.log) d=$(dirname $f); newest=$(ls $d/seg-*.log | sort | tail -1); [ "$f" = "$newest" ] && cp --remove-destination "${T}${f#$W}" "$f" ;;
      *) cp --remove-destination "${T}${f#$W}" "$f" ;;
    esac
  done
  $B --dir $W/root compact scale >/dev/null 2>&1 || echo "compact failed"
  for i in $(seq 1 20); do $B --dir $W/root unit scale u$(printf %010d $((i*37+3))) in_progress >/dev/null; done
  valgrind --tool=callgrind --callgrind-out-file=/tmp/cgp-$TAG.out $B --dir $W/root unit scale u0000000777 in_progress >/dev/null 2>&1
  tot=$(callgrind_annotate /tmp/cgp-$TAG.out 2>/dev/null | grep "PROGRAM TOTALS" | awk '{print $1}')
  fb=$(callgrind_annotate --inclusive=yes /tmp/cgp-$TAG.out 2>/dev/null | grep "Table::from_bytes \[" | awk '{print $1}')
  wi=$(callgrind_annotate --inclusive=yes /tmp/cgp-$TAG.out 2>/dev/null | grep -E "read::walk_(index|directory) \[" | awk '{print $1}')
  crc=$(callgrind_annotate --inclusive=yes /tmp/cgp-$TAG.out 2>/dev/null | grep "format::masked_crc \[" | awk '{print $1}')
  snap=$(ls -S $W/root/runs/scale/*.snap | head -1 | xargs stat -c %s)
  vers=$(for s in $W/root/runs/scale/*.snap; do od -An -tu2 -j8 -N2 $s | tr -d ' '; done | sort | uniq -c | tr '\n' ' ')
  echo "$(basename $T) $TAG total=$tot table_open=$fb walk=$wi crc=$crc largest_snap=$snap table_versions=[$vers]"
  cp /tmp/cgp-$TAG.out /tmp/cgp-$TAG-$(basename $T).out
  rm -rf $W
done
