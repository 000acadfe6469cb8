/* ragline console: vanilla JS, no build step, no external assets.
 *
 * Every request goes through api(), which sends the key the user signed in with
 * (Authorization: Bearer) so the console works with authentication on or off.
 * Features are shown by what the server says it has: the OpenAPI document
 * (chat, key endpoints), /health (cross-encoder) and /api/providers (store
 * capabilities such as hybrid search). Server data is only ever inserted as
 * text (textContent), never as HTML.
 */
"use strict";

const KEY_STORE = "ragline.apiKey";
const BASE = location.pathname.replace(/\/ui(\/.*)?$/, "");
const POLL_MS = 500;

const state = {
  paths: new Set(),   // OpenAPI paths the server has
  openapi: null,
  health: null,
  providers: null,
  storeCaps: new Set(),
  collections: [],
  me: null,           // {tenant, role} when the server says who the key is
  lastSearch: null,   // {collection, results} to come back to from the context page
  pollTimer: null,
};

// ---------------------------------------------------------------- helpers
function $(sel) { return document.querySelector(sel); }

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0; let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
}

function fmtNum(n) { return (n ?? 0).toLocaleString("en"); }

function fmtTime(iso) {
  if (!iso) return "";
  const d = new Date(typeof iso === "number" ? iso * 1000 : iso);
  return isNaN(d) ? String(iso) : d.toLocaleString();
}

function fmtSecs(s) {
  if (s === null || s === undefined) return "";
  if (s < 60) return s.toFixed(1) + " s";
  return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
}

let toastTimer = null;
function toast(msg, bad) {
  const t = $("#toast");
  t.textContent = msg;
  t.className = "toast" + (bad ? " bad" : "");
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, bad ? 8000 : 4000);
}

function showError(el, msg) {
  el.textContent = msg || "";
  el.hidden = !msg;
}

function parseJsonField(text, what) {
  const t = text.trim();
  if (!t) return null;
  try { return JSON.parse(t); } catch (e) {
    throw new ApiError(0, `${what} is not valid JSON: ${e.message}`);
  }
}

// ---------------------------------------------------------------- API
class ApiError extends Error {
  constructor(status, message, body) { super(message); this.status = status; this.body = body; }
}

function authHeaders() {
  const key = sessionStorage.getItem(KEY_STORE);
  return key ? { "Authorization": "Bearer " + key } : {};
}

async function errorFrom(resp) {
  let body = null; let msg = resp.statusText || ("HTTP " + resp.status);
  try {
    body = await resp.json();
    msg = body.message || (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body));
  } catch (e) { /* not JSON */ }
  return new ApiError(resp.status, msg, body);
}

