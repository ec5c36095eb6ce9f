# scripts/syscall-time.sh BIN TPL [N] : time spent inside each system call by a
# one-shot `runlog unit` call and by `runlog --version` (the process floor),
# per call, from the kernel's raw_syscalls tracepoints (`perf record`, root).
# TPL is a run template (`scale --child build TPL/root N jsonl 1000 1000`); it
# is copied, warmed with 20 calls, then N (default 200) calls of each are traced.
# Times include the tracepoints' own cost (about 0.5 us a call); fdatasync's is
# mostly time asleep waiting for the disk, not CPU.
set -eu
B=$1; T=$2; N=${3:-200}
W=${TMPDIR:-/tmp}/syscall-time.$$
trap 'rm -rf "$W"' EXIT
mkdir -p "$W"; cp -a "$T" "$W/run"
for i in $(seq 1 20); do "$B" --dir "$W/run/root" unit scale warm-$i in_progress >/dev/null; done
cat > "$W/unit.sh" <<EOF
for i in \$(seq 1 $N); do "$B" --dir "$W/run/root" unit scale st-\$i in_progress >/dev/null; done
EOF
cat > "$W/version.sh" <<EOF
for i in \$(seq 1 $N); do "$B" --version >/dev/null; done
EOF
for k in unit version; do
  perf record -q -e raw_syscalls:sys_enter,raw_syscalls:sys_exit,exceptions:page_fault_user \
    -o "$W/$k.data" -- bash "$W/$k.sh" >/dev/null 2>&1
  perf script --ns -i "$W/$k.data" -F comm,pid,time,event,trace 2>/dev/null \
    | awk -v c="$(basename "$B" | cut -c1-15)" '$1 == c' > "$W/$k.txt"
  echo "== $k"
  python3 - "$W/$k.txt" <<'PY'
import collections, re, sys
NAMES = {0: 'read', 1: 'write', 3: 'close', 7: 'poll', 8: 'lseek', 9: 'mmap', 10: 'mprotect', 13: 'rt_sigaction', 16: 'ioctl', 21: 'access', 131: 'sigaltstack', 302: 'prlimit64', 318: 'getrandom',
         11: 'munmap', 12: 'brk', 17: 'pread64', 18: 'pwrite64', 39: 'getpid',
         73: 'flock', 74: 'fsync', 75: 'fdatasync', 79: 'getcwd', 82: 'rename',
         87: 'unlink', 202: 'futex', 217: 'getdents64', 257: 'openat',
         262: 'newfstatat', 332: 'statx'}
time, calls, entered, procs, faults = collections.Counter(), collections.Counter(), {}, set(), 0
for line in open(sys.argv[1]):
    m = re.match(r'\s*\S+\s+(\d+)\s+([\d.]+):\s+(\S+): (.*)', line)
    if not m:
        continue
    pid, t, event, rest = m.group(1), float(m.group(2)), m.group(3), m.group(4)
    procs.add(pid)
    if event.endswith('sys_enter'):
        entered[pid] = (int(re.match(r'NR (\d+)', rest).group(1)), t)
    elif event.endswith('sys_exit') and pid in entered:
        nr, t0 = entered.pop(pid)
        name = NAMES.get(nr, f'nr{nr}')
        time[name] += t - t0
        calls[name] += 1
    elif 'page_fault' in event:
        faults += 1
n = max(len(procs), 1)
print(f'processes {n}: {sum(time.values()) / n * 1e6:.0f} us a call inside system calls, '
      f'{sum(calls.values()) / n:.0f} calls, {faults / n:.0f} page faults')
for name, t in time.most_common(16):
    print(f'  {name:11} {calls[name] / n:5.1f} a call  {t / n * 1e6:7.1f} us a call  {t / calls[name] * 1e6:6.1f} us each')
PY
done
