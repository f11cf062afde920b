// The related-notes pane: it follows the active note, falls back to the best hits for the note's
// title when the server has no /api/related (404) or has not indexed the note (422), opens a
// related note at its cited passage, and shows the failure states.
import { describe, expect, it } from "vitest";
import type HybridPlugin from "../src/main";
import type { RelatedView } from "../src/related-view";
import { log } from "./stub/core";
import type { App } from "./stub/core";
import { UNINDEXED, makePlugin, servers, sleep, until } from "./helpers";

async function pane(plugin: HybridPlugin, app: App, first: string): Promise<RelatedView> {
  await app.workspace.openNote(first);
  const view = (await plugin.showRelated())!;
  await view.updating;
  return view;
}

async function switchTo(app: App, view: RelatedView, path: string) {
  await app.workspace.openNote(path);
  await until(() => view.bodyEl.dataset.path === path || view.mode === "problem");
  await view.updating;
}

const titles = (view: RelatedView) => [...view.bodyEl.querySelectorAll(".hybrid-related-item")].map((li) => li.getAttribute("data-path"));

describe("related pane", () => {
  it("shows the notes related to the active note and follows note switches", async () => {
    const { plugin, app } = await makePlugin();
    const view = await pane(plugin, app, "home-lab/backups.md");
    expect(view.mode).toBe("related");
    expect(view.bodyEl.querySelector("h4")!.textContent).toBe("Related to backups");
    const first = titles(view);
    expect(first.length).toBeGreaterThan(2);
    expect(first).not.toContain("home-lab/backups.md");
    expect(view.bodyEl.querySelector(".hybrid-why-list li")!.textContent).toMatch(/link|similar|tag|co-cited/);
    const asked = log.requests.filter((r) => r.url.endsWith("/api/related")).map((r) => JSON.parse(r.body!).note);
    expect(asked).toEqual(["obsidian://open?vault=vault&file=home-lab%2Fbackups.md"]);

    const other = servers.notes.find((p) => p.startsWith("finance/"))!;
    await switchTo(app, view, other);
    expect(view.mode).toBe("related");
    expect(view.bodyEl.dataset.path).toBe(other);
    expect(titles(view)).not.toEqual(first);
    expect(titles(view)).not.toContain(other);
  });

  it("asks once when notes are switched in a burst", async () => {
    const { plugin, app } = await makePlugin();
    const view = await pane(plugin, app, "home-lab/backups.md");
    log.requests = [];
    const finance = servers.notes.filter((p) => p.startsWith("finance/")).slice(0, 3);
    for (const p of finance) await app.workspace.openNote(p);
    await until(() => view.bodyEl.dataset.path === finance[2]);
    await sleep(300);
    expect(log.requests.filter((r) => r.url.endsWith("/api/related")).length).toBe(1);
  });

  it("opens a related note at its cited passage", async () => {
    const { plugin, app } = await makePlugin();
    const view = await pane(plugin, app, "home-lab/backups.md");
    log.opened = [];
    const item = view.bodyEl.querySelector<HTMLElement>(".hybrid-related-item")!;
    item.click();
    await until(() => log.opened.length);
    expect(log.opened[0].path).toBe(item.dataset.path);
    expect((log.opened[0].eState as { line: number }).line).toBeGreaterThanOrEqual(0);
  });

  it("falls back to the best hits for the title when /api/related is missing (404)", async () => {
    const { plugin, app } = await makePlugin({ serverUrl: servers.legacy });
    const view = await pane(plugin, app, "home-lab/backups.md");
    expect(view.mode).toBe("title-search");
    expect(view.bodyEl.textContent).toContain("Best hits for “backups”");
    expect(view.bodyEl.textContent).toContain("no related-notes API");
    expect(titles(view).length).toBeGreaterThan(0);
    expect(titles(view)).not.toContain("home-lab/backups.md");
    const routes = log.requests.map((r) => new URL(r.url).pathname);
    expect(routes).toEqual(["/api/related", "/api/search"]);
    expect(JSON.parse(log.requests[1].body!).query).toBe("backups");
  });

  it("falls back to the title search for a note hybrid has not indexed (422)", async () => {
    const { plugin, app } = await makePlugin();
    const view = await pane(plugin, app, UNINDEXED);
    expect(view.mode).toBe("title-search");
    expect(view.bodyEl.textContent).toContain("has not indexed this note");
  });

  it("says the server is not running, and recovers on retry", async () => {
    const { plugin, app } = await makePlugin({ serverUrl: servers.dead });
    const view = await pane(plugin, app, "home-lab/backups.md");
    expect(view.mode).toBe("problem");
    const box = view.bodyEl.querySelector<HTMLElement>(".hybrid-problem")!;
    expect(box.dataset.kind).toBe("not-running");
    expect(box.querySelector("code")!.textContent).toContain("hybrid serve --http");
    plugin.settings.serverUrl = servers.open;
    const { configured } = await import("./helpers");
    configured.add(new URL(servers.open).origin);
    box.querySelector<HTMLElement>(".hybrid-retry")!.click();
    await until(() => view.mode === "related");
  });
});
