// The VDQ operator console: a small static app over the REST API.
//
// Rules kept throughout: every value that comes from the API reaches the page as text
// (textContent, text nodes, attribute values set with setAttribute on known-safe attributes),
// never as markup; the token lives in sessionStorage (this tab) and travels only in the
// Authorization header; the page offers only what the user's groups allow, and shows the
// server's answer when it refuses anyway.

const REFRESH_MS = 5000;
const store = window.sessionStorage;
const TOKEN_KEY = "vdq.console.token";
const PKCE_KEY = "vdq.console.pkce";
const apiBase = new URL("../", window.location.href);

let config = null;
let view = null; // {kind: "list"|"item", refresh: async () => void}
let timer = null;

// ---- DOM helpers (text only) ----------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "text") {
      node.textContent = String(value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function $(id) {
  return document.getElementById(id);
}

// A value as plain text: an object as "key: value" lines, a list one entry a line.
function text(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length ? value.map(text).join("\n") : "(none)";
  if (typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k}: ${text(v)}`).join("\n");
  }
  return String(value);
}

// A time for a list: to the second, in UTC, the exact value in the datetime attribute.
function when(iso) {
  if (!iso) return "—";
  const short = String(iso).replace("T", " ").replace(/\.\d+Z$/, "Z");
  return el("time", { datetime: iso, title: iso }, short);
}

function say(message) {
  $("status").textContent = message;
}

function alertError(error) {
  const box = $("alert");
  box.replaceChildren();
  if (!error) return;
  const status = error.status ? ` (${error.status}${error.code ? " " + error.code : ""})` : "";
  const title = error.status === 403 ? "Not allowed" : error.status === 409 ? "Not possible now"
    : "Something went wrong";
  box.append(el("strong", { text: `${title}${status}: ` }), String(error.message || error));
}

function who(item) {
  const r = item.receiver || {};
  return r.email || r.cell || "";
}

// ---- Sign-in (authorization code with PKCE, S256) -------------------------------------------

function b64url(bytes) {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText(size) {
  return b64url(crypto.getRandomValues(new Uint8Array(size)));
}

// The console's directory, the one callback URI the client has, even when the page was opened
// as .../console/index.html.
function redirectUri() {
  return window.location.origin + window.location.pathname.replace(/[^/]*$/, "");
}

async function signIn() {
  const verifier = randomText(48);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const state = randomText(24);
  store.setItem(PKCE_KEY, JSON.stringify({ verifier, state, hash: window.location.hash }));
  const url = new URL(config.authorize_url);
  url.search = new URLSearchParams({
    response_type: "code", client_id: config.client_id, redirect_uri: redirectUri(),
    scope: config.scope, state, code_challenge: b64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
  }).toString();
  window.location.assign(url.href);
}

async function finishSignIn(params) {
  const saved = JSON.parse(store.getItem(PKCE_KEY) || "null");
  store.removeItem(PKCE_KEY);
  // The code leaves the address bar (and the history) before anything else happens.
  window.history.replaceState(null, "", window.location.pathname + (saved ? saved.hash : ""));
  // The state first: a link anyone can send must not put words of its own on the page.
  if (!saved || params.get("state") !== saved.state) {
    throw new Error("the sign-in answer does not belong to this tab's request; sign in again");
  }
  if (params.get("error")) {
    throw new Error(`sign-in refused: ${params.get("error_description") || params.get("error")}`);
  }
  const answer = await fetch(config.token_url, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code", client_id: config.client_id, code: params.get("code"),
      redirect_uri: redirectUri(), code_verifier: saved.verifier,
    }),
  });
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok || !data.access_token) {
    throw new Error(`sign-in failed: ${data.error_description || data.error || answer.status}`);
  }
  store.setItem(TOKEN_KEY, data.access_token);
}

function claims() {
  const token = store.getItem(TOKEN_KEY);
  if (!token) return null;
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = decodeURIComponent(Array.from(atob(part),
      (c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0")).join(""));
    const found = JSON.parse(json);
    if (typeof found.exp === "number" && found.exp * 1000 <= Date.now()) return null;
    return found;
  } catch {
    return null;
  }
}

function groups(found) {
  let list = found["cognito:groups"] || [];
  if (typeof list === "string") list = list.split(",");
  const scopes = String(found.scope || "").split(" ").filter((s) => s.startsWith("vdq/"));
  return [...list, ...scopes.map((s) => s.slice(4))];
}

function may(action) {
  const found = claims();
  if (!found) return false;
  const held = new Set(groups(found).flatMap((g) => config.permissions[g] || []));
  return (config.needs[action] || ["?"]).every((p) => held.has(p));
}

function signOut(message) {
  store.removeItem(TOKEN_KEY);
  stopRefresh();
  showSignedOut(message);
}

// ---- The API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, { query, body } = {}) {
  const url = new URL(path.replace(/^\/+/, ""), apiBase);
  if (url.origin !== apiBase.origin || !url.pathname.startsWith(apiBase.pathname)) {
    // A path from an answer that leads elsewhere: the token goes to the API only.
    throw new ApiError(0, "bad_path", `${path} is not the API's`);
  }
  for (const [k, v] of Object.entries(query || {})) if (v) url.searchParams.set(k, v);
  const headers = { Authorization: `Bearer ${store.getItem(TOKEN_KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const data = answer.status === 204 ? null : await answer.json().catch(() => null);
  if (answer.status === 401) {
    signOut("Your session has ended: sign in again.");
    throw new ApiError(401, "unauthorized", "your session has ended");
  }
  if (!answer.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(answer.status, error.code, error.message || answer.statusText);
  }
  return data;
}

// ---- Views --------------------------------------------------------------------------------

function route() {
  const [path, search] = window.location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  return { parts, params: new URLSearchParams(search || "") };
}

async function render() {
  alertError(null);
  say("");
  const { parts, params } = route();
  for (const link of document.querySelectorAll("#nav a")) link.removeAttribute("aria-current");
  if (parts[0] === "item" && parts[1]) {
    let id = null;
    try {
      id = decodeURIComponent(parts[1]);
    } catch {
      view = null; // an address cut mid-escape (%E0): said, not a page left half drawn
      heading("No such item");
      alertError(new Error(`the address names no item: ${parts[1]}`));
      return;
    }
    await showItem(id);
  } else {
    const kind = parts[0] === "sent" ? "sent" : "queue";
    $(`nav-${kind}`).setAttribute("aria-current", "page");
    await showList(kind, params);
  }
}

function heading(label) {
  const h = el("h1", { tabindex: "-1", text: label });
  $("main").replaceChildren(h);
  return h;
}

async function showList(kind, params) {
  const title = kind === "queue" ? "Active queue" : "Sent items";
  document.title = `${title}: VDQ console`;
  const h = heading(title);
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow listing items." }));
    view = null;
    return;
  }
  const pages = { cursors: [null], index: 0, items: [], selected: new Set() };
  const filters = el("form", { class: "filters", role: "search", "aria-label": "Filters" });
  const select = (name, label, values, chosen) => el("label", {}, label, el("select",
    { name, id: `filter-${name}` },
    values.map(([value, shown]) => el("option", { value, selected: value === chosen },
      shown))));
  filters.append(
    select("method", "Method", [["", "any"], ...config.methods.map((m) => [m, m])],
      params.get("method") || ""),
    select("state", "State", [["", "any"], ...config.states[kind].map((s) => [s, s])],
      params.get("state") || ""),
    select("limit", "Per page", ["10", "25", "50", "100"].map((n) => [n, n]),
      params.get("limit") || "25"),
    el("button", { type: "submit", class: "primary" }, "Apply filters"));
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const [k, v] of new FormData(filters)) if (v) chosen.set(k, v);
    window.location.hash = `#/${kind}?${chosen}`;
  });
  const tbody = el("tbody");
  const canResend = kind === "sent" && may("resend");
  const columns = ["Item", "Method", "State", "Receiver", "Result", "Attempt", "Updated"];
  const table = el("table", { class: "items", id: "items" },
    el("caption", { id: "items-caption" }),
    el("thead", {}, el("tr", {}, canResend ? el("th", { scope: "col" }, "Select") : null,
      columns.map((c) => el("th", { scope: "col" }, c)))),
    tbody);
  const previous = el("button", { type: "button", id: "previous-page" }, "Previous page");
  const next = el("button", { type: "button", id: "next-page" }, "Next page");
  const paging = el("nav", { class: "paging", "aria-label": "Pages" }, previous, next);
  const resendBox = el("div", { id: "resend-box" });
  const resendButton = canResend ? el("button", { type: "button", id: "resend-selected" },
    "Resend selected…") : null;
  $("main").append(filters, el("div", { class: "actions" }, resendButton), resendBox, table,
    paging);

  const query = () => ({ method: params.get("method"), state: params.get("state"),
    limit: params.get("limit") || "25", cursor: pages.cursors[pages.index] });
  const draw = (page) => {
    const seen = JSON.stringify([pages.index, page]);
    if (seen === pages.shown) return; // unchanged: the rows (and what has focus) stay
    const changed = pages.shown !== undefined && pages.index === pages.drawnIndex;
    pages.shown = seen;
    pages.drawnIndex = pages.index;
    const focused = document.activeElement && document.activeElement.dataset.key;
    pages.items = page.items;
    tbody.replaceChildren(...page.items.map((item) => {
      const cells = [
        el("a", { href: `#/item/${encodeURIComponent(item.id)}`, "data-key": `open-${item.id}` },
          item.id),
        item.method, el("span", { class: `state state-${item.state}` }, item.state),
        who(item), text(item.result), text(item.attempt), when(item.updated_at),
      ];
      const box = canResend ? el("input", {
        type: "checkbox", "aria-label": `Select ${item.id} (${who(item)})`,
        "data-key": `select-${item.id}`, checked: pages.selected.has(item.id),
        on: { change: (e) => (e.target.checked ? pages.selected.add(item.id)
          : pages.selected.delete(item.id)) },
      }) : null;
      return el("tr", {}, box ? el("td", { "data-label": "Select" }, box) : null,
        cells.map((cell, i) => el("td", { "data-label": columns[i] }, cell)));
    }));
    if (!page.items.length) {
      tbody.append(el("tr", {}, el("td", { colspan: String(columns.length + 1) },
        "No items on this page.")));
    }
    table.querySelector("caption").textContent =
      `${title}, page ${pages.index + 1}: ${page.items.length} item(s)`;
    pages.cursors.length = pages.index + 1;
    if (page.cursor) pages.cursors.push(page.cursor);
    previous.disabled = pages.index === 0;
    next.disabled = !page.cursor;
    if (changed) say(`${title} updated.`);
    if (focused) {
      const again = tbody.querySelector(`[data-key="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  };
  const load = async () => draw(await api("GET", kind === "queue" ? "/queue-items"
    : "/sent-items", { query: query() }));
  previous.addEventListener("click", async () => { pages.index -= 1; await guarded(load); });
  next.addEventListener("click", async () => { pages.index += 1; await guarded(load); });
  if (resendButton) {
    resendButton.addEventListener("click", () => previewResend(resendBox, [...pages.selected],
      async () => { pages.selected.clear(); await load(); }));
  }
  view = { kind: "list", refresh: load };
  await guarded(load);
  h.focus();
}

function previewResend(box, ids, done) {
  alertError(null);
  if (!ids.length) {
    box.replaceChildren(el("p", { class: "preview", text: "Select the items to resend first." }));
    return;
  }
  if (ids.length > config.max_resend) {
    box.replaceChildren(el("p", { class: "preview",
      text: `At most ${config.max_resend} items can be resent at once.` }));
    return;
  }
  const title = el("h2", { tabindex: "-1", id: "preview-title" },
    `Resend ${ids.length} item(s) as new items?`);
  const confirm = el("button", { type: "button", class: "primary", id: "confirm-resend" },
    "Resend");
  const back = el("button", { type: "button" }, "Back");
  box.replaceChildren(el("section", { class: "preview", "aria-labelledby": "preview-title" },
    title, el("p", { text: "Each becomes a new queued item with the same sender, receiver and "
      + "content; the originals stay as they are." }),
    el("ul", {}, ids.map((id) => el("li", {}, id))),
    el("div", { class: "preview-buttons" }, confirm, back)));
  title.focus();
  back.addEventListener("click", () => box.replaceChildren());
  confirm.addEventListener("click", () => guarded(async () => {
    const answer = ids.length === 1
      ? await api("POST", `/sent-items/${encodeURIComponent(ids[0])}/resend`)
      : await api("POST", "/sent-items/resend", { body: { ids } });
    box.replaceChildren(el("p", { class: "preview" }, "Resent as ",
      answer.items.map((item, i) => [i ? ", " : "",
        el("a", { href: `#/item/${encodeURIComponent(item.id)}` }, item.id)])));
    say(`Resent ${answer.items.length} item(s).`);
    await done();
  }));
}

