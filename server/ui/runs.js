// envforge viewer: synthesis runs (#/runs, #/runs/NAME), over /ui/api/runs (server/ui_runs.h).
// Uses app.js's helpers (api, el, showError), which load first. As in app.js, everything from a
// run database (names, categories, reasons) goes into the page as text: textContent for HTML and
// SVG text alike, never innerHTML. The funnel chart is SVG built here, element by element: no
// charting library, nothing fetched but the API.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const FUNNEL_STAGES = [
  ["candidates", "candidates"], ["verified", "verified"], ["audited_sound", "audited"], ["in_band", "in band"], ["kept", "kept"],
];
const DROPPED_PAGE = 200;
const runsState = { name: null, offset: 0 };

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// The runs view's section, made on first use so that index.html needs no markup for it.
function runsSection() {
  let section = document.getElementById("runs-view");
  if (section) return section;
  section = el("section");
  section.id = "runs-view";
  section.hidden = true;
  document.querySelector("main").prepend(section);
  return section;
}

function formatSeconds(epochSeconds) {
  return typeof epochSeconds === "number" ? new Date(epochSeconds * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
}

function runsTable(runs) {
  const table = el("table");
  table.id = "runs";
  const head = el("tr");
  for (const title of ["run", "categories", "environments", "candidates", "kept", "dropped", "started"]) head.append(el("th", title));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const run of runs) {
    const row = el("tr");
    row.dataset.run = run.name;
    if (run.error) {
      const cell = el("td", run.error, "failed");
      cell.colSpan = 6;
      row.append(el("td", run.name), cell);
    } else {
      const envs = run.environments || {};
      const link = el("a", run.name);
      link.href = "#/runs/" + encodeURIComponent(run.name);
      const name = el("td");
      name.append(link);
      row.append(name, el("td", (run.categories || []).join(", ")), el("td", envs.done + " of " + envs.planned),
                 el("td", run.candidates), el("td", run.kept), el("td", run.dropped), el("td", formatSeconds(run.started)));
      row.addEventListener("click", () => { location.hash = "#/runs/" + encodeURIComponent(run.name); });
    }
    table.tBodies[0].append(row);
  }
  return table;
}

async function loadRuns(section) {
  const listing = await api("runs");
  section.append(el("h2", "Synthesis runs"));
  if (listing.note) section.append(el("p", listing.note, "note"));
  else if (listing.runs.length === 0) section.append(el("p", "no run databases (*.sqlite) in " + listing.dir, "note"));
  if (listing.runs.length) section.append(runsTable(listing.runs));
}

// The funnel as horizontal bars: one group per category and level (the totals last), one bar per
// stage, each as long as its count against the largest count in the run.
function funnelChart(rows) {
  const labelWidth = 190, stageWidth = 80, barArea = 440, countWidth = 60, barHeight = 14, gap = 3, groupGap = 14;
  const largest = Math.max(1, ...rows.map((row) => row.candidates));
  const groupHeight = FUNNEL_STAGES.length * (barHeight + gap) + groupGap;
  const width = labelWidth + stageWidth + barArea + countWidth, height = rows.length * groupHeight + 10;
  const chart = svg("svg", { class: "funnel-chart", width, height, viewBox: "0 0 " + width + " " + height, role: "img" });
  chart.append(svg("title", {}, "funnel per category and level: candidates, verified, audited, in band, kept"));
  rows.forEach((row, rowIndex) => {
    const top = rowIndex * groupHeight + 4;
    const group = svg("g", { class: "funnel-group", "data-category": row.category, "data-level": row.level });
    group.append(svg("text", { x: 0, y: top + barHeight - 2, class: "funnel-label" },
                     row.category === "all" ? "all categories" : row.category + " · level " + row.level));
    FUNNEL_STAGES.forEach(([key, title], stageIndex) => {
      const y = top + stageIndex * (barHeight + gap);
      const count = row[key] || 0;
      const length = Math.max(count ? 2 : 0, Math.round((count / largest) * barArea));
      group.append(svg("text", { x: labelWidth, y: y + barHeight - 3, class: "funnel-stage" }, title),
                   svg("rect", { x: labelWidth + stageWidth, y, width: length, height: barHeight, class: "bar bar-" + key }),
                   svg("text", { x: labelWidth + stageWidth + length + 4, y: y + barHeight - 3, class: "funnel-count" }, count));
    });
    chart.append(group);
  });
  return chart;
}

