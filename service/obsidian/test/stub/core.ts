// The `obsidian` module as far as the plugin uses it, for node (jsdom) and for the screenshot
// page: the boundary the tests replace, nothing more. It records what the plugin asks of the app
// (files opened and where, notices, requests) and every vault write method throws, so a test
// can assert the plugin never writes. requestUrl is given by the entry point (obsidian.ts:
// node's http; the screenshot page: the browser harness).
/* eslint-disable @typescript-eslint/no-explicit-any */
import { installDom } from "./dom";

installDom();

export interface RequestUrlParam { url: string; method?: string; contentType?: string; body?: string; headers?: Record<string, string>; throw?: boolean }
export interface RequestUrlResponse { status: number; headers: Record<string, string>; text: string; json: any; arrayBuffer: ArrayBuffer }
type Requester = (p: RequestUrlParam) => Promise<{ status: number; headers: Record<string, string>; text: string }>;

export const log = {
  requests: [] as RequestUrlParam[],
  notices: [] as string[],
  writes: [] as string[],     // vault write methods called (each also threw)
  opened: [] as { path: string; eState: any; active?: boolean }[],
  cursor: [] as { path: string; line: number }[],
  leaves: [] as (boolean | string | undefined)[],  // what each getLeaf call asked for (false: the current tab)
  reset() { this.requests = []; this.notices = []; this.writes = []; this.opened = []; this.cursor = []; this.leaves = []; },
};

let requester: Requester | null = null;
export function setRequester(r: Requester): void { requester = r; }

export function requestUrl(p: RequestUrlParam | string): Promise<RequestUrlResponse> {
  const param = typeof p === "string" ? { url: p } : p;
  log.requests.push(param);
  if (!requester) return Promise.reject(new Error("no requester"));
  return requester(param).then((r) => {
    if (r.status >= 400 && param.throw !== false) throw Object.assign(new Error(`Request failed, status ${r.status}`), { status: r.status });
    return { ...r, get json() { return JSON.parse(r.text); }, arrayBuffer: new ArrayBuffer(0) };
  });
}

// Obsidian's rule for a click or key that opens something: Mod (Ctrl, or Cmd on macOS) a new tab,
// Mod+Alt a split, Mod+Alt+Shift a window; none the current tab.
export const Keymap = {
  isModEvent(e?: { ctrlKey?: boolean; metaKey?: boolean; altKey?: boolean; shiftKey?: boolean } | null): boolean | string {
    if (!e || !(e.ctrlKey || e.metaKey)) return false;
    if (e.altKey) return e.shiftKey ? "window" : "split";
    return "tab";
  },
};

export class Notice {
  constructor(message: string) { log.notices.push(message); }
  hide(): void {}
}

export abstract class TAbstractFile { path = ""; name = ""; }
export class TFile extends TAbstractFile {
  basename: string; extension: string;
  constructor(path: string) {
    super();
    this.path = path;
    this.name = path.split("/").pop() || path;
    const dot = this.name.lastIndexOf(".");
    this.basename = dot > 0 ? this.name.slice(0, dot) : this.name;
    this.extension = dot > 0 ? this.name.slice(dot + 1) : "";
  }
}

class Events {
  private handlers = new Map<string, Array<(...a: any[]) => any>>();
  on(name: string, fn: (...a: any[]) => any) {
    const list = this.handlers.get(name) || [];
    list.push(fn);
    this.handlers.set(name, list);
    return { name, fn };
  }
  offref(ref: { name: string; fn: any }) {
    this.handlers.set(ref.name, (this.handlers.get(ref.name) || []).filter((f) => f !== ref.fn));
  }
  trigger(name: string, ...args: any[]) { for (const fn of this.handlers.get(name) || []) fn(...args); }
}

const refuse = (what: string) => () => {
  log.writes.push(what);
  throw new Error(`the plugin called ${what}: it must never write to the vault`);
};
export const WRITE_METHODS = ["create", "createBinary", "createFolder", "modify", "modifyBinary", "append",
  "process", "delete", "trash", "rename", "copy"];