async function api(path, opts = {}) {
  const headers = { ...authHeaders(), ...(opts.headers || {}) };
  let body = opts.body;
  if (body !== undefined && !(body instanceof FormData) && typeof body !== "string") {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(BASE + path, { method: opts.method || "GET", headers, body });
  } catch (e) {
    throw new ApiError(0, "The server cannot be reached: " + e.message);
  }
  if (!resp.ok) {
    const err = await errorFrom(resp);
    if (resp.status === 401 && !opts.noSignout) signOut("Your key was refused: " + err.message);
    throw err;
  }
  if (opts.raw) return resp;
  const type = resp.headers.get("content-type") || "";
  return type.includes("json") ? resp.json() : resp.text();
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------- capabilities
async function loadEnvironment() {
  const [openapi, health, providers] = await Promise.all([
    api("/openapi.json").catch(() => null),
    api("/health").catch(() => null),
    api("/api/providers").catch(() => null),
  ]);
  state.openapi = openapi;
  state.paths = new Set(Object.keys((openapi && openapi.paths) || {}));
  state.health = health;
  state.providers = providers;
  state.storeCaps = new Set();
  const engine = health && health.store && health.store.details && health.store.details.engine;
  const stores = (providers && providers.stores) || [];
  const store = stores.find(s => s.name === engine) || (stores.length === 1 ? stores[0] : null);
  for (const c of (store ? store.capabilities : [])) state.storeCaps.add(c);
  // Only admins may list keys, so the answer to GET /api/keys tells the role.
  state.me = null;
  if (state.paths.has("/api/keys")) {
    try {
      await api("/api/keys");
      state.me = { role: "admin" };
    } catch (e) {
      if (e.status === 403) state.me = { role: "user" };
    }
  }
  applyCapabilities();
}

function hasChat() { return state.paths.has("/api/chat"); }
// /health says whether a chat model is configured; an older server does not say: assume so
function chatConfigured() {
  const chat = state.health && state.health.chat;
  return !chat || chat.configured !== false;
}
// Server-side embedding ("embed") is what lets a text query run dense and hybrid search;
// embedding_provider/embedding_model alone are spec 000 metadata (pre-computed vectors).
function embedderOf(c) {
  if (c.embed) return `${c.embed.provider}${c.embed.model ? " · " + c.embed.model : ""}`;
  return "pre-computed vectors" + (c.embedding_provider ? ` (${c.embedding_provider})` : "");
}
function isAdmin() { return !state.me || !state.me.role || state.me.role === "admin"; }
function hasRerank() {
  return Boolean(state.health && state.health.cross_encoder &&
                 state.health.cross_encoder.status !== "not loaded");
}

function applyCapabilities() {
  $("#nav-chat").hidden = !hasChat();
  const who = state.me ? [state.me.tenant && "tenant " + state.me.tenant, state.me.role]
    .filter(Boolean).join(" · ") : "";
  $("#who").textContent = who;
  for (const el of document.querySelectorAll(".admin-only")) el.hidden = !isAdmin();
  // search modes the store cannot run are hidden (spec 000: the UI follows capabilities)
  for (const opt of document.querySelectorAll("#search-mode option[data-cap]")) {
    const ok = state.storeCaps.size === 0 || state.storeCaps.has(opt.dataset.cap);
    opt.hidden = !ok; opt.disabled = !ok;
  }
  const rr = $("#search-rerank");
  rr.disabled = !hasRerank();
  $("#rerank-wrap").title = hasRerank() ? "" : "No cross-encoder is loaded on the server";
  $("#rerank-wrap").hidden = !hasRerank();
  const embedders = ((state.providers && state.providers.embedders) || []).map(e => e.name);
  const sel = $("#create-embedder");
  sel.replaceChildren(h("option", { value: "" , text: "none (documents carry embeddings)" }),
    ...embedders.map(n => h("option", { value: n, text: n })));
  if (embedders.includes("local")) sel.value = "local";
}

// ---------------------------------------------------------------- routing
const PAGES = ["signin", "collections", "search", "context", "ingest", "chat", "providers"];

function signedIn() { return sessionStorage.getItem(KEY_STORE) !== null; }

function signOut(reason) {
  sessionStorage.removeItem(KEY_STORE);
  stopPolling();
  location.hash = "#/signin";
  if (reason) showError($("#signin-error"), reason);
}

async function route() {
  let [page, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  if (!signedIn()) page = "signin";
  else if (!PAGES.includes(page) || page === "signin") page = "collections";
  if (page === "chat" && !hasChat()) page = "collections";
  for (const p of PAGES) $("#page-" + p).hidden = p !== page;
  $("#nav").hidden = !signedIn();
  $("#signout").hidden = !signedIn();
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = "ragline · " + page;
  if (page !== "ingest") stopPolling();
  try {
    await RENDER[page](rest.map(decodeURIComponent));
  } catch (e) {
    toast(e.message, true);
  }
}

const RENDER = {
  signin: async () => { $("#signin-key").focus(); },
  collections: renderCollections,
  search: renderSearch,
  context: renderContext,
  ingest: renderIngest,
  chat: renderChat,
  providers: renderProviders,
};

// ---------------------------------------------------------------- sign in
async function onSignIn(ev) {
  ev.preventDefault();
  const key = $("#signin-key").value.trim();
  showError($("#signin-error"), "");
  sessionStorage.setItem(KEY_STORE, key);
  try {
    await api("/collections", { noSignout: true });
  } catch (e) {
    sessionStorage.removeItem(KEY_STORE);
    showError($("#signin-error"), e.status === 401 || e.status === 403
      ? "This key was not accepted: " + e.message : e.message);
    return;
  }
  $("#signin-key").value = "";
  await loadEnvironment();
  location.hash = "#/collections";
  await route();
}

// ---------------------------------------------------------------- dialog
function dialog({ title, body, ok = "OK", danger = false, onOk }) {
  const dlg = $("#dialog");
  $("#dialog-title").textContent = title;
  $("#dialog-body").replaceChildren(...[].concat(body));
  const okBtn = $("#dialog-ok");
  okBtn.textContent = ok;
  okBtn.className = danger ? "danger solid" : "";
  showError($("#dialog-error"), "");
  const done = () => dlg.close();
  $("#dialog-cancel").onclick = done;
  $("#dialog-form").onsubmit = async (ev) => {
    ev.preventDefault();
    okBtn.disabled = true;
    try {
      await onOk();
      done();
    } catch (e) {
      showError($("#dialog-error"), e.message);
    } finally {
      okBtn.disabled = false;
    }
  };
  dlg.showModal();
  const first = dlg.querySelector("#dialog-body input, #dialog-body textarea");
  (first || okBtn).focus();
}

// ---------------------------------------------------------------- collections
async function loadCollections() {
  const [list, info] = await Promise.all([api("/collections"), api("/info").catch(() => null)]);
  const sizes = {};
  for (const c of (info && info.collections) || []) sizes[c.name] = c.size_bytes;
  state.collections = list.collections.map(c => ({ ...c, size_bytes: sizes[c.name] }));
  return state.collections;
}

async function renderCollections() {
  const cols = await loadCollections();
  const body = $("#collections-table tbody");
  body.replaceChildren(...cols.map(c => h("tr", { "data-name": c.name },
    h("th", { scope: "row" }, h("a", { href: "#/search/" + enc(c.name), text: c.name })),
    h("td", { class: "num", text: fmtNum(c.count) }),
    h("td", { class: "num", text: fmtBytes(c.size_bytes) }),
    h("td", { class: "num", text: c.dimension ?? "" }),
    h("td", { text: embedderOf(c) }),
    h("td", { text: fmtTime(c.updated_at) }),
    h("td", { class: "actions" },
      isAdmin() ? h("button", { type: "button", class: "secondary small",
        onclick: () => editMetadata(c), "aria-label": `Edit metadata of ${c.name}` },
      "Metadata") : null,
      h("button", { type: "button", class: "danger small", onclick: () => emptyCollection(c),
        "aria-label": `Empty ${c.name}` }, "Empty"),
      isAdmin() ? h("button", { type: "button", class: "danger small",
        onclick: () => deleteCollection(c), "aria-label": `Delete ${c.name}` }, "Delete") : null),
  )));
  $("#collections-empty").hidden = cols.length > 0;
  $("#collections-table").hidden = cols.length === 0;
}

function editMetadata(c) {
  const ta = h("textarea", { id: "meta-json", rows: 10, spellcheck: "false" });
  ta.value = JSON.stringify(c.metadata || {}, null, 2);
  const mode = h("fieldset", {},
    h("legend", {}, "How to apply"),
    h("label", {}, h("input", { type: "radio", name: "meta-mode", value: "merge", checked: true }),
      " Merge into the existing metadata"),
    h("label", {}, h("input", { type: "radio", name: "meta-mode", value: "replace" }),
      " Replace all metadata"));
  dialog({
    title: `Metadata of ${c.name}`,
    body: [h("label", { for: "meta-json" }, "Metadata (JSON object)"), ta, mode],
    ok: "Save",
    onOk: async () => {
      const md = parseJsonField(ta.value, "Metadata") || {};
      const merge = document.querySelector("input[name=meta-mode]:checked").value === "merge";
      await api(`/collections/${enc(c.name)}/metadata?merge=${merge}`,
        { method: "PUT", body: { metadata: md } });
      toast(`Metadata of ${c.name} ${merge ? "merged" : "replaced"}.`);
      await renderCollections();
    },
  });
}

function emptyCollection(c) {
  dialog({
    title: `Empty ${c.name}?`,
    body: h("p", {}, `This deletes all ${fmtNum(c.count)} documents you can see in `,
      h("strong", {}, c.name), ". The collection and its settings stay. This cannot be undone."),
    ok: "Empty collection", danger: true,
    onOk: async () => {
      const r = await api(`/collections/${enc(c.name)}/documents/all`, { method: "DELETE" });
      toast(`${c.name}: ${fmtNum(r.count_deleted)} documents deleted.`);
      await renderCollections();
    },
  });
}

function deleteCollection(c) {
  const input = h("input", { id: "confirm-name", autocomplete: "off", spellcheck: "false" });
  dialog({
    title: `Delete ${c.name}?`,
    body: [h("p", {}, "This deletes the collection, its documents and its settings. " +
      "This cannot be undone."),
    h("label", { for: "confirm-name" }, `Type ${c.name} to confirm`), input],
    ok: "Delete collection", danger: true,
    onOk: async () => {
      if (input.value !== c.name) throw new ApiError(0, "The name does not match.");
      await api(`/collections/${enc(c.name)}`, { method: "DELETE" });
      toast(`Collection ${c.name} deleted.`);
      await renderCollections();
    },
  });
}

async function onCreateCollection(ev) {
  ev.preventDefault();
  try {
    const body = { name: $("#create-name").value.trim(),
      metadata: parseJsonField($("#create-meta").value, "Metadata") || {} };
    const emb = $("#create-embedder").value;
    if (emb) body.embed = { provider: emb };  // server-side embedding (opt-in)
    await api("/collections", { method: "POST", body });
    toast(`Collection ${body.name} created.`);
    $("#create-name").value = "";
    await renderCollections();
  } catch (e) { toast(e.message, true); }
}

// ---------------------------------------------------------------- search
async function renderSearch(args) {
  const cols = await loadCollections();
  const sel = $("#search-collection");
  const current = args[0] || sel.value || (state.lastSearch && state.lastSearch.collection);
  sel.replaceChildren(...cols.map(c => h("option", { value: c.name },
    `${c.name} (${fmtNum(c.count)})`)));
  if (current && cols.some(c => c.name === current)) sel.value = current;
  updateModes();
  if (state.lastSearch && state.lastSearch.collection === sel.value && !$("#search-results").children.length) {
    showResults(state.lastSearch);
  }
  $("#search-query").focus();
}

function updateModes() {
  const c = state.collections.find(x => x.name === $("#search-collection").value);
  const canEmbed = Boolean(c && c.embed);
  for (const opt of document.querySelectorAll("#search-mode option")) {
    const capOk = !opt.dataset.cap || state.storeCaps.size === 0 || state.storeCaps.has(opt.dataset.cap);
    const needsEmbed = opt.value === "dense" || opt.value === "hybrid";
    const ok = capOk && (!needsEmbed || canEmbed);
    opt.hidden = !ok; opt.disabled = !ok;
  }
  if ($("#search-mode").selectedOptions[0]?.disabled) $("#search-mode").value = "";
  const empty = $("#search-empty");
  empty.textContent = !c ? "No collections yet: create one on the Collections page." :
    c.count === 0 ? `Collection ${c.name} has no documents you can see yet: add some on the ` +
      "Ingestion page (or POST /collections/" + c.name + "/documents)." : "";
  empty.hidden = !empty.textContent;
}

async function onSearch(ev) {
  ev.preventDefault();
  const whereEl = $("#where-error");
  showError(whereEl, "");
  const collection = $("#search-collection").value;
  let body;
  try {
    body = { query: $("#search-query").value, limit: Number($("#search-limit").value) || 10,
      expand: $("#search-expand").value };
    const mode = $("#search-mode").value;
    if (mode) body.mode = mode;
    const where = parseJsonField($("#search-where").value, "The filter");
    if (where !== null) body.where = where;
    if ($("#search-rerank").checked && !$("#search-rerank").disabled) body.rerank = true;
    if ($("#search-boost-on").checked) body.boost = parseJsonField($("#search-boost").value, "The boost") || {};
  } catch (e) {
    showError(whereEl, e.message);
    return;
  }
  $("#search-summary").textContent = "Searching…";
  try {
    const r = await api(`/collections/${enc(collection)}/search`, { method: "POST", body });
    state.lastSearch = { collection, ...r };
    showResults(state.lastSearch);
  } catch (e) {
    $("#search-summary").textContent = "";
    $("#search-results").replaceChildren();
    if (e.status === 400) showError(whereEl, "The server refused the search: " + e.message);
    else toast(e.message, true);
  }
}

function showResults(r) {
  const max = Math.max(...r.results.map(x => Math.abs(x.score)), 1e-9);
  const warn = (r.warnings || []).join("; ");
  $("#search-summary").textContent = `${r.results.length} result(s) in ${r.took_ms} ms · mode ${r.mode}` +
    (r.stages && r.stages.length ? ` · stages: ${r.stages.join(" → ")}` : "") + (warn ? ` · ${warn}` : "");
  $("#search-results").replaceChildren(...r.results.map((hit, i) => {
    const m = hit.metadata || {};
    const title = m.title || m.source_path || m.parent_doc_id || hit.id;
    return h("li", { class: "hit" },
      h("div", { class: "hit-head" },
        h("span", { class: "muted" }, `#${i + 1}`),
        h("span", { class: "score", title: scoreExplanation(r, hit) }, hit.score.toFixed(4)),
        h("span", { class: "scorebar", style: `width:${Math.round(80 * Math.abs(hit.score) / max)}px`,
          "aria-hidden": "true" }),
        h("span", { class: "hit-title" }, title),
        m.section_title && m.section_title !== title ? h("span", { class: "muted" }, "§ " + m.section_title) : null,
        hit.boost !== undefined ? h("span", { class: "badge" }, `boost ${hit.boost}`) : null),
      h("p", { class: "hit-text" }, hit.context || hit.text),
      h("p", { class: "help" }, scoreExplanation(r, hit)),
      h("details", {}, h("summary", {}, "Metadata"), h("pre", {}, JSON.stringify(m, null, 2))),
      h("button", { type: "button", class: "secondary small open-context",
        "aria-label": `Open result ${i + 1} in context`,
        onclick: () => { location.hash = `#/context/${enc(r.collection)}/${enc(hit.id)}`; } },
      "Open in context"));
  }));
}

const SCALES = {
  dense: "cosine similarity of the query and chunk embeddings",
  sparse: "BM25 keyword score",
  "hybrid:rrf": "reciprocal-rank fusion of the dense and BM25 rankings (sum of 1/(k + rank))",
  "hybrid:dbsf": "distribution-based fusion (dense and BM25 scores normalised, then added)",
  hybrid: "fusion of the dense and BM25 candidates",
};

function scoreExplanation(r, hit) {
  const stages = r.stages || [];
  const first = stages.find(s => s.startsWith(r.mode)) || r.mode;
  let text = SCALES[first] || SCALES[r.mode] || r.mode;
  if (stages.includes("rerank")) text = "cross-encoder relevance (reranked " + first + " candidates)";
  if (stages.includes("boost")) text += ", plus metadata boosts";
  return `Score ${hit.score.toFixed(4)}: ${text}. Stages: ${stages.join(" → ") || r.mode}.`;
}

// ---------------------------------------------------------------- context
async function renderContext([collection, id]) {
  const box = $("#context-body");
  box.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  $("#context-back").href = "#/search/" + enc(collection || "");
  let ctx;
  try {
    ctx = await api(`/context/${enc(id)}?collection=${enc(collection)}`);
  } catch (e) {
    box.replaceChildren(h("p", { class: "error", role: "alert" }, e.message));
    throw e;
  }
  const chunkEl = (c, cls, label) => c ? h("div", { class: "chunk " + cls },
    h("span", { class: "meta" }, `${label} · chunk ${c.chunk_index ?? "?"}${c.section_title ? " · " + c.section_title : ""}`),
    c.text) : null;
  const go = (cid) => { location.hash = `#/context/${enc(collection)}/${enc(cid)}`; };
  const parent = ctx.parent_doc_id || (ctx.chunk && ctx.chunk.parent_doc_id);
  const lessonBox = h("div", { id: "lesson" });
  box.replaceChildren(
    h("p", { class: "muted" }, `Collection ${collection} · source ${parent || "(none)"}`),
    h("div", { class: "nav-row" },
      h("button", { type: "button", class: "secondary", disabled: !ctx.prev_chunk_id,
        onclick: () => go(ctx.prev_chunk_id) }, "◀ Previous chunk"),
      h("button", { type: "button", class: "secondary", disabled: !ctx.next_chunk_id,
        onclick: () => go(ctx.next_chunk_id) }, "Next chunk ▶"),
      parent ? h("button", { type: "button", id: "show-lesson",
        onclick: () => showLesson(collection, parent, lessonBox) }, "Whole source") : null),
    ...[chunkEl(ctx.prev, "prev", "previous"), chunkEl(ctx.chunk, "current", "this hit"),
      chunkEl(ctx.next, "next", "next")].filter(Boolean),
    lessonBox);
  $("#h-context").focus?.();
}

async function showLesson(collection, parent, box) {
  const l = await api(`/lesson/${parent.split("/").map(enc).join("/")}?collection=${enc(collection)}`);
  box.replaceChildren(h("h2", {}, `${l.title || parent} (${l.total_chunks} chunks)`),
    h("p", { class: "muted" }, l.source_path || ""),
    h("div", { class: "lesson-text" }, l.text));
  box.scrollIntoView({ block: "start" });
}

// ---------------------------------------------------------------- ingestion
async function renderIngest() {
  await refreshJobs();
}

async function refreshJobs() {
  const r = await api("/ingestion/status?limit=20");
  $("#jobs-table tbody").replaceChildren(...r.jobs.map(j => h("tr", {},
    h("td", {}, h("code", {}, j.job_id.slice(0, 8))),
    h("td", { text: `${j.kind} (${j.trigger})` }),
    h("td", { text: j.collection }),
    h("td", {}, h("span", { class: "badge " + statusClass(j.status) }, j.status)),
    h("td", { class: "num", text: `${fmtNum(j.files_changed)} / ${fmtNum(j.files_seen)}` }),
    h("td", { class: "num", text: fmtNum(j.chunks_created + j.chunks_updated) }),
    h("td", { class: "num", text: fmtSecs(j.duration_s) }),
    h("td", {}, jobErrors(j)))));
}

function statusClass(s) { return { succeeded: "ok", failed: "bad", running: "warn" }[s] || ""; }

function jobErrors(j) {
  const warnings = j.warnings || [];
  if (!j.error && !warnings.length) return "";
  return h("details", {}, h("summary", {}, j.error ? "error" : `${warnings.length} warning(s)`),
    j.error ? h("p", { class: "error" }, j.error) : null,
    warnings.length ? h("ul", {}, warnings.slice(0, 50).map(w => h("li", {}, String(w)))) : null);
}

function stopPolling() { clearTimeout(state.pollTimer); state.pollTimer = null; }

function progressShow(label, pct) {
  $("#progress").hidden = false;
  $("#progress-label").textContent = label;
  const bar = $("#progress-bar");
  if (pct === null || pct === undefined) bar.removeAttribute("value");
  else bar.value = pct;
}

function progressStats(pairs) {
  $("#progress-stats").replaceChildren(...pairs.filter(p => p[1] !== undefined && p[1] !== "")
    .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, String(v)))));
}