function runFacts(run) {
  const facts = el("dl");
  facts.id = "run-facts";
  const envs = run.environments || {};
  const cost = run.cost || {};
  const add = (name, value) => { if (value !== null && value !== undefined && value !== "") facts.append(el("dt", name), el("dd", value)); };
  add("categories", ((run.config || {}).categories || []).join(", "));
  add("environments", envs.done + " done, " + envs.failed + " failed, " + envs.pending + " pending of " + envs.planned);
  add("started", formatSeconds(run.started));
  add("last written", formatSeconds(run.modified));
  add("wall time", typeof cost.seconds === "number" ? cost.seconds.toFixed(1) + " s" : "");
  add("model calls", cost.model_calls);
  add("tokens", cost.tokens);
  add("seconds per kept task", typeof cost.seconds_per_kept_task === "number" ? cost.seconds_per_kept_task.toFixed(2) : "");
  for (const failure of envs.failures || []) add("failed environment", failure);
  return facts;
}

// A reason of one short line shows whole; a longer one (a generator's traceback) shows its first
// line and opens on a click.
function reasonBlock(reason) {
  const firstLine = reason.split("\n", 1)[0];
  if (firstLine.length === reason.length && reason.length <= 240) return el("span", reason);
  const details = el("details");
  details.append(el("summary", firstLine.length > 240 ? firstLine.slice(0, 240) + "..." : firstLine), el("pre", reason));
  return details;
}

function droppedTable(run) {
  const table = el("table");
  table.id = "dropped";
  const head = el("tr");
  for (const title of ["candidate", "task", "stage", "reason"]) head.append(el("th", title));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const dropped of run.dropped) {
    const row = el("tr");
    const reason = el("td", null, "reason");
    reason.append(reasonBlock(dropped.reason || ""));
    row.append(el("td", dropped.candidate, "id"), el("td", dropped.task), el("td", dropped.stage, "stage-" + dropped.stage), reason);
    table.tBodies[0].append(row);
  }
  return table;
}

function droppedPager(run) {
  const pager = el("nav");
  pager.id = "dropped-pager";
  const previous = el("button", "previous");
  const next = el("button", "next");
  previous.type = next.type = "button";
  previous.disabled = run.offset === 0;
  next.disabled = !run.has_more;
  previous.addEventListener("click", () => { runsState.offset = Math.max(0, runsState.offset - DROPPED_PAGE); showRunsRoute(); });
  next.addEventListener("click", () => { runsState.offset += DROPPED_PAGE; showRunsRoute(); });
  const first = run.dropped.length ? run.offset + 1 : 0;
  pager.append(previous, el("span", " " + first + "-" + (run.offset + run.dropped.length) + " of " + run.dropped_total + " "), next);
  return pager;
}

async function loadRun(section, name) {
  const run = await api("runs/" + encodeURIComponent(name) + "?limit=" + DROPPED_PAGE + "&offset=" + runsState.offset);
  const back = el("p");
  const link = el("a", "all runs");
  link.href = "#/runs";
  back.append(link);
  section.append(back, el("h2", "run " + run.name), runFacts(run), el("h3", "Funnel"), funnelChart(run.funnel));
  const reasons = el("ul");
  reasons.id = "drop-reasons";
  for (const [reason, count] of Object.entries(run.drop_reasons || {})) reasons.append(el("li", count + " × " + reason));
  section.append(el("h3", "Dropped candidates (" + run.dropped_total + ")"), reasons);
  if (run.dropped_total === 0) section.append(el("p", "no candidate was dropped", "note"));
  else section.append(droppedTable(run), droppedPager(run));
}

async function showRunsRoute() {
  const section = runsSection();
  const match = location.hash.match(/^#\/runs(?:\/([^&]+))?/);
  const name = match && match[1] ? decodeURIComponent(match[1]) : null;
  if (name !== runsState.name) runsState.offset = 0;
  runsState.name = name;
  try {
    const part = el("div");
    if (name) await loadRun(part, name);
    else await loadRuns(part);
    section.replaceChildren(part);
    showError(null);
  } catch (error) {
    section.replaceChildren();
    showError(error);
  }
}

// Called by app.js's route(): true when the address is a runs view (which it then shows, hiding
// the episode views); false otherwise, with the runs view hidden.
function routeRuns() {
  const mine = /^#\/runs(\/|&|$)/.test(location.hash);
  runsSection().hidden = !mine;
  if (!mine) return false;
  document.getElementById("list-view").hidden = true;
  document.getElementById("episode-view").hidden = true;
  showRunsRoute();
  return true;
}
