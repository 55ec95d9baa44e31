// envforge trajectory viewer. Everything untrusted (tool results, model text, prompts, ids) is
// put into the page with textContent, never innerHTML; the server's Content-Security-Policy
// allows no inline script either. The bearer token (when the server has one) comes from the
// page's fragment ("#token=T", "#/episode/ID&token=T") or the form, is kept in sessionStorage,
// and is sent on API calls.
"use strict";

const state = { offset: 0, limit: 50, filters: {} };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function token() { return sessionStorage.getItem("envforge-token") || ""; }

async function api(path, method) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const response = await fetch("/ui/api/" + path, { headers, method: method || "GET" });
  if (response.status === 401) {
    document.getElementById("token-form").hidden = false;
    throw new Error("this server needs a token: enter it above");
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
  return body;
}

function showError(error) {
  const box = document.getElementById("error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

function formatTime(us) { return us ? new Date(us / 1000).toISOString().replace("T", " ").slice(0, 19) : ""; }
function formatDuration(start, end) { return start && end ? ((end - start) / 1e6).toFixed(2) + " s" : ""; }

function verdictText(verdict) {
  if (!verdict || typeof verdict !== "object") return "";
  return verdict.passed === true ? "passed" : verdict.passed === false ? "failed" : "";
}

async function loadCounts() {
  try {
    const counts = await api("counts");
    const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");
    document.getElementById("counts").textContent =
      plural(counts.episodes, "episode") + ", " + plural(counts.steps, "tool call") + ", " + counts.open_episodes + " open";
  } catch (error) { showError(error); }
}

async function loadList() {
  const query = new URLSearchParams(state.filters);
  query.set("limit", state.limit);
  query.set("offset", state.offset);
  try {
    const page = await api("episodes?" + query.toString());
    const body = document.querySelector("#episodes tbody");
    body.replaceChildren();
    for (const episode of page.episodes) {
      const row = el("tr");
      row.dataset.id = episode.id;
      const verdict = verdictText(episode.verdict);
      row.append(el("td", formatTime(episode.started_at_us)), el("td", episode.env_name), el("td", episode.task_id),
                 el("td", episode.kind), el("td", episode.model), el("td", episode.outcome, "outcome-" + episode.outcome),
                 el("td", verdict, verdict), el("td", episode.steps),
                 el("td", formatDuration(episode.started_at_us, episode.ended_at_us)), el("td", episode.id, "id"));
      row.addEventListener("click", () => { location.hash = "#/episode/" + encodeURIComponent(episode.id); });
      body.append(row);
    }
    const first = page.episodes.length ? state.offset + 1 : 0;
    document.getElementById("page").textContent = first + "-" + (state.offset + page.episodes.length);
    document.getElementById("previous").disabled = state.offset === 0;
    document.getElementById("next").disabled = !page.has_more;
    showError(null);
  } catch (error) { showError(error); }
}

function jsonBlock(value) {
  return el("pre", typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

// Long text folds: the first lines show, the rest opens on a click.
function foldedBlock(value, summaryText) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  if (text.length < 1500) return el("pre", text);
  const details = el("details");
  details.append(el("summary", summaryText + " (" + text.length + " characters)"), el("pre", text));
  return details;
}

// What the model's turn behind an assistant message cost, shown on hover (where recorded).
function turnSummary(turn) {
  const logprobs = (turn.logprobs || []).filter((v) => typeof v === "number");
  const mean = logprobs.length ? (logprobs.reduce((a, b) => a + b, 0) / logprobs.length).toFixed(3) : "not recorded";
  return "turn " + turn.turn + ": prompt " + turn.prompt_tokens + " tokens (" + turn.reused_tokens + " reused), generated " +
    (turn.output_tokens || []).length + " tokens, finish " + turn.finish_reason + ", mean logprob " + mean + ", " +
    (turn.duration_us / 1000).toFixed(0) + " ms" + (turn.parse_error ? "; parse error: " + turn.parse_error : "");
}

function renderContextEvents(events) {
  const list = document.getElementById("conversation");
  for (const event of events) {
    const item = el("li", null, "context-event");
    item.append(el("span", "context management", "role"),
                el("div", "turn " + event.turn + ", " + event.strategy + ": " + event.tokens_before + " -> " + event.tokens_after +
                          " tokens, " + event.messages_dropped + " messages dropped"));
    if (event.summary) item.append(foldedBlock(event.summary, "summary"));
    list.append(item);
  }
}

function renderMessages(messages, turns) {
  const byMessage = new Map((turns || []).map((turn) => [turn.message_index, turn]));
  const list = document.getElementById("conversation");
  list.replaceChildren();
  if (messages.length === 0) list.append(el("li", "no model messages: a client drove this session through its tools"));
  for (const message of messages) {
    const item = el("li");
    item.append(el("span", message.role, "role"));
    const turn = byMessage.get(message.index);
    if (turn) item.setAttribute("title", turnSummary(turn));
    if (message.reasoning_content) {
      const thinking = el("details");
      thinking.append(el("summary", "reasoning"), el("pre", message.reasoning_content));
      item.append(thinking);
    }
    if (message.content) item.append(foldedBlock(message.content, "content"));
    for (const call of message.tool_calls || []) {
      item.append(el("div", "call " + call.name), jsonBlock(call.arguments));
    }
    if (message.tool_outcome) item.append(el("div", "outcome: " + message.tool_outcome));
    list.append(item);
  }
}

function renderSteps(steps) {
  const list = document.getElementById("steps");
  list.replaceChildren();
  for (const step of steps) {
    const result = step.result || {};
    const ok = !result.outcome || result.outcome === "ok";
    const item = el("li", null, ok ? "tool-ok" : "tool-error");
    item.append(el("div", step.step + ". " + step.tool + " (" + (step.duration_us / 1000).toFixed(1) + " ms)"));
    item.append(jsonBlock(step.arguments), foldedBlock(result, "result"));
    list.append(item);
  }
}

// The episodes forked from this one, linked (the newest 100).
async function loadForks(id) {
  const box = document.getElementById("forks");
  box.replaceChildren();
  try {
    const forks = await api("episodes?" + new URLSearchParams({ parent: id, limit: 100 }).toString());
    if (!forks.episodes.length) return;
    box.append(el("span", "forks: "));
    for (const fork of forks.episodes) {
      const link = el("a", fork.id + " (" + (fork.outcome || "open") + ")");
      link.href = "#/episode/" + encodeURIComponent(fork.id);
      box.append(link, el("span", " "));
    }
  } catch (error) { showError(error); }
}

async function loadEpisode(id) {
  try {
    const episode = await api("episodes/" + encodeURIComponent(id));
    document.getElementById("episode-title").textContent = episode.env_name + " / " + (episode.task_id || "no task");
    document.getElementById("episode-task-link").href =
      "#/task/" + encodeURIComponent(episode.env_name) + "/" + encodeURIComponent(episode.task_id || "");
    const facts = document.getElementById("episode-facts");
    facts.replaceChildren();
    for (const key of ["id", "kind", "model", "backend", "outcome", "seed", "rollout_id", "client"]) {
      if (episode[key] === null || episode[key] === undefined || episode[key] === "") continue;
      facts.append(el("dt", key), el("dd", episode[key]));
    }
    facts.append(el("dt", "tool calls"), el("dd", (episode.steps || []).length));
    facts.append(el("dt", "started"), el("dd", formatTime(episode.started_at_us)));
    loadForks(episode.id);
    if (episode.parent_id) {
      const parent = el("a", "the episode it was forked from (step " + episode.fork_step + ")");
      parent.href = "#/episode/" + encodeURIComponent(episode.parent_id);
      const cell = el("dd");
      cell.append(parent);
      facts.append(el("dt", "parent"), cell);
    }
    const verdict = document.getElementById("verdict");
    verdict.replaceChildren();
    const passed = verdictText(episode.verdict);
    verdict.append(el("div", passed || "no verdict", passed), jsonBlock(episode.verdict || {}));
    if (episode.answer) verdict.append(el("div", "answer"), foldedBlock(episode.answer, "answer"));
    renderMessages(episode.messages || [], episode.model_turns);
    renderContextEvents(episode.context_events || []);
    renderSteps(episode.steps || []);
    showError(null);
  } catch (error) { showError(error); }
}

// The replay, step by step: what was recorded beside what the environment answers now.
function renderReplay(report) {
  const box = document.getElementById("replay-result");
  box.replaceChildren();
  const divergence = report.first_divergence === null ? "every step matches" : "first divergence at step " + report.first_divergence;
  const verdict = report.verdict || {};
  box.append(el("p", divergence + "; verdict " + (verdict.status || "?") + (report.version_drift ? " (the environment changed)" : ""),
                report.matches ? "passed" : "failed"));
  const table = el("table", null, "replay");
  const head = el("tr");
  for (const title of ["step", "tool", "status", "recorded", "replayed"]) head.append(el("th", title));
  table.append(head);
  for (const step of report.steps || []) {
    const row = el("tr", null, step.status === "match" ? "match" : "diverged");
    row.append(el("td", step.step), el("td", step.tool), el("td", step.status));
    const recorded = el("td"), replayed = el("td");
    recorded.append(foldedBlock(step.recorded, "recorded"));
    replayed.append(foldedBlock(step.replayed, "replayed"));
    row.append(recorded, replayed);
    table.append(row);
  }
  box.append(table);
}

async function runReplay(id) {
  const box = document.getElementById("replay-result");
  box.replaceChildren(el("p", "replaying..."));
  const drift = document.getElementById("replay-drift").checked ? "?allow_version_drift=1" : "";
  try {
    renderReplay(await api("episodes/" + encodeURIComponent(id) + "/replay" + drift, "POST"));
  } catch (error) {
    box.replaceChildren(el("p", "replay: " + (error.message || error), "failed"));
  }
}

// pass@k curves as an SVG line chart (our own: no library): x is k on a log2 scale, y 0..1;
// `series` is [{label, points: [[k, value]...]}].
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function passAtKChart(series) {
  const width = 640, height = 280, left = 48, right = 180, top = 16, bottom = 36;
  const chart = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, role: "img", class: "pass-at-k" });
  const maxK = Math.max(2, ...series.flatMap((s) => s.points.map((p) => p[0])));
  const x = (k) => left + (Math.log2(k) / Math.log2(maxK)) * (width - left - right);
  const y = (v) => top + (1 - v) * (height - top - bottom);
  chart.append(svg("line", { x1: left, y1: y(0), x2: width - right, y2: y(0), class: "axis" }));
  chart.append(svg("line", { x1: left, y1: y(0), x2: left, y2: y(1), class: "axis" }));
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    chart.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, v.toFixed(2)));
  }
  for (let k = 1; k <= maxK; k *= 2) {
    chart.append(svg("text", { x: x(k), y: height - bottom + 16, "text-anchor": "middle", class: "tick" }, k));
  }
  chart.append(svg("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle", class: "tick" }, "k"));
  const colours = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7ea4", "#57606a"];
  series.forEach((s, i) => {
    const colour = colours[i % colours.length];
    const points = s.points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
    chart.append(svg("polyline", { points, fill: "none", stroke: colour, "stroke-width": 2, class: "series" }));
    for (const p of s.points) chart.append(svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, fill: colour }));
    chart.append(svg("text", { x: width - right + 10, y: top + 14 + i * 16, fill: colour }, s.label));
  });
  return chart;
}

