// The search modal against the real server: grouping, highlights, confidence, opening at the
// cited line, the breakdown on demand, debouncing and stale answers, and its failure states.
import { describe, expect, it } from "vitest";
import { DEBOUNCE_MS, SearchModal } from "../src/modal";
import { log } from "./stub/core";
import { makePlugin, servers, sleep, until } from "./helpers";

async function search(modal: SearchModal, query: string) {
  modal.inputEl.value = query;
  modal.inputEl.dispatchEvent(new Event("input"));
  await sleep(DEBOUNCE_MS + 20);
  await modal.searching;
}

const notesOf = (modal: SearchModal) => [...modal.resultsEl.querySelectorAll<HTMLElement>(".hybrid-note")];

describe("search modal", () => {
  it("groups passages by note, highlights the marks, shows the confidence word", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    const notes = notesOf(modal);
    expect(notes.length).toBeGreaterThan(1);
    const paths = notes.map((n) => n.dataset.path);
    expect(new Set(paths).size).toBe(paths.length); // each note once
    expect(paths[0]).toBe("home-lab/backups.md");
    const first = notes[0];
    const passages = first.querySelectorAll(".hybrid-passage");
    expect(passages.length).toBeGreaterThan(1); // the note's passages under it
    for (const p of passages) expect(p.getAttribute("data-citation")).toMatch(/^sample:home-lab\/backups\.md:\d+-\d+$/);
    const marks = [...first.querySelectorAll(".hybrid-snippet mark")].map((m) => m.textContent!.toLowerCase());
    expect(marks).toContain("restic");
    expect(first.querySelector(".hybrid-conf")!.textContent).toMatch(/^(strong|fair|weak)$/);
    expect(first.querySelector(".hybrid-conf")!.textContent).toBe("strong");
    expect(modal.statusEl.textContent).toMatch(/^\d+ notes · \d+ ms/);
  });

  it("shows note text as text: no element from a note's HTML", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    await search(modal, "zanzibar ledger");
    const note = notesOf(modal).find((n) => n.dataset.path === "misc/zanzibar.md")!;
    expect(note).toBeTruthy();
    expect(modal.contentEl.querySelectorAll("script, img, b, iframe").length).toBe(0);
    // a snippet is the note as rendered: its HTML tags are gone, what was between them is text
    expect(note.textContent).toContain("window.__pwned=2");
    expect(note.textContent).not.toContain("<script>");
    expect(note.querySelector(".hybrid-note-title")!.textContent).toContain('<img src=x onerror="window.__pwned=1">');
    const marks = [...note.querySelectorAll("mark")].map((m) => m.textContent!.toLowerCase());
    expect(marks).toContain("zanzibar");
    for (const m of note.querySelectorAll("mark")) expect(m.children.length).toBe(0);
    expect((globalThis as { __pwned?: number }).__pwned).toBeUndefined();
  });

  it("opens the chosen passage's note at its cited line, and closes", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    const passage = notesOf(modal)[0].querySelectorAll<HTMLElement>(".hybrid-passage")[1];
    const line = Number(passage.dataset.line);
    expect(line).toBeGreaterThan(1);
    passage.click();
    await until(() => log.opened.length);
    expect(log.opened[0]).toEqual({ path: "home-lab/backups.md", eState: { line: line - 1 }, active: true });
    expect(log.cursor).toEqual([{ path: "home-lab/backups.md", line: line - 1 }]);
    await until(() => !document.body.contains(modal.contentEl));
  });

  it("keyboard: arrows move the selection, Enter opens it", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    const key = (k: string) => modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: k }));
    key("ArrowDown");
    const selected = modal.resultsEl.querySelector<HTMLElement>(".hybrid-passage.is-selected")!;
    expect(selected).toBe(modal.resultsEl.querySelectorAll(".hybrid-passage")[1]);
    key("Enter");
    await until(() => log.opened.length);
    const [, path, start] = /^sample:(.+):(\d+)-\d+$/.exec(selected.dataset.citation!)!;
    expect(log.opened[0].path).toBe(path);
    expect(log.opened[0].eState).toEqual({ line: Number(start) - 1 });
  });

  it("an input method's Enter picks its word, not a hit; Mod+Enter and Mod+click open a new tab", async () => {
    const { plugin } = await makePlugin();
    // no command comes with a default hotkey (Obsidian's plugin guidelines)
    expect((plugin as unknown as { commands: { hotkeys?: unknown }[] }).commands.every((c) => !c.hotkeys)).toBe(true);
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    // composing (Chinese, Japanese…): Enter and the arrows belong to the input method
    modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", isComposing: true }));
    modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", isComposing: true }));
    modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", keyCode: 229 }));
    await sleep(50);
    expect(log.opened).toEqual([]);
    expect(modal.resultsEl.querySelectorAll(".hybrid-passage")[0].classList.contains("is-selected")).toBe(true);
    modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", ctrlKey: true }));
    await until(() => log.opened.length);
    expect(log.leaves).toEqual(["tab"]);

    const again = plugin.openSearch();
    await search(again, "restic backup");
    const passage = again.resultsEl.querySelector<HTMLElement>(".hybrid-passage")!;
    passage.dispatchEvent(new MouseEvent("click", { bubbles: true, metaKey: true, altKey: true }));
    await until(() => log.opened.length === 2);
    expect(log.leaves).toEqual(["tab", "split"]);
    passage.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await until(() => log.opened.length === 3);
    expect(log.leaves[2]).toBe(false); // a plain click: the current tab
  });

  it("builds the score breakdown only when asked", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    expect(modal.resultsEl.querySelector(".hybrid-breakdown")).toBeNull();
    const passage = modal.resultsEl.querySelector<HTMLElement>(".hybrid-passage")!;
    const button = passage.querySelector<HTMLElement>(".hybrid-why")!;
    button.click();
    const dl = passage.querySelector<HTMLElement>(".hybrid-breakdown")!;
    expect(dl).toBeTruthy();
    expect(modal.resultsEl.querySelectorAll(".hybrid-breakdown").length).toBe(1);
    const names = [...dl.querySelectorAll("dt")].map((d) => d.textContent);
    expect(names).toEqual(expect.arrayContaining(["BM25", "Vector", "Fused", "Final", "Confidence"]));
    expect(dl.querySelector(".hybrid-breakdown-lex dd")!.textContent).toMatch(/^#\d+ · [\d.]+$/);
    expect(log.opened).toEqual([]); // the button does not open the note
    button.click();
    expect(dl.classList.contains("hybrid-hidden")).toBe(true);
    expect(button.getAttribute("aria-expanded")).toBe("false");
    // Alt+B on the selected passage (the first): shown again, still one breakdown
    modal.inputEl.dispatchEvent(new KeyboardEvent("keydown", { key: "∫", code: "KeyB", altKey: true }));
    expect(dl.classList.contains("hybrid-hidden")).toBe(false);
    expect(modal.resultsEl.querySelectorAll(".hybrid-breakdown").length).toBe(1);
  });

  it("marks hits of another of hybrid's vaults, and does not open them", async () => {
    const { plugin } = await makePlugin({}, "another-vault"); // the server's vault is not the one open
    const modal = plugin.openSearch();
    await search(modal, "restic backup");
    const note = notesOf(modal)[0];
    expect(note.querySelector(".hybrid-note-path")!.textContent).toBe("sample:home-lab/backups.md (another vault)");
    note.querySelector<HTMLElement>(".hybrid-passage")!.click();
    await until(() => log.notices.length);
    expect(log.notices[0]).toContain("is in another vault");
    expect(log.opened).toEqual([]);
  });

  it("debounces typing: one request for a burst of keystrokes", async () => {
    const { plugin } = await makePlugin();
    const modal = plugin.openSearch();
    for (const q of ["r", "re", "res", "rest", "restic"]) {
      modal.inputEl.value = q;
      modal.inputEl.dispatchEvent(new Event("input"));
      await sleep(DEBOUNCE_MS / 4);
    }
    await sleep(DEBOUNCE_MS + 20);
    await modal.searching;
    const searches = log.requests.filter((r) => r.url.endsWith("/api/search"));
    expect(searches.length).toBe(1);
    expect(JSON.parse(searches[0].body!).query).toBe("restic");
    expect(modal.resultsEl.dataset.answered).toBe("restic");
  });

  it("drops an answer that arrives after a newer search's", async () => {
    const { plugin } = await makePlugin();
    const real = plugin.client.search.bind(plugin.client);
    // the first search's answer is held back until the second has been shown
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let calls = 0;
    plugin.client.search = async (body) => {
      const first = ++calls === 1; // counted as sent: the server may answer the second first
      const answer = await real(body);
      if (first) await held;
      return answer;
    };
    const modal = plugin.openSearch();
    modal.inputEl.value = "tax checklist";
    const slow = modal.run();
    modal.inputEl.value = "restic backup";
    await modal.run();
    release();
    await slow;
    expect(modal.resultsEl.dataset.answered).toBe("restic backup");
    expect(notesOf(modal)[0].dataset.path).toBe("home-lab/backups.md");
  });

  it("says the server is not running, with the command that starts it", async () => {
    const { plugin } = await makePlugin({ serverUrl: servers.dead });
    const modal = plugin.openSearch("restic");
    await modal.searching;
    const box = modal.statusEl.querySelector<HTMLElement>(".hybrid-problem")!;
    expect(box.dataset.kind).toBe("not-running");
    expect(box.textContent).toContain("not running");
    const port = new URL(servers.dead).port;
    expect(box.querySelector("code")!.textContent).toBe(`hybrid serve --http --watch --port ${port}`);
    expect(notesOf(modal)).toEqual([]);
  });

  it("says the token is wrong (401), and searches with the right one", async () => {
    const { plugin } = await makePlugin({ serverUrl: servers.token, token: "not-the-token" });
    const modal = plugin.openSearch("restic");
    await modal.searching;
    const box = modal.statusEl.querySelector<HTMLElement>(".hybrid-problem")!;
    expect(box.dataset.kind).toBe("unauthorized");
    expect(box.textContent).toContain("wrong bearer token");
    plugin.settings.token = servers.secret;
    (box.querySelector(".hybrid-retry") as HTMLElement).click();
    await modal.searching;
    expect(notesOf(modal)[0].dataset.path).toBe("home-lab/backups.md");
    const sent = log.requests.filter((r) => r.url.endsWith("/api/search")).map((r) => r.headers?.Authorization);
    expect(sent).toEqual(["Bearer not-the-token", `Bearer ${servers.secret}`]);
  });

  it("says a token is needed when none is set", async () => {
    const { plugin } = await makePlugin({ serverUrl: servers.token });
    const modal = plugin.openSearch("restic");
    await modal.searching;
    expect(modal.statusEl.textContent).toContain("needs a token");
  });
});
