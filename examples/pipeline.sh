#!/bin/sh
# A shell pipeline on runlog: UNITS units in a DAG (unit uNNN, N ≥ 1, depends on
# u((N-1)/2)), PARALLEL of them at a time with `xargs -P`, each marked
# in_progress, worked on, then done with its result in the note; finalized
# `done` when every unit is. Run it again after a failure or a kill and it
# resumes: `runlog start` with the same fingerprint restores the live run and
# `runlog resume --json` says which units are still to do. Needs no jq.
#
#   RUNLOG=target/debug/runlog RUNLOG_DIR=/tmp/pipe sh examples/pipeline.sh nightly 15 4
#
# RUNLOG is the runlog binary (default: `runlog` on PATH); the runs root is
# chosen as usual ($RUNLOG_DIR, else the nearest .runlog/). Setting
# PIPELINE_FAIL_UNIT=uNNN makes that unit fail after it is marked in_progress,
# to try resuming.
set -eu
RUNLOG=${RUNLOG:-runlog}
export RUNLOG

if [ "${1:-}" = "__unit" ]; then
    # One unit, run by xargs: durable in_progress, the work, durable done.
    run=$2
    unit=$3
    "$RUNLOG" unit "$run" "$unit" in_progress >/dev/null
    if [ "${PIPELINE_FAIL_UNIT:-}" = "$unit" ]; then
        echo "pipeline: $unit failed (PIPELINE_FAIL_UNIT)" >&2
        exit 1
    fi
    sleep 0.1
    sum=$(printf '%s' "$unit" | cksum | cut -d' ' -f1)
    "$RUNLOG" unit "$run" "$unit" done --note "cksum=$sum" >/dev/null
    echo "done $unit"
    exit 0
fi

if [ $# -lt 2 ]; then
    echo "usage: [RUNLOG=bin] $0 RUN UNITS [PARALLEL]" >&2
    exit 2
fi
if ! command -v "$RUNLOG" >/dev/null 2>&1; then
    echo "pipeline: no runlog binary at '$RUNLOG': install it with \`cargo install --path . --features cli\` or \`pip install ./python\` (the Python package brings it) from the repository, or set RUNLOG=target/debug/runlog after \`cargo build --features cli\`" >&2
    exit 127
fi
run=$1
n=$2
par=${3:-4}
# Refuse bad numbers before anything is written (exit 2, as runlog refuses).
case $n in
'' | *[!0-9]*)
    echo "pipeline: UNITS must be a whole number from 1 to 1000, not '$n'" >&2
    exit 2
    ;;
esac
case $par in
'' | *[!0-9]*)
    echo "pipeline: PARALLEL must be a whole number from 1 to 64, not '$par'" >&2
    exit 2
    ;;
esac
if [ "$n" -lt 1 ] || [ "$n" -gt 1000 ] || [ "$par" -lt 1 ] || [ "$par" -gt 64 ]; then
    echo "pipeline: UNITS must be 1..1000 and PARALLEL 1..64 (got $n and $par)" >&2
    exit 2
fi

# The units and their dependencies; "$@" collects the --deps arguments.
set --
units=""
i=0
while [ "$i" -lt "$n" ]; do
    name=$(printf 'u%03d' "$i")
    units="$units${units:+,}$name"
    if [ "$i" -gt 0 ]; then
        set -- "$@" --deps "$name=$(printf 'u%03d' $(((i - 1) / 2)))"
    fi
    i=$((i + 1))
done

# Restore the live run with this fingerprint, or start it.
"$RUNLOG" start --id "$run" --fingerprint "units=$n" --task "pipeline of $n units" \
    --units "$units" "$@"

# Waves: every eligible unit, PARALLEL at a time, until none is left. The
# resume set is one JSON line; unit names hold no quote, comma or bracket, so
# sed can take the "eligible" array apart.
while :; do
    rs=$("$RUNLOG" --json resume "$run")
    eligible=$(printf '%s\n' "$rs" | sed -n 's/.*"eligible":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' ' ')
    [ -n "$eligible" ] || break
    # shellcheck disable=SC2086 # one unit per word
    printf '%s\n' $eligible | xargs -n 1 -P "$par" sh "$0" __unit "$run"
done

case $rs in
*'"dep_blocked":{}'*) ;;
*)
    echo "pipeline: units held back: $rs" >&2
    exit 1
    ;;
esac
# Fail-closed: runlog refuses `finalize done` unless every unit is done.
"$RUNLOG" finalize "$run" done --result "$n units done"
