// The `obsidian` module on the screenshot page: the tests' stub (test/stub/core.ts), with
// requestUrl handed to the harness (scripts/screenshot.py), which makes the request to the real
// server outside the page, as Obsidian's requestUrl does (no CORS, no Origin header).
import { setRequester } from "../test/stub/core";

export * from "../test/stub/core";

declare global {
  interface Window { hybridRequest(param: string): Promise<string> }
}

setRequester(async (p) => JSON.parse(await window.hybridRequest(JSON.stringify(p))));