function showResult(r) {
  progressShow(r.unchanged ? "Done: unchanged, already ingested." : "Done.", 100);
  $("#progress").dataset.state = "done";
  progressStats([["Source", r.sourceId], ["Title", r.title], ["Chunks", fmtNum(r.chunksCreated)]]);
  refreshJobs().catch(() => {});
}

async function pollJob(jobId) {
  stopPolling();
  $("#progress").dataset.state = "running";
  showError($("#progress-error"), "");
  const tick = async () => {
    let j;
    try { j = await api(`/ingestion/status/${enc(jobId)}`); } catch (e) {
      showError($("#progress-error"), e.message); return;
    }
    const total = j.files_total ?? j.total_files ?? null;
    const done = (j.files_done ?? j.files_seen) || 0;
    const pct = j.status === "succeeded" ? 100 : total ? Math.min(100, 100 * done / total) : null;
    const elapsed = j.duration_s ?? (j.started_at ? (Date.now() / 1000 - Date.parse(j.started_at) / 1000) : null);
    const rate = j.rate ?? j.files_per_s ?? (elapsed && done ? done / elapsed : null);
    const eta = j.eta_s ?? (rate && total ? (total - done) / rate : null);
    progressShow(`Job ${jobId.slice(0, 8)}: ${j.status}`, pct);
    progressStats([
      ["Status", j.status], ["Files", total ? `${fmtNum(done)} / ${fmtNum(total)}` : fmtNum(done)],
      ["Changed", fmtNum(j.files_changed)], ["Failed", fmtNum(j.files_failed)],
      ["Chunks written", fmtNum(j.chunks_created + j.chunks_updated)],
      ["Texts embedded", fmtNum(j.texts_embedded)],
      ["Rate", rate ? rate.toFixed(2) + " files/s" : ""],
      ["Elapsed", elapsed !== null ? fmtSecs(elapsed) : ""],
      ["ETA", eta !== null && j.status === "running" ? fmtSecs(eta) : ""],
    ]);
    if (j.status === "succeeded" || j.status === "failed") {
      $("#progress").dataset.state = j.status === "succeeded" ? "done" : "failed";
      if (j.error) showError($("#progress-error"), j.error);
      refreshJobs().catch(() => {});
      return;
    }
    state.pollTimer = setTimeout(tick, POLL_MS);
  };
  await tick();
}

