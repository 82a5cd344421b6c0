// The suppression list: look a receiver up or page through the list, add one with why, take
// one off with why (after a preview), and read a receiver's history. Its own permissions: the
// list holds people's addresses, and a removal sends to someone who bounced or opted out.

import { $, add, alertError, busy, el, focusHeading, guarded, heading, refocus, say, text, when }
  from "./dom.js";
import { api, may } from "./session.js";

const COLUMNS = ["Receiver", "List", "Reason", "Since", "By", "Why", "Actions"];

// What an entry stops: one list's mail (an unsubscribe), or everything of its channel.
function scope(entry) {
  if (entry.list) return entry.list;
  return entry.channel === "sms" ? "every SMS" : "every email";
}

// A receiver may have an entry for everything and one per list: each row its own key.
function key(entry) {
  return entry.list ? `${entry.receiver}#${entry.list}` : entry.receiver;
}

function path(receiver) {
  return `/suppressions/${encodeURIComponent(receiver)}`;
}

export async function showSuppressions(params, setView) {
  document.title = "Suppressions: VDQ console";
  const h = heading("Suppression list");
  if (!may("suppressions")) {
    $("main").append(el("p", { text: "Your groups do not allow reading the suppression "
      + "list." }));
    setView(null);
    return;
  }
  const wanted = params.get("receiver") || "";
  const find = el("form", { class: "filters", role: "search", "aria-label": "Find a receiver",
    id: "suppression-find" },
    el("label", {}, "Receiver", el("input", { name: "receiver", id: "suppression-receiver",
      type: "search", value: wanted, autocomplete: "off", spellcheck: "false" })),
    el("label", {}, "Channel", el("select", { name: "channel", id: "suppression-channel" },
      [["", "any"], ["email", "email"], ["sms", "sms"]].map(([v, label]) => el("option",
        { value: v, selected: v === (params.get("channel") || "") }, label)))),
    el("button", { type: "submit", class: "primary" }, "Find"));
  find.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const [k, v] of new FormData(find)) if (String(v).trim()) chosen.set(k, v.trim());
    window.location.hash = `#/suppressions?${chosen}`;
  });
  const panel = el("div", { id: "suppression-panel" });
  const tbody = el("tbody");
  const table = el("table", { class: "items", id: "suppressions" },
    el("caption", { id: "suppressions-caption" }),
    el("thead", {}, el("tr", {}, COLUMNS.map((c) => el("th", { scope: "col" }, c)))), tbody);
  const previous = el("button", { type: "button", id: "previous-page" }, "Previous page");
  const next = el("button", { type: "button", id: "next-page" }, "Next page");
  const cursors = [null];
  let index = 0;
  let drawn = 0; // the index of the page on screen
  let shown = "";

  let moving = false;

  const load = async () => {
    const asked = index;
    const page = await api("GET", "/suppressions", { query: { receiver: wanted || undefined,
      channel: params.get("channel") || undefined, limit: "25", cursor: cursors[asked] } });
    if (asked !== index) return; // the operator moved on while it was read
    const seen = JSON.stringify([index, page]);
    if (seen === shown) return;
    shown = seen;
    drawn = index;
    tbody.replaceChildren(...page.suppressions.map((entry) => row(entry, panel, load)));
    if (!page.suppressions.length) {
      tbody.append(el("tr", {}, el("td", { colspan: String(COLUMNS.length) },
        wanted ? `${wanted} is not on the suppression list.` : "The list is empty.")));
    }
    table.querySelector("caption").textContent =
      `Suppressed receivers, page ${index + 1}: ${page.suppressions.length}`;
    cursors.length = index + 1;
    if (page.cursor) cursors.push(page.cursor);
    previous.disabled = index === 0;
    next.disabled = !page.cursor;
  };
  // One move at a time, as the lists of items page (a double click moves one page). A move
  // that fails stays on the page shown: the one before, or the one asked for if the live
  // refresh read and drew it meanwhile.
  const move = (button, step) => busy(button, async () => {
    if (moving) return;
    moving = true;
    index += step;
    try {
      await load();
    } catch (error) {
      if (drawn === index) return;
      index -= step;
      throw error;
    } finally {
      moving = false;
    }
  });
  previous.addEventListener("click", () => move(previous, -1));
  next.addEventListener("click", () => move(next, 1));
  add($("main"), find, may("change_suppressions") ? addForm(load) : null, panel, table,
    el("nav", { class: "paging", "aria-label": "Pages" }, previous, next));
  setView({ kind: "suppressions", refresh: load });
  await guarded(load);
  focusHeading(h);
}

