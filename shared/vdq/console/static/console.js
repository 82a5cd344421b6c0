// The VDQ operator console: a small static app over the REST API.
//
// Rules kept throughout: every value that comes from the API reaches the page as text
// (textContent, text nodes, attribute values set with setAttribute on known-safe attributes),
// never as markup; the token lives in sessionStorage (this tab) and travels only in the
// Authorization header; the page offers only what the user's groups allow, and shows the
// server's answer when it refuses anyway.

import { $, alertError, el, guarded, heading, say, text, when, who } from "./dom.js";
import { previewResend, showItem } from "./item.js";
import {
  api, claims, config, finishSignIn, forgetToken, groups, loadConfig, may, onSessionEnd,
  redirectUri, signIn,
} from "./session.js";

const REFRESH_MS = 5000;

let view = null; // {kind: "list"|"item", refresh: async () => void}
let timer = null;

function setView(shown) {
  view = shown;
}

function signOut(message) {
  forgetToken();
  stopRefresh();
  showSignedOut(message);
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
    await showItem(id, setView);
  } else {
    const kind = parts[0] === "sent" ? "sent" : "queue";
    $(`nav-${kind}`).setAttribute("aria-current", "page");
    await showList(kind, params, setView);
  }
}

async function showList(kind, params, setView) {
  const title = kind === "queue" ? "Active queue" : "Sent items";
  document.title = `${title}: VDQ console`;
  const h = heading(title);
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow listing items." }));
    setView(null);
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
  setView({ kind: "list", refresh: load });
  await guarded(load);
  h.focus();
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
  onSessionEnd(signOut);
  try {
    await loadConfig();
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
