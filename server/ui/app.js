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

async function api(path) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const response = await fetch("/ui/api/" + path, { headers });
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

function renderMessages(messages) {
  const list = document.getElementById("conversation");
  list.replaceChildren();
  if (messages.length === 0) list.append(el("li", "no model messages: a client drove this session through its tools"));
  for (const message of messages) {
    const item = el("li");
    item.append(el("span", message.role, "role"));
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

async function loadEpisode(id) {
  try {
    const episode = await api("episodes/" + encodeURIComponent(id));
    document.getElementById("episode-title").textContent = episode.env_name + " / " + (episode.task_id || "no task");
    const facts = document.getElementById("episode-facts");
    facts.replaceChildren();
    for (const key of ["id", "kind", "model", "backend", "outcome", "seed", "parent_id", "rollout_id", "client"]) {
      if (episode[key] === null || episode[key] === undefined || episode[key] === "") continue;
      facts.append(el("dt", key), el("dd", episode[key]));
    }
    facts.append(el("dt", "tool calls"), el("dd", (episode.steps || []).length));
    facts.append(el("dt", "started"), el("dd", formatTime(episode.started_at_us)));
    const verdict = document.getElementById("verdict");
    verdict.replaceChildren();
    const passed = verdictText(episode.verdict);
    verdict.append(el("div", passed || "no verdict", passed), jsonBlock(episode.verdict || {}));
    if (episode.answer) verdict.append(el("div", "answer"), foldedBlock(episode.answer, "answer"));
    renderMessages(episode.messages || []);
    renderSteps(episode.steps || []);
    showError(null);
  } catch (error) { showError(error); }
}

function route() {
  const match = location.hash.match(/^#\/episode\/(.+)$/);
  document.getElementById("list-view").hidden = !!match;
  document.getElementById("episode-view").hidden = !match;
  if (match) loadEpisode(decodeURIComponent(match[1]));
  else loadList();
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
    state.filters = {};
    for (const name of ["env", "task", "outcome", "kind"]) if (form.get(name)) state.filters[name] = form.get(name);
    state.limit = Number(form.get("limit")) || 50;
    state.offset = 0;
    loadList();
  });
  document.getElementById("previous").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadList(); });
  document.getElementById("next").addEventListener("click", () => { state.offset += state.limit; loadList(); });
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("envforge-token", document.getElementById("token").value);
    document.getElementById("token-form").hidden = true;
    loadCounts();
    route();
  });
  window.addEventListener("hashchange", route);
  loadCounts();
  route();
}

document.addEventListener("DOMContentLoaded", start);