function row(entry, panel, reload) {
  const history = el("button", { type: "button", "data-key": `history-${key(entry)}`,
    "aria-label": `History of ${entry.receiver}` }, "History");
  history.addEventListener("click",
    () => guarded(() => showHistory(panel, entry.receiver, history)));
  const remove = may("change_suppressions") ? el("button", { type: "button", class: "danger",
    "data-key": `remove-${key(entry)}`,
    "aria-label": `Remove ${entry.receiver}${entry.list ? ` from ${entry.list}` : ""}…` },
  "Remove…") : null;
  if (remove) remove.addEventListener("click", () => previewRemove(panel, entry, reload, remove));
  const cells = [entry.receiver, scope(entry), entry.reason, when(entry.since), text(entry.actor),
    text(entry.text), el("span", { class: "row-actions" }, history, remove)];
  return el("tr", {}, cells.map((cell, i) => el("td", { "data-label": COLUMNS[i] }, cell)));
}

function addForm(reload) {
  const form = el("form", { class: "filters", id: "suppression-add",
    "aria-labelledby": "suppression-add-title" },
    el("h2", { id: "suppression-add-title" }, "Add a receiver"),
    el("label", {}, "Address or number", el("input", { name: "receiver", id: "add-receiver",
      required: true, autocomplete: "off", spellcheck: "false" })),
    el("label", {}, "Why", el("input", { name: "text", id: "add-text", required: true,
      maxlength: "500" })),
    el("button", { type: "submit", class: "primary", id: "add-confirm" }, "Add to the list"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("add-confirm"), async () => {
      const data = Object.fromEntries(new FormData(form));
      const answer = await api("POST", "/suppressions", { body: {
        receiver: String(data.receiver).trim(), text: String(data.text).trim() } });
      const held = answer.suppression;
      say(answer.added ? `${held.receiver} added to the suppression list.`
        : `${held.receiver} was on the list already, since ${held.since} (${held.reason}).`);
      form.reset();
      await reload();
    });
  });
  return form;
}

function previewRemove(panel, entry, reload, opener) {
  alertError(null);
  const title = el("h2", { tabindex: "-1", id: "preview-title" }, entry.list
    ? `Take ${entry.receiver} off the list "${entry.list}"'s unsubscribes?`
    : `Take ${entry.receiver} off the suppression list?`);
  const why = el("input", { id: "remove-text", required: true, maxlength: "500" });
  const form = el("form", { class: "preview", id: "remove-preview",
    "aria-labelledby": "preview-title" }, title,
    el("p", { text: (entry.list ? `VDQ will send the list "${entry.list}"'s mail to `
      + `${entry.receiver} again (unsubscribed since ` : `VDQ will send to ${entry.receiver} `
      + "again (on the list since ") + `${entry.since}: ${entry.reason}). Items cancelled `
      + "meanwhile stay cancelled." }),
    el("label", { for: "remove-text" }, "Why (kept in its history)"), why,
    el("div", { class: "preview-buttons" },
      el("button", { type: "submit", class: "danger primary", id: "confirm-remove" },
        "Remove from the list"),
      el("button", { type: "button", id: "preview-back",
        on: { click: () => { panel.replaceChildren(); refocus(opener); } } }, "Back")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("confirm-remove"), async () => {
      await api("DELETE", path(entry.receiver), { query: { text: why.value.trim(),
        list: entry.list || undefined } });
      panel.replaceChildren();
      say(entry.list ? `${entry.receiver} removed from the unsubscribes of "${entry.list}".`
        : `${entry.receiver} removed from the suppression list.`);
      await reload();
      if (panel.isConnected) refocus(opener); // its row gone: the heading (the page still shown)
    });
  });
  panel.replaceChildren(form);
  title.focus();
}

async function showHistory(panel, receiver, opener) {
  const answer = await api("GET", `${path(receiver)}/history`);
  const title = el("h2", { tabindex: "-1", id: "history-title" }, `History of ${receiver}`);
  const now = answer.suppression;
  // Unsubscribed from a list but not suppressed: "Not suppressed now." alone would read as
  // if nothing stopped its mail (as `vdq suppressions show` says it).
  const lists = answer.lists || [];
  const nowhere = lists.length ? "Not suppressed from all its mail." : "Not suppressed now.";
  panel.replaceChildren(el("section", { class: "preview", "aria-labelledby": "history-title",
    id: "suppression-history" }, title,
  el("p", { id: "history-now", text: now ? `Suppressed since ${now.since} (${now.reason}).`
    : nowhere }),
  lists.length ? el("ul", { id: "history-lists", "aria-label": "Lists unsubscribed from" },
    lists.map((l) => el("li", { text: `Unsubscribed from the list "${l.list}" since `
      + `${l.since} (${l.reason}).` }))) : null,
  el("ol", { class: "timeline" }, answer.history.map((e) => el("li", {},
    el("time", { class: "when", datetime: e.at }, e.at),
    el("span", { class: "what" }, `${e.action}${e.reason ? ` (${e.reason})` : ""}`
      + (e.list ? ` for the list "${e.list}"` : "")),
    ` by ${text(e.actor)}`, e.text ? el("span", { class: "text" }, e.text) : null))),
  el("button", { type: "button",
    on: { click: () => { panel.replaceChildren(); refocus(opener); } } }, "Close")));
  title.focus();
}
