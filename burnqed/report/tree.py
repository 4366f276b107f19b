"""``burnqed tree``: one attempt's search tree as a static, self-contained HTML page.

The page is one file — inline CSS and JavaScript, the tree as JSON embedded in it, nothing fetched
from a network or a server — so it opens from a results directory, an e-mail or a CI artefact.  It
shows every node of the attempt (goal states, the tactic that reached each one with its outcome or
Lean's error, LLM log-probabilities, EBM energies, priorities, expansion order, timings), the proof
path highlighted, and where and why the search ended (the attempt's ``ended_by``,
:data:`burnqed.outcomes.END_REASONS`).  It stays usable on trees of thousands of nodes: the DOM holds
only the rows of opened subtrees (depth < ``open_depth`` and the proof path open at first; the rest
rendered when opened), a text box searches tactics, states and errors over the embedded JSON and
opens the way to each match, and a side list walks the expansions in order.

Nodes come from the trajectory readers (:mod:`burnqed.trajectory`), so the retried-error rule holds
here too: a superseded ``error`` try is never shown.

Example::

    burnqed tree results/iter_1/eval --theorem mathd_algebra_10 --out tree.html
    burnqed tree results/iter_1/eval.json --theorem mathd_algebra_10 --attempt 2 --out tree.html

    >>> pick_attempt([{"attempt": 0, "status": "failed", "proof_expansion": None},
    ...               {"attempt": 1, "status": "proved", "proof_expansion": 7}])
    1
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from burnqed.config import InputError
from burnqed.outcomes import END_REASONS
from burnqed.trajectory import NODE_SCHEMA, read_nodes, read_summary, search_part_dirs

# What each end reason (burnqed.outcomes) means, as the page says it.
END_REASON_TEXT = {
    "proof": "a verified proof was found",
    "budget": "the node budget (search.max_nodes expansions) was spent",
    "frontier": "no open state was left: every branch failed or reached search.max_depth",
    "timeout": "the per-attempt wall-clock cap (search.timeout_s) stopped it",
    "statement": "Lean rejected the theorem statement itself",
    "fault": "an infrastructure failure (REPL, policy server) stopped it; --resume retries it",
}
assert set(END_REASON_TEXT) == set(END_REASONS)

# The node columns the page shows, under the short keys its script reads.
NODE_KEYS = {
    "node_id": "id",
    "parent_id": "p",
    "depth": "d",
    "state": "s",
    "tactic": "t",
    "llm_logprob": "lp",
    "cum_logprob": "clp",
    "priority": "pr",
    "ebm_energy": "e",
    "status": "st",
    "on_proof_path": "pp",
    "solved": "ok",
    "error": "err",
    "duplicate_of": "dup",
    "expansion_index": "x",
    "created_s": "cs",
    "lean_s": "ls",
    "expand_wall_s": "ws",
    "expand_lean_s": "wl",
    "tokens": "tok",
    "num_candidates": "nc",
    "unique_candidates": "uc",
}
SUMMARY_KEYS = (
    "theorem", "attempt", "status", "ended_by", "proof", "verified", "proof_expansion",
    "nodes_expanded", "nodes_total", "rejected_proofs", "rejections", "wall_s", "lean_s",
    "gen_wait_s", "tokens", "wall_timeouts", "reasons",
)  # fmt: skip


@dataclass(frozen=True)
class Trajectories:
    """Summary and node rows of a search or eval output (every shard), read once."""

    directory: Path
    summary: pa.Table
    nodes: pa.Table

    def attempts(self, theorem: str) -> list[dict[str, Any]]:
        rows = self.summary.filter(pc.equal(self.summary["theorem"], theorem)).to_pylist()
        return sorted(rows, key=lambda r: r["attempt"])

    def attempt_nodes(self, theorem: str, attempt: int) -> list[dict[str, Any]]:
        t = self.nodes
        mask = pc.and_(pc.equal(t["theorem"], theorem), pc.equal(t["attempt"], attempt))
        return sorted(t.filter(mask).to_pylist(), key=lambda r: r["node_id"])


def resolve_directory(path: str | Path) -> Path:
    """A search or eval output directory; an eval JSON stands for the trajectories beside it."""
    path = Path(path)
    if path.suffix == ".json" and path.is_file():
        path = path.with_suffix("")
    if not path.is_dir():
        raise InputError(f"{path}: no such search or eval directory")
    return path


def load_trajectories(path: str | Path, theorems: Sequence[str] | None = None) -> Trajectories:
    """Read a search or eval output (``nodes/`` + ``summary/``, or its ``shard_*`` directories);
    ``theorems`` keeps only those theorems' node rows (what a caller renders)."""
    directory = resolve_directory(path)
    try:
        dirs = search_part_dirs(directory)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
    if not dirs:
        raise InputError(f"{directory}: holds no trajectory parts (summary/, nodes/ or shard_*/)")
    summaries, nodes = [], []
    for d in dirs:
        summary = read_summary(d).table
        if theorems is not None:
            present = set(summary["theorem"].to_pylist()) & set(theorems)
            if not present:
                summaries.append(summary)
                continue
        t = read_nodes(d).table
        if theorems is not None:
            t = t.filter(pc.is_in(t["theorem"], pa.array(sorted(present), pa.string())))
        summaries.append(summary)
        nodes.append(t)
    summary = pa.concat_tables(summaries)
    node_table = pa.concat_tables(nodes) if nodes else NODE_SCHEMA.empty_table()
    return Trajectories(directory, summary, node_table)


