// The plugin's settings (kept by Obsidian in the plugin's own data.json, never in a note) and
// their tab: where the server is, its token, whether a server on another machine is allowed.
import { App, Plugin, PluginSettingTab, Setting } from "obsidian";
import { ApiError, HybridClient, isLoopbackHost, startCommand } from "./api";

export interface HybridSettings {
  serverUrl: string;
  token: string;
  allowRemote: boolean; // a server whose host is not this machine (off: such a URL is refused)
  vault: string;        // hybrid's name for this vault, to search only it; "" = every vault
  topK: number;         // notes per search
}

export const DEFAULT_SETTINGS: HybridSettings = {
  serverUrl: "http://127.0.0.1:8765",
  token: "",
  allowRemote: false,
  vault: "",
  topK: 12,
};

export function readSettings(saved: unknown): HybridSettings {
  const s = { ...DEFAULT_SETTINGS, ...(saved && typeof saved === "object" ? saved : {}) } as HybridSettings;
  s.topK = Math.min(50, Math.max(1, Math.round(Number(s.topK)) || DEFAULT_SETTINGS.topK));
  return s;
}

// The warning shown under the URL: empty when the URL is this machine's.
export function remoteWarning(url: string): string {
  let host = "";
  try { host = new URL(url.trim()).hostname; } catch { return "Not a URL."; }
  if (isLoopbackHost(host)) return "";
  return `${host} is not this machine: every query, and the passages of your notes the server returns, ` +
    "would cross the network. Refused unless you allow it below.";
}

export interface SettingsHost extends Plugin {
  settings: HybridSettings;
  client: HybridClient;
  saveSettings(): Promise<void>;
}

// Why the plugin sees what agents see, said where its settings are (it surprised owners).
export const AGENT_VIEW = "You see here what agents see: notes hidden from agents (agent_exclude, #private, "
  + "private: true) are left out, secrets show as [redacted secret], and each search is in the audit log. "
  + "The owner's view needs the key the server writes to its own server.json: it changes whenever the server "
  + "starts, and this plugin's settings are a plain file inside the vault (it travels wherever the vault is "
  + "synced or copied), so the plugin does not keep it. For every note, run `hybrid ui` or `hybrid query`.";

export class HybridSettingTab extends PluginSettingTab {
  constructor(app: App, private readonly host: SettingsHost) {
    super(app, host);
  }

  display(): void {
    const { containerEl } = this;
    const s = this.host.settings;
    containerEl.empty();
    containerEl.createEl("p", { cls: "hybrid-settings-intro",
      text: "Searches go to a hybrid server running on this machine (`hybrid serve --http`). The plugin only reads: it never changes a note." });
    containerEl.createEl("p", { cls: "hybrid-settings-view", text: AGENT_VIEW });

    const warning = containerEl.createDiv({ cls: "hybrid-warning" });
    const showWarning = () => {
      const w = remoteWarning(s.serverUrl);
      warning.setText(w);
      warning.toggleClass("hybrid-hidden", !w);
    };
    new Setting(containerEl).setName("Server URL")
      .setDesc("Where `hybrid serve --http` listens (its --port).")
      .addText((t) => t.setPlaceholder(DEFAULT_SETTINGS.serverUrl).setValue(s.serverUrl).onChange(async (v) => {
        s.serverUrl = v.trim() || DEFAULT_SETTINGS.serverUrl;
        showWarning();
        await this.host.saveSettings();
      }));
    containerEl.appendChild(warning);
    showWarning();

    new Setting(containerEl).setName("Token")
      .setDesc("Only if the server was started with --token or HYBRID_TOKEN. Kept in this plugin's data.json, in plain text.")
      .addText((t) => {
        t.inputEl.type = "password";
        t.setValue(s.token).onChange(async (v) => {
          s.token = v.trim();
          await this.host.saveSettings();
        });
      });

    new Setting(containerEl).setName("Allow a server on another machine")
      .setDesc("Off: a URL whose host is not localhost or 127.x is refused, so nothing leaves this machine.")
      .addToggle((t) => t.setValue(s.allowRemote).onChange(async (v) => {
        s.allowRemote = v;
        await this.host.saveSettings();
      }));

    new Setting(containerEl).setName("Vault in hybrid")
      .setDesc("hybrid's name for this vault (`hybrid vault list`), to search only it. Empty: every vault the server has.")
      .addText((t) => t.setValue(s.vault).onChange(async (v) => {
        s.vault = v.trim();
        await this.host.saveSettings();
      }));

    new Setting(containerEl).setName("Notes per search")
      .addText((t) => t.setValue(String(s.topK)).onChange(async (v) => {
        s.topK = readSettings({ topK: v }).topK;
        await this.host.saveSettings();
      }));

    const status = containerEl.createDiv({ cls: "hybrid-connection" });
    new Setting(containerEl).setName("Check the connection")
      .addButton((b) => b.setButtonText("Check").onClick(() => this.check(status)));
  }

  async check(status: HTMLElement): Promise<void> {
    status.setText("Checking…");
    try {
      const h = await this.host.client.health();
      await this.host.client.checkAccess();
      status.setText(`Connected: hybrid answers, with vaults ${h.vaults.join(", ") || "(none)"}.`);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      const cmd = err instanceof ApiError && err.kind === "not-running" ? ` Start it with: ${startCommand(this.host.settings)}` : "";
      status.setText(msg + cmd);
    }
  }
}

// What the modal and the pane need of the plugin.
export interface Host {
  settings: HybridSettings;
  client: HybridClient;
}
