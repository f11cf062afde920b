// The server's answers as the plugin shows them: passages grouped by note, the confidence word,
// where in the note a passage is, its citation, and the rows of the score breakdown. No DOM here.

export interface Passage {
  vault: string;
  path: string;
  title: string;
  heading_path: string[];
  start_line: number;
  end_line: number;
  snippet: string;
  score: number;
  citation: string;
  uri: string;
  source: string;
  page: number | null;
  marks: string[];
  also_in: string[];
  confidence: number | null;
  lexical_rank: number | null;
  lexical_score: number | null;
  vector_rank: number | null;
  vector_score: number | null;
  fused_score: number | null;
  rerank_score: number | null;
  pin: string | null;
  recency_penalty: number | null;
}

export interface NoteGroup {
  vault: string;
  path: string;
  title: string;
  uri: string;
  confidence: number | null;
  passages: Passage[]; // the note's best passage first
}

export interface Answer {
  notes: NoteGroup[];
  relevant: boolean | null;
  corrected: string;   // "wrong → right" for the words typo repair replaced before searching
  suggested: string;   // "typed → likelier" for the spellings only offered
  notices: string[];   // one-line reasons the answer is what it is (a script no model reads)
  fusion: Record<string, number>;
}

const num = (x: unknown): number | null => (typeof x === "number" && Number.isFinite(x) ? x : null);
const str = (x: unknown): string => (typeof x === "string" ? x : x === null || x === undefined ? "" : String(x));
const strs = (x: unknown): string[] => (Array.isArray(x) ? x.map(str) : []);

export function toPassage(d: Record<string, unknown>): Passage {
  return {
    vault: str(d.vault), path: str(d.path), title: str(d.title), heading_path: strs(d.heading_path),
    start_line: num(d.start_line) ?? 1, end_line: num(d.end_line) ?? num(d.start_line) ?? 1,
    snippet: str(d.snippet), score: num(d.score) ?? 0, citation: str(d.citation), uri: str(d.uri),
    source: str(d.source) || "note", page: num(d.page), marks: strs(d.marks), also_in: strs(d.also_in),
    confidence: num(d.confidence), lexical_rank: num(d.lexical_rank), lexical_score: num(d.lexical_score),
    vector_rank: num(d.vector_rank), vector_score: num(d.vector_score), fused_score: num(d.fused_score),
    rerank_score: num(d.rerank_score), pin: typeof d.pin === "string" ? d.pin : null,
    recency_penalty: num(d.recency_penalty),
  };
}

// Group passages by note in the order of each note's first passage (the server's order).
export function groupPassages(passages: Passage[]): NoteGroup[] {
  const groups = new Map<string, NoteGroup>();
  for (const p of passages) {
    const key = `${p.vault}\u0000${p.path}`;
    let g = groups.get(key);
    if (!g) {
      g = { vault: p.vault, path: p.path, title: p.title, uri: p.uri, confidence: p.confidence, passages: [] };
      groups.set(key, g);
    }
    g.passages.push(p);
    if (p.confidence !== null && (g.confidence === null || p.confidence > g.confidence)) g.confidence = p.confidence;
  }
  return [...groups.values()];
}

// An /api/search answer, grouped by note whether the server sent `notes` or flat `hits`.
export function readAnswer(data: Record<string, unknown>): Answer {
  const raw = Array.isArray(data.notes)
    ? (data.notes as Record<string, unknown>[]).flatMap((n) => (Array.isArray(n.passages) ? n.passages : []))
    : Array.isArray(data.hits) ? data.hits : [];
  const passages = (raw as Record<string, unknown>[]).filter((d) => d && typeof d === "object").map(toPassage);
  const fusion: Record<string, number> = {};
  if (data.fusion && typeof data.fusion === "object") {
    for (const [k, v] of Object.entries(data.fusion as Record<string, unknown>)) if (typeof v === "number") fusion[k] = v;
  }
  return {
    notes: groupPassages(passages),
    relevant: typeof data.relevant === "boolean" ? data.relevant : null,
    corrected: pairs(data.corrections),
    suggested: pairs(data.suggestions),
    notices: strs(data.notices),
    fusion,
  };
}

function pairs(x: unknown): string {
  if (!x || typeof x !== "object") return "";
  return Object.entries(x as Record<string, unknown>).map(([k, v]) => `${k} → ${str(v)}`).join(", ");
}

