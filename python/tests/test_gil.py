"""The GIL is released while a call waits: a thread blocked in Runs.open on
another process's lock lets the main thread run the Python code that makes
that process let go. Were the GIL held, the main thread could not run until
the wait ran out, and the open would fail with Locked."""

import subprocess
import sys
import threading
import time

import runlog

HOLDER = """
import sys, runlog
run = runlog.Runs(sys.argv[1]).open("g")
print("held", flush=True)
sys.stdin.readline()
run.close()
print("released", flush=True)
"""


def test_a_thread_waiting_for_the_lock_does_not_hold_the_gil(root):
    runlog.Runs(root).start("g", units=["a"]).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    outcome = []

    def opener():
        try:
            with runlog.Runs(root, lock_wait=60).open("g") as run:
                run.unit("a", "done")
                outcome.append("wrote")
        except runlog.Error as e:
            outcome.append(e)

    t = threading.Thread(target=opener)
    t.start()
    # Python code running here while the opener waits in Rust.
    spins = 0
    while t.is_alive() and spins < 20:
        time.sleep(0.01)
        spins += 1
    assert t.is_alive() and outcome == []  # still waiting for the lock
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "released"
    t.join(60)
    assert holder.wait() == 0
    assert outcome == ["wrote"]
    assert runlog.Runs(root).get("g").unit_status("a").status == "done"
