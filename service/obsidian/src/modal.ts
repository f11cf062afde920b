// The search modal: type, and the notes answering appear grouped (each note once, its passages
// under it), words that answer highlighted, the confidence word beside each note; choosing a
// passage opens its note at the cited line; a passage's score breakdown is built when asked for.
import { App, Modal } from "obsidian";
import { inThisVault, openAt } from "./open";
import { problemBox, highlight, breakdownList } from "./render";
import { Answer, NoteGroup, Passage, breakdownRows, confidenceWord, fmt, lines, readAnswer, where } from "./results";
import type { Host } from "./settings";

export const DEBOUNCE_MS = 200;

interface Entry { el: HTMLElement; passage: Passage }

export class SearchModal extends Modal {
  inputEl!: HTMLInputElement;
  statusEl!: HTMLElement;
  resultsEl!: HTMLElement;
  private seq = 0;          // the newest search sent; answers to older ones are dropped
  private timer: ReturnType<typeof setTimeout> | null = null;
  private entries: Entry[] = [];
  private selected = -1;
  private fusion: Record<string, number> = {};
  searching: Promise<void> = Promise.resolve(); // the newest search (tests and the screenshot await it)

  constructor(app: App, private readonly host: Host, private readonly initial = "") {
    super(app);
  }

  onOpen(): void {
    this.modalEl.addClass("hybrid-modal");
    this.titleEl.setText("hybrid search");
    const { contentEl } = this;
    contentEl.empty();
    this.inputEl = contentEl.createEl("input", { cls: "hybrid-query",
      attr: { type: "search", placeholder: "Search your notes (\"phrases\", -exclude, tag:x, folder:y)", "aria-label": "Search" } });
    this.statusEl = contentEl.createDiv({ cls: "hybrid-status", attr: { "aria-live": "polite" } });
    this.resultsEl = contentEl.createEl("ol", { cls: "hybrid-results" });
    this.inputEl.addEventListener("input", () => this.schedule());
    this.inputEl.addEventListener("keydown", (e) => this.onKey(e));
    this.inputEl.value = this.initial;
    this.inputEl.focus();
    if (this.initial.trim()) this.searching = this.run();
    else this.statusEl.setText("Type to search.");
  }