// hybrid's words for a confidence (hybrid.retrieval.hits.confidence_label).
export function confidenceWord(c: number | null): "strong" | "fair" | "weak" | "" {
  if (c === null) return "";
  return c >= 0.7 ? "strong" : c >= 0.4 ? "fair" : "weak";
}

// The heading path, without a first heading that only repeats the title.
export function where(p: Passage): string {
  const path = [...p.heading_path];
  if (path.length && path[0] === p.title) path.shift();
  return path.join(" › ");
}

export function lines(p: Passage): string {
  if (p.page !== null) return `page ${p.page}`;
  return p.start_line === p.end_line ? `line ${p.start_line}` : `lines ${p.start_line}–${p.end_line}`;
}

// "vault:path:START-END" → its parts (a path may hold colons: the vault is up to the first one,
// the lines after the last); null for a PDF page citation or anything else.
export function parseCitation(c: string): { vault: string; path: string; start: number; end: number } | null {
  const m = /^([^:]+):(.+):(\d+)-(\d+)$/.exec(c);
  return m ? { vault: m[1], path: m[2], start: Number(m[3]), end: Number(m[4]) } : null;
}

export function fmt(x: number | null, digits = 4): string {
  if (x === null) return "–";
  return Number(x).toPrecision(digits).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
}

export interface BreakdownRow { key: string; name: string; value: string; title: string }

// How hybrid placed a passage: each arm's rank and score, the fused score, the priors that moved
// it, the reranker, the final score (as the search page shows it).
export function breakdownRows(p: Passage, fusion: Record<string, number>): BreakdownRow[] {
  const k = fusion.k ?? 60;
  const rows: BreakdownRow[] = [
    { key: "lex", name: "BM25", value: p.lexical_rank ? `#${p.lexical_rank} · ${fmt(p.lexical_score)}` : "not matched",
      title: "rank and BM25 score among the passages matching the words" },
    { key: "vec", name: "Vector", value: p.vector_rank ? `#${p.vector_rank} · ${fmt(p.vector_score, 3)}` : "not near",
      title: "rank and cosine similarity among the passages nearest in meaning" },
  ];
  if (p.fused_score !== null) {
    rows.push({ key: "fused", name: "Fused", value: fmt(p.fused_score),
      title: fusion.k ? `reciprocal-rank fusion: ${fmt(fusion.lexical ?? 1, 3)}/(${k}+BM25 rank) + ${fmt(fusion.vector ?? 1, 3)}/(${k}+vector rank)`
        : "one arm's score" });
  }
  if (p.pin) rows.push({ key: "pin", name: "Pinned",
    value: p.pin === "phrase" ? "kept first (phrase)" : p.pin === "tag" ? "tag first" : `exact-first (${p.pin})`,
    title: p.pin === "tag" ? "the query names a tag this note carries, so it ranks above the rest"
      : "the passage contains the query's literal words, so it ranks above the rest" });
  if (p.recency_penalty) rows.push({ key: "recency", name: "Recency", value: `×${fmt(1 - p.recency_penalty, 2)}`,
    title: "demoted: the note has not changed for a long time" });
  if (p.rerank_score !== null) rows.push({ key: "rerank", name: "Rerank", value: fmt(p.rerank_score, 3), title: "cross-encoder score" });
  rows.push({ key: "final", name: "Final", value: fmt(p.score), title: "the score the results are ordered by" });
  if (p.confidence !== null) rows.push({ key: "confidence", name: "Confidence", value: `${confidenceWord(p.confidence)} ${fmt(p.confidence, 2)}`,
    title: "calibrated estimate that this note answers the query" });
  return rows;
}

// text split at the hit's marks (whole words, case-insensitive), as [piece, isMark] pairs.
const SPACED_WORD = "(?:(?![\\p{scx=Han}\\p{scx=Hira}\\p{scx=Kana}\\p{scx=Hang}])[\\p{L}\\p{N}_])";
export function markSegments(text: string, marks: string[]): Array<[string, boolean]> {
  const words = [...new Set(marks.filter(Boolean))].sort((a, b) => b.length - a.length)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return [[text, false]];
  const re = new RegExp(`(?<!${SPACED_WORD})(?:${words.join("|")})(?!${SPACED_WORD})`, "giu");
  const out: Array<[string, boolean]> = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (!m[0] || m.index === undefined) continue;
    if (m.index > last) out.push([text.slice(last, m.index), false]);
    out.push([m[0], true]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push([text.slice(last), false]);
  return out;
}
