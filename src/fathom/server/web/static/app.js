// fathom's web page: talks only to this server's Agent Protocol endpoints.
// Streams runs with fetch + SSE parsing (so the API key header can be sent), rejoins a
// running stream after a reload or a lost connection, and polls the open thread so that
// two tabs on one thread stay consistent. Markdown and code come back from POST /ui/render
// as safe HTML; everything else is set with textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "fathom.apiKey";
const STREAM_MODES = ["values", "messages-tuple", "custom"];
const TERMINAL = new Set(["success", "error", "timeout", "interrupted"]);
const POLL_MS = 1500;

const S = {
  assistants: [],
  threads: [],
  threadId: null,
  thread: null,
  values: {},
  interrupts: [],
  run: null,            // {id, status}
  streaming: new Map(), // message id -> {text, agent}
  sub: new Map(),       // namespace -> {agent, callId, text, values, done}
  dynamic: new Map(),   // custom "subagent" events, by id
  usage: new Map(),     // agent -> Map(message id -> usage)
  banner: null,         // {kind, text}
  joined: null,         // run id being followed
  lastEventId: null,
  seenUpdate: null,
  asyncLive: new Map(), // task id -> run status from the server
  openFile: null,
  abort: null,          // AbortController of the stream being read
  open: new Set(),      // keys of the <details> a person opened (kept across re-renders)
  callsRun: null,       // the run whose calls the Calls panel shows (null: the last)
};

// ------------------------------------------------------------------ HTTP

let keyWaiter = null;

function apiKey() { return sessionStorage.getItem(KEY_STORAGE) || ""; }

function askForKey(message) {
  if (!keyWaiter) {
    keyWaiter = new Promise((resolve) => {
      const dialog = $("key-dialog");
      $("key-error").hidden = !message;
      $("key-error").textContent = message || "";
      $("key-form").onsubmit = () => {
        sessionStorage.setItem(KEY_STORAGE, $("key-input").value.trim());
        $("key-button").hidden = false;
        keyWaiter = null;
        resolve();
      };
      if (!dialog.open) dialog.showModal();
      $("key-input").focus();
    });
  }
  return keyWaiter;
}

async function http(method, path, body, extra = {}, signal = undefined) {
  for (;;) {
    const headers = { ...extra };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (apiKey()) headers["x-api-key"] = apiKey();
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal,
    });
    if (response.status === 401 || response.status === 403) {
      await askForKey(response.status === 403 ? "That key was refused; try again." : "");
      continue;
    }
    return response;
  }
}

async function api(method, path, body) {
  const response = await http(method, path, body);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    throw new Error((data && data.detail) || `${method} ${path}: HTTP ${response.status}`);
  }
  return data;
}

// Server-side rendering (markdown-it-py + Pygments), cached by content.
const renderCache = new Map();

async function renderHtml(items) {
  const keys = items.map((item) => JSON.stringify(item));
  const missing = items.filter((_, n) => !renderCache.has(keys[n]));
  if (missing.length) {
    const { html } = await api("POST", "/ui/render", { items: missing });
    missing.forEach((item, n) => renderCache.set(JSON.stringify(item), html[n]));
  }
  return keys.map((key) => renderCache.get(key));
}

function fillHtml(element, item) {
  const key = JSON.stringify(item);
  if (renderCache.has(key)) { element.innerHTML = renderCache.get(key); return; }
  element.textContent = item.text ?? item.new ?? "";
  renderHtml([item]).then(([html]) => { element.innerHTML = html; })
    .catch((error) => console.warn("render failed", error));
}

// ------------------------------------------------------------------ helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((block) => (typeof block === "string" ? block
      : block && block.type === "text" ? block.text || "" : "")).join("");
  }
  return "";
}

function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

function short(value, n = 80) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