export const ADAPTER_WRITE_METHODS = ["write", "writeBinary", "append", "process", "mkdir", "remove",
  "rmdir", "rename", "copy", "trashSystem", "trashLocal"];

export class Vault extends Events {
  files = new Map<string, TFile>();
  adapter: Record<string, any> = {};
  constructor(private name: string, paths: string[]) {
    super();
    for (const p of paths) this.files.set(p, new TFile(p));
    for (const m of WRITE_METHODS) (this as any)[m] = refuse(`vault.${m}`);
    for (const m of ADAPTER_WRITE_METHODS) this.adapter[m] = refuse(`vault.adapter.${m}`);
  }
  getName(): string { return this.name; }
  getAbstractFileByPath(path: string): TAbstractFile | null { return this.files.get(path) || null; }
  getFileByPath(path: string): TFile | null { return this.files.get(path) || null; }
  getMarkdownFiles(): TFile[] { return [...this.files.values()].filter((f) => f.extension === "md"); }
}

export class Component {
  registerEvent(_ref: any): void {}
  register(_fn: () => any): void {}
}

export class MarkdownView {
  editor: any;
  constructor(public file: TFile) {
    this.editor = {
      setCursor: (pos: { line: number }) => log.cursor.push({ path: file.path, line: pos.line }),
      scrollIntoView: () => {},
      getSelection: () => "",
    };
  }
}

export class WorkspaceLeaf {
  view: any = null;
  constructor(public app: App) {}
  async openFile(file: TFile, state?: { eState?: any; active?: boolean }): Promise<void> {
    log.opened.push({ path: file.path, eState: state?.eState, active: state?.active });
    this.view = new MarkdownView(file);
    this.app.workspace.activeView = this.view;
    this.app.workspace.activeFile = file;
    this.app.workspace.trigger("file-open", file);
  }
  async setViewState(state: { type: string }): Promise<void> {
    const make = this.app.viewTypes.get(state.type);
    if (!make) throw new Error(`no view type ${state.type}`);
    this.view = make(this);
    this.app.workspace.leaves.push(this);
    await this.view.onOpen();
  }
}

export class Workspace extends Events {
  activeFile: TFile | null = null;
  activeView: MarkdownView | null = null;
  leaves: WorkspaceLeaf[] = [];
  constructor(private app: App) { super(); }
  getLeaf(newLeaf?: boolean | string): WorkspaceLeaf { log.leaves.push(newLeaf); return new WorkspaceLeaf(this.app); }
  getRightLeaf(): WorkspaceLeaf { return new WorkspaceLeaf(this.app); }
  getActiveFile(): TFile | null { return this.activeFile; }
  getActiveViewOfType(type: any): any { return this.activeView instanceof type ? this.activeView : null; }
  getLeavesOfType(type: string): WorkspaceLeaf[] { return this.leaves.filter((l) => l.view?.getViewType?.() === type); }
  async revealLeaf(_leaf: WorkspaceLeaf): Promise<void> {}
  // Switching notes as the user does: the file becomes active and "file-open" fires.
  async openNote(path: string): Promise<void> {
    const f = this.app.vault.getFileByPath(path);
    if (!f) throw new Error(`no file ${path}`);
    await this.getLeaf().openFile(f);
  }
}

export class App {
  vault: Vault;
  workspace: Workspace;
  viewTypes = new Map<string, (leaf: WorkspaceLeaf) => any>();
  constructor(vaultName: string, paths: string[]) {
    this.vault = new Vault(vaultName, paths);
    this.workspace = new Workspace(this);
  }
}

export class Plugin extends Component {
  commands: any[] = [];
  settingTabs: any[] = [];
  saved: any = null;
  constructor(public app: App, public manifest: any = { id: "hybrid" }) { super(); }
  async loadData(): Promise<any> { return this.saved; }
  async saveData(data: any): Promise<void> { this.saved = JSON.parse(JSON.stringify(data)); }
  addCommand(c: any) { this.commands.push(c); return c; }
  addRibbonIcon(_icon: string, _title: string, _cb: any) { return createDiv(); }
  addSettingTab(t: any) { this.settingTabs.push(t); }
  registerView(type: string, make: (leaf: WorkspaceLeaf) => any) { this.app.viewTypes.set(type, make); }
}

