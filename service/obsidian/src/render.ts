// DOM pieces shared by the search modal and the related pane. Note text is untrusted: every
// piece of it is set as text (createEl's `text`, appendText), never as HTML.
import { ApiError, ClientSettings, startCommand } from "./api";
import { BreakdownRow, markSegments } from "./results";

// text into el, the marks wrapped in <mark>.
export function highlight(el: HTMLElement, text: string, marks: string[]): HTMLElement {
  for (const [piece, marked] of markSegments(text, marks)) {
    if (marked) el.createEl("mark", { text: piece });
    else el.appendText(piece);
  }
  return el;
}

export function breakdownList(parent: HTMLElement, rows: BreakdownRow[]): HTMLElement {
  const dl = parent.createEl("dl", { cls: "hybrid-breakdown", attr: { "aria-label": "Score breakdown" } });
  for (const r of rows) {
    const row = dl.createDiv({ cls: `hybrid-breakdown-${r.key}`, attr: { title: r.title } });
    row.createEl("dt", { text: r.name });
    row.createEl("dd", { text: r.value });
  }
  return dl;
}

// A failure as the user should read it: what is wrong, and for a server that is not running
// the command that starts it.
export function problemBox(parent: HTMLElement, err: unknown, settings: ClientSettings,
                           retry?: () => void): HTMLElement {
  const box = parent.createDiv({ cls: "hybrid-problem", attr: { role: "alert" } });
  const kind = err instanceof ApiError ? err.kind : "error";
  box.dataset.kind = kind;
  if (kind === "not-running") {
    box.createEl("p", { cls: "hybrid-problem-title", text: "The hybrid server is not running." });
    box.createEl("p", { text: `Nothing answers at ${settings.serverUrl}. Start it in a terminal:` });
    box.createEl("pre", { cls: "hybrid-command" }).createEl("code", { text: startCommand(settings) });
    box.createEl("p", { cls: "hybrid-muted", text: "(or `hybrid service install` to keep it running), then try again." });
  } else if (kind === "unauthorized" || kind === "throttled") {
    box.createEl("p", { cls: "hybrid-problem-title", text: "The server refused the token." });
    box.createEl("p", { text: (err as Error).message });
  } else {
    box.createEl("p", { cls: "hybrid-problem-title", text: "The search failed." });
    box.createEl("p", { text: err instanceof Error ? err.message : String(err) });
  }
  if (retry) box.createEl("button", { text: "Try again", cls: "hybrid-retry" }).addEventListener("click", retry);
  return box;
}
