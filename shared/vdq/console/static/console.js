// The VDQ operator console: a small static app over the REST API.
//
// Rules kept throughout: every value that comes from the API reaches the page as text
// (textContent, text nodes, attribute values set with setAttribute on known-safe attributes),
// never as markup; the token lives in sessionStorage (this tab) and travels only in the
// Authorization header; the page offers only what the user's groups allow, and shows the
// server's answer when it refuses anyway.

import { $, add, alertError, el, focusHeading, guarded, heading, say } from "./dom.js";
import { previewResend, showItem } from "./item.js";
import { countsPanel, pagedItems } from "./lists.js";
import {
  api, claims, config, finishSignIn, forgetToken, groups, loadConfig, may, onSessionEnd,
  redirectUri, signIn,
} from "./session.js";
import { showProducers } from "./producers.js";
import { showSuppressions } from "./suppressions.js";

const REFRESH_MS = 5000;
const ITEM_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

let view = null; // {kind, refresh: async () => void}
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

const PAGES = ["queue", "sent", "search", "counts", "producers", "suppressions"];

async function render() {
  alertError(null);
  say("");
  const { parts, params } = route();
  for (const link of document.querySelectorAll("#nav a")) link.removeAttribute("aria-current");
  fillSearchBox(parts[0] === "search" ? params : new URLSearchParams());
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
    // Ids are upper case; one typed or pasted in lower case is the same item (as the search
    // box reads it). What does not look like an id is asked for as it is.
    if (ITEM_ID.test(id.toUpperCase())) id = id.toUpperCase();
    await showItem(id, setView);
    return;
  }
  const page = PAGES.includes(parts[0]) ? parts[0] : "queue";
  const link = $(`nav-${page}`);
  if (link) link.setAttribute("aria-current", "page");
  if (page === "search") await showSearch(params);
  else if (page === "counts") await showCounts();
  else if (page === "suppressions") await showSuppressions(params, setView);
  else if (page === "producers") await showProducers(params, setView);
  else await showList(page, params);
}

function listFilters(kind, params) {
  const filters = el("form", { class: "filters", "aria-label": "Filters" });
  const select = (name, label, values, chosen) => el("label", {}, label, el("select",
    { name, id: `filter-${name}` },
    values.map(([value, shown]) => el("option", { value, selected: value === chosen },
      shown))));
  add(filters,
    select("method", "Method", [["", "any"], ...config.methods.map((m) => [m, m])],
      params.get("method") || ""),
    select("state", "State", [["", "any"], ...config.states[kind].map((s) => [s, s])],
      params.get("state") || ""),
    select("priority", "Lane", [["", "any"], ...config.priorities.map((p) => [p, p])],
      params.get("priority") || ""),
    // The sent items wait for nothing: the API takes `scheduled` for the queue only.
    kind === "queue" ? select("scheduled", "Send time", [["", "any"],
      ["true", "waiting for it"], ["false", "due"]], params.get("scheduled") || "") : null,
    select("limit", "Per page", ["10", "25", "50", "100"].map((n) => [n, n]),
      params.get("limit") || "25"),
    el("button", { type: "submit", class: "primary" }, "Apply filters"));
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const [k, v] of new FormData(filters)) if (v) chosen.set(k, v);
    window.location.hash = `#/${kind}?${chosen}`;
  });
  return filters;
}

async function showList(kind, params) {
  const title = kind === "queue" ? "Active queue" : "Sent items";
  document.title = `${title}: VDQ console`;
  const h = heading(title);
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow listing items." }));
    setView(null);
    return;
  }
  const canResend = kind === "sent" && may("resend");
  const list = pagedItems({
    title, selectable: canResend,
    load: (cursor) => api("GET", kind === "queue" ? "/queue-items" : "/sent-items", {
      query: { method: params.get("method"), state: params.get("state"),
        priority: params.get("priority"),
        scheduled: kind === "queue" ? params.get("scheduled") : null,
        limit: params.get("limit") || "25", cursor } }),
  });
  const counts = kind === "queue" ? countsPanel() : null;
  const resendBox = el("div", { id: "resend-box" });
  const resendButton = canResend ? el("button", { type: "button", id: "resend-selected" },
    "Resend selected…") : null;
  // The sent list is read from the table's stream, which follows a change by up to a minute
  // or so; an item's own page and the search by receiver do not.
  const lag = kind === "sent" ? el("p", { class: "note", id: "sent-note" },
    "An item is listed here about a minute after it is done; search by receiver or open "
    + "the item to see it at once.") : null;
  add($("main"), counts ? counts.node : null, lag, listFilters(kind, params),
    el("div", { class: "actions" }, resendButton), resendBox, list.nodes);
  if (resendButton) {
    resendButton.addEventListener("click", () => previewResend(resendBox,
      [...list.selected.values()],
      async () => { list.unselect(); await list.refresh(); }));
  }
  const refresh = async () => {
    await list.refresh();
    if (counts) await counts.refresh();
  };
  setView({ kind: "list", refresh });
  await guarded(refresh);
  focusHeading(h);
}