function ago(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

function notification(message) {
  return message.type === "human" && message.additional_kwargs
    && message.additional_kwargs.deepagents_notification;
}

function setConn(text) { $("conn").textContent = text; }

function setBanner(kind, text) {
  S.banner = kind ? { kind, text } : null;
  renderBanner();
}

// ------------------------------------------------------------------ threads

function threadLabel(thread) {
  const messages = (thread.values && thread.values.messages) || [];
  const first = messages.find((m) => m.type === "human" && !notification(m));
  return first ? short(textOf(first.content), 60) : "New thread";
}

async function loadThreads() {
  const found = await api("POST", "/threads/search",
    { limit: 100, sort_by: "updated_at", sort_order: "desc" });
  S.threads = found.filter((t) => !(t.metadata && t.metadata.parent_thread_id));
  renderThreads();
}

function renderThreads() {
  const query = $("thread-search").value.trim().toLowerCase();
  const list = $("thread-list");
  list.replaceChildren();
  for (const thread of S.threads) {
    const label = threadLabel(thread);
    if (query && !label.toLowerCase().includes(query) && !thread.thread_id.includes(query)) continue;
    const assistant = (thread.metadata && (thread.metadata.assistant_id || thread.metadata.graph_id)) || "";
    const remove = el("button", {
      type: "button", class: "delete", "aria-label": `Delete thread ${label}`, text: "Delete",
      onclick: async (event) => {
        event.stopPropagation();
        if (remove.dataset.armed !== "1") {
          remove.dataset.armed = "1"; remove.textContent = "Confirm"; return;
        }
        await api("DELETE", `/threads/${thread.thread_id}`);
        if (S.threadId === thread.thread_id) openThread(null);
        await loadThreads();
      },
    });
    list.append(el("li", { class: thread.thread_id === S.threadId ? "current" : "" },
      el("button", {
        type: "button", class: "thread", "data-thread": thread.thread_id,
        "aria-current": thread.thread_id === S.threadId ? "true" : null,
        onclick: () => openThread(thread.thread_id),
      },
      el("span", { class: "label", text: label }),
      el("span", { class: "meta", text: `${assistant} · ${thread.status} · ${ago(thread.updated_at)}` })),
      remove));
  }
  if (!list.children.length) {
    list.append(el("li", { class: "muted", text: query ? "No thread matches." : "No threads yet." }));
  }
}

function resetThreadView() {
  S.thread = null; S.values = {}; S.interrupts = []; S.run = null; S.joined = null; S.callsRun = null;
  S.streaming.clear(); S.sub.clear(); S.dynamic.clear(); S.usage.clear(); S.asyncLive.clear();
  S.banner = null; S.lastEventId = null; S.seenUpdate = null; S.openFile = null; S.open.clear();
}

async function openThread(threadId) {
  resetThreadView();
  S.threadId = threadId;
  history.replaceState(null, "", threadId ? `#thread=${threadId}` : "#");
  renderAll();
  renderThreads();
  if (threadId) await refreshThread({ join: true });
}

async function newThread() {
  const assistant = $("assistant").value;
  const thread = await api("POST", "/threads", { metadata: { graph_id: assistant, assistant_id: assistant } });
  await openThread(thread.thread_id);
  await loadThreads();
  $("input").focus();
  return thread.thread_id;
}

function threadAssistant() {
  const meta = (S.thread && S.thread.metadata) || {};
  return meta.assistant_id || meta.graph_id || $("assistant").value;
}

// Reload the thread's record and state; join its running run when asked (and not joined yet).
async function refreshThread({ join = false } = {}) {
  const threadId = S.threadId;
  if (!threadId) return;
  let thread;
  try { thread = await api("GET", `/threads/${threadId}`); } catch (error) {
    if (threadId === S.threadId) setBanner("error", `Cannot open the thread: ${error.message}`);
    return;
  }
  if (threadId !== S.threadId) return;
  S.thread = thread;
  if (!S.joined) {
    const state = await api("GET", `/threads/${threadId}/state`);
    if (threadId !== S.threadId) return;
    S.values = state.values || {};
    S.interrupts = state.interrupts || [];
    S.seenUpdate = thread.updated_at;
    renderAll();
  }
  if (thread.status === "error" && !S.banner && !S.joined) {
    setBanner("error", `The last run of this thread failed${thread.error ? `: ${thread.error}` : "."}`);
  }
  if (join && !S.joined && (thread.status === "busy")) {
    const runs = await api("GET", `/threads/${threadId}/runs?limit=10`);
    const live = runs.find((r) => r.status === "pending" || r.status === "running");
    if (live && threadId === S.threadId) followRun(threadId, live.run_id, null, true);
  }
  refreshAsyncTasks();
}

// ------------------------------------------------------------------ runs and streaming

async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = { event: "message", data: "", id: null };
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue;
        const field = line.slice(0, colon);
        const text = line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.event = text;
        else if (field === "data") event.data += text;
        else if (field === "id") event.id = text;
      }
      yield event;
    }
  }
}

async function startRun(body) {
  let threadId = S.threadId;
  if (!threadId) threadId = await newThread();
  setBanner(null);
  S.interrupts = [];
  S.joined = "starting"; // the poller must not join this run a second time
  renderApprovals();
  renderRunControls();
  S.abort = new AbortController();
  const response = await http("POST", `/threads/${threadId}/runs/stream`, {
    assistant_id: threadAssistant(), stream_mode: STREAM_MODES, stream_subgraphs: true,
    stream_resumable: true, on_disconnect: "continue", ...body,
  }, {}, S.abort.signal);
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    S.joined = null;
    renderRunControls();
    setBanner("error", `The run did not start: ${data.detail || response.status}`);
    return;
  }
  const location = response.headers.get("content-location") || "";
  const runId = location.split("/runs/")[1] || null;
  await followRun(threadId, runId, response, false);
}

// Follow a run's events: from `response` (a new run) or by joining its stream.
// `replay`: a fresh page joining a running run reads it from its first event.
async function followRun(threadId, runId, response, replay) {
  S.joined = runId || "pending";
  S.run = { id: runId, status: "running" };
  if (replay) { S.lastEventId = null; }
  renderRunControls();
  let attempts = 0;
  for (;;) {
    try {
      if (!response) {
        const headers = S.lastEventId !== null ? { "Last-Event-ID": S.lastEventId } : {};
        setConn(S.lastEventId !== null ? "reconnecting…" : "joining the run…");
        S.abort = new AbortController();
        response = await http("GET", `/threads/${threadId}/runs/${S.run.id}/stream`, undefined, headers, S.abort.signal);
        if (!response.ok) break;
      }
      setConn("streaming");
      for await (const event of sseEvents(response)) {
        if (threadId !== S.threadId) return;
        attempts = 0;
        if (event.id !== null) S.lastEventId = event.id;
        handleEvent(event);
      }
      break;
    } catch (error) {
      if (threadId !== S.threadId) return;
      response = null;
      if (!S.run.id || ++attempts > 30) { setBanner("error", `Lost the run's stream: ${error.message}`); break; }
      setConn("connection lost; retrying…");
      if (!navigator.onLine) await new Promise((resolve) => window.addEventListener("online", resolve, { once: true }));
      else await new Promise((resolve) => setTimeout(resolve, Math.min(500 * attempts, 4000)));
    }
  }
  if (threadId !== S.threadId) return;
  await finishRun(threadId);
}

