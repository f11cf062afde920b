// The status view: every vault's state, and re-index runs with their progress.
"use strict";

import { $, el, api, fmt, ago, guard, SignedOut } from "./common.js";
import "./tags.js"; // the tag review panel, shown in this view

let jobsTimer = 0;

const STAGES = { scan: "reading notes", load: "loading model", embed: "embedding chunks", write: "writing indexes" };

export const loadStatus = guard(async () => {
  let data;
  try { data = await api("/ui/api/status"); } catch (err) {
    if (err instanceof SignedOut) throw err;
    $("status-error").textContent = err.message;
    return;
  }
  $("status-error").textContent = "";
  const s = data.server;
  $("server-line").textContent = `hybrid ${s.version} · server pid ${s.pid}, up ${Math.round(s.uptime_s / 60)} min · ` +
    (s.watching ? "watcher on" : "watcher off (start with `hybrid serve --http --watch`)") +
    (s.rerank_model ? ` · reranker ${s.rerank_model}` : "");
  $("vault-list").replaceChildren(...data.vaults.map(vaultCard));
  if (!data.vaults.length) $("vault-list").append(el("p", { text: "No vaults registered: run `hybrid index PATH`." }));
  renderJobs(data.jobs);
});

function vaultCard(v) {
  const dl = el("dl");
  const add = (name, value) => dl.append(el("dt", { text: name }), el("dd", { text: value }));
  add("Folder", v.path + (v.exists ? "" : " (missing)"));
  if (v.kind && v.kind !== "notes") add("Kind", v.kind);
  add("Indexed", v.indexed ? `${v.notes} notes, ${v.chunks} chunks` : "not yet");
  if (v.sources && Object.keys(v.sources).length > 1) {
    add("Documents", Object.entries(v.sources).map(([k, n]) => `${n} ${k}`).join(", "));
  }
  add("Last indexed", v.last_indexed ? `${ago(v.last_indexed)} (${v.last_indexed.replace("T", " ")})` : "never");
  add("Model", v.embedder ? `${v.embedder}${v.dim ? ` · ${v.dim} dimensions` : ""}` : "–");
  add("Vector layout", v.vector_index || "–");
  if (v.store) add("Store", v.store);
  const w = v.watcher || {};
  add("Watcher", w.watching ? `watching${w.pending ? " · re-indexing" : ""}${w.last_error ? ` · last error: ${w.last_error}` : ""}`
                            : "not watching");
  if (v.changes) {
    const c = v.changes;
    add("On disk", (c.new || c.changed || c.deleted ? `${c.new} new, ${c.changed} changed, ${c.deleted} deleted since indexed` : "up to date")
      + (c.skipped ? `; ${c.skipped} skipped, tried again when changed: `
                     + c.skipped_files.slice(0, 3).map((f) => f.reason).join("; ")
                     + (c.skipped > 3 ? "; …" : "") : ""));
  }
  if (v.disk_bytes) add("Index size", `${(v.disk_bytes / 1048576).toFixed(1)} MB`);
  if (v.error) add("Problem", v.error);
  const button = el("button", { type: "button", class: "primary reindex", "data-vault": v.name,
                                text: `Re-index ${v.name}`, onclick: () => reindex(v.name) });
  const files = el("div", { class: "files", id: `files-${v.name}` });
  const listing = el("button", { type: "button", class: "list-files", "data-vault": v.name, "aria-controls": files.id,
                                 text: "Files", onclick: () => showFiles(v.name, files) });
  return el("section", { class: "vault", "aria-labelledby": `vault-${v.name}`, "data-vault": v.name },
    el("h3", { id: `vault-${v.name}`, text: v.name }), dl, button, listing,
    el("div", { class: "job", id: `job-${v.name}`, role: "status", "aria-live": "polite" }), files);
}

const FILE_STATES = ["indexed", "pending", "skipped", "failed", "excluded"];

// Every file of a vault and what became of it (`hybrid status --files`), of one state or all.
const showFiles = guard(async (name, box, state = "") => {
  let data;
  try {
    data = await api(`/ui/api/files?vault=${encodeURIComponent(name)}${state ? `&state=${state}` : ""}`);
  } catch (err) {
    if (err instanceof SignedOut) throw err;
    box.replaceChildren(el("p", { class: "error", text: err.message }));
    return;
  }
  const pick = el("select", { "aria-label": `Files of ${name} to show`,
                              onchange: () => showFiles(name, box, pick.value) },
    el("option", { value: "", text: `all (${data.total})` }),
    ...FILE_STATES.map((s) => el("option", { value: s, text: `${s} (${data.counts[s]})` })));
  pick.value = state;
  const rows = data.files.map((f) => el("tr", { class: `file-${f.state}` },
    el("td", { text: f.state }), el("td", { class: "path", text: f.path }), el("td", { text: f.detail })));
  const table = el("table", { class: "file-list" },
    el("thead", {}, el("tr", {}, el("th", { text: "State" }), el("th", { text: "File" }), el("th", { text: "Why" }))),
    el("tbody", {}, ...rows));
  box.replaceChildren(
    el("p", { text: `${data.total} files: ` + FILE_STATES.map((s) => `${data.counts[s]} ${s}`).join(", ")
                    + (data.from_index ? " (what the index records: the folder is not here)" : "") }),
    pick, table,
    data.truncated ? el("p", { class: "hint", text: `The first ${data.files.length} shown: \`hybrid status --files\` lists them all.` }) : null);
});

const reindex = guard(async (name) => {
  try {
    await api("/ui/api/reindex", { vault: name });
  } catch (err) {
    if (err instanceof SignedOut) throw err;
    $("status-error").textContent = err.message;
    return;
  }
  pollJobs();
});

const pollJobs = guard(async () => {
  clearTimeout(jobsTimer);
  const data = await api("/ui/api/jobs");
  renderJobs(data.jobs);
  const running = data.jobs.some((j) => j.state === "running");
  jobsTimer = running ? setTimeout(pollJobs, 400) : 0;
  if (!running) loadStatus(); // fresh counts; the cards keep each vault's last run line
});

function renderJobs(jobs) {
  const latest = {};
  for (const j of jobs) if (!latest[j.vault] || j.id > latest[j.vault].id) latest[j.vault] = j;
  for (const j of Object.values(latest)) {
    const box = $(`job-${j.vault}`);
    if (!box) continue;
    const button = document.querySelector(`.reindex[data-vault="${CSS.escape(j.vault)}"]`);
    if (button) button.disabled = j.state === "running";
    if (j.state === "running") {
      const label = `${STAGES[j.stage] || j.stage}${j.total ? ` ${j.done}/${j.estimated ? "~" : ""}${j.total}` : ""}`;
      const bar = el("progress", { max: j.total || 1, "aria-label": `Re-indexing ${j.vault}: ${label}` });
      if (j.total) bar.value = j.done; else bar.removeAttribute("value");
      box.replaceChildren(bar, el("span", { text: label }));
      if (!jobsTimer) pollJobs();
    } else if (j.state === "done") {
      const s = j.summary;
      box.replaceChildren(el("span", { class: "done",
        text: `Re-indexed: ${s.added} added, ${s.updated} updated, ${s.removed} removed, ${s.unchanged} unchanged` +
              `${s.skipped ? `, ${s.skipped} skipped` : ""} in ${fmt(s.seconds, 2)} s` +
              `${s.warnings ? ` (${s.warnings} warnings: see \`hybrid index\`)` : ""}` }));
    } else {
      box.replaceChildren(el("span", { class: "error", text: `Re-index failed: ${j.error}` }));
    }
  }
}
