#!/usr/bin/env bash
# A throwaway Ceph RADOS Gateway on 127.0.0.1 for the remote tests (issue 15):
# one monitor, one memstore OSD, radosgw (beast), auth none, pool size 1.
#
#   bash .ci/ceph.sh start   # prints nothing but progress; writes $CEPH_DIR/env
#   . "$CEPH_DIR/env"        # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... RUNLOG_S3_BUCKET
#   bash .ci/ceph.sh stop    # kills the three daemons and removes $CEPH_DIR
#
# Needs: apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd ceph-common
# Facts it relies on (measured on the CI machine): radosgw hangs at startup
# unless `ms mon client mode = crc`; pool size 1 and a small pg num on one OSD.
set -euo pipefail

CEPH_DIR="${CEPH_DIR:-/tmp/runlog-ceph}"
# Ports: given ones are used as they are; otherwise each attempt picks free
# ones at random. Fixed defaults (6789, 7480) collided on a CI host running
# several jobs in one network namespace: our OSD registered with another job's
# monitor and was refused with "wrong fsid".
FIXED_RGW_PORT="${RGW_PORT:-}"
FIXED_MON_PORT="${MON_PORT:-}"
ACCESS_KEY="${CEPH_ACCESS_KEY:-runlogtestaccess}"
SECRET_KEY="${CEPH_SECRET_KEY:-runlogtestsecretkey0123456789}"
BUCKET="${RUNLOG_S3_BUCKET:-runlog-test}"
CONF="$CEPH_DIR/ceph.conf"

log() { printf 'ceph.sh: %s\n' "$*" >&2; }

# A port nobody listens on now (bash's /dev/tcp: no extra tools needed).
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}

start() {
  if [ -f "$CEPH_DIR/env" ]; then
    log "already running (found $CEPH_DIR/env); stop it first"
    return 0
  fi
  local attempt
  for attempt in 1 2 3; do
    RGW_PORT="${FIXED_RGW_PORT:-$(free_port)}"
    MON_PORT="${FIXED_MON_PORT:-$(free_port)}"
    # A child shell, so that `set -e` holds inside (it is off in an `if`).
    if RGW_PORT=$RGW_PORT MON_PORT=$MON_PORT bash "${BASH_SOURCE[0]}" start-once; then
      return 0
    fi
    log "attempt $attempt failed (mon port $MON_PORT, gateway port $RGW_PORT); logs:"
    tail -n 5 "$CEPH_DIR"/log/*.log >&2 2>/dev/null || true
    stop
  done
  log "the gateway did not start in 3 attempts"
  return 1
}

start_once() {
  rm -rf "$CEPH_DIR"
  mkdir -p "$CEPH_DIR"/{mon,osd,rgw,run,log}
  local fsid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = 127.0.0.1:$MON_PORT
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon max pg per osd = 1000
osd crush chooseleaf type = 0
mon warn on pool no redundancy = false
# A throwaway cluster on a build machine's disk: the monitor must not refuse
# to start when the disk is nearly full of build output (it does below 5%
# free by default, which a full CI target directory can reach).
mon data avail crit = 0
mon data avail warn = 0
run dir = $CEPH_DIR/run
pid file = $CEPH_DIR/run/\$name.pid
log file = $CEPH_DIR/log/\$name.log
admin socket = $CEPH_DIR/run/\$name.asok
[mon.a]
mon data = $CEPH_DIR/mon
public addr = 127.0.0.1:$MON_PORT
[osd.0]
osd data = $CEPH_DIR/osd
osd objectstore = memstore
memstore device bytes = 2147483648
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw data = $CEPH_DIR/rgw
rgw dns name = localhost
EOF
  monmaptool --create --clobber --fsid "$fsid" --add a "127.0.0.1:$MON_PORT" "$CEPH_DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$CEPH_DIR/monmap"
  ceph-mon -c "$CONF" -i a
  # The monitor that answers must be ours (same fsid), not one that already
  # held the port.
  local answered=""
  for i in $(seq 1 30); do
    answered=$(timeout 10 ceph -c "$CONF" fsid 2>/dev/null || true)
    [ -n "$answered" ] && break
    sleep 1
  done
  if [ "$answered" != "$fsid" ]; then
    log "the monitor on 127.0.0.1:$MON_PORT answered fsid '$answered', ours is $fsid"
    return 1
  fi
  log "mon started on 127.0.0.1:$MON_PORT"
  local osd_uuid
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  timeout 60 ceph -c "$CONF" osd create "$osd_uuid" 0 >/dev/null
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >/dev/null 2>&1
  ceph -c "$CONF" osd crush add-bucket host0 host >/dev/null 2>&1 || true
  ceph -c "$CONF" osd crush move host0 root=default >/dev/null 2>&1 || true
  ceph -c "$CONF" osd crush add osd.0 1.0 host=host0 >/dev/null 2>&1 || true
  ceph-osd -c "$CONF" -i 0
  log "osd started"
  local i
  for i in $(seq 1 60); do
    if timeout 10 ceph -c "$CONF" osd stat 2>/dev/null | grep -q '1 up'; then break; fi
    sleep 1
  done
  if ! timeout 10 ceph -c "$CONF" osd stat 2>/dev/null | grep -q '1 up'; then
    log "the OSD did not come up"
    return 1
  fi
  radosgw -c "$CONF" -n client.rgw.a
  log "radosgw started on 127.0.0.1:$RGW_PORT"
  # The user is created once the gateway has made its pools.
  for i in $(seq 1 90); do
    if timeout 30 radosgw-admin -c "$CONF" user create --uid=runlog --display-name=runlog \
      --access-key="$ACCESS_KEY" --secret="$SECRET_KEY" >/dev/null 2>&1; then
      break
    fi
    sleep 1
  done
  timeout 60 radosgw-admin -c "$CONF" user info --uid=runlog >/dev/null
  for i in $(seq 1 90); do
    if curl -s -o /dev/null "http://127.0.0.1:$RGW_PORT/"; then break; fi
    sleep 1
  done
  # The bucket: an unsigned-payload PUT signed with the user's keys (curl's SigV4).
  for i in $(seq 1 30); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT \
      --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
      -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
      "http://127.0.0.1:$RGW_PORT/$BUCKET") || code=000
    case "$code" in 200|409) break ;; esac
    sleep 1
  done
  case "$code" in 200|409) ;; *) log "creating bucket $BUCKET failed: HTTP $code"; return 1 ;; esac
  cat >"$CEPH_DIR/env" <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_ALLOW_HTTP=true
export AWS_REGION=us-east-1
export AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false
export RUNLOG_S3_BUCKET=$BUCKET
export RUNLOG_CEPH_CONF=$CONF
EOF
  log "ready: . $CEPH_DIR/env"
}

# The gateway alone, for the tests that take it away mid-run.
stop_rgw() {
  pkill_pidfile "$CEPH_DIR/run/client.rgw.a.pid"
}
start_rgw() {
  radosgw -c "$CONF" -n client.rgw.a
}

pkill_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

stop() {
  pkill_pidfile "$CEPH_DIR/run/client.rgw.a.pid"
  pkill_pidfile "$CEPH_DIR/run/osd.0.pid"
  pkill_pidfile "$CEPH_DIR/run/mon.a.pid"
  rm -rf "$CEPH_DIR"
}

case "${1:-}" in
  start) start ;;
  start-once) start_once ;;
  stop) stop ;;
  stop-rgw) stop_rgw ;;
  start-rgw) start_rgw ;;
  *) echo "usage: $0 start|stop|stop-rgw|start-rgw" >&2; exit 2 ;;
esac