export class Modal {
  modalEl: HTMLElement; titleEl: HTMLElement; contentEl: HTMLElement; containerEl: HTMLElement;
  constructor(public app: App) {
    this.containerEl = createDiv({ cls: "modal-container" });
    this.containerEl.createDiv({ cls: "modal-bg" });
    this.modalEl = this.containerEl.createDiv({ cls: "modal" });
    this.titleEl = this.modalEl.createDiv({ cls: "modal-title" });
    this.contentEl = this.modalEl.createDiv({ cls: "modal-content" });
  }
  open(): void { document.body.appendChild(this.containerEl); this.onOpen(); }
  close(): void { this.onClose(); this.containerEl.remove(); }
  onOpen(): void {}
  onClose(): void {}
}

export class ItemView extends Component {
  app: App; containerEl: HTMLElement; contentEl: HTMLElement;
  constructor(public leaf: WorkspaceLeaf) {
    super();
    this.app = leaf.app;
    this.containerEl = createDiv({ cls: "workspace-leaf-content" });
    this.containerEl.createDiv({ cls: "view-header" });
    this.contentEl = this.containerEl.createDiv({ cls: "view-content" });
    document.body.appendChild(this.containerEl);
  }
}

class TextComponent {
  inputEl: HTMLInputElement;
  private cb: ((v: string) => any) | null = null;
  constructor(parent: HTMLElement) {
    this.inputEl = parent.createEl("input", { type: "text" }) as HTMLInputElement;
    this.inputEl.addEventListener("input", () => this.cb?.(this.inputEl.value));
  }
  setValue(v: string) { this.inputEl.value = v; return this; }
  getValue() { return this.inputEl.value; }
  setPlaceholder(p: string) { this.inputEl.placeholder = p; return this; }
  onChange(cb: (v: string) => any) { this.cb = cb; return this; }
}
class ToggleComponent {
  toggleEl: HTMLInputElement;
  private cb: ((v: boolean) => any) | null = null;
  constructor(parent: HTMLElement) {
    this.toggleEl = parent.createEl("input", { type: "checkbox" }) as HTMLInputElement;
    this.toggleEl.addEventListener("change", () => this.cb?.(this.toggleEl.checked));
  }
  setValue(v: boolean) { this.toggleEl.checked = v; return this; }
  onChange(cb: (v: boolean) => any) { this.cb = cb; return this; }
}
class ButtonComponent {
  buttonEl: HTMLButtonElement;
  constructor(parent: HTMLElement) { this.buttonEl = parent.createEl("button") as HTMLButtonElement; }
  setButtonText(t: string) { this.buttonEl.textContent = t; return this; }
  onClick(cb: () => any) { this.buttonEl.addEventListener("click", cb); return this; }
}

export class Setting {
  settingEl: HTMLElement; nameEl: HTMLElement; descEl: HTMLElement; controlEl: HTMLElement;
  constructor(parent: HTMLElement) {
    this.settingEl = parent.createDiv({ cls: "setting-item" });
    this.nameEl = this.settingEl.createDiv({ cls: "setting-item-name" });
    this.descEl = this.settingEl.createDiv({ cls: "setting-item-description" });
    this.controlEl = this.settingEl.createDiv({ cls: "setting-item-control" });
  }
  setName(n: string) { this.nameEl.setText(n); return this; }
  setDesc(d: string) { this.descEl.setText(d); return this; }
  addText(cb: (t: TextComponent) => any) { cb(new TextComponent(this.controlEl)); return this; }
  addToggle(cb: (t: ToggleComponent) => any) { cb(new ToggleComponent(this.controlEl)); return this; }
  addButton(cb: (b: ButtonComponent) => any) { cb(new ButtonComponent(this.controlEl)); return this; }
}

export class PluginSettingTab {
  containerEl: HTMLElement;
  constructor(public app: App, public plugin: Plugin) { this.containerEl = createDiv({ cls: "vertical-tab-content" }); }
  display(): void {}
  hide(): void {}
}
