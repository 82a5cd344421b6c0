// The reputation guard: each producer's bounce and complaint rates against the thresholds it is
// held to, the account's and SES's own; a held producer's parked items, and (for those allowed)
// the release or the cancel of what a hold parked.

import {
  $, add, alertError, busy, el, excerpt, focusHeading, guarded, heading, refocus, say, stateCell,
  when, who,
} from "./dom.js";
import { api, may } from "./session.js";

const COLUMNS = ["Producer", "Sent", "Bounced", "Complained", "Bounce rate", "Complaint rate",
  "Level", "Actions"];

function path(producer, what) {
  return `/producers/${encodeURIComponent(producer)}/${what}`;
}

function rate(value, digits, threshold) {
  const shown = value === null || value === undefined ? "—" : `${value.toFixed(digits)}%`;
  return `${shown} (holds at ${threshold}%)`;
}

function level(row) {
  const recorded = row.level ? row.level.level : "ok";
  const volume = row.rates_count ? row.judged : `${row.judged}, low volume`;
  const judged = row.watched ? `${volume}, watched` : volume;
  return el("span", { class: `level-${recorded}`, title: row.reason },
    recorded === judged ? recorded : `${recorded} (now ${judged})`);
}

export async function showProducers(params, setView) {
  document.title = "Producers: VDQ console";
  const h = heading("Producers");
  if (!may("list")) {
    $("main").append(el("p", { text: "Your groups do not allow reading the producers." }));
    setView(null);
    return;
  }
  const intro = el("p", { id: "producers-intro" });
  const ses = el("p", { id: "producers-ses" });
  const panel = el("div", { id: "held-panel" });
  const tbody = el("tbody");
  const table = el("table", { class: "items", id: "producers" },
    el("caption", { id: "producers-caption" }),
    el("thead", {}, el("tr", {}, COLUMNS.map((c) => el("th", { scope: "col" }, c)))), tbody);
  let shown = "";
  let known = new Set(); // the producers the last read found items parked for

  const load = async () => {
    const data = await api("GET", "/producers");
    // Each row says whether items are parked, whatever the level: a release cut short (its
    // answer said `more`) leaves some, and new rates may then move the level on to a warning
    // or back to ok. A row whose flag the API could not read (null) stays as the last read
    // found it; the rates are shown all the same.
    const parked = new Set(data.producers.filter((row) => row.parked === true
      || (row.parked === null && known.has(row.producer))).map((row) => row.producer));
    known = parked;
    const seen = JSON.stringify(data.producers.concat([data.account, data.ses, [...parked]]));
    if (seen === shown) return;
    shown = seen;
    intro.textContent = `Bounce and complaint rates per email sent over the last `
      + `${data.window_hours} hours, against each producer's thresholds (guard: ${data.guard}). `
      + "SES reviews an account at 5% bounces or 0.1% complaints and may pause it at 10% or 0.5%.";
    ses.textContent = data.ses.available
      ? `SES's own figures for the account: bounce rate ${data.ses.bounce_rate}%, complaint `
        + `rate ${data.ses.complaint_rate}%.`
      : `SES's own figures: not available (${data.ses.why}).`;
    tbody.replaceChildren(...data.producers.map((row) => producerRow(row, panel, load, false,
      parked.has(row.producer))), producerRow(data.account, panel, load, true, false));
    table.querySelector("caption").textContent =
      `Producers: ${data.producers.length}, and the whole account`;
  };
  add($("main"), intro, ses, table, panel);
  setView({ kind: "producers", refresh: load });
  await guarded(load);
  const wanted = params.get("held");
  if (wanted) await guarded(() => showHeld(panel, wanted, load));
  focusHeading(h);
}