// An item and the pages of its history read so far. The first page comes with the item, the
// next ones when asked for: an item of 10,000 entries costs no hundred requests a view. A
// refresh reads the item and the last page shown again (history is only added to, at its end),
// so it costs two requests whatever the number of pages on screen.
async function loadItem(id, known) {
  const item = await api("GET", `/queue-items/${encodeURIComponent(id)}`);
  const pages = [{ from: null, entries: item.history || [], next: item.history_cursor }];
  if (known && known.item.id === item.id && known.pages.length > 1) {
    pages.push(...known.pages.slice(1, -1), await historyPage(id, known.pages.at(-1).from));
  }
  return { item, pages };
}

async function historyPage(id, from) {
  const page = await api("GET", `/queue-items/${encodeURIComponent(id)}/history`,
    { query: { cursor: from } });
  return { from, entries: page.entries, next: page.cursor };
}

function fieldTable(label, id, data) {
  return el("table", { class: "fields", id },
    el("caption", {}, label),
    el("tbody", {}, Object.entries(data).map(([key, value]) => el("tr", {},
      el("th", { scope: "row" }, key), el("td", { class: "value" }, text(value))))));
}

function timeline(history) {
  return el("ol", { class: "timeline", id: "timeline", "aria-label": "History, oldest first",
    tabindex: "-1" },
    history.map((entry) => el("li", {},
      el("time", { class: "when", datetime: entry.at }, text(entry.at)),
      el("span", { class: "what" }, entry.from_state
        ? `${entry.name}: ${entry.from_state} → ${entry.to_state}`
        : `${entry.name || entry.kind}${entry.to_state ? ": " + entry.to_state : ""}`),
      ` by ${text(entry.actor)} (${text(entry.source)}), attempt ${text(entry.attempt)}`,
      entry.text ? el("span", { class: "text" }, entry.text) : null)));
}