function afterIngest(status, r) {
  if (status === 202 || r.jobId || r.job_id) return pollJob(r.jobId || r.job_id);
  showResult(r);
  return null;
}

function onUpload(ev) {
  ev.preventDefault();
  const file = $("#upload-file").files[0];
  if (!file) return;
  const fd = new FormData();
  fd.append("documentFile", file, file.name);
  const xhr = new XMLHttpRequest();  // fetch() cannot report upload progress
  xhr.open("POST", BASE + "/api/rag/ingest/upload");
  for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
  $("#progress").dataset.state = "uploading";
  showError($("#progress-error"), "");
  progressStats([["File", file.name], ["Size", fmtBytes(file.size)]]);
  progressShow(`Uploading ${file.name}…`, 0);
  xhr.upload.onprogress = (e) => {
    if (e.lengthComputable) progressShow(`Uploading ${file.name}: ${Math.round(100 * e.loaded / e.total)}%`, 100 * e.loaded / e.total);
  };
  xhr.upload.onload = () => progressShow(`Processing ${file.name}…`, null);
  xhr.onerror = () => showError($("#progress-error"), "The upload failed: the server cannot be reached.");
  xhr.onload = () => {
    let r = {};
    try { r = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
    if (xhr.status >= 400) {
      $("#progress").dataset.state = "failed";
      progressShow(`Upload of ${file.name} failed`, 0);
      showError($("#progress-error"), r.message || r.detail || `HTTP ${xhr.status}`);
      if (xhr.status === 401) signOut("Your key was refused.");
      return;
    }
    afterIngest(xhr.status, r);
  };
  xhr.send(fd);
}

async function submitIngest(path, body, label) {
  $("#progress").dataset.state = "running";
  showError($("#progress-error"), "");
  progressStats([]);
  progressShow(label, null);
  try {
    const resp = await api(path, { method: "POST", body, raw: true });
    await afterIngest(resp.status, await resp.json());
  } catch (e) {
    $("#progress").dataset.state = "failed";
    progressShow(label + " failed", 0);
    showError($("#progress-error"), e.message);
  }
}

function onUrl(ev) {
  ev.preventDefault();
  const url = $("#url-input").value.trim();
  submitIngest("/api/rag/ingest/url", { url }, `Fetching ${url}…`);
}

function onText(ev) {
  ev.preventDefault();
  const title = $("#text-title").value.trim();
  submitIngest("/api/rag/ingest/text", { text: $("#text-body").value, title: title || null },
    `Ingesting ${title || "text"}…`);
}

function onDir(ev) {
  ev.preventDefault();
  const body = { path: $("#dir-path").value.trim(), mode: $("#dir-mode").value };
  const col = $("#dir-collection").value.trim();
  if (col) body.collection = col;
  submitIngest("/ingestion/trigger", body, `Starting a job on ${body.path}…`);
}

// ---------------------------------------------------------------- chat
function chatField() {
  // the request body's text field, read from the OpenAPI schema (robust to its naming)
  try {
    const op = state.openapi.paths["/api/chat"].post;
    let schema = op.requestBody.content["application/json"].schema;
    if (schema.$ref) schema = state.openapi.components.schemas[schema.$ref.split("/").pop()];
    const props = Object.keys(schema.properties || {});
    return ["message", "query", "question", "prompt"].find(p => props.includes(p)) || props[0] || "message";
  } catch (e) { return "message"; }
}

async function renderChat() {
  const cols = await loadCollections();
  const sel = $("#chat-collection");
  const current = sel.value || (state.lastSearch && state.lastSearch.collection);
  sel.replaceChildren(...cols.map(c => h("option", { value: c.name },
    `${c.name} (${fmtNum(c.count)})`)));
  if (current && cols.some(c => c.name === current)) sel.value = current;
  else if (cols.some(c => c.count > 0)) sel.value = cols.find(c => c.count > 0).name;
  updateChatState();
  $("#chat-input").focus();
}

function updateChatState() {
  const c = state.collections.find(x => x.name === $("#chat-collection").value);
  const notice = $("#chat-notice");
  let msg = "";
  if (!chatConfigured()) {
    msg = "No chat model is configured on this server: set RAGLINE_LLM_BASE_URL and " +
      "RAGLINE_LLM_MODEL (any OpenAI-compatible server: Ollama, llama.cpp, vLLM) and restart " +
      "it; see docs/answers.md. Search works without one.";
  } else if (!c) {
    msg = "No collections yet: create one and add documents, then ask about them here.";
  } else if (c.count === 0) {
    msg = `Collection ${c.name} has no documents you can see yet: answers will come from ` +
      "the model's general knowledge, without sources.";
  }
  notice.textContent = msg;
  notice.hidden = !msg;
  $("#chat-form button[type=submit]").disabled = !chatConfigured();
  $("#chat-input").disabled = !chatConfigured();
}

async function onChat(ev) {
  ev.preventDefault();
  const text = $("#chat-input").value.trim();
  if (!text) return;
  const log = $("#chat-log");
  log.append(h("div", { class: "msg user" }, text));
  const answer = h("div", { class: "msg assistant" }, h("span", { class: "answer" }));
  const out = answer.querySelector(".answer");
  const extra = h("div", { class: "sources" });
  answer.append(extra);
  log.append(answer);
  $("#chat-input").value = "";
  const body = { [chatField()]: text };
  const collection = $("#chat-collection").value;
  if (collection) body.collection = collection;
  if (state.conversationId) body.conversation_id = state.conversationId;
  try {
    const resp = await api("/api/chat", { method: "POST", body, raw: true,
      headers: { "Accept": "text/event-stream, application/json" } });
    const type = resp.headers.get("content-type") || "";
    if (type.includes("event-stream")) await readStream(resp, out, extra);
    else showChatPart(await resp.json(), out, extra);
  } catch (e) {
    out.textContent = e.status === 503 ? "Chat is not available: " + e.message : e.message;
    answer.classList.add("error");
  }
}

async function readStream(resp, out, extra) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const evt = buf.slice(0, i); buf = buf.slice(i + 2);
      const data = evt.split("\n").filter(l => l.startsWith("data:")).map(l => l.slice(5).replace(/^ /, "")).join("\n");
      if (!data || data === "[DONE]") continue;
      let part;
      try { part = JSON.parse(data); } catch (e) { out.textContent += data; continue; }
      showChatPart(part, out, extra);
    }
  }
}

