// Opening a hit: the file of this vault it cites, opened at the cited line. Reads only: a hit
// whose note is not in this vault (another of hybrid's vaults) is reported, never created.
import { App, Keymap, MarkdownView, Notice, TFile } from "obsidian";

export interface Located { vault: string; path: string; uri: string }

// The vault folder an obsidian:// URI names ("" when it names none).
export function uriVault(uri: string): string {
  if (!uri.toLowerCase().startsWith("obsidian://")) return "";
  try {
    return new URL(uri).searchParams.get("vault") || "";
  } catch {
    return "";
  }
}

// Whether a hit is a note of the vault open in Obsidian: hybrid's vault name when the settings
// give it, else the vault folder in the hit's obsidian:// URI.
export function inThisVault(app: App, hit: Located, vaultName: string): boolean {
  if (vaultName) return hit.vault === vaultName;
  const folder = uriVault(hit.uri);
  return !folder || folder === app.vault.getName();
}

export function localFile(app: App, hit: Located, vaultName: string): TFile | null {
  if (!inThisVault(app, hit, vaultName)) return null;
  const f = app.vault.getAbstractFileByPath(hit.path);
  return f instanceof TFile ? f : null;
}

// Open the hit's note at line (1-based, as hybrid cites): the view scrolls there through the
// ephemeral state, and the editor's cursor is put on it when the note opens in an editor. The
// event that chose it decides where, as everywhere in Obsidian: Mod (Ctrl/Cmd) a new tab,
// Mod+Alt a split, Mod+Alt+Shift a window, none the current tab.
export async function openAt(app: App, hit: Located, line: number, vaultName: string,
  evt?: MouseEvent | KeyboardEvent | null): Promise<boolean> {
  const file = localFile(app, hit, vaultName);
  if (!file) {
    new Notice(inThisVault(app, hit, vaultName)
      ? `hybrid: ${hit.path} is not in this vault any more (re-index with \`hybrid index\`).`
      : `hybrid: ${hit.vault}:${hit.path} is in another vault.`);
    return false;
  }
  const zeroBased = Math.max(0, line - 1);
  const leaf = app.workspace.getLeaf(Keymap.isModEvent(evt ?? null));
  await leaf.openFile(file, { active: true, eState: { line: zeroBased } });
  const view = app.workspace.getActiveViewOfType(MarkdownView);
  if (view && view.file === file && view.editor) {
    const pos = { line: zeroBased, ch: 0 };
    view.editor.setCursor(pos);
    view.editor.scrollIntoView({ from: pos, to: pos }, true);
  }
  return true;
}
