// Around every test: the stub's record starts empty, and afterwards no vault write method was
// called and no request went anywhere but the server URL the test configured.
import { afterEach, beforeEach, expect } from "vitest";
import { log } from "./stub/core";
import { configured } from "./helpers";

beforeEach(() => {
  log.reset();
  configured.clear();
  document.body.empty();
});

afterEach(() => {
  expect(log.writes, "the plugin called a vault write method").toEqual([]);
  for (const r of log.requests) {
    const base = new URL(r.url).origin;
    expect(configured.has(base), `request to ${r.url}, not a configured server URL`).toBe(true);
  }
});
