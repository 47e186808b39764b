"""Chrome traces written by the profiler load in a real browser (PROF-300).

A headless Chromium parses each trace with the browser's own ``JSON.parse`` and checks
every event against the Trace Event Format (the schema chrome://tracing and Perfetto
read): phases, numeric microsecond timestamps, durations, pid/tid, instant-event
scopes, flow ids and metadata names. The page then draws the complete events as a
timeline, so ``--screenshot`` gives a picture of the trace. Skipped where no Chromium
is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import refimpl as t

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs a Chromium binary")

# The browser-side check: parse, validate, draw; the verdict goes into #result as JSON.
_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>trace check</title></head>
<body><pre id="result">pending</pre><canvas id="c" width="1200" height="600"></canvas>
<script id="trace" type="application/json">%s</script>
<script>
const problems = [];
let counts = {};
let trace;
try { trace = JSON.parse(document.getElementById("trace").textContent); }
catch (e) { problems.push("JSON.parse: " + e.message); }
const num = (v) => typeof v === "number" && isFinite(v);
if (trace) {
  const events = Array.isArray(trace) ? trace : trace.traceEvents;
  if (!Array.isArray(events)) problems.push("no traceEvents array");
  (events || []).forEach((e, i) => {
    const where = "event " + i + " (" + e.name + ")";
    if (typeof e.ph !== "string") { problems.push(where + ": no ph"); return; }
    counts[e.ph] = (counts[e.ph] || 0) + 1;
    if (!("pid" in e) || !("tid" in e)) problems.push(where + ": no pid/tid");
    if (e.ph === "X") {
      if (typeof e.name !== "string") problems.push(where + ": no name");
      if (!num(e.ts) || !num(e.dur) || e.dur < 0) problems.push(where + ": bad ts/dur");
    } else if (e.ph === "i" || e.ph === "I") {
      if (!num(e.ts) || !["g", "p", "t"].includes(e.s || "t")) problems.push(where + ": bad instant");
    } else if (e.ph === "s" || e.ph === "f") {
      if (!num(e.ts) || e.id === undefined) problems.push(where + ": bad flow");
    } else if (e.ph === "M") {
      if (!["process_name", "thread_name", "process_labels", "process_sort_index",
            "thread_sort_index"].includes(e.name) || typeof e.args !== "object")
        problems.push(where + ": bad metadata");
    } else {
      problems.push(where + ": unexpected phase " + e.ph);
    }
  });
  const spans = (events || []).filter((e) => e.ph === "X" && num(e.ts));
  const t0 = Math.min(...spans.map((e) => e.ts)), t1 = Math.max(...spans.map((e) => e.ts + e.dur));
  const rows = [...new Set(spans.map((e) => e.pid + "/" + e.tid))];
  const g = document.getElementById("c").getContext("2d");
  spans.forEach((e) => {
    const x = 10 + 1180 * (e.ts - t0) / (t1 - t0 || 1), w = Math.max(1, 1180 * e.dur / (t1 - t0 || 1));
    const y = 10 + 60 * rows.indexOf(e.pid + "/" + e.tid);
    g.fillStyle = e.cat === "kernel" ? "#c33" : e.cat === "user_annotation" ? "#39c" : "#6a6";
    g.fillRect(x, y, w, 40);
  });
}
document.getElementById("result").textContent = JSON.stringify({problems, counts});
</script></body></html>"""


def check_in_browser(trace_path: Path, tmp_path: Path, screenshot: Path | None = None) -> dict:
    """Run the page on ``trace_path`` in headless Chromium; returns its verdict."""
    page = tmp_path / (trace_path.stem + ".html")
    # </script> cannot occur in JSON text that is inside a script element
    text = trace_path.read_text().replace("</", "<\\/")
    page.write_text(_PAGE % text)
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*args, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    if screenshot is not None:
        subprocess.run([*args, f"--screenshot={screenshot}", "--window-size=1220,700",
                        page.as_uri()], capture_output=True, timeout=120, check=True)
    start = dom.index('<pre id="result">') + len('<pre id="result">')
    return json.loads(html.unescape(dom[start:dom.index("</pre>", start)]))


def test_refimpl_trace_loads_in_chromium(tmp_path: Path) -> None:
    x = t.ones(32, 32, requires_grad=True)
    with t.profiler.profile(record_shapes=True, profile_memory=True) as p:
        with t.profiler.record_function("step"):
            y = (x.mm(x) * 2).relu().sum()
        y.backward()
    path = tmp_path / "refimpl.pt.trace.json"
    p.export_chrome_trace(str(path))
    shot = os.environ.get("TRACE_SCREENSHOT")
    verdict = check_in_browser(path, tmp_path, Path(shot) if shot else None)
    assert verdict["problems"] == []
    assert verdict["counts"]["X"] >= 10 and verdict["counts"]["i"] >= 2


def test_a_broken_trace_is_caught_by_the_browser_check(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "12", "dur": 3},
        {"ph": "Q", "name": "b", "pid": 1, "tid": 1}]}))
    verdict = check_in_browser(path, tmp_path)
    assert verdict["problems"] == ["event 0 (a): bad ts/dur", "event 1 (b): unexpected phase Q"]


def test_torch_trace_passes_the_same_browser_check(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    a = torch.ones(16, 16)
    with torch.profiler.profile(profile_memory=True) as p:
        torch.mm(a, a).sum()
    path = tmp_path / "torch.pt.trace.json"
    p.export_chrome_trace(str(path))
    verdict = check_in_browser(path, tmp_path)
    assert verdict["problems"] == [] and verdict["counts"]["X"] >= 2