async function showCounts() {
  document.title = "Counts: VDQ console";
  const h = heading("Counts");
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow counting items." }));
    setView(null);
    return;
  }
  const counts = countsPanel({ hourly: true });
  $("main").append(counts.node);
  setView({ kind: "counts", refresh: counts.refresh });
  await guarded(counts.refresh);
  focusHeading(h);
}

// ---- Search: the box on every page, and its results ---------------------------------------

const KEYS = [["", "anything"], ["receiver", "receiver"], ["sender", "sender"],
  ["origin", "origin (type:id)"], ["provider_id", "provider ID"], ["id", "item id"]];

function fillSearchBox(params) {
  $("search-q").value = params.get("q") || "";
  $("search-by").value = params.get("by") || "";
  $("search-since").value = params.get("since") || "";
  $("search-until").value = params.get("until") || "";
}

// A number as people print it: maybe a +, digits, and spaces (also no-break ones copied from
// a page), dots, dashes and brackets, (415) 555-0100 too.
const PRINTED_NUMBER = /^\+?[0-9(][0-9 ().\u00a0\u2007\u202f-]{4,}$/;

// What the API is asked: the box's text read as what it looks like, unless "by" says.
function searchQuery(params) {
  const q = (params.get("q") || "").trim();
  let by = params.get("by") || "";
  if (!by && q) {
    if (ITEM_ID.test(q.toUpperCase())) by = "id";
    // A number as people print it (+1 (415) 555-0100): the API takes it to E.164, or says
    // what is missing (the country code) rather than finding no provider ID of that name.
    else if (q.includes("@") || PRINTED_NUMBER.test(q)) by = "receiver";
    else if (q.includes(":")) by = "origin";
    else by = "provider_id";
  }
  const query = {};
  if (q && by === "origin") {
    const at = q.indexOf(":");
    query.origin_type = q.slice(0, at).trim();
    query.origin_id = q.slice(at + 1).trim();
  } else if (q && by) {
    query[by] = by === "id" ? q.toUpperCase() : q;
  }
  if (params.get("since")) query.since = params.get("since");
  if (params.get("until")) query.until = params.get("until");
  for (const name of ["state", "method"]) if (params.get(name)) query[name] = params.get(name);
  return query;
}

async function showSearch(params) {
  document.title = "Search: VDQ console";
  const h = heading("Search");
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow searching items." }));
    setView(null);
    return;
  }
  const query = searchQuery(params);
  if (!Object.keys(query).length) {
    $("main").append(el("p", { text: "Type an address, a number, an origin (type:id), a "
      + "provider ID or an item id in the search box, or choose a date window." }));
    setView(null);
    focusHeading(h);
    return;
  }
  // The window's dates are days in UTC (as the API reads them, and as every time shown).
  const words = { since: "queued from", until: "to" };
  const described = Object.entries(query).map(([k, v]) => (words[k]
    ? `${words[k]} ${v} (UTC)` : `${k.replace("_", " ")} ${v}`)).join(", ");
  $("main").append(el("p", { id: "search-summary", text: `Items with ${described}, newest `
    + "first. By sender, provider ID or time alone, an item shows about a minute after it "
    + "was queued." }));
  const list = pagedItems({
    title: "Search results", empty: "No items found.",
    load: (cursor) => api("GET", "/search", { query: { ...query, limit: "25", cursor } }),
  });
  $("main").append(...list.nodes);
  setView({ kind: "search", refresh: list.refresh });
  await guarded(list.refresh);
  focusHeading(h);
}

function searchBox() {
  const form = $("search");
  const select = $("search-by");
  select.append(...KEYS.map(([value, label]) => el("option", { value }, label)));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (String(v).trim()) chosen.set(k, v.trim());
    window.location.hash = `#/search?${chosen}`;
  });
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
  $("search").hidden = true;
  $("sign-out").hidden = true;
  $("user").textContent = "";
  const button = el("button", { type: "button", class: "primary", id: "sign-in" }, "Sign in");
  button.addEventListener("click", () => signIn().catch(alertError));
  heading("Sign in");
  $("main").append(el("p", { text: message || "Sign in to see the queue." }), button);
}

function showSignedIn(found) {
  $("nav").hidden = false;
  $("search").hidden = !may("list");
  $("nav-suppressions").hidden = !may("suppressions");
  $("nav-producers").hidden = !may("list");
  $("sign-out").hidden = false;
  const list = groups(found);
  $("user").textContent = `Signed in as ${found["cognito:username"] || found.username
    || found.sub} (${list.length ? list.join(", ") : "no groups"})`;
}

async function start() {
  // The skip link moves the focus to the content and keeps the page: followed as a link, its
  // "#main" would be the page's address, and an address the router does not know is the queue.
  document.querySelector("a.skip").addEventListener("click", (event) => {
    event.preventDefault();
    $("main").focus();
  });
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
  searchBox();
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
