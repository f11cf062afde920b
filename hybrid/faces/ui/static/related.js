// The "Related notes" panel of a hit: the notes most related to the hit's note, each with why
// (POST /ui/api/related). Note text is untrusted: every piece is set with textContent.
"use strict";

import { el, api, fmt, SignedOut } from "./common.js";

// A button for the hit's actions and the panel it fills (closed until asked; loaded once).
export function relatedParts(h, id) {
  const panel = el("section", { class: "related", id: `${id}-related`, hidden: true,
                                "aria-label": `Notes related to ${h.title || h.path}` });
  const button = el("button", {
    type: "button", class: "related-toggle", "aria-expanded": "false", "aria-controls": panel.id,
    text: "Related notes", onclick: () => toggle(h, button, panel),
  });
  return { button, panel };
}

async function toggle(h, button, panel) {
  const open = button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", String(open));
  panel.hidden = !open;
  if (!open || panel.dataset.loaded) return;
  panel.replaceChildren(el("p", { class: "more", text: "Finding related notes…" }));
  try {
    const r = await api("/ui/api/related", { note: h.path, vault: h.vault, top_k: 8 });
    panel.dataset.loaded = "1";
    panel.replaceChildren(render(r));
  } catch (err) {
    if (err instanceof SignedOut) throw err;
    panel.replaceChildren(el("p", { class: "error", role: "alert", text: err.message }));
  }
}

function render(r) {
  const head = el("h4", { text: r.meaning ? "Related notes" : "Related notes (links and tags only: not embedded)" });
  if (!r.notes.length) return el("div", {}, head, el("p", { class: "more", text: "No related notes found." }));
  const list = el("ol", { class: "related-list" });
  for (const n of r.notes) {
    list.append(el("li", { "data-citation": n.citation },
      el("strong", { text: n.title || n.path }),
      el("span", { class: "conf", text: ` ${fmt(n.score, 3)}` }),
      el("div", {}, el("code", { text: n.citation })),
      el("ul", { class: "why", "aria-label": "Why it is related" },
        ...n.why.map((w) => el("li", { text: w }))),
      n.snippet ? el("p", { class: "more-snippet", text: n.snippet }) : null));
  }
  return el("div", {}, head, list);
}
