// Lists of items (the active queue, the sent items, a search's results), page by page with
// the API's cursor, and the counts panel of the last 24 hours.

import { busy, el, excerpt, from, resultText, say, stateCell, when, who } from "./dom.js";
import { api } from "./session.js";

export const COLUMNS = ["Item", "State", "Receiver", "Sender", "Subject", "Result", "Updated"];

// A table of items with its pages. ``load(cursor)`` reads one page ({items, cursor});
// ``selectable`` adds a check box a row (the resend's selection, each item by its id, kept
// across pages). Returns the nodes to place, the refresh of the page shown, the selection and
// its clearing.
export function pagedItems({ title, load, selectable = false, empty = "No items on this page." }) {
  const pages = { cursors: [null], index: 0, items: [], selected: new Map() }; // id -> item
  const tbody = el("tbody");
  const table = el("table", { class: "items", id: "items" },
    el("caption", { id: "items-caption" }),
    el("thead", {}, el("tr", {}, selectable ? el("th", { scope: "col" }, "Select") : null,
      COLUMNS.map((c) => el("th", { scope: "col" }, c)))),
    tbody);
  const previous = el("button", { type: "button", id: "previous-page" }, "Previous page");
  const next = el("button", { type: "button", id: "next-page" }, "Next page");
  const paging = el("nav", { class: "paging", "aria-label": "Pages" }, previous, next);

  const row = (item) => {
    const cells = [
      el("a", { href: `#/item/${encodeURIComponent(item.id)}`, "data-key": `open-${item.id}` },
        item.id),
      stateCell(item), who(item), from(item), excerpt(item), resultText(item),
      when(item.updated_at),
    ];
    const box = selectable ? el("input", {
      type: "checkbox", "aria-label": `Select ${item.id} (${who(item)})`,
      "data-key": `select-${item.id}`, checked: pages.selected.has(item.id),
      on: { change: (e) => (e.target.checked ? pages.selected.set(item.id, item)
        : pages.selected.delete(item.id)) },
    }) : null;
    return el("tr", {}, box ? el("td", { "data-label": "Select" }, box) : null,
      cells.map((cell, i) => el("td", { "data-label": COLUMNS[i] }, cell)));
  };

  const draw = (page) => {
    const seen = JSON.stringify([pages.index, page]);
    if (seen === pages.shown) return; // unchanged: the rows (and what has focus) stay
    const changed = pages.shown !== undefined && pages.index === pages.drawnIndex;
    pages.shown = seen;
    pages.drawnIndex = pages.index;
    const active = document.activeElement;
    const focused = active && active.dataset.key;
    const ring = focused && (active.matches(":focus-visible")
      || active.classList.contains("focus-ring"));
    pages.items = page.items;
    tbody.replaceChildren(...page.items.map(row));
    if (!page.items.length) {
      tbody.append(el("tr", {}, el("td", { colspan: String(COLUMNS.length + 1) },
        page.cursor ? "None on this page: the search stopped at its read limit. Try the next "
          + "page." : empty)));
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
      if (again) {
        // As the keyboard left it: the row is new, so the browser, not knowing the keyboard
        // put the focus there, would draw no ring; the class draws it until the focus moves.
        again.focus();
        if (ring) {
          again.classList.add("focus-ring");
          again.addEventListener("blur", () => again.classList.remove("focus-ring"),
            { once: true });
        }
      }
    }
  };
  // A page is drawn only while it is still the page asked for: a live refresh that was out
  // when the operator moved on draws nothing.
  const refresh = async () => {
    const index = pages.index;
    const page = await load(pages.cursors[index]);
    if (index === pages.index) draw(page);
  };
  // One move at a time: a second click before the page is read (a double click) does
  // nothing, else it would ask for a page whose cursor is not known yet. A move that fails
  // stays on the page shown: the one before, or the one asked for if the live refresh read
  // and drew it meanwhile (the move is done then).
  const move = (button, step) => busy(button, async () => {
    if (pages.moving) return;
    pages.moving = true;
    pages.index += step;
    try {
      await refresh();
    } catch (error) {
      if (pages.drawnIndex === pages.index) return;
      pages.index -= step;
      throw error;
    } finally {
      pages.moving = false;
    }
  });
  previous.addEventListener("click", () => move(previous, -1));
  next.addEventListener("click", () => move(next, 1));
  // The selection used (resent): no row stays ticked, whether the page is drawn again or not.
  const unselect = () => {
    pages.selected.clear();
    for (const box of tbody.querySelectorAll("input[type=checkbox]")) box.checked = false;
  };
  return { nodes: [table, paging], refresh, selected: pages.selected, unselect };
}

// ---- Counts ----------------------------------------------------------------------------------

const TILES = [["sent", "Sent"], ["delivered", "Delivered"], ["bounced", "Bounced"],
  ["complained", "Complaints"], ["errored", "Errored"], ["unconfirmed", "Unconfirmed"],
  ["cancelled", "Cancelled"]];

// The last 24 hours in tiles (both methods together, each method's share beside), as the
// dashboard of a sending service opens. ``hourly`` adds the table of each hour.
export function countsPanel({ hourly = false } = {}) {
  const tiles = el("dl", { class: "tiles", id: "count-tiles" });
  const note = el("p", { class: "note", id: "counts-note" });
  const hours = hourly ? el("div", { id: "count-hours" }) : null;
  const section = el("section", { class: "counts", "aria-labelledby": "counts-title" },
    el("h2", { id: "counts-title" }, "Last 24 hours"), tiles, note, hours);
  let shown = "";
  const refresh = async () => {
    const stats = await api("GET", "/stats", { query: { period: "hours" } });
    const seen = JSON.stringify(stats.totals) + JSON.stringify(stats.buckets);
    if (seen === shown) return;
    shown = seen;
    const methods = Object.keys(stats.totals);
    tiles.replaceChildren(...TILES.map(([key, label]) => {
      const total = methods.reduce((n, m) => n + stats.totals[m][key], 0);
      const parts = methods.map((m) => `${m} ${stats.totals[m][key]}`).join(", ");
      return el("div", { class: `tile tile-${key}`, "data-tile": key },
        el("dt", {}, label), el("dd", {}, el("span", { class: "count" }, String(total)),
          el("span", { class: "split" }, parts)));
    }));
    note.textContent = `Counted from the table's stream: a count follows what happened by up `
      + `to ${stats.lag_seconds} seconds. An item counts each time it enters a state (retried `
      + `and errored again, twice). Hours in UTC.`;
    if (hours) hours.replaceChildren(hourTable(stats));
  };
  return { node: section, refresh };
}

// An hour as its row names it: HH:MM today (UTC, as the read's as_of), and with its date
// before, else yesterday's hours would read as today's.
function hourLabel(start, today) {
  const hour = start.slice(11, 16);
  return start.slice(0, 10) === today ? hour : `${start.slice(0, 10)} ${hour}`;
}

function hourTable(stats) {
  const methods = Object.keys(stats.totals);
  const today = String(stats.as_of).slice(0, 10);
  const rows = stats.buckets.slice().reverse().map((bucket) => el("tr", {},
    el("th", { scope: "row" }, el("time", { datetime: bucket.start },
      hourLabel(bucket.start, today))),
    TILES.map(([key]) => el("td", {}, String(methods.reduce((n, m) => n + bucket[m][key], 0))))));
  return el("table", { class: "hours", id: "hours" },
    el("caption", {}, "Each hour of the last 24, newest first (email and SMS together)"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Hour (UTC)"),
      TILES.map(([, label]) => el("th", { scope: "col" }, label)))),
    el("tbody", {}, rows));
}