function showChatPart(p, out, extra) {
  if (typeof p === "string") { out.textContent += p; return; }
  const delta = p.delta ?? p.token ?? p.content ?? p.text;  // ragline's token events: {text}
  if (typeof delta === "string") out.textContent += delta;
  const full = p.answer ?? p.response;
  if (typeof full === "string") out.textContent = full;
  if (p.conversation_id) state.conversationId = p.conversation_id;
  const path = p.path ?? p.route;
  if (path) extra.append(h("p", {}, h("span", { class: "badge" }, "path: " + path)));
  const sources = p.sources ?? p.citations;
  if (Array.isArray(sources) && sources.length) {
    extra.append(h("p", {}, "Sources:"), h("ol", {}, sources.map(s => h("li", {},
      typeof s === "string" ? s : (s.title || s.source_id || s.id || JSON.stringify(s))))));
  }
}

// ---------------------------------------------------------------- providers
async function renderProviders() {
  await loadEnvironment();
  const hh = state.health || {};
  const store = hh.store || {};
  $("#health").replaceChildren(...[h("h2", {}, "Server health"),
    h("dl", { class: "stats" },
      h("div", {}, h("dt", {}, "Status"), h("dd", {}, h("span", { class: "badge " + (hh.status === "healthy" ? "ok" : "bad") }, hh.status || "unknown"))),
      h("div", {}, h("dt", {}, "Version"), h("dd", {}, hh.version || "")),
      h("div", {}, h("dt", {}, "Store"), h("dd", {}, `${(store.details && store.details.engine) || ""} ${store.status || ""}`)),
      h("div", {}, h("dt", {}, "Collections"), h("dd", {}, fmtNum(hh.collections))),
      h("div", {}, h("dt", {}, "Storage"), h("dd", {}, fmtBytes(hh.storage_bytes))),
      h("div", {}, h("dt", {}, "Cross-encoder"), h("dd", {}, hh.cross_encoder ? (hh.cross_encoder.model || hh.cross_encoder.status || "loaded") : "none")),
      h("div", {}, h("dt", {}, "Chat"), h("dd", {}, !hasChat() ? "not available" :
        chatConfigured() ? "chat model configured" : "no chat model configured"))),
    store.error ? h("p", { class: "error" }, store.error) : null].filter(Boolean));
  const prov = state.providers || {};
  const kinds = prov.kinds || Object.keys(prov).filter(k => Array.isArray(prov[k]));
  const problems = [...(prov.errors || []), ...(prov.skipped || [])];
  $("#providers").replaceChildren(...kinds.map(kind => [kind, prov[kind] || []]).map(([kind, list]) => h("section", { class: "card" },
    h("h2", {}, kind),
    list.length ? h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"),
      h("th", { scope: "col" }, "Capabilities"), h("th", { scope: "col" }, "Connection schema"))),
    h("tbody", {}, list.map(p => h("tr", {},
      h("th", { scope: "row" }, p.name),
      h("td", {}, (p.capabilities || []).map(c => h("span", { class: "badge" }, c))),
      h("td", {}, h("details", {}, h("summary", {}, "schema"), h("pre", {}, JSON.stringify(p.schema, null, 2)))))))) :
      h("p", { class: "muted" }, "none registered"))),
    ...(problems.length ? [h("section", { class: "card" }, h("h2", {}, "Plugins not loaded"),
      h("ul", {}, problems.map(p => h("li", {}, `${p.kind}: ${p.name}` +
        (p.distribution ? ` (${p.distribution})` : "") + ` — ${p.reason}`))))] : []));
}

