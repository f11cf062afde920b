// hybrid's search page. No framework, no build step: every element is made with el() and every
// piece of note text is set with textContent (notes, saved pages and bookmarks are untrusted).
"use strict";

import { $, el, api, fmt, guard, handlers, SignedOut } from "./common.js";
import { loadStatus } from "./status.js";
import { relatedParts } from "./related.js";

const DEBOUNCE_MS = 180;
const TOP_K = 20;
const SAFE_LINK = /^(obsidian:|https?:)/i;
const FILTERS = ["vault", "folder", "tag", "since", "source", "mode"];
// why a hit was lifted above the fused order (hybrid.retrieval.arms.Pin)
const PIN_LABELS = { phrase: "kept first (phrase)", tag: "tag first" };
const PIN_WHY = {
  literal: "the passage contains the query's literal words as written, so it ranks above the rest",
  tag: "the query names a tag this note carries, so it ranks above the rest",
};
const MODE_LABELS = { hybrid: "Hybrid", lexical: "Words (BM25)", vector: "Meaning (vectors)" };

const state = {
  seq: 0,            // the newest search sent; older answers are dropped
  controller: null,  // aborts the search in flight when a newer one starts
  timer: 0,
  fusion: {},        // RRF k and the arms' weights of the last search
  hits: [],
};