function attachmentList(attachments) {
  if (!attachments.length) return el("p", { text: "No attachments." });
  return el("ul", { class: "attachments", id: "attachments" }, attachments.map((a) => {
    const button = el("button", { type: "button", "aria-label": `Download ${a.filename}`,
      disabled: a.purged }, a.purged ? "Deleted by cleanup" : "Download");
    button.addEventListener("click", () => guarded(async () => {
      const answer = await api("GET", a.download_path, { query: { redirect: "false" } });
      const url = new URL(answer.url);
      if (url.protocol !== "https:" && url.protocol !== "http:") {
        throw new Error("the download URL is not a web address");
      }
      el("a", { href: url.href, target: "_blank", rel: "noopener noreferrer" }).click();
      say(`Downloading ${a.filename} (the link works for a few minutes).`);
    }));
    return el("li", {}, el("span", { class: "filename" }, a.filename),
      ` (${text(a.content_type)}, ${text(a.size)} bytes${a.inline ? ", inline" : ""}) `, button);
  }));
}

async function showItem(id) {
  document.title = `Item ${id}: VDQ console`;
  const h = heading(`Item ${id}`);
  if (!may("read")) {
    $("main").append(el("p", { text: "Your groups do not allow reading items." }));
    view = null;
    return;
  }
  const actions = el("div", { class: "actions", id: "item-actions" });
  const preview = el("div", { id: "preview" });
  const body = el("div", { id: "item-body" });
  $("main").append(actions, preview, body);
  let shown = "";
  let state = null;
  const draw = (next) => {
    state = next;
    const { item, pages } = next;
    const history = pages.flatMap((page) => page.entries);
    const more = pages.at(-1).next;
    const seen = JSON.stringify([item, history, more]);
    if (seen === shown) return;
    const first = shown === "";
    const hadFocus = document.activeElement && document.activeElement.id === "history-more";
    shown = seen;
    const { content, attachments, history: _h, history_cursor: _c, ...fields } = item;
    const moreButton = more ? el("button", { type: "button", id: "history-more",
      on: { click: () => guarded(showMore) } }, "Show more history") : null;
    body.replaceChildren(
      el("h2", {}, "Fields"), fieldTable("The item", "fields", fields),
      el("h2", {}, "Content"), fieldTable("What is sent", "content", content || {}),
      el("h2", {}, "Attachments"), attachmentList(attachments || []),
      el("h2", {}, "History"), timeline(history),
      more ? el("p", { text: `The first ${history.length} entries; there are more.` }) : null,
      moreButton);
    drawActions(actions, preview, item, load);
    if (hadFocus) (moreButton || $("timeline")).focus(); // the button gone: where it led
    if (!first) say(`Item ${item.id} updated: ${item.state}.`);
  };
  const load = async () => draw(await loadItem(id, state));
  const showMore = async () => {
    const page = await historyPage(id, state.pages.at(-1).next);
    draw({ ...state, pages: [...state.pages, page] });
  };
  view = { kind: "item", refresh: load };
  await guarded(load);
  h.focus();
}

