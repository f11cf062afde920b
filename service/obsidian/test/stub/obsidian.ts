// The `obsidian` module in the node tests: core.ts with requestUrl over node's http, as the app
// makes it (outside the page: no Origin header, no CORS).
import http from "node:http";
import https from "node:https";
import { setRequester } from "./core";

export * from "./core";

setRequester((p) => new Promise((resolve, reject) => {
  const url = new URL(p.url);
  const headers: Record<string, string> = { ...(p.headers || {}) };
  if (p.contentType) headers["Content-Type"] = p.contentType;
  const req = (url.protocol === "https:" ? https : http).request(url, { method: p.method || "GET", headers, timeout: 10000 }, (res) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.on("end", () => resolve({
      status: res.statusCode || 0,
      headers: Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, String(v)])),
      text: Buffer.concat(chunks).toString("utf8"),
    }));
  });
  req.on("timeout", () => req.destroy(new Error("timed out")));
  req.on("error", (e) => reject(new Error(`net::${(e as NodeJS.ErrnoException).code || e.message}`)));
  if (p.body !== undefined) req.write(p.body);
  req.end();
}));
