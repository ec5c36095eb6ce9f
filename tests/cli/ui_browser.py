"""Drives `runlog ui` in headless Chromium with Playwright for Python.

Started by tests/cli/cli_ui_browser.rs, which has made the run and started
the view. Checks, in a real browser: the token refused then accepted, the
runs page, the run page's counts moving without a reload while this script
advances the run with the CLI, a failure (blocked with a note) and a retry
appearing in the failures lists, the unit search (an output's digest shown
once, a long note shown whole), each list's values under their own headers,
a stalled run listed first and flagged with no ETA, and a unit whose name
and note are HTML shown as text with no script run. With --shots DIR it saves
DIR/ui-runs.png and DIR/ui-run.png (docs/GUIDE.md's screenshots).
"""

import argparse
import os
import subprocess
import sys
import time

from playwright.sync_api import sync_playwright

ap = argparse.ArgumentParser()
ap.add_argument("--runlog", required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--base", required=True, help="http://127.0.0.1:PORT")
ap.add_argument("--token", required=True)
ap.add_argument("--run", required=True)
ap.add_argument("--crafted", required=True, help="the unit whose name is HTML")
ap.add_argument("--stalled", required=True, help="a run quiet for an hour with a unit blocked")
ap.add_argument("--chromium", required=True)
ap.add_argument("--shots")
a = ap.parse_args()


def step(what):
    print("ui_browser:", what, flush=True)


def runlog(*args):
    subprocess.run([a.runlog, "--dir", a.dir, *args], check=True,
                   stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def wait_for(what, pred, timeout=20.0):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


with sync_playwright() as p:
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    browser = p.chromium.launch(executable_path=a.chromium, headless=True, args=args)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    # The token: refused without it or with a wrong one, accepted with it.
    r = page.goto(a.base + "/")
    assert r.status == 401, f"no token: HTTP {r.status}"
    assert "needs its token" in page.content()
    r = page.goto(a.base + "/?token=wrong-token-wrong-token")
    assert r.status == 401, f"wrong token: HTTP {r.status}"
    r = page.goto(f"{a.base}/?token={a.token}")
    assert r.status == 200, f"right token: HTTP {r.status}"
    step("token refused without it and when wrong, accepted when right")

    # The runs page lists the run (the cookie carries the token from here).
    row = page.locator(f'tr[data-run="{a.run}"]')
    row.wait_for(timeout=10000)
    assert a.run in row.inner_text()
    assert "?token" not in page.url, "the token stays in the address bar"
    step("runs page shows the run")

    # Trouble first: the stalled run (no writer, quiet for an hour, a unit
    # blocked) heads the live runs, flagged, with no ETA; the live one runs.
    first = page.locator("table.live tbody tr").first
    wait_for("the stalled run first", lambda: first.get_attribute("data-run") == a.stalled)
    assert first.get_attribute("data-health") == "needs_attention"
    assert first.locator("td").nth(1).locator(".status").inner_text() == "needs attention"
    assert "1 unit(s) blocked; no writer" in first.inner_text(), first.inner_text()
    assert first.locator("td.eta").inner_text() == "stalled"
    assert row.get_attribute("data-health") == "running"
    colors = page.evaluate("""() => [...document.querySelectorAll('table.live tbody tr')]
        .map(r => getComputedStyle(r.querySelector('.status')).color)""")
    assert colors[0] != colors[-1], f"needs attention coloured as running: {colors}"
    step("the stalled run is listed first, flagged needs attention, ETA stalled")
    if a.shots:
        page.wait_for_timeout(2500)  # two refreshes: the rate shows
        page.screenshot(path=os.path.join(a.shots, "ui-runs.png"), full_page=True)

    # The stalled run's page: flagged, and no ETA from its better days.
    page.goto(f"{a.base}/run/{a.stalled}")
    wait_for("the stalled run's ETA", lambda: "ETA stalled" in page.locator("#run-rate").inner_text())
    assert page.locator("#run-status").inner_text() == "needs attention"
    assert "no writer" in page.locator("#run-why").inner_text()
    step("the stalled run's page says needs attention, ETA stalled")

    # The run page; a marker on window proves no reload happens below.
    page.goto(f"{a.base}/run/{a.run}")
    page.wait_for_url(f"**/run/{a.run}")
    done = page.locator("#count-done")
    wait_for("the counts", lambda: done.inner_text() not in ("", "–"))
    page.evaluate("window.__noReload = 1")
    before = int(done.inner_text().replace(",", ""))
    for i in range(1, 6):
        runlog("unit", a.run, f"w{i:03}", "done")
    wait_for("done to move", lambda: int(done.inner_text().replace(",", "")) >= before + 5)
    assert page.evaluate("window.__noReload") == 1, "the page reloaded"
    step(f"counts moved {before} -> {done.inner_text()} without a reload")

    # A failure and a retry appear in the failures lists as they happen.
    runlog("unit", a.run, "w006", "in_progress")
    runlog("unit", a.run, "w006", "blocked", "--note", "disk full on node-7")
    runlog("unit", a.run, "w007", "in_progress")
    runlog("unit", a.run, "w007", "pending", "--note", "lost the worker")
    runlog("unit", a.run, "w007", "in_progress")
    blocked = page.locator("#list-blocked")
    wait_for("w006 in the blocked list",
             lambda: "w006" in blocked.inner_text() and "disk full on node-7" in blocked.inner_text())
    retried = page.locator("#list-retried")
    wait_for("w007 in the retried list", lambda: "w007" in retried.inner_text())
    assert page.evaluate("window.__noReload") == 1, "the page reloaded"
    step("a failure (blocked, with its note) and a retry appeared in the failures lists")

    # The unit search.
    page.fill("#unit-name", "w007")
    page.click("#unit-form button")
    wait_for("the unit", lambda: page.locator("#unit-found").count() and page.locator("#unit-found").inner_text() == "w007")
    assert "2" in page.locator("#unit-result").inner_text()
    step("unit search found w007 (2 attempts)")

    # A unit the cluster driver finished: its output reference, as text.
    note = ('{"output":{"store":"file:///srv/outs","name":"r/w008/1-c1","len":2048,'
            '"digest":"blake3:9f2c","kind":"bytes"},"claim":"c1","attempt":1}')
    runlog("unit", a.run, "w008", "done", "--note", note)
    page.fill("#unit-name", "w008")
    page.click("#unit-form button")
    out = page.locator("#unit-output")
    wait_for("the output reference", lambda: out.count() and "file:///srv/outs/r/w008/1-c1" in out.inner_text())
    assert "2,048 bytes" in out.inner_text() and "9f2c" in out.inner_text(), out.inner_text()
    assert out.inner_text().count("blake3") == 1, f"the digest's hash named twice: {out.inner_text()}"
    step("unit search shows w008's output reference, its digest once")

    # A long note: the unit's JSON shows it whole (wrapped, nothing cut off).
    long_note = "worker lost: " + " ".join(f"step-{i}" for i in range(150)) + " END-OF-NOTE"
    runlog("unit", a.run, "w009", "blocked", "--note", long_note)
    page.fill("#unit-name", "w009")
    page.click("#unit-form button")
    box = page.locator("#unit-json")
    wait_for("w009's record", lambda: box.count() and "END-OF-NOTE" in box.inner_text())
    fit = page.evaluate("""() => { const b = document.getElementById('unit-json');
        return [b.scrollWidth, b.clientWidth, b.scrollHeight, b.clientHeight]; }""")
    assert fit[0] <= fit[1] + 1 and fit[2] <= fit[3] + 1, f"the record is cut (scroll vs client): {fit}"
    step("a long note is shown whole in the unit's record")

    # The crafted unit: its name and note are shown as text; no script ran.
    page.fill("#unit-name", a.crafted)
    page.click("#unit-form button")
    wait_for("the crafted unit", lambda: page.locator("#unit-found").count() and page.locator("#unit-found").inner_text() == a.crafted)
    pending = page.locator("#list-pending")
    wait_for("the crafted name as text in the pending list", lambda: a.crafted in pending.inner_text())
    assert page.evaluate("window.__pwned") is None, "a crafted note ran script"
    assert not dialogs, f"a crafted name ran script: {dialogs}"
    assert page.locator("#list-pending script").count() == 0
    assert page.locator("img").count() == 0, "a note became an element"
    step("the crafted name and note are shown as text; no script ran")

    # Each value sits under its own header: in every list, a cell's text is
    # aligned with its header's (left with left, numbers right with right).
    for kind in ("pending", "retried", "blocked"):
        table = page.locator(f"#list-{kind} table")
        wait_for(f"the {kind} list", lambda: table.count() == 1)
        off = page.evaluate("""(kind) => {
            const t = document.querySelector('#list-' + kind + ' table');
            const box = n => { const r = document.createRange(); r.selectNodeContents(n); return r.getBoundingClientRect(); };
            const heads = [...t.querySelectorAll('thead th')];
            const out = [];
            for (const tr of t.querySelectorAll('tbody tr')) {
              [...tr.children].forEach((td, i) => {
                const c = box(td), h = box(heads[i]);
                if (c.width === 0) return;  // an empty cell
                const right = getComputedStyle(td).textAlign === 'right';
                out.push([heads[i].textContent, right ? c.right - h.right : c.left - h.left]);
              });
            }
            return out; }""", kind)
        bad = [o for o in off if abs(o[1]) > 1.5]
        assert off and not bad, f"{kind}: values not under their headers (header, offset px): {bad}"
    step("each list's values sit under their own headers")

    if a.shots:
        # The top of the page: counts, chart and the failures lists.
        page.fill("#unit-name", "w007")
        page.evaluate("document.getElementById('unit-result').replaceChildren()")
        page.set_viewport_size({"width": 1280, "height": 1000})
        page.wait_for_timeout(1500)
        page.screenshot(path=os.path.join(a.shots, "ui-run.png"))
        step(f"screenshots saved in {a.shots}")

    assert not errors, f"script errors on the page: {errors}"
    browser.close()
print("ui_browser: OK")