function drawActions(box, preview, item, reload) {
  const buttons = [];
  const active = config.states.queue.includes(item.state); // a done item takes neither
  for (const name of ["retry", "cancel"]) {
    if (!active || !may(name)) continue;
    const label = name === "retry" ? "Retry…" : "Cancel item…";
    buttons.push(el("button", { type: "button", id: `action-${name}`,
      class: name === "cancel" ? "danger" : "",
      on: { click: () => guarded(() => previewTransition(preview, item, name, reload)) } },
      label));
  }
  if (may("resend") && config.states.sent.includes(item.state)) {
    buttons.push(el("button", { type: "button", id: "action-resend",
      on: { click: () => previewResend(preview, [item.id], reload) } }, "Resend…"));
  }
  box.replaceChildren(...buttons);
}

async function previewTransition(box, item, name, reload) {
  box.replaceChildren();
  const path = `/queue-items/${encodeURIComponent(item.id)}/transitions/${name}`;
  const dry = await api("POST", path, { query: { dry_run: "true" } });
  const title = el("h2", { tabindex: "-1", id: "preview-title" },
    `${name === "retry" ? "Retry" : "Cancel"} this item?`);
  const confirm = el("button", { type: "button", class: name === "cancel" ? "danger primary"
    : "primary", id: `confirm-${name}` }, name === "retry" ? "Retry now" : "Cancel the item");
  const back = el("button", { type: "button", id: "preview-back" }, "Back");
  box.replaceChildren(el("section", { class: "preview", "aria-labelledby": "preview-title" },
    title,
    el("p", { id: "preview-text", text: `Dry run: the item would move from ${dry.from_state} `
      + `to ${dry.to_state}. Nothing has changed yet.` }),
    el("div", { class: "preview-buttons" }, confirm, back)));
  title.focus();
  back.addEventListener("click", () => box.replaceChildren());
  confirm.addEventListener("click", () => guarded(async () => {
    const done = await api("POST", path);
    box.replaceChildren();
    say(`${name === "retry" ? "Retried" : "Cancelled"}: ${done.from_state} → ${done.to_state}.`);
    await reload();
    $("item-actions").querySelector("button")?.focus();
  }));
}

