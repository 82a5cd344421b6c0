// DOM helpers of the console: every value reaches the page as text, never as markup.

export function el(tag, attrs = {}, ...children) {
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

// ``node``'s children replaced by ``children`` (lists flattened; null, undefined and false left
// out: the DOM's own replaceChildren and append would write them as the text "null").
export function put(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined
    && c !== false));
}

export function add(node, ...children) {
  node.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined
    && c !== false));
}

export function $(id) {
  return document.getElementById(id);
}

// A value as plain text: an object as "key: value" lines (null fields left out), a list one
// entry a line, nothing as a dash. Never the word "null".
export function text(value) {
  if (value === null || value === undefined || value === "") return "—";
  if (Array.isArray(value)) return value.length ? value.map(text).join("\n") : "(none)";
  if (typeof value === "object") {
    const lines = Object.entries(value).filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => `${k}: ${text(v)}`);
    return lines.length ? lines.join("\n") : "—";
  }
  return String(value);
}

// A time for a list: to the second, in UTC, the exact value in the datetime attribute.
export function when(iso) {
  if (!iso) return "—";
  const short = String(iso).replace("T", " ").replace(/\.\d+Z$/, "Z");
  return el("time", { datetime: iso, title: iso }, short);
}

export function say(message) {
  $("status").textContent = message;
}

// What a refusal means, in the words of the API's reference: a field to correct or an item
// that is not there is not "something went wrong".
const TITLES = { 400: "Bad request", 403: "Not allowed", 404: "Not found",
  409: "Not possible now", 413: "Too large", 422: "Invalid input", 429: "Too many requests" };

export function alertError(error) {
  const box = $("alert");
  box.replaceChildren();
  if (!error) return;
  const status = error.status ? ` (${error.status}${error.code ? " " + error.code : ""})` : "";
  const title = TITLES[error.status] || "Something went wrong";
  box.append(el("strong", { text: `${title}${status}: ` }), String(error.message || error));
}

// The start of an item's subject or body, or what it is when it has neither: an MMS of media
// alone (no text, no segments) is not content lost.
export function excerpt(item) {
  if (mediaOnly(item)) return MEDIA_ONLY;
  return text(item.excerpt);
}

const MEDIA_ONLY = "(media only)";

function mediaOnly(item) {
  return !item.excerpt && item.method === "sms" && item.segments === 0;
}

// What the item page shows of an item's content: an MMS of media alone says so where its body
// would be, not a dash.
export function shownContent(item, content) {
  const shown = { ...(content || {}) };
  if (mediaOnly(item) && !shown.body) shown.body = MEDIA_ONLY;
  return shown;
}

export function who(item) {
  const r = item.receiver || {};
  return r.email || r.cell || "";
}

export function from(item) {
  const s = item.sender || {};
  return s.email || s.cell || s.messaging_service_sid || "";
}

// What a list marks beside an item's state (the API's signals), in words a reader knows.
const SIGNALS = { bounce: "bounced", complaint: "complaint", reject: "rejected", stop: "STOP",
  suppressed: "suppressed" };

export function badges(item) {
  const held = item.held ? [el("span", { class: "badge badge-held", title: item.held },
    "held")] : [];
  return [...held, ...(item.signals || []).map((s) => el("span", { class: `badge badge-${s}` },
    SIGNALS[s] || s))];
}

export function stateCell(item) {
  return el("span", { class: "state-cell" },
    el("span", { class: `state state-${item.state}` }, item.state), badges(item));
}

// An item's result as an operator should read it: a cancelled item was stopped by VDQ or an
// operator, whatever a provider reported afterwards about an earlier attempt; a queued item
// with a send_at waits for it (not stuck: a retry after it clears send_at), unless the reputation guard
// parked it: then it waits for its producer's release, whatever time it was scheduled for.
export function resultText(item) {
  const result = item.result || "";
  if (item.state === "queued" && item.send_at && !result && !item.held) {
    return `Scheduled: sends at ${String(item.send_at).slice(0, 19)}Z`;
  }
  if (item.state !== "cancelled") return result || "—";
  // VDQ's own words of why it was not sent (a suppression, the guard's cancel of a parked item).
  if (result.startsWith("not sent") || result.startsWith("cancelled while")) return result;
  if (!result) return "Cancelled: not sent.";
  return `Cancelled: not sent again. A provider result of an earlier attempt: ${result}`;
}

// The keyboard's place once a panel closes (a preview done or left, a history closed): back on
// what opened it, found again by its id or data-key if a refresh drew it anew, else on the
// page's heading. Left on a removed element, the focus would be on nothing and the next Tab
// would start again at the top of the page.
export function refocus(opener) {
  let again = opener && opener !== document.body && opener.isConnected ? opener : null;
  if (!again && opener && opener.id) again = $(opener.id);
  if (!again && opener && opener.dataset && opener.dataset.key) {
    again = document.querySelector(`[data-key="${CSS.escape(opener.dataset.key)}"]`);
  }
  (again || $("main").querySelector("h1")).focus();
}

let focusAtDraw = null; // where the focus was when the page was last drawn anew

export function heading(label) {
  const h = el("h1", { tabindex: "-1", text: label });
  $("main").replaceChildren(h);
  focusAtDraw = document.activeElement;
  return h;
}

// The page's heading takes the focus once the page is read, unless the user has put it
// elsewhere meanwhile: on a slow API, an operator who went straight to the search box would
// lose the rest of what they typed.
export function focusHeading(h) {
  const now = document.activeElement;
  if (h.isConnected && (!now || now === document.body || now === focusAtDraw)) h.focus();
}

export async function guarded(work) {
  try {
    await work();
  } catch (error) {
    if (error.status !== 401) alertError(error);
  }
}

// A button's work, once at a time: from the click until the API has answered, a double click
// or a second press does nothing more (a resend pressed twice would send two copies; a retry
// pressed twice, refuse the second as a conflict). aria-disabled, not disabled: a disabled
// button loses the keyboard's focus. A failure is shown as ``guarded`` shows it, and the
// button works again.
export async function busy(button, work) {
  if (button.getAttribute("aria-disabled") === "true") return;
  button.setAttribute("aria-disabled", "true");
  try {
    await guarded(work);
  } finally {
    button.removeAttribute("aria-disabled");
  }
}
