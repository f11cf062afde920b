// hybrid search for Obsidian: a client of a running `hybrid serve --http` on this machine. It
// adds a search modal (command "Search notes", give it a hotkey) and a pane of notes related to
// the active note. It reads: nothing here writes to the vault; the only file Obsidian writes for
// it is its own settings (data.json in the plugin's folder).
import { Plugin, TFile, WorkspaceLeaf } from "obsidian";
import { HybridClient } from "./api";
import { SearchModal } from "./modal";
import { RELATED_VIEW, RelatedView } from "./related-view";
import { DEFAULT_SETTINGS, HybridSettingTab, HybridSettings, readSettings } from "./settings";

export default class HybridPlugin extends Plugin {
  settings: HybridSettings = { ...DEFAULT_SETTINGS };
  client: HybridClient = new HybridClient(() => this.settings);

  async onload(): Promise<void> {
    this.settings = readSettings(await this.loadData());
    this.registerView(RELATED_VIEW, (leaf: WorkspaceLeaf) => new RelatedView(leaf, this));
    // no default hotkey (Obsidian's plugin guidelines): the user picks one under Settings > Hotkeys
    this.addCommand({ id: "search", name: "Search notes", callback: () => this.openSearch() });
    this.addCommand({ id: "search-selection", name: "Search notes for the selection",
      editorCallback: (editor) => this.openSearch(editor.getSelection()) });
    this.addCommand({ id: "related", name: "Show related notes", callback: () => { void this.showRelated(); } });
    this.addRibbonIcon("search", "hybrid search", () => this.openSearch());
    this.addSettingTab(new HybridSettingTab(this.app, this));
    this.registerEvent(this.app.workspace.on("file-open", (file: TFile | null) => this.followFile(file)));
  }

  openSearch(query = ""): SearchModal {
    const modal = new SearchModal(this.app, this, query);
    modal.open();
    return modal;
  }

  relatedViews(): RelatedView[] {
    return this.app.workspace.getLeavesOfType(RELATED_VIEW)
      .map((l) => l.view).filter((v): v is RelatedView => v instanceof RelatedView);
  }

  followFile(file: TFile | null): void {
    for (const view of this.relatedViews()) view.setFile(file);
  }

  async showRelated(): Promise<RelatedView | null> {
    let leaf = this.app.workspace.getLeavesOfType(RELATED_VIEW)[0];
    if (!leaf) {
      const right = this.app.workspace.getRightLeaf(false);
      if (!right) return null;
      await right.setViewState({ type: RELATED_VIEW, active: true });
      leaf = right;
    }
    await this.app.workspace.revealLeaf(leaf);
    return leaf.view instanceof RelatedView ? leaf.view : null;
  }

  async saveSettings(): Promise<void> {
    await this.saveData(this.settings);
  }
}
