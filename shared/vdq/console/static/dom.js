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

export function $(id) {
  return document.getElementById(id);
}

// A value as plain text: an object as "key: value" lines, a list one entry a line.
export function text(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length ? value.map(text).join("\n") : "(none)";
  if (typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k}: ${text(v)}`).join("\n");
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

export function alertError(error) {
  const box = $("alert");
  box.replaceChildren();
  if (!error) return;
  const status = error.status ? ` (${error.status}${error.code ? " " + error.code : ""})` : "";
  const title = error.status === 403 ? "Not allowed" : error.status === 409 ? "Not possible now"
    : "Something went wrong";
  box.append(el("strong", { text: `${title}${status}: ` }), String(error.message || error));
}

export function who(item) {
  const r = item.receiver || {};
  return r.email || r.cell || "";
}

export function heading(label) {
  const h = el("h1", { tabindex: "-1", text: label });
  $("main").replaceChildren(h);
  return h;
}

export async function guarded(work) {
  try {
    await work();
  } catch (error) {
    if (error.status !== 401) alertError(error);
  }
}
