// deepswe-eval view: the page's only script (inlined by viewer.py, allowed by its sha256).
// Every piece of run data reaches the page as a text node (append / textContent): never as
// markup, so nothing a model wrote can become an element or a script.
"use strict";
(function () {
  const PAGE = 200; // rows rendered at a time; "show more" adds the next ones
  const run = JSON.parse(document.getElementById("deepswe-run").textContent);
  const rows = run.episodes.map((r, n) => Object.assign({ n: n }, r));
  let filtered = rows;
  let shown = PAGE;
  let selected = null;

  function el(tag, cls, ...kids) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const k of kids) {
      if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    }
    return e;
  }
  function option(value, text) {
    const o = el("option", null, text);
    o.value = value;
    return o;
  }
  function uniq(values) {
    return Array.from(new Set(values)).sort();
  }
  function badge(outcome) {
    return el("span", "badge o-" + outcome.replace(/[^a-z_]/g, ""), outcome);
  }
  function fmt(x, digits) {
    return x === null || x === undefined ? "" : Number(x).toFixed(digits);
  }

  // --- the frame: header with filters, the list, the episode pane -------------------------
  const f = {
    task: el("input"), outcome: el("select"), ending: el("select"),
    verifier: el("select"), min: el("input"), max: el("input"),
  };
  f.task.type = "search";
  f.task.placeholder = "instance id or repository";
  f.min.type = f.max.type = "number";
  f.min.step = f.max.step = "any";
  f.min.placeholder = "min";
  f.max.placeholder = "max";
  f.outcome.append(option("", "all"), ...uniq(rows.map((r) => r.outcome)).map((o) => option(o, o)));
  f.ending.append(option("", "all"), ...uniq(rows.map((r) => r.ending)).map((o) => option(o, o)));
  const verifiers = uniq(rows.flatMap((r) => Object.keys(r.scores)));
  f.verifier.append(...verifiers.map((v) => option(v, v)));
  if (!verifiers.length) f.verifier.append(option("", "no scores"));
  for (const k of Object.keys(f)) f[k].id = "f-" + k;

  const count = el("span");
  count.id = "count";
  const header = el("header", null, el("h1", null, run.title), el("div", null,
    el("label", null, "task", f.task), el("label", null, "outcome", f.outcome),
    el("label", null, "ending", f.ending),
    el("label", null, "verifier score", f.verifier, f.min, " – ", f.max), count));
  header.lastChild.id = "filters";

  const body = el("tbody");
  body.id = "rows";
  const head = el("tr");
  for (const h of ["task", "run", "outcome", "ending", "steps", "score", "s"]) head.append(el("th", null, h));
  const more = el("button");
  more.id = "more";
  const list = el("div", null, el("table", null, el("thead", null, head), body), more);
  list.id = "list";
  const pane = el("section", null, el("p", "empty", "Choose an episode in the list."));
  pane.id = "episode";
  document.body.append(header, el("main", null, list, pane));

  // --- the list ---------------------------------------------------------------------------
  function matches(r) {
    const q = f.task.value.trim().toLowerCase();
    if (q && !r.id.toLowerCase().includes(q) && !r.repo.toLowerCase().includes(q)) return false;
    if (f.outcome.value && r.outcome !== f.outcome.value) return false;
    if (f.ending.value && r.ending !== f.ending.value) return false;
    const lo = parseFloat(f.min.value);
    const hi = parseFloat(f.max.value);
    if (isNaN(lo) && isNaN(hi)) return true;
    const s = r.scores[f.verifier.value];
    return s !== undefined && !(s < lo) && !(s > hi);
  }

  function renderRows() {
    const score = f.verifier.value;
    body.replaceChildren(...filtered.slice(0, shown).map((r) => {
      const tr = el("tr", r.n === selected ? "selected" : null,
        el("td", "id", r.id), el("td", null, r.run),
        el("td", null, badge(r.outcome), r.test_infra ? el("span", "badge flag", "test infra") : "",
          r.gate ? el("span", "badge flag", "gate " + r.gate) : ""),
        el("td", null, r.ending), el("td", null, r.steps), el("td", null, fmt(r.scores[score], 3)),
        el("td", null, fmt(r.seconds, 1)));
      tr.dataset.n = r.n;
      tr.addEventListener("click", () => open(r));
      return tr;
    }));
    count.textContent = filtered.length + " of " + rows.length + " episodes";
    const left = filtered.length - shown;
    more.hidden = left <= 0;
    more.textContent = "show " + Math.min(left, PAGE) + " more (" + left + " not shown)";
  }

  function applyFilters() {
    filtered = rows.filter(matches);
    shown = PAGE;
    renderRows();
  }
  for (const k of Object.keys(f)) f[k].addEventListener("input", applyFilters);
  more.addEventListener("click", () => { shown += PAGE; renderRows(); });

  // --- one episode ------------------------------------------------------------------------
  function meta(pairs) {
    const dl = el("dl", "meta");
    for (const [k, v] of pairs) if (v !== "" && v !== null && v !== undefined) dl.append(el("dt", null, k), el("dd", null, v));
    return dl;
  }

  function diff(patch) {
    const box = el("div", "diff");
    for (const line of patch.replace(/\n$/, "").split("\n")) {
      let cls = null;
      if (/^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename |GIT binary)/.test(line)) cls = "file";
      else if (line.startsWith("@@")) cls = "hunk";
      else if (line.startsWith("+")) cls = "add";
      else if (line.startsWith("-")) cls = "del";
      box.append(el("div", cls, line));
    }
    return box;
  }

  function step(s) {
    const call = s.action;
    const text = s.assistant;
    const cut = call ? text.indexOf("<function=") : -1;
    const thought = (cut >= 0 ? text.slice(0, cut) : text).trim();
    const title = "step " + (s.index + 1) + " · " + (call ? call.name : "no valid tool call") +
      (s.exit_code !== null ? " · exit " + s.exit_code : "") + (s.action_timed_out ? " · timed out" : "");
    const box = el("details", "step", el("summary", null, title),
      el("div", "label", "thought"), thought ? el("pre", "thought", thought) : el("p", "empty", "(none before the tool call)"));
    box.open = true;
    if (call) {
      const tool = el("div", "tool", el("span", "name", call.name));
      for (const [k, v] of Object.entries(call.parameters)) tool.append(el("div", "label", k), el("pre", null, v));
      box.append(el("div", "label", "tool call"), tool);
    }
    box.append(el("div", "label", "observation"), s.observation ? el("pre", "observation", s.observation) : el("p", "empty", "(no output)"),
      el("details", null, el("summary", "label", "raw reply"), el("pre", null, text)));
    return box;
  }

  function grade(g, t) {
    if (!g) return [el("p", "empty", "Not graded. " + (t.ending_detail || ""))];
    const rules = (g.rules || "swebench") + (g.grader_ran_tests ? ", tests run by the grader" : "");
    const out = [meta([["outcome", badge(g.outcome)], ["reward", g.reward], ["parser", g.parser],
      ["rules", rules], ["reason", g.reason]])];
    const infra = g.test_infra || [];
    if (infra.length) {
      const lines = infra.map((c) => c.path + " (" + c.why + "; " + (c.restored ? "put back before the tests" : "kept, flagged") + ")");
      out.push(el("div", "label", "test infrastructure the patch changed (" + infra.length + ")"), el("pre", null, lines.join("\n")));
    }
    const gate = g.static_gate || [];
    if (gate.length) {
      const lines = gate.map((f) => "tier " + f.tier + " " + f.rule + ": " + f.path + ":" + f.line + "  " + f.text);
      out.push(el("div", "label", "static gate (" + gate.length + ")"), el("pre", null, lines.join("\n")));
    }
    for (const k of ["f2p_failed", "p2p_failed", "missing", "mismatched", "unexpected"]) {
      if (g[k].length) out.push(el("div", "label", k + " (" + g[k].length + ")"), el("pre", null, g[k].join("\n")));
    }
    if (t.test_log) {
      const log = el("details", null, el("summary", null, "test log (test_output.txt)"), el("pre", null, t.test_log));
      out.push(log);
    }
    const tests = Object.entries(g.statuses);
    if (tests.length) {
      const tb = el("tbody");
      for (const [name, st] of tests) tb.append(el("tr", null, el("td", "id", name), el("td", "t-" + st, st)));
      out.push(el("div", "label", "test statuses (" + tests.length + ")"), el("table", "tests", tb));
    }
    return out;
  }

  function open(r) {
    selected = r.n;
    history.replaceState(null, "", "#" + encodeURIComponent(r.id) + ":" + r.run);
    for (const tr of body.children) tr.classList.toggle("selected", Number(tr.dataset.n) === r.n);
    const d = JSON.parse(document.getElementById("ep-" + r.n).textContent);
    const t = d.trajectory;
    const scores = Object.entries(d.verdicts).map(([v, x]) => v + ": " + (x.score !== null ? fmt(x.score, 3) : x.status + (x.detail ? " (" + x.detail + ")" : "")));
    const parts = [el("h2", null, r.id + " · run " + r.run), meta([
      ["repository", r.repo], ["outcome", badge(r.outcome)], ["status", d.status],
      ["ending", t ? t.ending + (t.ending_detail ? ": " + t.ending_detail : "") : ""],
      ["steps", t ? t.steps.length : ""], ["attempts", d.attempts], ["reason", d.reason],
      ["policy", t ? t.policy : ""], ["verifiers", scores.join(", ")],
      ["seconds", t ? fmt(t.wall_seconds, 1) + " agent, " + fmt(t.grade_seconds, 1) + " grading" : ""],
    ])];
    if (!t) {
      parts.push(el("p", "empty", "No trajectory stored: " + (d.reason || d.status)));
    } else {
      parts.push(el("h3", null, "Prompt"));
      for (const m of t.prompt) {
        const box = el("details", "prompt", el("summary", "label", m.role + " message"), el("pre", null, m.content));
        box.open = m.role !== "system"; // the system prompt is the same in every episode
        parts.push(box);
      }
      parts.push(el("h3", null, "Steps (" + t.steps.length + ")"), ...t.steps.map(step));
      parts.push(el("h3", null, "Patch"), t.patch ? diff(t.patch) : el("p", "empty", "empty patch"));
      parts.push(el("h3", null, "Grading log and verdict"), ...grade(t.grade, t));
    }
    pane.replaceChildren(...parts);
    pane.scrollTop = 0;
  }

  applyFilters();
  const hash = decodeURIComponent(location.hash.slice(1));
  const at = hash.lastIndexOf(":");
  const first = rows.find((r) => r.id === hash.slice(0, at) && String(r.run) === hash.slice(at + 1));
  if (first) open(first);
})();
