// The screenshot page's script: the real plugin (src/main.ts) loaded as Obsidian loads it, its
// search command run with a query; the modal it draws is what scripts/screenshot.py captures.
import HybridPlugin from "../src/main";
import { App } from "../test/stub/core";

declare global {
  interface Window { hybridShot: { server: string; query: string; notes: string[]; vault: string }; hybridReady?: boolean }
}

async function main(): Promise<void> {
  const { server, query, notes, vault } = window.hybridShot;
  const app = new App(vault, notes);
  const plugin = new HybridPlugin(app as never, { id: "hybrid" } as never);
  await plugin.onload();
  plugin.settings.serverUrl = server;
  const modal = plugin.openSearch(query);
  await modal.searching;
  // the score breakdown, as the "Score" button of the first passage shows it
  modal.resultsEl.querySelector<HTMLElement>(".hybrid-passage .hybrid-why")?.click();
  window.hybridReady = true;
}

main().catch((err) => {
  document.body.textContent = `screenshot page failed: ${err}`;
  window.hybridReady = true;
});