function handleEvent({ event, data }) {
  let payload;
  try { payload = data ? JSON.parse(data) : null; } catch { return; }
  const [mode, ...rest] = event.split("|");
  const ns = rest.join("|");
  if (mode === "metadata") {
    if (payload && payload.run_id) { S.run.id = payload.run_id; S.joined = payload.run_id; }
    return;
  }
  if (mode === "error") {
    const message = payload && (payload.message || payload.error) || "the run failed";
    setBanner("error", `Run failed: ${payload && payload.error ? payload.error + ": " : ""}${payload && payload.message || message}`);
    return;
  }
  if (mode === "values") {
    if (ns) {
      const sub = subagent(ns);
      sub.values = payload;
      renderAgents();
      return;
    }
    S.values = payload || {};
    if (payload && payload.__interrupt__) S.interrupts = payload.__interrupt__;
    const ids = new Set(((payload && payload.messages) || []).map((m) => m.id));
    for (const id of [...S.streaming.keys()]) if (ids.has(id)) S.streaming.delete(id);
    renderAll();
    return;
  }
  if (mode === "messages") {
    const [chunk, meta] = payload || [];
    if (!chunk) return;
    // an in-process async subagent's run may report into this stream: it has its own thread
    if (meta && meta.thread_id && meta.thread_id !== S.threadId) return;
    const agent = (meta && meta.lc_agent_name) || threadAssistant();
    if (chunk.usage_metadata) recordUsage(agent, chunk.id, chunk.usage_metadata);
    if (!String(chunk.type).startsWith("AI")) return;
    const piece = textOf(chunk.content);
    if (ns) {
      const sub = subagent(ns);
      sub.agent = agent;
      if (meta && meta.fathom_task_call_id) sub.callId = meta.fathom_task_call_id;
      sub.text += piece;
      updateSubText(sub);
      renderAgents();
      return;
    }
    if (!piece) return;
    const entry = S.streaming.get(chunk.id) || { text: "", agent };
    entry.text += piece;
    S.streaming.set(chunk.id, entry);
    updateStreaming(chunk.id, entry);
    return;
  }
  if (mode === "custom") {
    // an `eval`'s dynamic subagents: {"type": "subagent", "event": "start"|"complete"|"error",
    // "subagent_type", "label", "call_id", "tool_call_id", "error"?}
    if (payload && typeof payload === "object" && payload.type === "subagent") {
      const id = payload.call_id || payload.label || `dynamic-${S.dynamic.size + 1}`;
      const status = { start: "running", complete: "done", error: "error" }[payload.event] || payload.event || "";
      S.dynamic.set(id, { ...(S.dynamic.get(id) || {}), ...payload, status });
      renderAgents();
    }
  }
}

function subagent(ns) {
  if (!S.sub.has(ns)) S.sub.set(ns, { ns, agent: ns.split(":")[0], callId: null, text: "", values: null });
  return S.sub.get(ns);
}

function recordUsage(agent, id, usage) {
  if (!S.usage.has(agent)) S.usage.set(agent, new Map());
  S.usage.get(agent).set(id, usage);
  renderUsage();
}

async function finishRun(threadId) {
  const runId = S.run && S.run.id;
  let status = "success";
  if (runId) {
    try { status = (await api("GET", `/threads/${threadId}/runs/${runId}`)).status; } catch { /* deleted */ }
  }
  if (threadId !== S.threadId) return;
  S.run = { id: runId, status };
  S.joined = null;
  S.streaming.clear();
  setConn("");
  await refreshThread();
  if (status === "error" && !(S.banner && S.banner.kind === "error")) {
    setBanner("error", "Run failed (see the server log).");
  } else if (status === "timeout") {
    setBanner("error", "Run timed out.");
  } else if (status === "interrupted" && !S.interrupts.length) {
    setBanner("cancelled", "Run cancelled.");
  }
  renderRunControls();
  loadThreads().catch(() => {});
}

async function cancelRun() {
  if (!S.run || !S.run.id || !S.threadId) return;
  await api("POST", `/threads/${S.threadId}/runs/${S.run.id}/cancel`);
}

async function send() {
  const text = $("input").value;
  if (!text.trim() || S.joined) return;
  $("input").value = "";
  const pending = { type: "human", content: text, id: `local-${Date.now()}` };
  S.values = { ...S.values, messages: [...(S.values.messages || []), pending] };
  renderMessages();
  await startRun({ input: { messages: [{ type: "human", content: text }] } });
}

