// The settings tab: the warning for a server on another machine, and the connection check.
import { describe, expect, it } from "vitest";
import { HybridSettingTab, readSettings } from "../src/settings";
import { makePlugin, servers, until } from "./helpers";

async function tab(settings: Parameters<typeof makePlugin>[0]) {
  const { plugin, app } = await makePlugin(settings);
  const t = new HybridSettingTab(app as never, plugin);
  t.display();
  return { t, plugin };
}

const check = async (t: HybridSettingTab) => {
  const status = t.containerEl.querySelector<HTMLElement>(".hybrid-connection")!;
  [...t.containerEl.querySelectorAll("button")].find((b) => b.textContent === "Check")!.click();
  await until(() => status.textContent !== "Checking…" && status.textContent);
  return status.textContent!;
};

describe("settings", () => {
  it("warns while the URL is not this machine's, and saves what is typed", async () => {
    const { t, plugin } = await tab({});
    const warning = t.containerEl.querySelector<HTMLElement>(".hybrid-warning")!;
    expect(warning.classList.contains("hybrid-hidden")).toBe(true);
    const url = t.containerEl.querySelector<HTMLInputElement>("input[type=text]")!;
    url.value = "http://192.168.1.5:8765";
    url.dispatchEvent(new Event("input"));
    await until(() => (plugin as unknown as { saved: { serverUrl: string } }).saved?.serverUrl === "http://192.168.1.5:8765");
    expect(warning.classList.contains("hybrid-hidden")).toBe(false);
    expect(warning.textContent).toContain("not this machine");
    expect(await check(t)).toContain("is not this machine");
    expect(t.containerEl.querySelector<HTMLInputElement>("input[type=password]")).toBeTruthy();
    // the tab says plainly that this is the agents' view, and why the owner's is not offered
    const view = t.containerEl.querySelector<HTMLElement>(".hybrid-settings-view")!.textContent!;
    expect(view).toContain("what agents see");
    expect(view).toContain("changes whenever the server starts");
  });

  it("checks the connection: connected, not running, wrong token", async () => {
    expect(await check((await tab({})).t)).toBe("Connected: hybrid answers, with vaults sample.");
    const dead = await check((await tab({ serverUrl: servers.dead })).t);
    expect(dead).toContain(`Start it with: hybrid serve --http --watch --port ${new URL(servers.dead).port}`);
    expect(await check((await tab({ serverUrl: servers.token, token: "nope" })).t)).toContain("wrong bearer token");
  });

  it("reads saved settings with defaults and bounds", () => {
    expect(readSettings(null).serverUrl).toBe("http://127.0.0.1:8765");
    expect(readSettings({ topK: 500 }).topK).toBe(50);
    expect(readSettings({ topK: "x" }).topK).toBe(12);
  });
});
