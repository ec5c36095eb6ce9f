// runlog ui: the runs page and a run's page. Everything that comes from a run
// (names, notes, errors, items) is inserted as text (textContent / text
// nodes), never parsed as HTML; the server's Content-Security-Policy allows
// no inline script.
"use strict";

const STATUSES = ["done", "in_progress", "pending", "blocked", "dep_blocked"];
// The counts' JSON keys, by status.
const COUNT_KEY = { done: "done", in_progress: "inProgress", pending: "pending", blocked: "blocked", dep_blocked: "depBlocked" };
const LISTS = [
  ["blocked", "Blocked (failures)", "blocked units with their notes"],
  ["retried", "Retried", "units with more than one attempt"],
  ["stuck", "Stuck?", "in progress for longer than most units take"],
  ["pending", "Pending", "not started"],
  ["eligible", "Eligible now", "not done, every dependency done: what a resume runs"],
  ["held_back", "Held back", "not done, waiting on a dependency (with the roots blocking it)"],
];

// Builds an element: attributes set one by one, children appended; a string
// child becomes a text node.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.appendChild(typeof k === "string" || typeof k === "number" ? document.createTextNode(String(k)) : k);
  }
  return e;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
function byId(id) { return document.getElementById(id); }
function setText(id, text) { const n = byId(id); if (n) n.textContent = text; }