def pick_attempt(rows: Sequence[Mapping[str, Any]]) -> int:
    """The attempt shown when none is asked for: the proved one whose proof came first, else the
    first attempt."""
    proved = [r for r in rows if r["status"] == "proved" and r["proof_expansion"] is not None]
    if proved:
        return min(proved, key=lambda r: (r["proof_expansion"], r["attempt"]))["attempt"]
    return min(r["attempt"] for r in rows)


def _finite(x: Any) -> Any:
    """JSON has no infinities or NaN: a priority of -inf (an error edge) is written as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def tree_payload(data: Trajectories, theorem: str, attempt: int | None = None) -> dict[str, Any]:
    """The JSON the page embeds: the attempt's summary row, its nodes, and the end of the search.

    Raises :class:`InputError` naming the directory for an unknown theorem key or attempt."""
    rows = data.attempts(theorem)
    if not rows:
        known = sorted(set(data.summary["theorem"].to_pylist()))
        hint = ", ".join(known[:5]) + (", …" if len(known) > 5 else "")
        raise InputError(
            f"{data.directory}: no theorem {theorem!r} ({len(known)} theorems: {hint or 'none'})"
        )
    if attempt is None:
        attempt = pick_attempt(rows)
    row = next((r for r in rows if r["attempt"] == attempt), None)
    if row is None:
        raise InputError(
            f"{data.directory}: theorem {theorem!r} has no attempt {attempt} "
            f"(attempts: {', '.join(str(r['attempt']) for r in rows)})"
        )
    nodes = [
        {short: _finite(n[col]) for col, short in NODE_KEYS.items()}
        for n in data.attempt_nodes(theorem, attempt)
    ]
    expanded = [n for n in nodes if n["x"] is not None]
    last = max(expanded, key=lambda n: n["x"])["id"] if expanded else None
    solved_end = next((n["id"] for n in nodes if n["pp"] and n["ok"]), None)
    return {
        "summary": {k: row[k] for k in SUMMARY_KEYS},
        "ended_by_text": END_REASON_TEXT.get(row["ended_by"], row["ended_by"]),
        "attempts": [r["attempt"] for r in rows],
        "nodes": nodes,
        # where the search stopped: the proof's last node, else the last node it expanded
        "end_node": solved_end if solved_end is not None else last,
        "last_expanded": last,
        "open_frontier": sum(
            1
            for n in nodes
            if n["st"] == "open" and n["x"] is None and n["err"] is None and n["dup"] is None
        ),
    }


def _embed_json(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' (escaped within strings)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_html(payload: Mapping[str, Any], *, open_depth: int = 2) -> str:
    """The page for one :func:`tree_payload`."""
    s = payload["summary"]
    title = f"{s['theorem']} · attempt {s['attempt']} · {s['status']}"
    return (
        _TEMPLATE.replace("__TITLE__", html.escape(title))
        .replace("__OPEN_DEPTH__", str(int(open_depth)))
        .replace("__DATA__", _embed_json(payload))
    )


def write_tree(
    directory: str | Path | Trajectories,
    *,
    theorem: str,
    out: str | Path,
    attempt: int | None = None,
    open_depth: int = 2,
) -> dict[str, Any]:
    """Write the page of ``theorem``'s ``attempt`` (default: :func:`pick_attempt`) to ``out``;
    returns the summary row shown."""
    data = (
        directory
        if isinstance(directory, Trajectories)
        else load_trajectories(directory, [theorem])
    )
    payload = tree_payload(data, theorem, attempt)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(payload, open_depth=open_depth), encoding="utf-8")
    return payload["summary"]


def write_trees(
    trajectories: str | Path, out_dir: str | Path, theorems: Sequence[str], *, limit: int
) -> list[dict[str, Any]]:
    """Pages of the first ``limit`` of ``theorems`` (those the trajectories hold) into ``out_dir``.

    Returns one entry per theorem the trajectories hold: theorem, attempt, status, ended_by and
    ``file`` (the page's name, ``None`` beyond ``limit``).  Reads the trajectories once."""
    wanted = list(dict.fromkeys(theorems))
    if not wanted:
        return []
    held = set(load_trajectories(trajectories, []).summary["theorem"].to_pylist())  # no nodes read
    wanted = [t for t in wanted if t in held]
    data = load_trajectories(trajectories, wanted[:limit])
    entries = []
    for theorem in wanted:
        rows = data.attempts(theorem)
        attempt = pick_attempt(rows)
        row = next(r for r in rows if r["attempt"] == attempt)
        name = None
        if sum(e["file"] is not None for e in entries) < limit:
            name = tree_file_name(theorem, attempt)
            write_tree(data, theorem=theorem, attempt=attempt, out=Path(out_dir) / name)
        entries.append({"theorem": theorem, "attempt": attempt, "status": row["status"],
                        "ended_by": row["ended_by"], "file": name})  # fmt: skip
    return entries


def tree_file_name(theorem: str, attempt: int) -> str:
    """A file name for a theorem key (which may hold '/', spaces or dots) that stays unique."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", theorem).strip("._")[:80] or "theorem"
    if safe != theorem:  # two keys that sanitise alike must not share a file
        safe += "-" + hashlib.blake2b(theorem.encode(), digest_size=4).hexdigest()
    return f"{safe}.a{attempt}.html"


# The page.  Plain DOM, no framework; the script renders rows on demand from the embedded JSON.
_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
:root { --ok: #1a7f37; --bad: #c62828; --open: #1f6feb; --muted: #6e7781; --path: #fff3c4; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #1f2328; background: #fff; }
header { padding: 10px 16px; background: #f6f8fa; border-bottom: 1px solid #d0d7de; }
header h1 { font-size: 18px; margin: 0 0 6px; }
header .facts span { margin-right: 14px; white-space: nowrap; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px;
         font-weight: 600; color: #fff; background: var(--muted); }
.badge.proved { background: var(--ok); } .badge.failed, .badge.error { background: var(--bad); }
.badge.open { background: var(--open); } .badge.timeout, .badge.statement_error { background: #9a6700; }
#proof { margin: 6px 0 0; padding: 6px 8px; background: var(--path); border-radius: 4px;
         font-family: ui-monospace, monospace; white-space: pre-wrap; }
#toolbar { padding: 8px 16px; border-bottom: 1px solid #d0d7de; display: flex; gap: 8px;
           flex-wrap: wrap; align-items: center; }
#toolbar input { width: 22em; padding: 3px 6px; }
button { padding: 2px 8px; cursor: pointer; }
main { display: flex; height: calc(100vh - 160px); min-height: 300px; }
#tree { flex: 3; overflow: auto; padding: 8px 16px; font-family: ui-monospace, monospace;
        font-size: 13px; }
#side { flex: 2; overflow: auto; border-left: 1px solid #d0d7de; padding: 8px 12px; }
ul.children { list-style: none; margin: 0; padding-left: 18px; border-left: 1px dotted #d0d7de; }
#tree > ul.children { padding-left: 0; border-left: none; }
.row { cursor: pointer; white-space: nowrap; padding: 1px 2px; border-radius: 3px; }
.row:hover { background: #eaeef2; }
.row.selected { outline: 2px solid var(--open); }
.row.match { background: #ddf4ff; }
.caret { display: inline-block; width: 1.2em; color: var(--muted); }
.node.proof-path > .row { background: var(--path); font-weight: 600; }
.node.error-edge > .row .tac { color: var(--bad); }
.node.duplicate > .row { color: var(--muted); font-style: italic; }
.st-proved { color: var(--ok); } .st-failed { color: var(--bad); } .st-open { color: var(--open); }
.num { color: var(--muted); margin-left: 8px; }
.end-mark { color: #fff; background: #8250df; border-radius: 6px; padding: 0 5px; margin-left: 6px;
            font-size: 11px; }
pre.state { white-space: pre-wrap; background: #f6f8fa; padding: 6px; border-radius: 4px; }
table.kv td { padding: 1px 8px 1px 0; vertical-align: top; }
table.kv td:first-child { color: var(--muted); }
#matches div, #expansions div { cursor: pointer; white-space: nowrap; overflow: hidden;
                                text-overflow: ellipsis; }
#matches div:hover, #expansions div:hover { background: #eaeef2; }
h3 { margin: 12px 0 4px; font-size: 14px; }
</style>
</head>
<body>
<header>
  <h1 id="title"></h1>
  <div class="facts" id="facts"></div>
  <div id="ended"></div>
  <div id="proof"></div>
</header>
<div id="toolbar">
  <input id="search" type="search" placeholder="search tactics, states, errors (Enter)">
  <span id="search-count"></span>
  <button id="go-proof">proof path</button>
  <button id="go-end">where it ended</button>
  <button id="collapse">collapse all</button>
  <button id="deeper">open one level more</button>
</div>
<main>
  <div id="tree"></div>
  <div id="side">
    <h3>Node</h3><div id="details">Click a node.</div>
    <h3>Search matches</h3><div id="matches"></div>
    <h3>Expansions in order</h3><div id="expansions"></div>
  </div>
</main>
<script type="application/json" id="tree-data">__DATA__</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("tree-data").textContent);
const OPEN_DEPTH = __OPEN_DEPTH__;
const PAGE = 200;                       // rows rendered per batch (children, lists)
const S = D.summary, byId = new Map(), kids = new Map();
for (const n of D.nodes) { byId.set(n.id, n); kids.set(n.id, []); }
for (const n of D.nodes) if (n.p !== null && kids.has(n.p)) kids.get(n.p).push(n);
const root = D.nodes.find(n => n.p === null);
const open = new Set(), matches = new Set();
let selected = null;
for (const n of D.nodes) if (n.d < OPEN_DEPTH || (n.pp && kids.get(n.id).some(c => c.pp))) open.add(n.id);

const el = (tag, cls, text) => { const e = document.createElement(tag);
  if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
const fmt = (x, k = 3) => (x === null || x === undefined) ? "–" : Number(x).toFixed(k);

function header() {
  document.getElementById("title").textContent = `${S.theorem} — attempt ${S.attempt}`;
  const f = document.getElementById("facts");
  const b = el("span"); b.appendChild(el("span", "badge " + S.status, S.status)); f.appendChild(b);
  const facts = [["ended by", S.ended_by], ["expanded", `${S.nodes_expanded} / ${S.nodes_total} nodes`],
    ["proof at expansion", S.proof_expansion ?? "–"], ["verified", S.verified],
    ["wall", fmt(S.wall_s, 2) + " s"], ["Lean", fmt(S.lean_s, 2) + " s"],
    ["tokens", S.tokens], ["open frontier", D.open_frontier], ["attempts", D.attempts.join(", ")]];
  for (const [k, v] of facts) f.appendChild(el("span", "", `${k}: ${v}`));
  let ended = `Search ended by ${S.ended_by}: ${D.ended_by_text}.`;
  if (S.rejected_proofs) ended += ` ${S.rejected_proofs} proof(s) rejected: ${S.rejections.join("; ")}.`;
  if (S.reasons.length) ended += ` Reasons: ${S.reasons.join("; ")}.`;
  document.getElementById("ended").textContent = ended;
  document.getElementById("proof").textContent = S.proof ? "Proof:\n" + S.proof.join("\n")
    : "No proof.";
}

function label(n) {
  const row = el("div", "row"); row.dataset.id = n.id;
  const k = kids.get(n.id);
  row.appendChild(el("span", "caret", k.length ? (open.has(n.id) ? "▾" : "▸") : "·"));
  row.appendChild(el("span", "st-" + n.st, n.ok ? "✔ " : n.err ? "✘ " : n.dup !== null ? "↺ " : "● "));
  row.appendChild(el("span", "tac", n.p === null ? "(root)" : n.t));
  let extra = ` #${n.id}`;
  if (n.x !== null) extra += ` x${n.x}`;
  if (n.p !== null) extra += ` lp ${fmt(n.lp)}`;
  if (n.e !== null) extra += ` E ${fmt(n.e)}`;
  if (k.length) extra += ` [${k.length}]`;
  if (n.err) extra += `  ${n.err.split("\n")[0].slice(0, 80)}`;
  if (n.dup !== null) extra += `  = #${n.dup}`;
  row.appendChild(el("span", "num", extra));
  if (n.id === D.end_node) row.appendChild(el("span", "end-mark", "ended: " + S.ended_by));
  else if (n.id === D.last_expanded) row.appendChild(el("span", "end-mark", "last expansion"));
  if (matches.has(n.id)) row.classList.add("match");
  if (selected === n.id) row.classList.add("selected");
  return row;
}

function nodeLi(n) {
  const li = el("li", "node"); li.id = "node-" + n.id;
  if (n.pp) li.classList.add("proof-path");
  if (n.err) li.classList.add("error-edge");
  if (n.dup !== null) li.classList.add("duplicate");
  li.appendChild(label(n));
  if (open.has(n.id) && kids.get(n.id).length) li.appendChild(childList(n));
  return li;
}

function childList(n, upto = PAGE) {
  const ul = el("ul", "children"), k = kids.get(n.id);
  for (const c of k.slice(0, upto)) ul.appendChild(nodeLi(c));
  if (k.length > upto) {
    const more = el("li", "", ""); const b = el("button", "", `show ${Math.min(PAGE, k.length - upto)} more of ${k.length - upto}`);
    b.onclick = ev => { ev.stopPropagation(); ul.replaceWith(childList(n, upto + PAGE)); };
    more.appendChild(b); ul.appendChild(more);
  }
  return ul;
}

function rerender(id) {
  const li = document.getElementById("node-" + id);
  if (li) li.replaceWith(nodeLi(byId.get(id)));
}

function render() {
  const t = document.getElementById("tree"); t.textContent = "";
  const ul = el("ul", "children"); if (root) ul.appendChild(nodeLi(root)); t.appendChild(ul);
}

function details(n) {
  const d = document.getElementById("details"); d.textContent = "";
  const t = el("table", "kv");
  const rows = [["node", `#${n.id} (depth ${n.d}, parent ${n.p ?? "–"})`], ["status", n.st + (n.ok ? ", solved" : "")],
    ["on proof path", n.pp], ["tactic", n.t ?? "(root)"], ["LLM logprob", fmt(n.lp, 4)],
    ["cumulative logprob", fmt(n.clp, 4)], ["priority", fmt(n.pr, 4)], ["EBM energy", fmt(n.e, 4)],
    ["expansion", n.x ?? "never expanded"], ["candidates", `${n.nc} raw, ${n.uc} unique`],
    ["created", fmt(n.cs, 3) + " s"], ["Lean (creating call)", fmt(n.ls, 3) + " s"],
    ["expansion wall / Lean", `${fmt(n.ws, 3)} s / ${fmt(n.wl, 3)} s`], ["tokens", n.tok],
    ["duplicate of", n.dup ?? "–"], ["error", n.err ?? "–"]];
  for (const [k, v] of rows) { const r = el("tr"); r.appendChild(el("td", "", k)); r.appendChild(el("td", "", String(v))); t.appendChild(r); }
  d.appendChild(t);
  if (n.s !== null) { d.appendChild(el("h3", "", "Goal state")); d.appendChild(el("pre", "state", n.s)); }
  if (n.dup !== null) { const b = el("button", "", `go to #${n.dup}`); b.onclick = () => reveal(n.dup); d.appendChild(b); }
}

function select(id) {
  const prev = selected; selected = id;
  for (const r of document.querySelectorAll(".row.selected")) r.classList.remove("selected");
  const row = document.querySelector(`#node-${id} > .row`);
  if (row) { row.classList.add("selected"); row.scrollIntoView({block: "center"}); }
  details(byId.get(id));
  return prev;
}

function reveal(id) {
  // open every ancestor (rendering only the rows on the way), then select the node
  const chain = []; let n = byId.get(id);
  while (n && n.p !== null) { n = byId.get(n.p); chain.push(n.id); }
  let top = null;
  for (const a of chain.reverse()) if (!open.has(a)) { open.add(a); if (top === null) top = a; }
  if (top !== null) rerender(top);
  select(id);
}

document.getElementById("tree").addEventListener("click", ev => {
  const row = ev.target.closest(".row"); if (!row) return;
  const id = Number(row.dataset.id);
  if (ev.target.classList.contains("caret") || selected === id) {
    if (open.has(id)) open.delete(id); else open.add(id);
    rerender(id);
  }
  select(id);
});

function search(q) {
  matches.clear(); q = q.trim().toLowerCase();
  const box = document.getElementById("matches"); box.textContent = "";
  if (q) for (const n of D.nodes)
    if ((n.t && n.t.toLowerCase().includes(q)) || (n.s && n.s.toLowerCase().includes(q)) ||
        (n.err && n.err.toLowerCase().includes(q))) matches.add(n.id);
  document.getElementById("search-count").textContent = q ? `${matches.size} matching nodes` : "";
  let i = 0;
  for (const id of matches) {
    if (i++ >= PAGE) { box.appendChild(el("div", "", `… ${matches.size - PAGE} more`)); break; }
    const n = byId.get(id); const r = el("div", "", `#${id} ${n.t ?? "(root)"}`);
    r.onclick = () => reveal(id); box.appendChild(r);
  }
  render();
}
document.getElementById("search").addEventListener("keydown", ev => { if (ev.key === "Enter") search(ev.target.value); });

function expansions(upto = PAGE) {
  const box = document.getElementById("expansions"); box.textContent = "";
  const xs = D.nodes.filter(n => n.x !== null).sort((a, b) => a.x - b.x);
  for (const n of xs.slice(0, upto)) {
    const r = el("div", "", `x${n.x}  #${n.id}  ${n.t ?? "(root)"}  → ${kids.get(n.id).length} children`);
    r.onclick = () => reveal(n.id); box.appendChild(r);
  }
  if (xs.length > upto) { const b = el("button", "", `show more (${xs.length - upto} left)`); b.onclick = () => expansions(upto + PAGE); box.appendChild(b); }
}

document.getElementById("go-proof").onclick = () => { const e = D.nodes.find(n => n.pp && n.ok); if (e) reveal(e.id); };
document.getElementById("go-end").onclick = () => { if (D.end_node !== null) reveal(D.end_node); };
let level = OPEN_DEPTH;
document.getElementById("collapse").onclick = () => { open.clear(); level = 1; if (root) open.add(root.id); render(); };
document.getElementById("deeper").onclick = () => {
  level += 1;
  for (const n of D.nodes) if (n.d < level && kids.get(n.id).length) open.add(n.id);
  render();
};

header(); render(); expansions();
if (root) details(root);
</script>
</body>
</html>
"""