async function guarded(work) {
  try {
    await work();
  } catch (error) {
    if (error.status !== 401) alertError(error);
  }
}

// ---- Live refresh: the visible view, every few seconds, paused while the tab is hidden -------
//
// One refresh at a time (a tick while one is out sends nothing), and while the API fails the
// ticks skipped double, up to a minute's worth: a slow or down API is not asked every tick.

const MAX_SKIPPED = 11; // ticks: a minute at REFRESH_MS
let refreshing = false;
let failures = 0;
let skip = 0;

function startRefresh() {
  stopRefresh();
  timer = window.setInterval(refreshNow, REFRESH_MS);
}

function stopRefresh() {
  if (timer !== null) window.clearInterval(timer);
  timer = null;
}

async function refreshNow() {
  if (document.visibilityState === "hidden" || !view || refreshing) return;
  if (!claims()) {
    signOut("Your session has ended: sign in again.");
    return;
  }
  if (skip > 0) {
    skip -= 1;
    return;
  }
  refreshing = true;
  try {
    await view.refresh();
    if (failures) alertError(null);
    failures = 0;
  } catch (error) {
    failures += 1;
    skip = Math.min(2 ** failures - 1, MAX_SKIPPED);
    if (error.status !== 401) alertError(error);
  } finally {
    refreshing = false;
  }
}

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") refreshNow();
});

