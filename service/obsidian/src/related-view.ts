// The side pane: notes related to the active note (POST /api/related: shared meaning, links,
// tags), following the active note as you switch. A server without /api/related (404), or one
// that has not indexed this note yet (422), gets the best search hits for the note's title.
import { ItemView, TFile, WorkspaceLeaf } from "obsidian";
import { ApiError } from "./api";
import { openAt, uriVault } from "./open";
import { problemBox } from "./render";
import { confidenceWord, fmt, parseCitation, readAnswer } from "./results";
import type { Host } from "./settings";

export const RELATED_VIEW = "hybrid-related";
export const RELATED_DEBOUNCE_MS = 250;
const TOP_K = 10;

interface Item { title: string; vault: string; path: string; uri: string; line: number; detail: string[]; snippet: string; score: string }

export class RelatedView extends ItemView {
  file: TFile | null = null;
  mode: "related" | "title-search" | "problem" | "empty" = "empty";
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  updating: Promise<void> = Promise.resolve(); // the newest update (tests await it)

  constructor(leaf: WorkspaceLeaf, private readonly host: Host) {
    super(leaf);
  }

  getViewType(): string { return RELATED_VIEW; }
  getDisplayText(): string { return "Related notes"; }
  getIcon(): string { return "network"; }

  get bodyEl(): HTMLElement {
    return this.containerEl.children[1] as HTMLElement;
  }

  async onOpen(): Promise<void> {
    this.bodyEl.addClass("hybrid-related");
    this.setFile(this.app.workspace.getActiveFile(), true);
  }

  async onClose(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.seq++;
  }

  // Follow the active note (debounced: flicking through notes asks once).
  setFile(file: TFile | null, now = false): void {
    if (file && this.file && file.path === this.file.path && this.mode !== "problem") return;
    this.file = file;
    if (this.timer) clearTimeout(this.timer);
    if (now) {
      this.updating = this.update();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      this.updating = this.update();
    }, RELATED_DEBOUNCE_MS);
  }

  async update(): Promise<void> {
    const seq = ++this.seq;
    const file = this.file;
    const body = this.bodyEl;
    if (!file || file.extension !== "md") {
      this.mode = "empty";
      body.empty();
      body.createEl("p", { cls: "hybrid-muted", text: "Open a note to see the notes related to it." });
      return;
    }
    let items: Item[];
    let mode: "related" | "title-search" = "related";
    let reason = "";
    try {
      items = await this.related(file);
    } catch (err) {
      const fallback = err instanceof ApiError && (err.kind === "not-found" || (err.kind === "refused" && err.status === 422));
      if (!fallback) return this.fail(seq, err);
      mode = "title-search";
      reason = err instanceof ApiError && err.kind === "not-found"
        ? "this server has no related-notes API" : "hybrid has not indexed this note (or may not show it)";
      try {
        items = await this.titleSearch(file);
      } catch (err2) {
        return this.fail(seq, err2);
      }
    }
    if (seq !== this.seq) return; // the user moved on to another note
    this.mode = mode;
    body.empty();
    body.dataset.mode = mode;
    body.dataset.path = file.path;
    const head = body.createDiv({ cls: "hybrid-related-head" });
    head.createEl("h4", { text: mode === "related" ? `Related to ${file.basename}` : `Best hits for “${file.basename}”` });
    if (reason) head.createEl("p", { cls: "hybrid-muted", text: `Search by title: ${reason}.` });
    if (!items.length) body.createEl("p", { cls: "hybrid-muted", text: "Nothing found." });
    const list = body.createEl("ol", { cls: "hybrid-related-list" });
    for (const it of items) this.renderItem(list, it);
  }

  private fail(seq: number, err: unknown): void {
    if (seq !== this.seq) return;
    this.mode = "problem";
    this.bodyEl.empty();
    problemBox(this.bodyEl, err, this.host.settings, () => { this.updating = this.update(); });
  }

  // The note as hybrid knows it: an obsidian:// URI naming this vault's folder, so the server
  // finds which of its vaults it is in (or hybrid's vault name from the settings).
  private async related(file: TFile): Promise<Item[]> {
    const s = this.host.settings;
    const note = s.vault ? file.path
      : `obsidian://open?vault=${encodeURIComponent(this.app.vault.getName())}&file=${encodeURIComponent(file.path)}`;
    const data = await this.host.client.related(note, s.vault || undefined, TOP_K);
    const notes = Array.isArray(data.notes) ? (data.notes as Record<string, unknown>[]) : [];
    return notes.map((n) => {
      const cited = parseCitation(String(n.citation ?? ""));
      return {
        title: String(n.title || n.path), vault: String(n.vault ?? ""), path: String(n.path ?? ""),
        uri: String(n.uri ?? ""), line: cited ? cited.start : 1,
        detail: Array.isArray(n.why) ? n.why.map(String) : [], snippet: String(n.snippet ?? ""),
        score: typeof n.score === "number" ? fmt(n.score, 3) : "",
      };
    });
  }

  private async titleSearch(file: TFile): Promise<Item[]> {
    const s = this.host.settings;
    const body: Record<string, unknown> = { query: file.basename, top_k: TOP_K + 1 };
    if (s.vault) body.vaults = [s.vault];
    const answer = readAnswer(await this.host.client.search(body));
    const self = (vault: string, path: string, uri: string) => path === file.path &&
      (s.vault ? vault === s.vault : (uriVault(uri) || this.app.vault.getName()) === this.app.vault.getName());
    return answer.notes.filter((g) => !self(g.vault, g.path, g.uri)).slice(0, TOP_K).map((g) => ({
      title: g.title || g.path, vault: g.vault, path: g.path, uri: g.uri, line: g.passages[0].start_line,
      detail: [confidenceWord(g.confidence)].filter(Boolean), snippet: g.passages[0].snippet, score: "",
    }));
  }

  private renderItem(list: HTMLElement, it: Item): void {
    const li = list.createEl("li", { cls: "hybrid-related-item", attr: { "data-path": it.path } });
    const title = li.createDiv({ cls: "hybrid-related-title" });
    title.createSpan({ text: it.title });
    if (it.score) title.createSpan({ cls: "hybrid-muted", text: ` ${it.score}` });
    if (it.detail.length) {
      const why = li.createEl("ul", { cls: "hybrid-why-list" });
      for (const d of it.detail) why.createEl("li", { text: d });
    }
    if (it.snippet) li.createDiv({ cls: "hybrid-snippet", text: it.snippet });
    li.addEventListener("click", (e) => { void openAt(this.app, it, it.line, this.host.settings.vault, e); });
  }
}
