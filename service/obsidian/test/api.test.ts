// The client against the real server: which URLs it will talk to, and how each failure reads.
import { describe, expect, it } from "vitest";
import { ApiError, HybridClient, baseUrl, isLoopbackHost, startCommand } from "../src/api";
import { log } from "./stub/core";
import { configured, servers } from "./helpers";

const client = (serverUrl: string, token = "", allowRemote = false) => {
  try { configured.add(new URL(serverUrl).origin); } catch { /* none */ }
  return new HybridClient(() => ({ serverUrl, token, allowRemote }));
};

async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected a failure");
}

describe("api client", () => {
  it("knows loopback hosts as hybrid's server does", () => {
    for (const h of ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1"]) expect(isLoopbackHost(h)).toBe(true);
    for (const h of ["127.evil.com", "example.com", "192.168.1.5", "10.0.0.1", "localhost.example", "127.0.0.256"]) {
      expect(isLoopbackHost(h)).toBe(false);
    }
  });

  it("refuses a server on another machine unless allowed, before any request", async () => {
    configured.clear(); // no request may go anywhere
    const remote = new HybridClient(() => ({ serverUrl: "http://192.168.1.5:8765", token: "", allowRemote: false }));
    expect((await failure(remote.search({ query: "x" }))).kind).toBe("remote-blocked");
    expect(() => baseUrl({ serverUrl: "http://mybox.lan:8765", token: "", allowRemote: true })).not.toThrow();
    for (const bad of ["ftp://127.0.0.1:8765", "127.0.0.1:8765x", "http://user:pw@127.0.0.1:8765", "http://127.0.0.1:8765/?q=1"]) {
      const e = await failure(client(bad).health());
      expect(e.kind).toBe("bad-url");
    }
    expect(log.requests).toEqual([]);
  });

  it("searches, answers health, and checks the token", async () => {
    const c = client(servers.open);
    expect((await c.health()).vaults).toEqual(["sample"]);
    const data = await c.search({ query: "restic", top_k: 3 });
    expect(Array.isArray(data.notes)).toBe(true);
    await c.checkAccess();
    const t = client(servers.token, "wrong");
    expect((await c.health()).status).toBe("ok"); // /health needs no token …
    expect((await failure(t.checkAccess())).kind).toBe("unauthorized"); // … the search does
    await client(servers.token, servers.secret).checkAccess();
  });

  it("reads a refused request's reason, and a server that is not running", async () => {
    const e = await failure(client(servers.open).search({ query: "x", top_k: 0 }));
    expect(e.kind).toBe("refused");
    expect(e.status).toBe(400);
    expect(e.message).toContain("top_k");
    const dead = await failure(client(servers.dead).health());
    expect(dead.kind).toBe("not-running");
    expect(startCommand({ serverUrl: "http://127.0.0.1:8765", token: "", allowRemote: false })).toBe("hybrid serve --http --watch");
    expect(startCommand({ serverUrl: servers.dead, token: "t", allowRemote: false }))
      .toBe(`HYBRID_TOKEN=<your token> hybrid serve --http --watch --port ${new URL(servers.dead).port}`);
  });

  it("sends no Origin header, JSON bodies, and the token as a bearer", async () => {
    await client(servers.token, servers.secret).search({ query: "restic", top_k: 1 });
    const r = log.requests[0];
    expect(r.method).toBe("POST");
    expect(r.contentType).toBe("application/json");
    expect(r.headers).toEqual({ Authorization: `Bearer ${servers.secret}` });
  });
});