function tableOf(rows, titles) {
  const table = document.createDocumentFragment();
  const head = el("tr");
  for (const title of titles) head.append(el("th", title));
  table.append(head);
  for (const row of rows) {
    const line = el("tr");
    for (const cell of row) line.append(el("td", cell));
    table.append(line);
  }
  return table;
}

async function loadTask(env, task) {
  try {
    const stats = await api("task?" + new URLSearchParams({ env, task }).toString());
    document.getElementById("task-title").textContent = env + " / " + task;
    document.getElementById("task-episodes").href = listAddress({ env, task }, 50, 0);
    document.getElementById("task-summary").textContent = stats.episodes + " episodes" +
      (stats.truncated ? " (the newest 20,000)" : "") + "; " + stats.all.passed + " of " + stats.all.n + " scored episodes passed";
    const series = [{ label: "all (" + stats.all.n + ")", points: stats.all.pass_at_k }];
    for (const rollout of stats.rollouts.slice(0, 7)) {
      series.push({ label: rollout.rollout_id + " (" + rollout.model + ")", points: rollout.pass_at_k });
    }
    document.getElementById("task-chart").replaceChildren(stats.all.n ? passAtKChart(series) : el("p", "no scored episodes"));
    document.getElementById("task-outcomes").replaceChildren(tableOf(Object.entries(stats.outcomes), ["outcome", "episodes"]));
    document.getElementById("task-rollouts").replaceChildren(tableOf(
      stats.rollouts.map((r) => [r.rollout_id, r.model, r.n, r.passed, (r.pass_at_k[0] || [1, 0])[1].toFixed(3)]),
      ["rollout", "model", "scored", "passed", "pass@1"]));
    showError(null);
  } catch (error) { showError(error); }
}