// ------------------------------------------------------------------ async tasks (live status)

async function refreshAsyncTasks() {
  const tasks = Object.values(S.values.async_tasks || {});
  await Promise.all(tasks.map(async (task) => {
    const known = S.asyncLive.get(task.task_id);
    if (known && TERMINAL.has(known.status)) return;
    try {
      const run = await api("GET", `/threads/${task.thread_id}/runs/${task.run_id}`);
      const child = await api("GET", `/threads/${task.thread_id}`);
      S.asyncLive.set(task.task_id, { status: run.status, usage: child.metadata && child.metadata.fathom_usage });
    } catch { /* the task's thread may live on another server */ }
  }));
  renderAgents();
  renderUsage();
}

// ------------------------------------------------------------------ rendering

function renderAll() {
  renderMessages(); renderTodos(); renderFiles(); renderAgents(); renderUsage(); renderCalls();
  renderApprovals(); renderBanner(); renderRunControls(); renderTitle();
}

function renderTitle() {
  const title = $("thread-title");
  if (!S.threadId) { title.textContent = "No thread open: type a message to start one."; return; }
  title.replaceChildren(el("span", { text: `Thread ${S.threadId.slice(0, 8)}` }),
    el("span", { class: "muted", text: ` · ${threadAssistant()} · ${S.thread ? S.thread.status : ""}` }));
}

function toolResults() {
  const results = new Map();
  for (const m of S.values.messages || []) if (m.type === "tool") results.set(m.tool_call_id, m);
  return results;
}