// ---------------------------------------------------------------- start
function init() {
  $("#signin-form").addEventListener("submit", onSignIn);
  $("#signout").addEventListener("click", () => signOut());
  $("#create-form").addEventListener("submit", onCreateCollection);
  $("#search-form").addEventListener("submit", onSearch);
  $("#search-collection").addEventListener("change", updateModes);
  $("#search-boost-on").addEventListener("change", (e) => {
    for (const el of document.querySelectorAll(".boost-row")) el.hidden = !e.target.checked;
  });
  $("#upload-form").addEventListener("submit", onUpload);
  $("#url-form").addEventListener("submit", onUrl);
  $("#text-form").addEventListener("submit", onText);
  $("#dir-form").addEventListener("submit", onDir);
  $("#jobs-refresh").addEventListener("click", () => refreshJobs().catch(e => toast(e.message, true)));
  $("#chat-form").addEventListener("submit", onChat);
  $("#chat-collection").addEventListener("change", () => {
    state.conversationId = null;  // a conversation stays with its collection
    updateChatState();
  });
  $("#chat-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("#chat-form").requestSubmit();
  });
  window.addEventListener("hashchange", route);
  const start = signedIn() ? loadEnvironment().catch(e => toast(e.message, true)) : Promise.resolve();
  start.then(route);
}

document.addEventListener("DOMContentLoaded", init);
