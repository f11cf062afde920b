// It never writes to the vault: the stub's write methods throw (and every test checks none was
// called, test/setup.ts); here the source is read for any call of one, and the bundle is built.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ADAPTER_WRITE_METHODS, WRITE_METHODS } from "./stub/core";

const src = path.resolve(__dirname, "../src");
const sources = fs.readdirSync(src).filter((f) => f.endsWith(".ts")).map((f) => [f, fs.readFileSync(path.join(src, f), "utf8")]);

describe("never writes to the vault", () => {
  it("calls no vault or adapter write method, nor fetch, anywhere in its source", () => {
    const names = [...new Set([...WRITE_METHODS, ...ADAPTER_WRITE_METHODS])].join("|");
    const vaultWrite = new RegExp(`\\bvault\\s*\\.\\s*(?:adapter\\s*\\.\\s*)?(?:${names})\\s*\\(`);
    for (const [file, text] of sources) {
      expect(text, `${file} writes to the vault`).not.toMatch(vaultWrite);
      expect(text, `${file} reaches the adapter`).not.toMatch(/\.adapter\b/);
      expect(text, `${file} uses fetch/XHR (requests go through requestUrl to the configured URL)`)
        .not.toMatch(/\bfetch\s*\(|XMLHttpRequest|WebSocket|sendBeacon/);
      expect(text, `${file} sets HTML from text`).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    }
  });

  it("builds main.js with esbuild, obsidian left to the app", () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "hybrid-plugin-build-"));
    execFileSync(process.execPath, [path.resolve(__dirname, "../esbuild.config.mjs"), out]);
    const js = fs.readFileSync(path.join(out, "main.js"), "utf8");
    expect(js).toContain('require("obsidian")');
    expect(js).not.toMatch(/require\("(?!obsidian")/); // nothing else left to require
    expect(js).toContain("hybrid-related");
    fs.rmSync(out, { recursive: true, force: true });
  });
});