function renderMessages() {
  const box = $("messages");
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const results = toolResults();
  const shown = [];
  for (const message of S.values.messages || []) {
    const note = notification(message);
    if (note) {
      shown.push(el("div", { class: "note", text: `Background task ${note.agent_name || ""} ${note.status || "updated"}.` }));
    } else if (message.type === "human") {
      shown.push(el("div", { class: "msg user" }, el("div", { class: "who", text: "You" }),
        el("div", { class: "body plain", text: textOf(message.content) })));
    } else if (message.type === "ai") {
      shown.push(aiMessage(message, results));
    } else if (message.type === "tool" && !hasCall(message.tool_call_id)) {
      shown.push(toolBlock({ name: message.name, args: {}, id: message.tool_call_id }, message));
    }
  }
  for (const [id, entry] of S.streaming) shown.push(streamingBubble(id, entry));
  box.replaceChildren(...shown);
  if (!shown.length) box.append(el("p", { class: "muted empty", text: "Nothing here yet." }));
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function hasCall(callId) {
  return (S.values.messages || []).some((m) => m.type === "ai" && (m.tool_calls || []).some((c) => c.id === callId));
}

function aiMessage(message, results) {
  const text = textOf(message.content);
  const body = el("div", { class: "body markdown" });
  if (text) fillHtml(body, { kind: "markdown", text });
  return el("div", { class: "msg ai", "data-id": message.id },
    el("div", { class: "who", text: message.name || "agent" }),
    text ? body : null,
    (message.tool_calls || []).map((call) => toolBlock(call, results.get(call.id))));
}

function streamingBubble(id, entry) {
  return el("div", { class: "msg ai streaming", "data-id": id },
    el("div", { class: "who", text: `${entry.agent} (typing…)` }),
    el("div", { class: "body plain", "data-stream": id, text: entry.text }));
}

function updateStreaming(id, entry) {
  const node = document.querySelector(`[data-stream="${CSS.escape(id)}"]`);
  if (node) {
    node.textContent = entry.text;
    const box = $("messages");
    box.scrollTop = box.scrollHeight;
  } else {
    renderMessages();
  }
}

function toolStatus(call, result) {
  if (result) return result.status === "error" ? "error" : "done";
  if (S.interrupts.length) return "awaiting approval";
  return S.joined ? "running" : "not run";
}

// A re-render must not close what a person opened.
function keepOpen(details, key) {
  details.open = S.open.has(key);
  details.addEventListener("toggle", () => { if (details.open) S.open.add(key); else S.open.delete(key); });
  return details;
}

function toolBlock(call, result) {
  const status = toolStatus(call, result);
  const details = keepOpen(el("details", { class: `tool ${status.replace(/ /g, "-")}`, "data-call": call.id }), `call:${call.id}`);
  details.append(el("summary", {},
    el("span", { class: "tool-name", text: call.name }),
    el("span", { class: "tool-args", text: short(call.args || {}, 70) }),
    el("span", { class: "tool-status", text: status })));
  details.append(el("div", { class: "label", text: "Arguments" }), el("pre", { class: "json", text: pretty(call.args || {}) }));
  if (call.name === "task") {
    const sub = [...S.sub.values()].find((s) => s.callId === call.id);
    if (sub) details.append(el("div", { class: "label", text: `Subagent ${sub.agent}` }),
      el("pre", { class: "subtext", "data-sub": sub.ns, text: sub.text }));
  }
  if (result) {
    details.append(el("div", { class: "label", text: "Result" }), el("pre", { class: "result", text: textOf(result.content) || pretty(result.content) }));
  }
  return details;
}

function updateSubText(sub) {
  const node = document.querySelector(`[data-sub="${CSS.escape(sub.ns)}"]`);
  if (node) node.textContent = sub.text;
  else renderMessages();
}

function renderTodos() {
  const todos = S.values.todos || [];
  const box = $("todos");
  if (!todos.length) { box.replaceChildren(el("p", { class: "muted", text: "No todos." })); return; }
  const icon = { completed: "✔", in_progress: "▶", pending: "○" };
  box.replaceChildren(el("ul", { class: "todos" }, todos.map((todo) =>
    el("li", { class: `todo ${todo.status}` },
      el("span", { class: "icon", "aria-hidden": "true", text: icon[todo.status] || "•" }),
      el("span", { class: "text", text: todo.content }),
      el("span", { class: "visually-hidden", text: ` (${String(todo.status).replace("_", " ")})` })))));
}

function fileText(file) {
  if (!file) return "";
  if (typeof file === "string") return file;
  const content = file.content;
  return Array.isArray(content) ? content.join("\n") : String(content ?? "");
}

// The write/edit tool calls that changed `path`, with the content before and after each.
function fileChanges(path) {
  const results = toolResults();
  const changes = [];
  let current = "";
  for (const message of S.values.messages || []) {
    for (const call of (message.type === "ai" && message.tool_calls) || []) {
      const args = call.args || {};
      if (args.file_path !== path) continue;
      const result = results.get(call.id);
      if (!result || result.status === "error") continue;
      if (call.name === "write_file") {
        changes.push({ call, old: current, new: String(args.content ?? "") });
        current = String(args.content ?? "");
      } else if (call.name === "edit_file") {
        const before = current;
        const oldString = String(args.old_string ?? "");
        const newString = String(args.new_string ?? "");
        current = args.replace_all ? before.split(oldString).join(newString) : before.replace(oldString, newString);
        changes.push({ call, old: before, new: current });
      }
    }
  }
  return changes;
}

function renderFiles() {
  const files = S.values.files || {};
  const paths = Object.keys(files).sort();
  const box = $("files");
  if (!paths.length) { box.replaceChildren(el("p", { class: "muted", text: "No files." })); $("file-view").replaceChildren(); return; }
  const tree = {};
  for (const path of paths) {
    let node = tree;
    const parts = path.split("/").filter(Boolean);
    parts.forEach((part, n) => {
      if (n === parts.length - 1) node[part] = path;
      else node = node[part + "/"] = node[part + "/"] || {};
    });
  }
  const list = (node) => el("ul", { class: "tree" }, Object.keys(node).sort().map((name) =>
    typeof node[name] === "string"
      ? el("li", {}, el("button", {
        type: "button", class: `file ${S.openFile === node[name] ? "open" : ""}`, "data-path": node[name],
        "aria-pressed": S.openFile === node[name] ? "true" : "false",
        onclick: () => { S.openFile = S.openFile === node[name] ? null : node[name]; renderFiles(); },
      }, name))
      : el("li", {}, el("span", { class: "dir", text: name }), list(node[name]))));
  box.replaceChildren(list(tree));
  renderFileView();
}

function renderFileView() {
  const view = $("file-view");
  const path = S.openFile;
  const files = S.values.files || {};
  if (!path || !(path in files)) { view.replaceChildren(); return; }
  const code = el("div", { class: "code" });
  fillHtml(code, { kind: "code", text: fileText(files[path]), path });
  const changes = fileChanges(path).map((change, n) => {
    const diff = el("div", { class: "diff" });
    fillHtml(diff, { kind: "diff", old: change.old, new: change.new, path });
    return keepOpen(el("details", { class: "change" }, el("summary", { text: `Change ${n + 1}: ${change.call.name}` }), diff), `change:${change.call.id}`);
  });
  view.replaceChildren(el("h3", { text: path }), code, changes.length ? el("div", { class: "changes" }, changes) : null);
}

function renderAgents() {
  const box = $("agents");
  const root = threadAssistant();
  const items = [];
  const results = toolResults();
  for (const message of S.values.messages || []) {
    for (const call of (message.type === "ai" && message.tool_calls) || []) {
      if (call.name !== "task") continue;
      const args = call.args || {};
      const sub = [...S.sub.values()].find((s) => s.callId === call.id);
      const status = results.has(call.id) ? "done" : S.joined ? "running" : "not run";
      items.push(el("li", { class: `agent sync ${status.replace(/ /g, "-")}`, "data-kind": "sync" },
        el("span", { class: "name", text: args.subagent_type || (sub && sub.agent) || "subagent" }),
        el("span", { class: "kind", text: "sync" }),
        el("span", { class: "status", text: status }),
        el("div", { class: "desc", text: short(args.description || "", 120) })));
    }
  }
  for (const task of Object.values(S.values.async_tasks || {})) {
    const live = S.asyncLive.get(task.task_id);
    const status = (live && live.status) || task.status;
    items.push(el("li", { class: `agent async ${status}`, "data-kind": "async", "data-task": task.task_id },
      el("span", { class: "name", text: task.agent_name }),
      el("span", { class: "kind", text: "async" }),
      el("span", { class: "status", text: status }),
      el("div", { class: "desc", text: `task ${String(task.task_id).slice(0, 8)} · thread ${String(task.thread_id).slice(0, 8)}` })));
  }
  for (const [id, info] of S.dynamic) {
    const label = info.label ? `${info.label} (${info.subagent_type || "subagent"})` : (info.subagent_type || id);
    items.push(el("li", { class: `agent dynamic ${info.status}`, "data-kind": "dynamic", "data-call": id },
      el("span", { class: "name", text: label }),
      el("span", { class: "kind", text: "eval" }),
      el("span", { class: "status", text: info.status || "" }),
      el("div", { class: "desc", text: info.error ? `error: ${info.error}` : `from eval call ${String(info.tool_call_id || "").slice(0, 12)}` })));
  }
  box.replaceChildren(el("div", { class: "agent-root", text: `${root} (main)` }),
    items.length ? el("ul", { class: "agents" }, items) : el("p", { class: "muted", text: "No subagents." }));
}

// the thread's spend against its budget (the `fathom_budget` channel: all agents, all runs)
const CAP_LABELS = { max_model_calls: "model-call cap", max_tokens: "token cap", max_usd: "cost cap", max_wall_s: "time cap" };

function budgetLine() {
  const budget = S.values.fathom_budget;
  if (!budget || typeof budget !== "object") return null;
  const spent = budget.spent || {};
  const limits = budget.limits || {};
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  const usd = (n) => `$${Number(n || 0).toFixed(4)}`;
  const parts = [];
  for (const [cap, what, used, show] of [
    ["max_tokens", "tokens", (spent.input_tokens || 0) + (spent.output_tokens || 0), count],
    ["max_model_calls", "model calls", spent.calls || 0, count],
    ["max_usd", "USD", spent.usd || 0, usd],
    ["max_wall_s", "seconds", spent.wall_s || 0, (n) => Number(n || 0).toFixed(1)],
  ]) {
    const limit = limits[cap];
    if (limit) parts.push(`${what} ${show(used)} of ${show(limit)} (${Math.round((100 * used) / limit)} %)`);
    else if (cap === "max_tokens" || cap === "max_model_calls") parts.push(`${what} ${show(used)}`);
  }
  let text = `Budget: ${parts.join(" · ")}`;
  if (budget.reached) text += ` · reached: ${CAP_LABELS[budget.reached] || budget.reached}`;
  return el("p", { class: budget.reached ? "budget reached" : "budget", id: "budget", text });
}

function renderUsage() {
  const rows = new Map();
  const add = (agent, calls, input, output) => {
    const row = rows.get(agent) || { calls: 0, input: 0, output: 0 };
    row.calls += calls; row.input += input; row.output += output;
    rows.set(agent, row);
  };
  const counted = new Set();
  for (const m of S.values.messages || []) {
    if (m.type === "ai" && m.usage_metadata) {
      counted.add(m.id);
      add(m.name || threadAssistant(), 1, m.usage_metadata.input_tokens || 0, m.usage_metadata.output_tokens || 0);
    }
  }
  for (const [agent, byId] of S.usage) {
    for (const [id, usage] of byId) {
      if (counted.has(id)) continue;
      add(agent, 1, usage.input_tokens || 0, usage.output_tokens || 0);
    }
  }
  for (const task of Object.values(S.values.async_tasks || {})) {
    const live = S.asyncLive.get(task.task_id);
    const usage = live && live.usage;
    if (usage && typeof usage === "object") {
      add(`${task.agent_name} (async)`, usage.calls || 0, usage.input_tokens || 0, usage.output_tokens || 0);
    }
  }
  const box = $("usage");
  const budget = budgetLine();
  const lead = budget ? [budget] : [];
  if (!rows.size) { box.replaceChildren(...lead, el("p", { class: "muted", text: "No model calls yet." })); return; }
  // the server's prompt-cache figures: how much of each request repeated the previous one
  const prefix = (S.thread && S.thread.metadata && S.thread.metadata.fathom_prefix) || {};
  const reuse = (agent) => {
    const entry = prefix[agent] || (agent === threadAssistant() ? prefix["(unnamed agent)"] : null);
    return entry && typeof entry.mean === "number" ? `${(entry.mean * 100).toFixed(1)} %` : "–";
  };
  box.replaceChildren(...lead, el("table", { class: "usage" },
    el("thead", {}, el("tr", {}, ["Agent", "Calls", "In", "Out", "Prefix kept"].map((h) => el("th", {
      scope: "col", text: h,
      title: h === "Prefix kept" ? "Mean share of each model request's previous request that it repeats from the start (prompt-cache reuse)" : undefined,
    })))),
    el("tbody", {}, [...rows].map(([agent, row]) => el("tr", { "data-agent": agent },
      el("th", { scope: "row", text: agent }), el("td", { text: row.calls }),
      el("td", { text: row.input }), el("td", { text: row.output }),
      el("td", { class: "reuse", text: reuse(agent) }))))));
}

// the call card: the server's record of each model call of a run (the `fathom_calls` metadata)
function callRuns() {
  const calls = (S.thread && S.thread.metadata && S.thread.metadata.fathom_calls) || [];
  const runs = [];
  for (const call of Array.isArray(calls) ? calls : []) {
    const last = runs[runs.length - 1];
    if (last && last.id === call.run_id) last.calls.push(call);
    else runs.push({ id: call.run_id, calls: [call] });
  }
  return runs;
}

function callAnswer(call) {
  if (call.error) return `error: ${call.error}`;
  const parts = (call.output_calls || []).map((name) => `→ ${name}`);
  parts.push(call.output_text ? call.output_text : "(no text)");
  return parts.join("; ");
}

function renderCalls() {
  const box = $("calls");
  const runs = callRuns();
  if (!runs.length) { box.replaceChildren(el("p", { class: "muted", text: "No calls recorded yet." })); return; }
  const chosen = runs.find((r) => r.id === S.callsRun) || runs[runs.length - 1];
  const picker = el("select", { id: "calls-run", "aria-label": "Run whose calls are shown" },
    runs.map((run, n) => el("option", { value: run.id || "", text: `run ${n + 1} of ${runs.length} · ${String(run.id || "").slice(0, 8)}` })));
  picker.value = chosen.id || "";
  picker.addEventListener("change", () => { S.callsRun = picker.value; renderCalls(); });
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  const sum = (key) => chosen.calls.reduce((n, call) => n + (Number(call[key]) || 0), 0);
  const reasoning = chosen.calls.some((call) => typeof call.reasoning_tokens === "number");
  const totals = [`${chosen.calls.length} calls`, `${count(sum("input_tokens"))} in`, `${count(sum("output_tokens"))} out`];
  if (reasoning) totals.push(`${count(sum("reasoning_tokens"))} reasoning`);
  totals.push(`${count(sum("input_tokens") + sum("output_tokens"))} tokens`);
  const rows = chosen.calls.map((call, n) => {
    const details = keepOpen(el("details", { class: `call ${call.kind}`, "data-n": n + 1 }), `calls:${chosen.id}:${n}`);
    const tokens = `${count(call.input_tokens)} in · ${count(call.output_tokens)} out`
      + (typeof call.reasoning_tokens === "number" ? ` · ${count(call.reasoning_tokens)} reasoning` : "");
    details.append(el("summary", {},
      el("span", { class: "call-n", text: `${n + 1}` }),
      el("span", { class: "call-caller", text: call.caller }),
      el("span", { class: "call-kind", text: call.kind }),
      el("span", { class: "call-msgs", text: `${call.messages} msgs` }),
      el("span", { class: "call-tokens", text: tokens })));
    const hidden = (call.new_count || 0) - (call.new || []).length;
    details.append(
      el("div", { class: "label", text: `Tools offered (${(call.tools || []).length})` }),
      el("div", { class: "call-tools", text: (call.tools || []).join(", ") || "none" }),
      el("div", { class: "label", text: `New in this call (${call.new_count || 0} of ${call.messages} messages)` }),
      el("ol", { class: "call-new" }, hidden > 0 ? el("li", { class: "muted", text: `… ${hidden} earlier` }) : null,
        (call.new || []).map((item) => el("li", { "data-kind": item.kind },
          el("span", { class: "kind", text: item.kind }), " ", item.text))),
      el("div", { class: "label", text: "Answer" }),
      el("div", { class: "call-answer", text: callAnswer(call) }));
    return details;
  });
  box.replaceChildren(picker, el("p", { class: "call-totals", text: totals.join(" · ") }), ...rows);
}

function renderBanner() {
  const banner = $("banner");
  banner.hidden = !S.banner;
  banner.className = `banner ${S.banner ? S.banner.kind : ""}`;
  banner.textContent = S.banner ? S.banner.text : "";
}

function renderRunControls() {
  const running = Boolean(S.joined);
  $("send").disabled = running;
  $("cancel").hidden = !running;
  document.body.dataset.run = running ? "running" : (S.run ? S.run.status : "none");
}

// ------------------------------------------------------------------ approvals

function renderApprovals() {
  const box = $("approvals");
  const pending = S.joined ? [] : S.interrupts;
  box.hidden = !pending.length;
  if (!pending.length) { box.replaceChildren(); return; }
  const forms = [];
  box.replaceChildren(el("h2", { text: "Waiting for your decision" }));
  for (const interrupt of pending) {
    const value = interrupt.value || {};
    if (Array.isArray(value.action_requests)) {
      value.action_requests.forEach((request, n) => {
        const config = (value.review_configs || [])[n] || {};
        const allowed = config.allowed_decisions || ["approve", "edit", "reject"];
        const card = approvalCard(interrupt.id, n, request, allowed);
        forms.push(card);
        box.append(card.node);
      });
    } else {
      const answer = el("textarea", { rows: 2, "aria-label": "Answer", class: "answer" });
      box.append(el("div", { class: "approval" }, el("pre", { class: "json", text: pretty(value) }),
        el("label", {}, "Answer (text or JSON)", answer)));
      forms.push({ interruptId: interrupt.id, generic: true, answer });
    }
  }
  const error = el("p", { class: "error-text", role: "alert" });
  const submit = el("button", {
    type: "button", class: "primary", text: "Submit decisions",
    onclick: () => submitDecisions(forms, error),
  });
  const approveAll = el("button", {
    type: "button", text: "Approve all",
    onclick: () => { forms.forEach((f) => f.choose && f.choose("approve")); submitDecisions(forms, error); },
  });
  box.append(el("div", { class: "approval-buttons" }, submit, approveAll), error);
}

function approvalCard(interruptId, n, request, allowed) {
  const name = `decision-${interruptId}-${n}`;
  const args = el("textarea", { class: "args", rows: 4, "aria-label": `Arguments of ${request.name} #${n + 1}`, spellcheck: "false" });
  args.value = pretty(request.args || {});
  const reason = el("input", { class: "reason", type: "text", placeholder: "Reason (told to the agent)", "aria-label": `Reason for rejecting ${request.name} #${n + 1}` });
  const radios = {};
  const choices = el("div", { class: "choices", role: "radiogroup", "aria-label": `Decision for ${request.name} #${n + 1}` },
    allowed.filter((d) => ["approve", "edit", "reject"].includes(d)).map((decision) => {
      const radio = el("input", { type: "radio", name, value: decision });
      radios[decision] = radio;
      return el("label", { class: `choice ${decision}` }, radio, ` ${decision[0].toUpperCase()}${decision.slice(1)}`);
    }));
  const choose = (decision) => { if (radios[decision]) radios[decision].checked = true; };
  choose("approve");
  args.readOnly = !radios.edit;
  args.addEventListener("input", () => choose("edit"));
  reason.addEventListener("input", () => choose("reject"));
  const node = el("div", { class: "approval", "data-index": n },
    el("div", { class: "approval-head" }, el("strong", { text: request.name }),
      el("span", { class: "muted", text: ` #${n + 1} ` }),
      el("code", { class: "approval-summary", text: short(request.args || {}, 90) })),
    el("label", { class: "label" }, "Arguments", args), choices, radios.reject ? reason : null);
  return { interruptId, request, radios, args, reason, node, choose };
}

async function submitDecisions(forms, errorNode) {
  const resume = {};
  try {
    for (const form of forms) {
      if (form.generic) {
        const raw = form.answer.value;
        let answer = raw;
        try { answer = JSON.parse(raw); } catch { /* plain text */ }
        resume[form.interruptId] = answer;
        continue;
      }
      const decision = Object.keys(form.radios).find((d) => form.radios[d].checked) || "approve";
      const entry = resume[form.interruptId] || { decisions: [] };
      if (decision === "edit") {
        let args;
        try { args = JSON.parse(form.args.value); } catch (error) {
          throw new Error(`The arguments of ${form.request.name} are not valid JSON: ${error.message}`);
        }
        entry.decisions.push({ type: "edit", edited_action: { name: form.request.name, args } });
      } else if (decision === "reject") {
        const reason = form.reason.value.trim();
        entry.decisions.push(reason ? { type: "reject", message: reason } : { type: "reject" });
      } else {
        entry.decisions.push({ type: "approve" });
      }
      resume[form.interruptId] = entry;
    }
  } catch (error) {
    errorNode.textContent = error.message;
    return;
  }
  S.interrupts = [];
  renderApprovals();
  await startRun({ command: { resume } });
}

// ------------------------------------------------------------------ polling (other tabs, async tasks)

let polls = 0;

async function poll() {
  try {
    if (++polls % 4 === 0) await loadThreads(); // threads other tabs or clients started
    if (S.threadId && !S.joined) {
      const thread = await api("GET", `/threads/${S.threadId}`);
      if (thread.status === "busy" || thread.updated_at !== S.seenUpdate) await refreshThread({ join: true });
      else if (Object.values(S.values.async_tasks || {}).length) await refreshAsyncTasks();
    }
  } catch (error) {
    console.warn("poll failed", error);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

// ------------------------------------------------------------------ start

async function loadAssistants() {
  const found = await api("POST", "/assistants/search", { limit: 100 });
  const ids = [...new Set(found.map((a) => a.graph_id))];
  $("assistant").replaceChildren(...ids.map((id) => el("option", { value: id, text: id })));
}

function bind() {
  $("composer").addEventListener("submit", (event) => { event.preventDefault(); send(); });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); send(); }
  });
  $("cancel").addEventListener("click", () => cancelRun().catch((e) => setBanner("error", e.message)));
  $("new-thread").addEventListener("click", () => newThread().catch((e) => setBanner("error", e.message)));
  $("thread-search").addEventListener("input", renderThreads);
  $("skip").addEventListener("click", (event) => { event.preventDefault(); $("input").focus(); });
  $("key-button").addEventListener("click", () => askForKey(""));
  $("key-button").hidden = !apiKey();
  // Offline: drop the stream now; back online, rejoin it after the last event seen.
  window.addEventListener("offline", () => { if (S.abort && S.joined) S.abort.abort(); });
  window.addEventListener("hashchange", () => {
    const id = threadFromHash();
    if (id !== S.threadId) openThread(id);
  });
}

function threadFromHash() {
  const match = location.hash.match(/thread=([\w-]+)/);
  return match ? match[1] : null;
}

async function main() {
  bind();
  renderAll();
  try {
    await loadAssistants();
    await loadThreads();
    const id = threadFromHash();
    if (id) await openThread(id);
  } catch (error) {
    setBanner("error", `Cannot reach the server: ${error.message}`);
  }
  document.body.dataset.ready = "1";
  setTimeout(poll, POLL_MS);
}

main();