function routeTask() {
  const match = location.hash.match(/^#\/task\/([^/]+)\/([^/]+)$/);
  document.getElementById("task-view").hidden = !match;
  if (!match) return false;
  document.getElementById("list-view").hidden = true;
  document.getElementById("episode-view").hidden = true;
  loadTask(decodeURIComponent(match[1]), decodeURIComponent(match[2]));
  return true;
}

// The list's filters and page live in the address ("#/?outcome=submitted&offset=50"), so a view
// can be linked to, and the back button goes back a page.
function listAddress(filters, limit, offset) {
  const query = new URLSearchParams(filters);
  if (limit !== 50) query.set("limit", limit);
  if (offset) query.set("offset", offset);
  const text = query.toString();
  return "#/" + (text ? "?" + text : "");
}

function routeList() {
  const question = location.hash.indexOf("?");
  const query = new URLSearchParams(question < 0 ? "" : location.hash.slice(question + 1));
  state.filters = {};
  const form = document.getElementById("filters");
  for (const name of ["env", "task", "outcome", "kind"]) {
    if (query.get(name)) state.filters[name] = query.get(name);
    form.elements[name].value = query.get(name) || "";
  }
  for (const name of ["sort", "order"]) if (query.get(name)) state.filters[name] = query.get(name);
  state.limit = Number(query.get("limit")) || 50;
  state.offset = Math.max(0, Number(query.get("offset")) || 0);
  form.elements.limit.value = String(state.limit);
  loadList();
}

function route() {
  if (routeTask()) return;  // #/task/ENV/TASK
  if (routeRuns()) return;  // #/runs and #/runs/NAME: runs.js
  const match = location.hash.match(/^#\/episode\/([^/]+)(\/replay(-drift)?)?$/);
  document.getElementById("list-view").hidden = !!match;
  document.getElementById("episode-view").hidden = !match;
  if (!match) return routeList();
  const id = decodeURIComponent(match[1]);
  document.getElementById("replay-result").replaceChildren();
  document.getElementById("replay").onclick = () => runReplay(id);
  // "#/episode/ID/replay" (or ".../replay-drift") replays on opening: a link to a replay, and
  // the browser tests.
  document.getElementById("replay-drift").checked = !!match[3];
  loadEpisode(id).then(() => { if (match[2]) runReplay(id); });
}

function start() {
  // "#token=T" or "#/episode/ID&token=T": the token is kept, and taken out of the address.
  const fragment = location.hash.match(/[#&]token=([^&]*)/);
  if (fragment) {
    sessionStorage.setItem("envforge-token", decodeURIComponent(fragment[1]));
    const rest = location.hash.replace(/[#&]token=[^&]*/, "").replace(/^#/, "");
    history.replaceState(null, "", "#" + (rest.startsWith("/") ? rest : "/"));
  }
  document.getElementById("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const filters = {};
    for (const name of ["env", "task", "outcome", "kind"]) if (form.get(name)) filters[name] = form.get(name);
    for (const name of ["sort", "order"]) if (state.filters[name]) filters[name] = state.filters[name];
    location.hash = listAddress(filters, Number(form.get("limit")) || 50, 0);
  });
  document.getElementById("previous").addEventListener("click", () => {
    location.hash = listAddress(state.filters, state.limit, Math.max(0, state.offset - state.limit));
  });
  document.getElementById("next").addEventListener("click", () => {
    location.hash = listAddress(state.filters, state.limit, state.offset + state.limit);
  });
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("envforge-token", document.getElementById("token").value);
    document.getElementById("token-form").hidden = true;
    loadCounts();
    route();
  });
  // Sortable columns: a click sorts by it, a second click turns the order around.
  for (const header of document.querySelectorAll("#episodes th[data-sort]")) {
    header.addEventListener("click", () => {
      const filters = Object.assign({}, state.filters);
      const same = filters.sort === header.dataset.sort;
      filters.sort = header.dataset.sort;
      filters.order = same && filters.order !== "asc" ? "asc" : "desc";
      location.hash = listAddress(filters, state.limit, 0);
    });
  }
  window.addEventListener("hashchange", route);
  loadCounts();
  route();
  // Live: while the first page of the list shows, new episodes appear without a reload.
  setInterval(() => {
    if (document.hidden || document.getElementById("list-view").hidden || state.offset !== 0) return;
    loadCounts();
    loadList();
  }, 3000);
}

document.addEventListener("DOMContentLoaded", start);