function fmtNum(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function fmtRate(r) { return r === null || r === undefined ? "–" : (r >= 10 ? r.toFixed(0) : r.toFixed(2)) + "/s"; }
function fmtDur(secs) {
  if (secs === null || secs === undefined || !isFinite(secs)) return "–";
  secs = Math.max(0, Math.round(secs));
  const h = Math.floor(secs / 3600), m = Math.floor((secs % 3600) / 60), s = secs % 60;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(s).padStart(2, "0")}s` : `${s}s`;
}
function ago(ts) {
  const t = Date.parse(ts);
  if (!ts || isNaN(t)) return "–";
  return fmtDur((Date.now() - t) / 1000) + " ago";
}
function runHref(id) { return "/run/" + encodeURIComponent(id); }
function statusEl(s) { return el("span", { class: "status st-" + String(s).replace(/[^a-z_]/g, "") }, String(s)); }
// A run's health (the server decides it: runlog::run::Health): the label a
// live run shows instead of its status "running", and its colour.
const HEALTH_LABEL = { needs_attention: "needs attention", idle: "idle", running: "running", failed: "failed", done: "done" };
function healthName(h) { return h && HEALTH_LABEL[h.health] ? h.health : "running"; }
// A run's status cell: a live run by its health (why underneath when it is
// trouble), a finished one by its status, coloured by its health.
function runStateEl(r, withWhy = true) {
  if (!r.initialized) return el("span", { class: "status h-idle" }, "not initialized");
  const h = healthName(r.health);
  const label = r.closed ? String(r.status) : HEALTH_LABEL[h];
  const why = healthWhy(r);
  return el("span", {},
    el("span", { class: "status h-" + h, "data-health": h, title: why || null }, label),
    withWhy && why ? el("div", { class: "muted small why" }, why) : null);
}
// Why a run is trouble (empty for one running or done as expected).
function healthWhy(r) {
  const h = healthName(r.health);
  return r.health && r.health.why && h !== "running" && h !== "done" ? r.health.why : "";
}
// The ETA cell: none for a finished run, "stalled" for an idle one or one
// that needs attention (the server gives them no ETA).
function etaText(r) {
  if (r.closed) return "";
  const h = healthName(r.health);
  if (h === "idle" || h === "needs_attention") return "stalled";
  return fmtDur(r.etaSecs);
}

function bar(counts, total) {
  const b = el("div", { class: "bar", role: "img", "aria-label": "progress" });
  for (const k of STATUSES) {
    const n = counts ? counts[COUNT_KEY[k]] || 0 : 0;
    if (!total || !n) continue;
    const s = el("span", { class: "s-" + k, title: k + " " + n });
    s.style.width = (100 * n / total) + "%";
    b.appendChild(s);
  }
  return b;
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  const text = await r.text();
  let v;
  try { v = JSON.parse(text); } catch (_) { v = { error: text }; }
  if (!r.ok) throw new Error(v.error || ("HTTP " + r.status));
  return v;
}

function setConn(state, text) {
  const c = byId("conn");
  c.textContent = text;
  c.className = "conn " + state;
}

// ---------------------------------------------------------------- runs page

function runsTable(rows, finished) {
  const heads = [["run"], ["status"], ["task"], ["progress"], ["done", "num"], ["rate (1 min)", "num"], ["ETA", "num"], ["last change"], ["remote"]];
  const t = el("table", { class: finished ? "finished" : "live" },
    el("thead", {}, el("tr", {}, heads.map(([h, c]) => el("th", { class: c }, h)))));
  const tb = el("tbody");
  for (const r of rows) {
    if (r.error) {
      tb.appendChild(el("tr", { "data-run": r.id }, el("td", {}, el("a", { href: runHref(r.id) }, r.id)),
        el("td", { class: "error", colspan: 8 }, r.error)));
      continue;
    }
    const remote = r.remote ? (r.remote.lag ? "lag " + fmtNum(r.remote.lag.lag) : r.remote.line) : "";
    tb.appendChild(el("tr", { "data-run": r.id, "data-health": healthName(r.health), class: "row-" + healthName(r.health) },
      el("td", {}, el("a", { href: runHref(r.id) }, r.id)),
      el("td", {}, runStateEl(r)),
      el("td", { class: "note" }, r.task),
      el("td", {}, bar(r.counts, r.total)),
      el("td", { class: "num" }, fmtNum(r.done) + " / " + fmtNum(r.total)),
      el("td", { class: "num", title: r.rateFrom === "sinceStart" ? "average since the run started (measured over a minute once this page has seen two refreshes)" : "over the last minute" }, r.closed ? "" : fmtRate(r.rate) + (r.rateFrom === "sinceStart" ? " avg" : "")),
      el("td", { class: "num eta" }, etaText(r)),
      el("td", {}, ago(r.updatedAt)),
      el("td", { class: "muted" }, remote)));
  }
  t.appendChild(tb);
  return t;
}

async function runsPage() {
  document.title = "runlog: runs";
  const main = byId("main");
  const refresh = async () => {
    let v;
    try {
      v = await getJSON("/api/runs");
      setConn("live", "updated " + new Date().toLocaleTimeString());
    } catch (e) {
      setConn("down", "cannot reach the view: " + e.message);
      return;
    }
    setText("where", v.root);
    clear(main);
    main.appendChild(el("h1", {}, "Runs"));
    main.appendChild(el("p", { class: "muted" }, `${fmtNum(v.total)} runs under ${v.root}` +
      (v.total > v.listedLimit ? ` (the ${fmtNum(v.listedLimit)} changed last are listed)` : "")));
    const trouble = v.live.filter(r => r.error || (r.health && r.health.trouble)).length;
    main.appendChild(el("h2", {}, `Live (${v.live.length})` + (trouble ? ` · ${trouble} need${trouble === 1 ? "s" : ""} a look (listed first)` : "")));
    main.appendChild(v.live.length ? runsTable(v.live, false) : el("p", { class: "muted" }, "none"));
    main.appendChild(el("h2", {}, `Finished (${v.finished.length})`));
    main.appendChild(v.finished.length ? runsTable(v.finished, true) : el("p", { class: "muted" }, "none"));
    main.appendChild(el("h2", {}, "Archived"));
    if (v.archived.error) {
      main.appendChild(el("p", { class: "error" }, v.archived.error));
    } else if (!v.archived.shown.length) {
      main.appendChild(el("p", { class: "muted" }, "none"));
    } else {
      const t = el("table", { class: "archived" }, el("thead", {}, el("tr", {}, ["name", "id", "status", "task", "updated"].map(h => el("th", {}, h)))));
      const tb = el("tbody");
      for (const a of v.archived.shown) {
        tb.appendChild(el("tr", {}, el("td", {}, a.name), el("td", {}, a.id || ""), el("td", {}, a.status ? statusEl(a.status) : (a.error || "")),
          el("td", { class: "note" }, a.task || ""), el("td", {}, a.updatedAt ? ago(a.updatedAt) : "")));
      }
      t.appendChild(tb);
      main.appendChild(t);
      if (v.archived.total > v.archived.shown.length) main.appendChild(el("p", { class: "muted" }, `${fmtNum(v.archived.total)} archived in all`));
    }
  };
  await refresh();
  setInterval(refresh, 2000);
}

// ----------------------------------------------------------------- run page

const live = { points: [], lists: {}, listsSeq: null, id: null };

function chart(svg, s) {
  clear(svg);
  const W = 600, H = 120, ns = "http://www.w3.org/2000/svg";
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("preserveAspectRatio", "none");
  const mk = (tag, attrs) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v)); return e; };
  const c = s.lists && s.lists.chart;
  const caption = [];
  if (c && c.buckets.length) {
    const max = Math.max(1, ...c.buckets);
    const bw = W / c.buckets.length;
    c.buckets.forEach((n, i) => {
      const h = (H - 14) * n / max;
      svg.appendChild(mk("rect", { x: i * bw + 0.5, y: H - 12 - h, width: Math.max(1, bw - 1), height: h }));
    });
    const perMin = max / ((c.toMs - c.fromMs) / c.buckets.length / 60000);
    caption.push(`bars: units done over the run's life (peak ${perMin.toFixed(1)}/min)`);
  }
  // The live rate as this page has seen it, drawn over the last points.
  if (live.points.length > 1) {
    const max = Math.max(0.001, ...live.points.map(p => p.r));
    const pts = live.points.map((p, i) => `${(W * i / (live.points.length - 1)).toFixed(1)},${(H - 12 - (H - 24) * p.r / max).toFixed(1)}`);
    svg.appendChild(mk("polyline", { points: pts.join(" ") }));
    caption.push(`line: the rate this page has seen (max ${fmtRate(max)})`);
  }
  setText("chart-caption", caption.join(" · "));
}

