// The item view: an item, its content, attachments and history, and the operator's actions
// on it (transitions and resend, each previewed as a dry run first).

import { $, alertError, el, guarded, heading, say, text } from "./dom.js";
import { api, config, may } from "./session.js";

export function previewResend(box, ids, done) {
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

export async function showItem(id, setView) {
  document.title = `Item ${id}: VDQ console`;
  const h = heading(`Item ${id}`);
  if (!may("read")) {
    $("main").append(el("p", { text: "Your groups do not allow reading items." }));
    setView(null);
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
  setView({ kind: "item", refresh: load });
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
