// Shared by the page's modules: building elements, calling the server, formatting.
"use strict";

export const $ = (id) => document.getElementById(id);

// what a call answered 401 to does (app.js sets it: show the sign-in screen)
export const handlers = { signedOut: () => {} };

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

export class SignedOut extends Error {}

export async function api(path, body, signal) {
  const init = body === undefined ? { signal } : {
    method: "POST", signal, body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" },
  };
  const resp = await fetch(path, { credentials: "same-origin", ...init });
  let data = null;
  try { data = await resp.json(); } catch { data = null; }
  if (resp.status === 401 && path !== "/ui/login") throw new SignedOut();
  if (!resp.ok) throw new Error((data && data.error) || `the server answered ${resp.status}`);
  return data;
}

export function fmt(x, digits = 4) {
  if (x === null || x === undefined) return "–";
  return Number(x).toPrecision(digits).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
}

export function ago(iso) {
  if (!iso) return "never";
  const s = (Date.now() - new Date(iso).getTime()) / 1000;
  if (!isFinite(s)) return iso;
  if (s < 90) return "just now";
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

// Run fn; a 401 anywhere in it shows the sign-in screen, an aborted fetch is no error.
export function guard(fn) {
  return async (...args) => {
    try { return await fn(...args); } catch (err) {
      if (err instanceof SignedOut) return handlers.signedOut();
      if (err.name === "AbortError") return undefined;
      throw err;
    }
  };
}
