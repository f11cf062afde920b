// Making the plugin as Obsidian does (a stub App over the test vault's file list) and waiting.
import { inject } from "vitest";
import HybridPlugin from "../src/main";
import type { HybridSettings } from "../src/settings";
import { App } from "./stub/core";

export const servers = inject("servers");
export const configured = new Set<string>(); // the server URLs the tests set, by origin

// Files the stub vault holds besides the indexed ones: a note hybrid has not indexed.
export const UNINDEXED = "drafts/not indexed yet.md";

// vaultName: the folder name of the vault open in the app (the server's is servers.vaultFolder)
export async function makePlugin(settings: Partial<HybridSettings> = {}, vaultName = servers.vaultFolder) {
  const app = new App(vaultName, [...servers.notes, UNINDEXED]);
  const plugin = new HybridPlugin(app as never, { id: "hybrid" } as never);
  await plugin.onload();
  configure(plugin, settings);
  return { app, plugin };
}

export function configure(plugin: HybridPlugin, settings: Partial<HybridSettings>) {
  Object.assign(plugin.settings, { serverUrl: servers.open, ...settings });
  try { configured.add(new URL(plugin.settings.serverUrl).origin); } catch { /* a bad URL: no request may go out */ }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(fn: () => T | undefined | null | false, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await sleep(20);
  }
}