// Put text into node with each of a hit's marks (the words of it the server found answering the
// query: hybrid.retrieval.excerpt.Marker) wrapped in <mark>, as whole words only, as the CLI does
// (hybrid.retrieval.excerpt.mark_spans): a CJK character is no part of a spaced script's word, and
// in CJK text every position is a word boundary.
function highlight(node, text, marks) {
  const re = markRegex(marks);
  if (!re) { node.append(text); return node; }
  let last = 0;
  re.lastIndex = 0;
  for (const m of text.matchAll(re)) {
    if (!m[0]) continue;
    node.append(text.slice(last, m.index), el("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  node.append(text.slice(last));
  return node;
}

const SPACED_WORD = "(?:(?![\\p{scx=Han}\\p{scx=Hira}\\p{scx=Kana}\\p{scx=Hang}])[\\p{L}\\p{N}_])";
const markRegexes = new Map();
function markRegex(marks) {
  const words = [...new Set(marks || [])].sort((a, b) => b.length - a.length)
    .map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return null;
  const key = words.join("|");
  if (!markRegexes.has(key)) {
    if (markRegexes.size > 200) markRegexes.clear();
    markRegexes.set(key, new RegExp(`(?<!${SPACED_WORD})(?:${key})(?!${SPACED_WORD})`, "giu"));
  }
  return markRegexes.get(key);
}
// --- views -----------------------------------------------------------------------------------
function show(view) {
  $("signin").hidden = view !== "signin";
  $("search-view").hidden = view !== "search";
  $("status-view").hidden = view !== "status";
  $("nav").hidden = view === "signin";
  $("nav-search").setAttribute("aria-pressed", String(view === "search"));
  $("nav-status").setAttribute("aria-pressed", String(view === "status"));
  if (view === "status") loadStatus();
  if (view === "search") $("q").focus();
}

async function signedOut() {
  let info = { token_login: false };
  try { info = await api("/ui/api/session"); } catch { /* the form stays hidden */ }
  $("signin-form").hidden = !info.token_login;
  if (new URLSearchParams(location.search).get("signin") === "expired") $("signin-expired").hidden = false;
  show("signin");
  if (info.token_login) $("token").focus();
}

// --- search ----------------------------------------------------------------------------------
function filterValues() {
  const out = {};
  for (const f of FILTERS) out[f] = $(`f-${f}`).value.trim();
  out.rerank = $("f-rerank").checked;
  return out;
}

function requestBody(q, f) {
  const body = { query: q, top_k: TOP_K, mode: f.mode || "hybrid" };
  if (f.vault) body.vaults = [f.vault];
  if (f.folder) body.folders = [f.folder];
  if (f.tag) body.tags = [f.tag];
  if (f.since) body.since = f.since;
  if (f.source) body.sources = [f.source];
  if (f.rerank) body.rerank = true;
  return body;
}

function saveUrl(q, f) {
  const p = new URLSearchParams();
  if (q) p.set("q", q);
  for (const k of FILTERS) if (f[k] && !(k === "mode" && f[k] === "hybrid")) p.set(k, f[k]);
  if (f.rerank) p.set("rerank", "1");
  const qs = p.toString();
  history.replaceState(null, "", qs ? `/?${qs}` : "/");
}

function loadUrl() {
  const p = new URLSearchParams(location.search);
  $("q").value = p.get("q") || "";
  for (const k of FILTERS) if (p.has(k)) ensureOption($(`f-${k}`), p.get(k));
  $("f-rerank").checked = p.get("rerank") === "1";
}

// once the filters' options exist: the address's filters a rebuilt list dropped. The query and
// any filter already set stay: the search box is shown before the options arrive, and what
// someone typed meanwhile is theirs.
function reloadUrlFilters() {
  const p = new URLSearchParams(location.search);
  for (const k of FILTERS) if (p.has(k) && !$(`f-${k}`).value) ensureOption($(`f-${k}`), p.get(k));
}

function ensureOption(input, value) {
  if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === value)) {
    input.append(el("option", { value, text: value }));
  }
  input.value = value;
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(runSearch, DEBOUNCE_MS);
}

const runSearch = guard(async () => {
  clearTimeout(state.timer);
  const q = $("q").value;
  const f = filterValues();
  saveUrl(q.trim(), f);
  if (state.controller) state.controller.abort();
  const seq = ++state.seq;
  const narrowed = f.folder || f.tag || f.since || f.source;
  if (!q.trim() && !narrowed) {
    state.controller = null;
    renderAnswer({ hits: [] });
    $("error").textContent = "";
    $("summary").textContent = "";
    return;
  }
  state.controller = new AbortController();
  $("results").setAttribute("aria-busy", "true");
  let data;
  try {
    data = await api("/ui/api/search", requestBody(q, f), state.controller.signal);
  } catch (err) {
    if (seq !== state.seq || err.name === "AbortError") return;
    if (err instanceof SignedOut) throw err;
    $("results").removeAttribute("aria-busy");
    $("error").textContent = err.message;
    $("summary").textContent = "";
    $("verdict").hidden = true;
    renderAnswer({ hits: [] });
    return;
  }
  if (seq !== state.seq) return; // a newer search is on its way
  $("results").removeAttribute("aria-busy");
  $("error").textContent = "";
  state.fusion = data.fusion || {};
  state.listing = !!(data.parsed && data.parsed.listing);  // filters alone: newest first, no scores
  const n = renderAnswer(data);
  $("results").dataset.answered = q; // the query these results answer
  const unit = data.notes ? ["note", "notes"] : ["passage", "passages"];
  let line = n ? `${n} ${n === 1 ? unit[0] : unit[1]} in ${Math.round(data.took_ms)} ms`
               : "Nothing found";
  $("verdict").hidden = !(n && data.relevant === false);
  if (data.corrected_query) line += ` · searched for “${data.corrected_query}”`;
  if (data.suggested_query) line += ` · maybe you meant “${data.suggested_query}”`;
  for (const notice of data.notices || []) line += ` · ${notice}`;
  const read = readAs(data.parsed);
  if (read) line += ` · read as ${read}`;
  $("summary").textContent = line;
});

function readAs(p) {
  if (!p) return "";
  const parts = [];
  if (p.phrases.length) parts.push(p.phrases.map((x) => `“${x}”`).join(" "));
  if (p.excludes.length) parts.push("without " + p.excludes.join(", "));
  if (p.folders.length) parts.push("in " + p.folders.join(", "));
  if (p.tags.length) parts.push("tagged " + p.tags.map((t) => `#${t}`).join(" "));
  if (p.sources.length) parts.push("kind " + p.sources.join(", "));
  if (p.since !== null && p.since !== undefined) parts.push("since " + new Date(p.since * 1000).toISOString().slice(0, 10));
  if (p.listing) parts.push("a listing, newest first");
  return parts.join(" · ");
}

// --- hits ------------------------------------------------------------------------------------
// One entry per note (its best passage, the note's other passages listed under it) or, when the
// answer is passages, per passage. Returns the number of entries.
function renderAnswer(data) {
  const groups = data.notes ? data.notes.map((n) => n.passages) : (data.hits || []).map((h) => [h]);
  state.hits = groups.map((g) => g[0]);
  const items = groups.map((g, i) => {
    const item = hitItem(g[0], i);
    if (g.length > 1) item.querySelector("article").insertBefore(morePassages(g.slice(1)), item.querySelector(".chips"));
    return item;
  });
  $("results").replaceChildren(...items);
  return groups.length;
}

function morePassages(hits) {
  return el("ul", { class: "more-passages", "aria-label": "More passages of this note" },
    ...hits.map((h) => el("li", { "data-citation": h.citation },
      el("code", { text: h.citation }),
      where(h) ? el("span", { class: "where", text: where(h) }) : null,
      h.confidence !== null && h.confidence !== undefined
        ? el("span", { class: "conf", text: `${confLabel(h.confidence)} ${fmt(h.confidence, 2)}` }) : null,
      highlight(el("div", { class: "more-snippet" }), h.snippet || "", h.marks), alsoIn(h))));
}

// The near-identical passages folded into a hit (hybrid.retrieval.fold): the same text elsewhere.
function alsoIn(h) {
  if (!h.also_in || !h.also_in.length) return null;
  return el("p", { class: "also-in", title: "The same text is in these notes too" },
    "also in: ", ...h.also_in.flatMap((c, i) => [i ? ", " : null, el("code", { text: c })]).filter(Boolean));
}

function folderOf(path) {
  const i = path.lastIndexOf("/");
  return i > 0 ? path.slice(0, i) : "";
}

function hitItem(h, i) {
  const id = `hit-${i}`;
  const title = el("button", {
    type: "button", id: `${id}-title`, "aria-expanded": "false", "aria-controls": `${id}-body`,
    onclick: () => toggle(i), text: h.title || h.path,
  });
  const citation = h.citation;
  const chips = el("ul", { class: "chips", "aria-label": "Kind, folder and tags (choose one to filter by it)" });
  chips.append(el("li", {}, el("button", {
    type: "button", class: "kind", "data-filter": "source", "data-value": h.source,
    title: `Only ${h.source} results`, text: h.source + (h.page ? ` · p. ${h.page}` : ""),
    onclick: () => follow("source", h.source),
  })));
  const folder = folderOf(h.path);
  if (folder) chips.append(el("li", {}, el("button", {
    type: "button", "data-filter": "folder", "data-value": folder, title: `Only notes in ${folder}/`,
    text: `${folder}/`, onclick: () => follow("folder", folder),
  })));
  for (const t of h.tags || []) chips.append(el("li", {}, el("button", {
    type: "button", "data-filter": "tag", "data-value": t, title: `Only notes tagged #${t}`,
    text: `#${t}`, onclick: () => follow("tag", t),
  })));
  const actions = el("div", { class: "actions" });
  if (h.uri && SAFE_LINK.test(h.uri)) {
    const obsidian = h.uri.toLowerCase().startsWith("obsidian:");
    actions.append(el("a", {
      href: h.uri, class: obsidian ? "open-obsidian" : "open-page",
      rel: obsidian ? null : "noopener noreferrer", target: obsidian ? null : "_blank",
      text: obsidian ? "Open in Obsidian" : "Open page",
    }));
  }
  actions.append(el("button", { type: "button", class: "copy", "data-citation": citation,
                                onclick: (e) => copy(citation, e.currentTarget), text: "Copy citation" }));
  const related = relatedParts(h, id);
  actions.append(related.button);
  if (h.confidence !== null && h.confidence !== undefined) {
    actions.append(el("span", { class: "conf", text: `confidence ${confLabel(h.confidence)} ${fmt(h.confidence, 2)}` }));
  }
  return el("li", { class: "hit", id, "data-index": i, "data-citation": citation },
    el("article", { "aria-labelledby": `${id}-title` },
      el("h3", {}, title),
      where(h) ? el("p", { class: "where", text: where(h) }) : null,
      el("p", { class: "cite" }, el("code", { text: citation }),
         h.url ? el("span", { text: ` · ${h.url}` }) : null,
         dayOf(h) ? el("span", { class: "date", title: dateWhy(h), text: ` · ${dayOf(h)}` }) : null),
      highlight(el("p", { class: "snippet" }), h.snippet || "", h.marks),
      alsoIn(h),
      chips,
      breakdown(h),
      actions,
      related.panel,
      el("div", { class: "section", id: `${id}-body`, hidden: true })));
}

// The heading path, without a first heading that only repeats the title.
function where(h) {
  const path = [...(h.heading_path || [])];
  if (path.length && path[0] === h.title) path.shift();
  return path.join(" › ");
}

function confLabel(c) { return c >= 0.7 ? "strong" : c >= 0.4 ? "fair" : "weak"; }

// The note's date (YYYY-MM-DD) and where it comes from (its front matter's field, its name, or
// the file's modification time): what a listing is ordered by.
function dayOf(h) { return (h.modified || "").slice(0, 10); }
function dateWhy(h) {
  const src = h.date_source || "";
  if (src.startsWith("frontmatter:")) return `the note's ${src.slice(12)} property`;
  if (src === "name") return "the date in the note's name";
  return "the file's modification time";
}

// How hybrid retrieval placed this passage: each arm's rank and score, what fusion made of them,
// the priors that moved it (exact-first pin, recency demotion), the reranker, the final score.
// A listing (filters alone) has no scores: it says so, and the date it is ordered by.
function breakdown(h) {
  if (state.listing) {
    const dl = el("dl", { class: "breakdown", "aria-label": "Why it is listed" },
      el("div", { class: "listed", title: "no words to score: every note passing the filters, by date" },
        el("dt", { text: "Listed" }), el("dd", { text: "by the filters, newest first" })),
      el("div", { class: "date", title: dateWhy(h) }, el("dt", { text: "Date" }), el("dd", { text: dayOf(h) || "unknown" })));
    return el("div", { class: "score" }, dl);
  }
  const k = state.fusion.k ?? 60;
  const wl = state.fusion.lexical ?? 1;
  const wv = state.fusion.vector ?? 1;
  const lexPart = h.lexical_rank ? wl / (k + h.lexical_rank) : 0;
  const vecPart = h.vector_rank ? wv / (k + h.vector_rank) : 0;
  const dl = el("dl", { class: "breakdown", "aria-label": "Score breakdown" });
  const row = (cls, name, value, title) => dl.append(
    el("div", { class: cls, title }, el("dt", { text: name }), el("dd", { text: value })));
  row("lex", "BM25", h.lexical_rank ? `#${h.lexical_rank} · ${fmt(h.lexical_score)}` : "not matched",
      "rank and BM25 score among the passages matching the words");
  row("vec", "Vector", h.vector_rank ? `#${h.vector_rank} · ${fmt(h.vector_score, 3)}` : "not near",
      "rank and cosine similarity among the passages nearest in meaning");
  if (h.fused_score !== null && h.fused_score !== undefined) {
    row("fused", "Fused", fmt(h.fused_score), state.fusion.k
      ? `reciprocal-rank fusion: ${fmt(wl, 3)}/(${k}+BM25 rank) + ${fmt(wv, 3)}/(${k}+vector rank)` : "one arm's score");
  }
  if (h.pin) row("pin", "Pinned", PIN_LABELS[h.pin] || `exact-first (${h.pin})`, PIN_WHY[h.pin] || PIN_WHY.literal);
  if (h.recency_penalty) row("recency", "Recency", `×${fmt(1 - h.recency_penalty, 2)}`,
                             "demoted: the note has not changed for a long time");
  if (h.rerank_score !== null && h.rerank_score !== undefined) {
    row("rerank", "Rerank", fmt(h.rerank_score, 3), "cross-encoder score (logit)");
  }
  row("final", "Final", fmt(h.score), "the score the results are ordered by");
  const total = lexPart + vecPart;
  const wrap = el("div", { class: "score" }, dl);
  if (total > 0) {
    const lexPct = Math.round((100 * lexPart) / total);
    const mix = el("div", { class: "mix", role: "img",
      "aria-label": `Fusion share: words ${lexPct}%, meaning ${100 - lexPct}%` },
      el("span", { class: "lex" }), el("span", { class: "vec" }));
    mix.children[0].style.width = `${lexPct}%`;   // CSSOM, allowed under the page's CSP
    mix.children[1].style.width = `${100 - lexPct}%`;
    wrap.append(mix);
  }
  return wrap;
}

function follow(kind, value) {
  ensureOption($(`f-${kind}`), value);
  runSearch();
  $("q").focus();
}

async function copy(text, button) {
  let ok = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch { ok = false; }
  if (!ok) { // plain http on a LAN name: the old way
    const area = el("textarea", { class: "visually-hidden", readonly: true });
    area.value = text;
    document.body.append(area);
    area.select();
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
  }
  const was = "Copy citation";
  button.textContent = ok ? "Copied" : "Copy failed";
  $("summary").textContent = ok ? `Copied ${text}` : "Could not copy: select the citation and copy it";
  setTimeout(() => { button.textContent = was; }, 1500);
}

const toggle = guard(async (i, open) => {
  const h = state.hits[i];
  const button = $(`hit-${i}-title`);
  const body = $(`hit-${i}-body`);
  if (!h || !button) return;
  const expand = open ?? button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", String(expand));
  body.hidden = !expand;
  if (!expand || body.dataset.loaded) return;
  body.replaceChildren(el("p", { class: "more", text: "Reading from disk…" }));
  try {
    const s = await api("/ui/api/read", {
      vault: h.vault, path: h.path, start_line: h.start_line, end_line: h.end_line,
      heading_path: h.heading_path,
    });
    body.dataset.loaded = "1";
    const pre = el("pre", { "aria-label": `${h.path}, lines ${s.start_line} to ${s.end_line}` });
    s.lines.forEach((text, j) => {
      const n = s.start_line + j;
      const inHit = n >= s.hit_start && n <= s.hit_end;
      pre.append(el("span", { class: inHit ? "line in-hit" : "line" },
        el("span", { class: "ln", "aria-hidden": "true", text: String(n) }), highlight(el("span"), text || " ", h.marks)));
    });
    body.replaceChildren(pre, el("p", { class: "more",
      text: `${s.path}, lines ${s.start_line}–${s.end_line} of ${s.total_lines} (read now from disk)` }));
    if (s.backlinks && s.backlinks.length) {  // who links to this note
      const more = s.backlinks_total > s.backlinks.length ? ` and ${s.backlinks_total - s.backlinks.length} more` : "";
      body.append(el("p", { class: "more backlinks",
        text: `Linked from: ${s.backlinks.map((b) => b.path).join(", ")}${more}` }));
    }
  } catch (err) {
    if (err instanceof SignedOut) throw err;
    body.replaceChildren(el("p", { class: "error", role: "alert", text: err.message }));
  }
});

// --- keyboard --------------------------------------------------------------------------------
function hitButtons() { return [...document.querySelectorAll("#results .hit h3 button")]; }

function currentHit() {
  const li = document.activeElement && document.activeElement.closest("#results .hit");
  return li ? Number(li.dataset.index) : -1;
}

function onKey(e) {
  if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || $("search-view").hidden) return;
  const t = e.target;
  const typing = t instanceof HTMLInputElement || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
  const inQuery = t === $("q");
  const inResults = !!(t.closest && t.closest("#results"));
  if (e.key === "/" && !typing) {
    e.preventDefault();
    $("q").focus();
    $("q").select();
    return;
  }
  if ((e.key === "ArrowDown" || e.key === "ArrowUp") && (inQuery || inResults)) {
    const buttons = hitButtons();
    if (!buttons.length) return;
    e.preventDefault();
    const at = inQuery ? -1 : currentHit();
    const next = e.key === "ArrowDown" ? Math.min(at + 1, buttons.length - 1) : at - 1;
    if (next < 0) { $("q").focus(); return; }
    buttons[next].focus();
    buttons[next].scrollIntoView({ block: "nearest" });
    return;
  }
  if (e.key === "Escape") {
    const i = currentHit();
    if (i >= 0) {
      const b = $(`hit-${i}-title`);
      if (b.getAttribute("aria-expanded") === "true") { toggle(i, false); b.focus(); }
      else $("q").focus();
      e.preventDefault();
    } else if (inQuery && $("q").value) {
      $("q").value = "";
      runSearch();
      e.preventDefault();
    }
  }
}

