// The item view: an item, its content, attachments and history, and the operator's actions
// on it (transitions and resend, each previewed as a dry run first).

import {
  $, alertError, badges, busy, el, excerpt, focusHeading, guarded, heading, put, refocus,
  resultText, say, shownContent, text, who,
} from "./dom.js";
import { api, config, may } from "./session.js";

// Where a suppressed receiver is: what an answer's ``suppressed`` entry says of it.
function suppressedWhere(held) {
  return held.list ? `unsubscribed from the list "${held.list}"` : "on the suppression list";
}

// ``items``: the items to resend, each named in the preview by whom it goes to and what it is.
export function previewResend(box, items, done) {
  alertError(null);
  const ids = items.map((item) => item.id);
  const opener = document.activeElement;
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
    el("ul", {}, items.map((item) => el("li", {},
      `${item.id}: to ${who(item) || "—"}, ${excerpt(item)}`))),
    el("div", { class: "preview-buttons" }, confirm, back)));
  title.focus();
  back.addEventListener("click", () => { box.replaceChildren(); refocus(opener); });
  // One key for this preview: a press again after an answer that was lost on its way (the
  // network, a timeout) gets the first press's copies, not new ones.
  const key = `console-resend-${crypto.randomUUID()}`;
  confirm.addEventListener("click", () => busy(confirm, async () => {
    const answer = ids.length === 1
      ? await api("POST", `/sent-items/${encodeURIComponent(ids[0])}/resend`, { key })
      : await api("POST", "/sent-items/resend", { body: { ids }, key });
    // The focus on what was done, the copies' links next.
    const result = el("p", { class: "preview", tabindex: "-1", id: "resend-result" },
      "Resent as ", answer.items.map((item, i) => [i ? ", " : "",
        el("a", { href: `#/item/${encodeURIComponent(item.id)}` }, item.id)]));
    // A receiver suppressed since its original was sent: its copy is queued all the same and
    // ends cancelled, unsent (the answer names it as an enqueue's does).
    const held = answer.suppressed || [];
    box.replaceChildren(result, held.length ? el("ul", { class: "warning",
      id: "resend-suppressed", "aria-label": "Receivers suppressed since" },
    held.map((s) => el("li", { text: `${s.receiver} is ${suppressedWhere(s)} since `
      + `${s.since} (${s.reason}): its copy will be cancelled, unsent.` }))) : null);
    result.focus();
    say(`Resent ${answer.items.length} item(s)`
      + (held.length ? `; ${held.length} to a suppressed receiver: cancelled, unsent.` : "."));
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

// The policy of the email's rendered HTML, on top of the console's own (which the frame
// inherits): nothing runs, nothing is fetched from elsewhere, its links lead nowhere.
const FRAME_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'";

function htmlViews(html) {
  const page = `<!doctype html><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" `
    + `content="${FRAME_POLICY}"><base target="_self">${html}`;
  const frame = el("iframe", { id: "html-rendered", class: "rendered", sandbox: "",
    referrerpolicy: "no-referrer",
    title: "The email's HTML as it renders, without scripts or remote content" });
  frame.setAttribute("srcdoc", page);
  return el("div", { class: "html-views" },
    el("section", { "aria-labelledby": "html-rendered-title" },
      el("h3", { id: "html-rendered-title" }, "HTML, rendered"), frame,
      el("p", { class: "note", text: "Shown without running its scripts, without its styles "
        + "and without remote images (a tracking pixel is not loaded)." })),
    el("section", { "aria-labelledby": "html-source-title" },
      el("h3", { id: "html-source-title" }, "HTML source"),
      el("pre", { id: "html-source", class: "source", tabindex: "0",
        "aria-labelledby": "html-source-title" }, html)));
}

function contentViews(item, content) {
  const { html, ...rest } = shownContent(item, content);
  return [fieldTable("What is sent", "content", rest), html ? htmlViews(html) : null];
}

// What an entry did: a change of state, or an event that kept it. A late or ignored entry says
// so: a late delivery belongs to the attempt it names, not to the item's current one.
function change(entry) {
  const marked = entry.kind === "late" || entry.kind === "ignored";
  const name = `${entry.name || entry.kind || "entry"}${marked ? ` (${entry.kind})` : ""}`;
  if (entry.from_state && entry.to_state && entry.from_state !== entry.to_state) {
    return `${name}: ${entry.from_state} → ${entry.to_state}`;
  }
  if (!entry.from_state && entry.to_state && entry.to_state !== name) {
    return `${name}: ${entry.to_state}`;
  }
  return name;
}

function timeline(history) {
  return el("ol", { class: "timeline", id: "timeline", "aria-label": "History, oldest first",
    tabindex: "-1" },
    history.map((entry) => el("li", {},
      el("time", { class: "when", datetime: entry.at }, text(entry.at)),
      el("span", { class: "what" }, change(entry)),
      ` by ${text(entry.actor)} (${text(entry.source)})`,
      entry.attempt === null || entry.attempt === undefined ? "" : `, attempt ${entry.attempt}`,
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
  // ``quiet``: the reload after the operator's own action, which says what it did itself.
  const draw = (next, quiet = false) => {
    state = next;
    const { item, pages } = next;
    const history = pages.flatMap((page) => page.entries);
    const more = pages.at(-1).next;
    const seen = JSON.stringify([item, history, more]);
    if (seen === shown) return;
    const first = shown === "";
    const hadFocus = document.activeElement && document.activeElement.id === "history-more";
    shown = seen;
    const { content, attachments, history: _h, history_cursor: _c, signals: _s,
      ...fields } = item;
    fields.result = resultText(item);
    fields.excerpt = excerpt(item);
    const moreButton = more ? el("button", { type: "button", id: "history-more",
      on: { click: (event) => busy(event.currentTarget, showMore) } }, "Show more history")
      : null;
    put(body,
      el("p", { class: "signals", id: "item-signals" }, badges(item)),
      el("h2", {}, "Fields"), fieldTable("The item", "fields", fields),
      el("h2", {}, "Content"), contentViews(item, content),
      el("h2", {}, "Attachments"), attachmentList(attachments || []),
      el("h2", {}, "History"), timeline(history),
      more ? el("p", { text: `The first ${history.length} entries; there are more.` }) : null,
      moreButton);
    drawActions(actions, preview, item, () => load(true));
    if (hadFocus) (moreButton || $("timeline")).focus(); // the button gone: where it led
    if (!first && !quiet) say(`Item ${item.id} updated: ${item.state}.`);
    // A transition's preview is its dry run from the state it was made in: once the item has
    // moved on (another operator, the worker), it would only be refused. (Not while its own
    // confirm is out: that is the move.)
    const stale = preview.querySelector("[data-from-state]");
    if (stale && stale.dataset.fromState !== item.state
        && !stale.querySelector("[aria-disabled='true']")) {
      const focused = preview.contains(document.activeElement);
      preview.replaceChildren();
      say(`Item ${item.id} is now ${item.state}: the preview no longer applies.`);
      if (focused) refocus(actions.querySelector("button"));
    }
  };
  const load = async (quiet = false) => draw(await loadItem(id, state), quiet);
  const showMore = async () => {
    const page = await historyPage(id, state.pages.at(-1).next);
    draw({ ...state, pages: [...state.pages, page] });
  };
  setView({ kind: "item", refresh: load });
  await guarded(load);
  focusHeading(h);
}

function drawActions(box, preview, item, reload) {
  const buttons = [];
  for (const name of ["retry", "cancel"]) {
    // Only from the states the API takes it from: a Retry of a queued or awaiting item, or a
    // Cancel of one being sent, would only be refused.
    if (!config.transitions[name].includes(item.state) || !may(name)) continue;
    const label = name === "retry" ? "Retry…" : "Cancel item…";
    buttons.push(el("button", { type: "button", id: `action-${name}`,
      class: name === "cancel" ? "danger" : "",
      on: { click: (event) => busy(event.currentTarget,
        () => previewTransition(preview, item, name, reload)) } }, label));
  }
  if (may("resend") && config.states.sent.includes(item.state)) {
    buttons.push(el("button", { type: "button", id: "action-resend",
      on: { click: () => previewResend(preview, [item], reload) } }, "Resend…"));
  }
  box.replaceChildren(...buttons);
}

async function previewTransition(box, item, name, reload) {
  box.replaceChildren();
  const path = `/queue-items/${encodeURIComponent(item.id)}/transitions/${name}`;
  const dry = await api("POST", path, { query: { dry_run: "true" } });
  const title = el("h2", { tabindex: "-1", id: "preview-title" },
    `${name === "retry" ? "Retry" : "Cancel"} this item?`);
  // A retry before the item's send_at keeps it waiting for it (the API clears a passed one).
  const sendAt = (dry.item || item).send_at;
  const waits = name === "retry" && sendAt && Date.parse(sendAt) > Date.now();
  const until = waits ? ` and wait for its send_at ${String(sendAt).replace("T", " ")
    .replace(/\.\d+Z$/, "Z")}: sent then, not now` : "";
  const confirm = el("button", { type: "button", class: name === "cancel" ? "danger primary"
    : "primary", id: `confirm-${name}` },
  name === "retry" ? (waits ? "Retry for its send time" : "Retry now") : "Cancel the item");
  const back = el("button", { type: "button", id: "preview-back" }, "Back");
  const held = dry.suppressed;
  const warning = held ? el("p", { id: "preview-suppressed", class: "warning", text:
    `${held.receiver} is ${suppressedWhere(held)} since ${held.since} (${held.reason}): the `
    + "retry would be cancelled at once, without sending. Take it off the list first to "
    + "send it." }) : null;
  box.replaceChildren(el("section", { class: "preview", "aria-labelledby": "preview-title",
    "data-from-state": item.state }, title,
    el("p", { id: "preview-text", text: `Dry run: the item would move from ${dry.from_state} `
      + `to ${dry.to_state}${until}. Nothing has changed yet.` }), warning,
    el("div", { class: "preview-buttons" }, confirm, back)));
  title.focus();
  back.addEventListener("click", () => { box.replaceChildren(); refocus($(`action-${name}`)); });
  confirm.addEventListener("click", () => busy(confirm, async () => {
    const done = await api("POST", path);
    box.replaceChildren();
    say(`${name === "retry" ? "Retried" : "Cancelled"}: ${done.from_state} → ${done.to_state}.`);
    await reload();
    // Unless the operator has left the page meanwhile: the focus is theirs there.
    if (box.isConnected) refocus($("item-actions").querySelector("button")); // none: the heading
  }));
}