  onClose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.seq++; // an answer still on its way is dropped
    this.contentEl.empty();
  }

  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.searching = this.run();
    }, DEBOUNCE_MS);
  }

  async run(): Promise<void> {
    const query = this.inputEl.value;
    const seq = ++this.seq;
    if (!query.trim()) {
      this.show([], "Type to search.");
      return;
    }
    const s = this.host.settings;
    const body: Record<string, unknown> = { query, top_k: s.topK };
    if (s.vault) body.vaults = [s.vault];
    this.resultsEl.setAttr("aria-busy", "true");
    const started = Date.now();
    let answer: Answer;
    try {
      answer = readAnswer(await this.host.client.search(body));
    } catch (err) {
      if (seq !== this.seq) return;
      this.resultsEl.removeAttribute("aria-busy");
      this.show([], "");
      problemBox(this.statusEl, err, s, () => { this.searching = this.run(); });
      return;
    }
    if (seq !== this.seq) return; // a newer search is on its way
    this.resultsEl.removeAttribute("aria-busy");
    this.fusion = answer.fusion;
    this.show(answer.notes, summary(answer, Date.now() - started));
    this.resultsEl.dataset.answered = query;
  }

  private show(notes: NoteGroup[], status: string): void {
    this.statusEl.empty();
    this.statusEl.setText(status);
    this.resultsEl.empty();
    this.entries = [];
    this.selected = -1;
    for (const g of notes) this.renderNote(g);
    if (this.entries.length) this.select(0);
  }

  private renderNote(g: NoteGroup): void {
    const li = this.resultsEl.createEl("li", { cls: "hybrid-note", attr: { "data-path": g.path, "data-vault": g.vault } });
    const head = li.createDiv({ cls: "hybrid-note-head" });
    head.createSpan({ cls: "hybrid-note-title", text: g.title || g.path });
    const word = confidenceWord(g.confidence);
    if (word) head.createSpan({ cls: `hybrid-conf hybrid-conf-${word}`, text: word,
      attr: { title: `confidence ${fmt(g.confidence, 2)}: how likely this note answers the query` } });
    const local = inThisVault(this.app, g, this.host.settings.vault);
    head.createSpan({ cls: "hybrid-note-path", text: local ? g.path : `${g.vault}:${g.path} (another vault)` });
    head.addEventListener("click", (e) => this.choose(g.passages[0], e));
    const list = li.createEl("ul", { cls: "hybrid-passages" });
    for (const p of g.passages) this.renderPassage(list, p);
  }

  private renderPassage(list: HTMLElement, p: Passage): void {
    const index = this.entries.length;
    const item = list.createEl("li", { cls: "hybrid-passage", attr: { "data-citation": p.citation, "data-line": String(p.start_line) } });
    const meta = item.createDiv({ cls: "hybrid-where" });
    const w = where(p);
    if (w) meta.createSpan({ cls: "hybrid-heading", text: w });
    meta.createSpan({ cls: "hybrid-lines", text: lines(p) });
    highlight(item.createDiv({ cls: "hybrid-snippet" }), p.snippet, p.marks);
    if (p.also_in.length) item.createDiv({ cls: "hybrid-also-in", text: `also in: ${p.also_in.join(", ")}` });
    const why = item.createEl("button", { cls: "hybrid-why", text: "Score", attr: { "aria-expanded": "false", type: "button" } });
    why.addEventListener("click", (e) => {
      e.stopPropagation();
      this.toggleBreakdown(item, why, p);
    });
    item.addEventListener("click", (e) => this.choose(p, e));
    item.addEventListener("mousemove", () => { if (this.selected !== index) this.select(index); });
    this.entries.push({ el: item, passage: p });
  }

  // The breakdown is made only when first asked for, then shown and hidden.
  toggleBreakdown(item: HTMLElement, button: HTMLElement, p: Passage): void {
    let dl = item.querySelector<HTMLElement>(".hybrid-breakdown");
    const open = button.getAttribute("aria-expanded") !== "true";
    button.setAttr("aria-expanded", String(open));
    if (!dl && open) dl = breakdownList(item, breakdownRows(p, this.fusion));
    if (dl) dl.toggleClass("hybrid-hidden", !open);
  }

  private select(i: number): void {
    if (this.selected >= 0 && this.entries[this.selected]) this.entries[this.selected].el.removeClass("is-selected");
    this.selected = i;
    const e = this.entries[i];
    if (!e) return;
    e.el.addClass("is-selected");
    e.el.scrollIntoView?.({ block: "nearest" });
  }

  private onKey(e: KeyboardEvent): void {
    // an input method (Chinese, Japanese, Korean…) is composing: its Enter and arrows pick a
    // candidate word, not a search or a hit
    if (e.isComposing || e.keyCode === 229) return;
    const n = this.entries.length;
    if (e.key === "ArrowDown" && n) {
      e.preventDefault();
      this.select((this.selected + 1) % n);
    } else if (e.key === "ArrowUp" && n) {
      e.preventDefault();
      this.select((this.selected - 1 + n) % n);
    } else if (e.key === "Enter") {
      e.preventDefault();
      if (this.timer) { // typed and pressed Enter before the debounce ran: search now
        clearTimeout(this.timer);
        this.timer = null;
        this.searching = this.run();
      } else if (this.entries[this.selected]) {
        void this.choose(this.entries[this.selected].passage, e);
      }
    } else if (e.altKey && (e.code === "KeyB" || e.key === "b") && this.entries[this.selected]) {
      e.preventDefault();
      const { el, passage } = this.entries[this.selected];
      const button = el.querySelector<HTMLElement>(".hybrid-why");
      if (button) this.toggleBreakdown(el, button, passage);
    }
  }

  async choose(p: Passage, evt?: MouseEvent | KeyboardEvent): Promise<void> {
    if (await openAt(this.app, p, p.start_line, this.host.settings.vault, evt)) this.close();
  }
}

function summary(a: Answer, ms: number): string {
  const n = a.notes.length;
  let line = n ? `${n} ${n === 1 ? "note" : "notes"} · ${ms} ms` : "Nothing found.";
  if (n && a.relevant === false) line += " · none looks like an answer (all weak)";
  if (a.corrected) line += ` · searched with ${a.corrected}`;
  if (a.suggested) line += ` · maybe you meant ${a.suggested}`;
  for (const notice of a.notices) line += ` · ${notice}`;
  return line;
}