// account: the whole account's row (its name may also be a producer's: the row says which).
// parked: items are parked, whatever the level (a release cut short): released again, they
// are sent; the held items' panel cancels them instead.
function producerRow(row, panel, reload, account, parked) {
  const name = row.producer;
  const recorded = row.level ? row.level.level : "ok";
  const actions = [];
  if (!account && (recorded === "hold" || recorded === "released" || parked)) {
    actions.push(el("button", { type: "button", "data-key": `held-${name}`,
      "aria-label": `Held items of ${name}`,
      on: { click: () => guarded(() => showHeld(panel, name, reload)) } }, "Held items"));
  }
  if (!account && (recorded === "hold" || parked) && may("release_hold")) {
    actions.push(el("button", { type: "button", class: "primary", "data-key": `release-${name}`,
      "aria-label": `Release ${name}…`, on: { click: () => confirmWork(panel, name, "release",
        reload, recorded !== "hold") } }, "Release…"));
  }
  const t = row.thresholds;
  const cells = [account ? "the whole account" : name, String(row.sent), String(row.bounced),
    String(row.complained), rate(row.bounce_rate, 2, t.bounce_hold),
    rate(row.complaint_rate, 3, t.complaint_hold), level(row),
    el("span", { class: "row-actions" }, ...actions)];
  return el("tr", {}, cells.map((cell, i) => el("td", { "data-label": COLUMNS[i] }, cell)));
}

async function showHeld(panel, producer, reload) {
  const opener = document.activeElement;
  const answer = await api("GET", path(producer, "held"), { query: { limit: "50" } });
  const title = el("h2", { tabindex: "-1", id: "held-title" }, `Held items of ${producer}`);
  const rows = answer.items.map((item) => el("tr", {},
    el("td", { "data-label": "Item" }, el("a", { href: `#/item/${encodeURIComponent(item.id)}`,
      "data-key": `open-${item.id}` }, item.id)),
    el("td", { "data-label": "State" }, stateCell(item)),
    el("td", { "data-label": "To" }, who(item)),
    el("td", { "data-label": "Subject" }, excerpt(item)),
    el("td", { "data-label": "Queued" }, when(item.queued_at))));
  const buttons = [];
  if (answer.items.length && may("cancel_held")) {
    buttons.push(el("button", { type: "button", class: "danger", id: "cancel-held",
      on: { click: () => confirmWork(panel, producer, "cancel", reload) } }, "Cancel held…"));
  }
  panel.replaceChildren(el("section", { class: "preview", "aria-labelledby": "held-title",
    id: "held-items" }, title,
  answer.items.length ? el("table", { class: "items", id: "held" },
    el("caption", {}, `Parked: ${answer.items.length}${answer.after ? " (first page)" : ""}`),
    el("thead", {}, el("tr", {}, ["Item", "State", "To", "Subject", "Queued"].map((c) =>
      el("th", { scope: "col" }, c)))), el("tbody", {}, ...rows))
    : el("p", { text: "Nothing is parked." }),
  el("div", { class: "preview-buttons" }, ...buttons,
    el("button", { type: "button",
      on: { click: () => { panel.replaceChildren(); refocus(opener); } } }, "Close"))));
  title.focus();
}

// again: a release of a producer no longer held, whose release was cut short.
function confirmWork(panel, producer, work, reload, again = false) {
  alertError(null);
  const opener = document.activeElement;
  const release = work === "release";
  const title = el("h2", { tabindex: "-1", id: "confirm-title" },
    release ? `Release ${producer}?` : `Cancel what ${producer}'s hold parked?`);
  let said = "Each parked item is cancelled, unsent. The hold stays until a release.";
  if (release) {
    said = again ? "Its hold is released, and its release was cut short: each item still "
      + "parked is sent in its lane at the provider's rate."
      : "Its new email is sent again, and each parked item is sent in its lane at the "
        + "provider's rate. Its rates count again from now.";
  }
  const form = el("form", { class: "preview", id: "confirm-work",
    "aria-labelledby": "confirm-title" }, title,
  el("p", { text: said }),
  el("div", { class: "preview-buttons" },
    el("button", { type: "submit", class: release ? "primary" : "danger primary",
      id: "confirm-go" }, release ? "Release" : "Cancel the held items"),
    el("button", { type: "button", id: "confirm-back",
      on: { click: () => { panel.replaceChildren(); refocus(opener); } } }, "Back")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy($("confirm-go"), async () => {
      const answer = await api("POST", path(producer, release ? "release" : "cancel-held"));
      panel.replaceChildren();
      say(`${producer}: ${answer.done} parked items ${release ? "sent again" : "cancelled"}`
        + (answer.more ? "; more are parked: do it again." : "."));
      await reload();
      // Drawn anew by the reload (by its data-key), or gone: the heading; unless the operator
      // has left the page meanwhile (the focus is theirs there).
      if (panel.isConnected) refocus(opener);
    });
  });
  panel.replaceChildren(form);
  title.focus();
}
