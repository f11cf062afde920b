// The tag review panel (in the Status view): the tags waiting for review, accepted or rejected
// one by one. An accept writes the note's front block on the server (refused when the file
// changed since the suggestion) and re-indexes its vault.
"use strict";

import { $, el, api, guard, SignedOut } from "./common.js";

const load = guard(async () => {
  let data;
  try { data = await api("/ui/api/tags"); } catch (err) {
    if (err instanceof SignedOut) throw err;
    $("tags-error").textContent = err.message;
    return;
  }
  render(data);
});

function render(data) {
  $("tags-error").textContent = "";
  const notes = data.notes || [];
  $("tags-list").replaceChildren(...notes.map(noteRow));
  $("tags-empty").hidden = notes.length > 0;
}

function noteRow(n) {
  const list = el("ul", { class: "tag-list" });
  for (const s of n.pending) {
    const act = (what) => guard(async () => {
      try { render(await api(`/ui/api/tags/${what}`, { vault: n.vault, note: n.path, tags: [s.tag] })); } catch (err) {
        if (err instanceof SignedOut) throw err;
        $("tags-error").textContent = err.message;
      }
    });
    list.append(el("li", {},
      el("code", { text: s.tag + (s.new ? " (new)" : "") }), " ",
      el("span", { class: "hint", text: `${s.by}: ${s.why}` }), " ",
      el("button", { type: "button", class: "tag-accept", text: "Accept", onclick: act("accept") }), " ",
      el("button", { type: "button", class: "tag-reject", text: "Reject", onclick: act("reject") })));
  }
  return el("li", {}, el("strong", { text: `${n.vault}:${n.path}` }), list);
}

document.addEventListener("DOMContentLoaded", () => {
  $("nav-status").addEventListener("click", load);
  $("tags-refresh").addEventListener("click", load);
});
