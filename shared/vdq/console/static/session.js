// The console's session: its settings (config.json), sign-in (authorization code with PKCE,
// S256), the token's claims and what they allow, and the one way to call the API. The token
// lives in sessionStorage (this tab) and travels only in the Authorization header.

const store = window.sessionStorage;
const TOKEN_KEY = "vdq.console.token";
const PKCE_KEY = "vdq.console.pkce";
const apiBase = new URL("../", window.location.href);

export let config = null; // config.json, read once by loadConfig
let sessionEnded = () => {};

export async function loadConfig() {
  const answer = await fetch("config.json", { cache: "no-store" });
  config = await answer.json();
}

// What the page does when the API says the session has ended (401).
export function onSessionEnd(handler) {
  sessionEnded = handler;
}

export function forgetToken() {
  store.removeItem(TOKEN_KEY);
}

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
export function redirectUri() {
  return window.location.origin + window.location.pathname.replace(/[^/]*$/, "");
}

export async function signIn() {
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

export async function finishSignIn(params) {
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

export function claims() {
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

export function groups(found) {
  let list = found["cognito:groups"] || [];
  if (typeof list === "string") list = list.split(",");
  const scopes = String(found.scope || "").split(" ").filter((s) => s.startsWith("vdq/"));
  return [...list, ...scopes.map((s) => s.slice(4))];
}

export function may(action) {
  const found = claims();
  if (!found) return false;
  const held = new Set(groups(found).flatMap((g) => config.permissions[g] || []));
  return (config.needs[action] || ["?"]).every((p) => held.has(p));
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, { query, body, key } = {}) {
  const url = new URL(path.replace(/^\/+/, ""), apiBase);
  if (url.origin !== apiBase.origin || !url.pathname.startsWith(apiBase.pathname)) {
    // A path from an answer that leads elsewhere: the token goes to the API only.
    throw new ApiError(0, "bad_path", `${path} is not the API's`);
  }
  for (const [k, v] of Object.entries(query || {})) if (v) url.searchParams.set(k, v);
  const headers = { Authorization: `Bearer ${store.getItem(TOKEN_KEY) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key; // the same request again gets the first's answer
  const answer = await fetch(url, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const data = answer.status === 204 ? null : await answer.json().catch(() => null);
  if (answer.status === 401) {
    sessionEnded("Your session has ended: sign in again.");
    throw new ApiError(401, "unauthorized", "your session has ended");
  }
  if (!answer.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(answer.status, error.code, error.message || answer.statusText);
  }
  return data;
}