function kv(rows) {
  return el("table", { class: "kv" }, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
}

function renderSummary(s) {
  if (s.error) {
    setConn("down", s.error);
    return;
  }
  setText("run-task", s.task);
  const st = byId("run-status");
  clear(st);
  st.appendChild(runStateEl(s, false));
  setText("run-why", healthWhy(s));
  byId("run-why").className = "why-line why-" + healthName(s.health);
  setText("run-meta", `seq ${fmtNum(s.seq)} · created ${s.createdAt} · last change ${ago(s.updatedAt)}` + (s.finishedAt ? ` · finished ${s.finishedAt}` : "") + (s.result ? ` · result: ${s.result}` : ""));
  const b = byId("run-bar");
  clear(b);
  b.appendChild(bar(s.counts, s.total));
  for (const k of STATUSES) setText("count-" + k, fmtNum(s.counts[COUNT_KEY[k]]));
  setText("count-total", fmtNum(s.total));
  setText("run-rate", `${fmtRate(s.rate)} ${s.rateFrom === "sinceStart" ? "on average since the run started" : "over the last minute"} · ETA ${s.closed ? "–" : etaText(s)}`);
  if (s.rate !== null && s.rate !== undefined && s.rateFrom === "lastMinute") {
    live.points.push({ t: Date.now(), r: s.rate });
    if (live.points.length > 120) live.points.shift();
  }
  chart(byId("chart"), s);

  const ph = byId("phases");
  clear(ph);
  ph.appendChild(s.phases.length ? el("table", {}, el("tbody", {}, s.phases.map(p => el("tr", {}, el("td", {}, p.name), el("td", {}, statusEl(p.status)), el("td", { class: "muted" }, p.finishedAt || p.startedAt || p.updatedAt))))) : el("p", { class: "muted" }, "none"));
  const bu = byId("budgets");
  clear(bu);
  bu.appendChild(s.budgets.length ? el("table", {}, el("thead", {}, el("tr", {}, ["budget", "spent", "limit", "owner", ""].map(h => el("th", {}, h)))),
    el("tbody", {}, s.budgets.map(x => el("tr", {}, el("td", {}, x.name), el("td", { class: "num" }, fmtNum(x.spent)), el("td", { class: "num" }, x.limit === null ? "unlimited" : fmtNum(x.limit)),
      el("td", {}, x.owner), el("td", { class: x.exhausted ? "exhausted" : "" }, x.exhausted ? "exhausted " + (x.exhaustedAt || "") : ""))))) : el("p", { class: "muted" }, "none"));
  const it = byId("items");
  clear(it);
  if (!s.openItems.total) it.appendChild(el("p", { class: "muted" }, "none open" + (s.resolvedItems ? ` (${s.resolvedItems} resolved)` : "")));
  else {
    it.appendChild(el("ul", {}, s.openItems.shown.map(i => el("li", {}, el("b", {}, i.id), " ", el("span", { class: "note" }, typeof i.item === "string" ? i.item : JSON.stringify(i.item))))));
    if (s.openItems.total > s.openItems.shown.length) it.appendChild(el("p", { class: "muted" }, `${s.openItems.total} open in all`));
  }
  setText("fingerprint", JSON.stringify(s.fingerprint, null, 1));
  setText("remote", s.remote ? s.remote.line : "no remote");
  setText("checkpoint", s.checkpoint ? `checkpoint ${s.checkpoint.count} at ${s.checkpoint.at}` : "no checkpoint");
  if (s.lists) {
    const r = s.lists.resume;
    setText("resume", `skip ${fmtNum(r.skip)} · eligible ${fmtNum(r.eligible)} · held back ${fmtNum(r.heldBack)} (at the scan's seq ${fmtNum(s.lists.scanSeq)})`);
    setText("lists-age", `blocked, retried, stuck, pending at seq ${fmtNum(s.lists.seq)} (kept from the log's tail); eligible and held back from the scan at seq ${fmtNum(s.lists.scanSeq)}, ${ago(new Date(s.lists.scannedAtMs).toISOString())}, in ${s.lists.tookMs} ms` + (s.scanning ? " (rescanning)" : "") +
      ` · stuck = in progress ≥ ${fmtDur(s.lists.stuckAfterMs / 1000)}`);
    for (const [k] of LISTS) setText("total-" + k, fmtNum(s.lists.totals[k]));
    if (s.lists.seq !== live.listsSeq) {
      live.listsSeq = s.lists.seq;
      for (const [k] of LISTS) loadList(k, live.lists[k] || 0);
    }
  } else {
    setText("lists-age", "scanning the units for the lists…");
  }
}

async function loadList(kind, page) {
  live.lists[kind] = page;
  const box = byId("list-" + kind);
  let v;
  try {
    v = await getJSON(`/api/runs/${encodeURIComponent(live.id)}/lists/${kind}?page=${page}`);
  } catch (e) {
    clear(box);
    box.appendChild(el("p", { class: "error" }, e.message));
    return;
  }
  clear(box);
  if (v.scanning) { box.appendChild(el("p", { class: "muted" }, "scanning…")); return; }
  if (!v.entries.length) { box.appendChild(el("p", { class: "muted" }, "none")); return; }
  // Each header is aligned as its column's cells (numbers to the right), so
  // every value sits under its own header.
  const cols = kind === "held_back" ? [["unit"], ["status"], ["waiting on"], ["blocking roots"]]
    : kind === "stuck" ? [["unit"], ["attempts", "num"], ["started"], ["note"]]
    : [["unit"], ["status"], ["attempts", "num"], ["note"], ["last change"]];
  const rows = v.entries.map(e => {
    const name = el("td", { class: "unit" }, el("a", { href: "#unit", "data-unit": "1" }, e.name));
    name.firstChild.addEventListener("click", ev => { ev.preventDefault(); lookup(e.name); });
    if (kind === "held_back") return el("tr", {}, name, el("td", {}, statusEl(e.status)), el("td", { class: "note" }, (e.openDeps || []).join(", ")), el("td", { class: "note" }, (e.roots || []).join(", ") + (e.rootsWalkCut ? " …" : "")));
    if (kind === "stuck") return el("tr", {}, name, el("td", { class: "num" }, e.attempts), el("td", {}, ago(e.startedAt)), el("td", { class: "note" }, e.note));
    return el("tr", {}, name, el("td", {}, statusEl(e.status)), el("td", { class: "num" }, e.attempts), el("td", { class: "note" }, e.note), el("td", {}, ago(e.updatedAt)));
  });
  box.appendChild(el("table", { class: "list list-" + kind }, el("thead", {}, el("tr", {}, cols.map(([c, cls]) => el("th", { class: cls }, c)))), el("tbody", {}, rows)));
  const prev = el("button", {}, "‹ prev"), next = el("button", {}, "next ›");
  prev.disabled = page <= 0;
  next.disabled = page + 1 >= v.pages;
  prev.addEventListener("click", () => loadList(kind, page - 1));
  next.addEventListener("click", () => loadList(kind, page + 1));
  const more = v.total > v.kept ? ` · the first ${fmtNum(v.kept)} of ${fmtNum(v.total)} are kept; \`runlog get ${live.id}\` lists all` : "";
  box.appendChild(el("div", { class: "pager" }, prev, el("span", { class: "muted" }, `page ${page + 1} of ${v.pages}${more}`), next));
}

// The output reference the cluster driver recorded in the done note, as text.
function outputText(o) {
  if (!o) return "–";
  const parts = [`${o.store}/${o.name}`];
  if (o.len !== null && o.len !== undefined) parts.push(`${fmtNum(o.len)} bytes`);
  if (o.kind) parts.push(o.kind);
  // The digest names its hash ("blake3:<hex>"): shown once, as recorded.
  if (o.digest) parts.push(/^[a-z0-9]+:/.test(o.digest) ? o.digest : `blake3:${o.digest}`);
  if (o.attempt !== null && o.attempt !== undefined) parts.push(`attempt ${o.attempt}`);
  return el("span", { class: "note", id: "unit-output" }, parts.join(" · "));
}

async function lookup(name) {
  byId("unit-name").value = name;
  const out = byId("unit-result");
  clear(out);
  let v;
  try {
    v = await getJSON(`/api/runs/${encodeURIComponent(live.id)}/unit?name=${encodeURIComponent(name)}`);
  } catch (e) {
    out.appendChild(el("p", { class: "error" }, e.message));
    return;
  }
  if (!v.found) { out.appendChild(el("p", { class: "muted", id: "unit-missing" }, "no unit named ", el("b", {}, v.name))); return; }
  const u = v.unit;
  out.appendChild(kv([
    ["unit", el("b", { id: "unit-found" }, v.name)],
    ["status", statusEl(u.status)],
    ["attempts", String(u.attempts)],
    ["note", el("span", { class: "note" }, u.note || "")],
    ["depends on", (u.dependsOn || []).join(", ") || "–"],
    ["blocking roots", (v.blockingRoots || []).join(", ") + (v.rootsWalkCut ? " …" : "") || "–"],
    ["created", u.createdAt], ["started", u.startedAt || "–"], ["updated", u.updatedAt], ["finished", u.finishedAt || "–"],
    ["output", outputText(v.outputRef)],
  ]));
  // The record as JSON, wrapped: a long note is shown whole, never cut at the box's edge.
  out.appendChild(el("pre", { id: "unit-json", class: "wrap" }, JSON.stringify(u, null, 1)));
}

function runSkeleton(id) {
  const main = byId("main");
  clear(main);
  const count = k => el("div", { class: "count" }, el("b", { id: "count-" + k }, "–"), k);
  const lists = LISTS.map(([k, title, what]) => el("section", { id: "section-" + k },
    el("h2", {}, title, " ", el("span", { class: "muted", id: "total-" + k }, ""), " ", el("span", { class: "muted" }, "· " + what)),
    el("div", { id: "list-" + k }, el("p", { class: "muted" }, "scanning…"))));
  main.append(
    el("h1", {}, el("span", { id: "run-id" }, id), " ", el("span", { id: "run-status" })),
    el("div", { id: "run-why", class: "why-line" }),
    el("div", { id: "run-task", class: "note" }),
    el("div", { id: "run-meta", class: "muted" }),
    el("div", { id: "run-bar" }),
    el("div", { class: "counts" }, STATUSES.map(count), el("div", { class: "count" }, el("b", { id: "count-total" }, "–"), "total")),
    el("div", { id: "run-rate" }),
    document.createElementNS("http://www.w3.org/2000/svg", "svg"),
    el("div", { id: "chart-caption", class: "muted small" }),
    el("div", { id: "lists-age", class: "muted" }),
    el("h2", {}, "Find a unit"),
    el("form", { id: "unit-form" }, el("input", { type: "search", id: "unit-name", placeholder: "unit name", autocomplete: "off" }), " ", el("button", { type: "submit" }, "look up")),
    el("div", { id: "unit-result" }),
    ...lists.slice(0, 3),
    el("h2", {}, "Resume set"), el("div", { id: "resume", class: "muted" }, "…"),
    ...lists.slice(3),
    el("div", { class: "grid" },
      el("section", {}, el("h2", {}, "Phases"), el("div", { id: "phases" })),
      el("section", {}, el("h2", {}, "Budgets"), el("div", { id: "budgets" })),
      el("section", {}, el("h2", {}, "Open items"), el("div", { id: "items" })),
      el("section", {}, el("h2", {}, "Remote, checkpoint"), el("div", { id: "remote" }), el("div", { id: "checkpoint", class: "muted" })),
    ),
    el("h2", {}, "Fingerprint"), el("pre", { id: "fingerprint" }),
  );
  const svg = main.querySelector("svg");
  svg.setAttribute("id", "chart");
  svg.setAttribute("class", "chart");
  byId("unit-form").addEventListener("submit", ev => {
    ev.preventDefault();
    const n = byId("unit-name").value;
    if (n) lookup(n);
  });
}

async function runPage(id) {
  live.id = id;
  document.title = "runlog: " + id;
  setText("where", "run " + id);
  runSkeleton(id);
  try {
    renderSummary(await getJSON("/api/runs/" + encodeURIComponent(id)));
  } catch (e) {
    clear(byId("main"));
    byId("main").appendChild(el("p", { class: "error", id: "run-error" }, e.message));
    return;
  }
  const es = new EventSource("/api/runs/" + encodeURIComponent(id) + "/events");
  es.addEventListener("summary", ev => {
    setConn("live", "live");
    try { renderSummary(JSON.parse(ev.data)); } catch (e) { setConn("down", "bad update: " + e.message); }
  });
  es.onerror = () => setConn("down", "reconnecting…");
}

function start() {
  // The token, if the URL carried one, is now in a cookie: keep it out of
  // the history and of screenshots.
  if (location.search) history.replaceState(null, "", location.pathname);
  const m = location.pathname.match(/^\/run\/([^/]+)$/);
  if (m) runPage(decodeURIComponent(m[1]));
  else runsPage();
}

document.addEventListener("DOMContentLoaded", start);