document.addEventListener("focusin", () => {
  const i = currentHit();
  for (const li of document.querySelectorAll("#results .hit")) li.classList.toggle("selected", Number(li.dataset.index) === i);
});
// --- start -----------------------------------------------------------------------------------
const loadFacets = guard(async () => {
  const f = await api("/ui/api/facets");
  const fill = (select, values) => {
    const keep = select.value;
    select.replaceChildren(select.options[0], ...values.map((v) => el("option", { value: v, text: v })));
    if (keep) ensureOption(select, keep);
  };
  fill($("f-vault"), f.vaults);
  fill($("f-source"), f.sources);
  // the search options as the server declares them (hybrid.retrieval.request.OPTIONS): the
  // modes offered, and each control's help
  const opts = f.options || {};
  if (opts.mode) {
    const keep = $("f-mode").value || opts.mode.default;
    const modes = [opts.mode.default, ...opts.mode.choices.filter((m) => m !== opts.mode.default)];
    $("f-mode").replaceChildren(...modes.map((m) => el("option", { value: m, text: MODE_LABELS[m] || m })));
    $("f-mode").value = keep;
  }
  for (const [id, name] of [["f-folder", "folders"], ["f-tag", "tags"], ["f-since", "since"], ["f-source", "sources"],
                            ["f-mode", "mode"], ["f-rerank", "rerank"], ["f-vault", "vaults"]]) {
    if (opts[name]) $(id).title = opts[name].help;
  }
  $("folders").replaceChildren(...f.folders.map((v) => el("option", { value: v })));
  $("tags").replaceChildren(...f.tags.map((v) => el("option", { value: v })));
});