// ---- Start ---------------------------------------------------------------------------------

function showSignedOut(message) {
  view = null;
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("user").textContent = "";
  const button = el("button", { type: "button", class: "primary", id: "sign-in" }, "Sign in");
  button.addEventListener("click", () => signIn().catch(alertError));
  heading("Sign in");
  $("main").append(el("p", { text: message || "Sign in to see the queue." }), button);
}

function showSignedIn(found) {
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  const list = groups(found);
  $("user").textContent = `Signed in as ${found["cognito:username"] || found.username
    || found.sub} (${list.length ? list.join(", ") : "no groups"})`;
}

async function start() {
  $("sign-out").addEventListener("click", () => {
    signOut("You are signed out.");
    if (config.logout_url) {
      const url = new URL(config.logout_url);
      url.search = new URLSearchParams({ client_id: config.client_id, logout_uri: redirectUri() })
        .toString();
      window.location.assign(url.href);
    }
  });
  window.addEventListener("hashchange", () => {
    if (claims()) render();
    else showSignedOut("Your session has ended: sign in again.");
  });
  try {
    const answer = await fetch("config.json", { cache: "no-store" });
    config = await answer.json();
  } catch (error) {
    alertError(new Error(`cannot read the console's settings: ${error.message}`));
    return;
  }
  const params = new URLSearchParams(window.location.search);
  if (params.has("code") || params.has("error")) {
    try {
      await finishSignIn(params);
    } catch (error) {
      showSignedOut();
      alertError(error);
      return;
    }
  }
  const found = claims();
  if (!found) {
    showSignedOut();
    return;
  }
  showSignedIn(found);
  await render();
  startRefresh();
}

start();