async function start() {
  show("search");
  if (window.matchMedia("(max-width: 40rem)").matches && !location.search.match(/(folder|tag|since|source|vault)=/)) {
    $("filters-box").open = false; // a phone: the results first
  }
  loadUrl();
  await loadFacets();
  reloadUrlFilters();
  const status = await api("/ui/api/status").catch(() => null);
  if (status && status.server.rerank_model) $("rerank-field").hidden = false;
  if ($("q").value || $("f-tag").value || $("f-folder").value || $("f-source").value) runSearch();
}

function wire() {
  $("q").addEventListener("input", schedule);
  $("search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(); });
  for (const f of FILTERS) $(`f-${f}`).addEventListener(f === "folder" || f === "tag" || f === "since" ? "input" : "change", schedule);
  $("f-rerank").addEventListener("change", schedule);
  $("f-clear").addEventListener("click", () => {
    for (const f of FILTERS) $(`f-${f}`).value = f === "mode" ? "hybrid" : "";
    $("f-rerank").checked = false;
    runSearch();
    $("q").focus();
  });
  $("nav-search").addEventListener("click", () => show("search"));
  $("nav-status").addEventListener("click", () => show("status"));
  $("signout").addEventListener("click", async () => {
    await api("/ui/logout", {}).catch(() => null);
    renderAnswer({ hits: [] });
    signedOut();
  });
  $("signout-all").addEventListener("click", async () => {
    try { await api("/ui/logout-everywhere", {}); } catch (err) {
      if (!(err instanceof SignedOut)) { $("status-error").textContent = err.message; return; }
    }
    renderAnswer({ hits: [] });
    signedOut();
  });
  $("signin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("signin-error").textContent = "";
    try {
      await api("/ui/login", { token: $("token").value });
      $("token").value = "";
      $("signin-expired").hidden = true;
      await guard(start)();
    } catch (err) {
      $("signin-error").textContent = err.message;
    }
  });
  document.addEventListener("keydown", onKey);
}

handlers.signedOut = signedOut;
wire();
api("/ui/api/session").then((s) => (s.signed_in ? guard(start)() : signedOut()))
  .catch((err) => { $("signin-error").textContent = `Cannot reach the server: ${err.message}`; show("signin"); });
