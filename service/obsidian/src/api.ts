// The client of a running `hybrid serve --http`: POST /api/search, POST /api/related, GET /health.
// Every request goes through Obsidian's requestUrl (made outside the page: no CORS, no Origin
// header, which hybrid's server would refuse from app://obsidian.md) and only to the URL in the
// settings; a URL whose host is not this machine is refused unless the user allowed it.
import { requestUrl } from "obsidian";

export interface ClientSettings {
  serverUrl: string;
  token: string;
  allowRemote: boolean;
}

export type ProblemKind =
  | "bad-url"        // the setting is not an http(s) URL
  | "remote-blocked" // the host is not this machine and the user has not allowed that
  | "not-running"    // nothing answered: connection refused, timed out, unknown host
  | "not-hybrid"     // something answered, but not hybrid's API (404 on /api/search, not JSON)
  | "not-found"      // 404 on a route (an older server without /api/related)
  | "unauthorized"   // 401: token missing or wrong
  | "throttled"      // 429: too many wrong tokens from this address
  | "refused"        // 400/403/413/415/422: the server said what is wrong
  | "server-error";  // 5xx

export class ApiError extends Error {
  constructor(readonly kind: ProblemKind, message: string, readonly status = 0) {
    super(message);
    this.name = "ApiError";
  }
}

const DEFAULT_PORT = 8765;

// Exactly "localhost" or a loopback IP literal (127.0.0.0/8, ::1), as hybrid's server decides it:
// a name that merely starts with "127." is someone else's DNS.
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  return !!m && m.slice(1).every((x) => Number(x) <= 255);
}

// The server's base URL (no trailing slash) from the setting; ApiError when it is unusable.
export function baseUrl(s: ClientSettings): URL {
  let url: URL;
  try {
    url = new URL(s.serverUrl.trim());
  } catch {
    throw new ApiError("bad-url", `“${s.serverUrl}” is not a URL: set the server URL, e.g. http://127.0.0.1:${DEFAULT_PORT}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ApiError("bad-url", `the server URL must start with http:// or https:// (got ${url.protocol})`);
  }
  if (url.username || url.password || url.search || url.hash) {
    throw new ApiError("bad-url", "the server URL must be scheme://host:port only (a token goes in the Token setting)");
  }
  if (!isLoopbackHost(url.hostname) && !s.allowRemote) {
    throw new ApiError("remote-blocked", `${url.host} is not this machine: your queries and notes would cross the network. ` +
      "Use http://127.0.0.1:PORT, or turn on “Allow a server on another machine” in the settings.");
  }
  return url;
}

function endpoint(s: ClientSettings, route: string): string {
  const base = baseUrl(s).toString().replace(/\/+$/, "");
  return base + route;
}

// The command that starts the server the settings point at.
export function startCommand(s: ClientSettings): string {
  let port = DEFAULT_PORT;
  try {
    const url = new URL(s.serverUrl.trim());
    port = Number(url.port) || (url.protocol === "https:" ? 443 : 80);
  } catch { /* the default */ }
  const portArg = port === DEFAULT_PORT ? "" : ` --port ${port}`;
  const token = s.token.trim() ? "HYBRID_TOKEN=<your token> " : "";
  return `${token}hybrid serve --http --watch${portArg}`;
}

function errorText(data: unknown): string {
  if (data && typeof data === "object" && typeof (data as { error?: unknown }).error === "string") {
    return String((data as { error: string }).error).split("\n")[0];
  }
  return "";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export class HybridClient {
  constructor(private readonly settings: () => ClientSettings) {}

  private async call(route: string, body?: unknown): Promise<Record<string, unknown>> {
    const s = this.settings();
    const url = endpoint(s, route);
    const headers: Record<string, string> = {};
    if (s.token.trim()) headers.Authorization = `Bearer ${s.token.trim()}`;
    let resp;
    try {
      resp = await requestUrl({
        url,
        method: body === undefined ? "GET" : "POST",
        contentType: body === undefined ? undefined : "application/json",
        body: body === undefined ? undefined : JSON.stringify(body),
        headers,
        throw: false,
      });
    } catch (err) {
      throw new ApiError("not-running", `hybrid is not running at ${baseUrl(s).host} (${(err as Error).message || err})`);
    }
    const data = parseJson(resp.text);
    const said = errorText(data);
    const st = resp.status;
    if (st === 401) {
      throw new ApiError("unauthorized", s.token.trim()
        ? "the server refused the token (wrong bearer token): check Settings → hybrid search → Token"
        : "the server needs a token (it was started with --token or HYBRID_TOKEN): set it in Settings → hybrid search → Token", st);
    }
    if (st === 429) throw new ApiError("throttled", `too many wrong tokens from this machine: ${said || "try again later"}`, st);
    if (st === 404) throw new ApiError("not-found", `${route} not found on ${baseUrl(s).host}`, st);
    if (st >= 500) throw new ApiError("server-error", `the server failed (HTTP ${st})${said ? `: ${said}` : ""}`, st);
    if (st >= 400) throw new ApiError("refused", said || `the server refused the request (HTTP ${st})`, st);
    if (!data || typeof data !== "object" || Array.isArray(data)) {
      throw new ApiError("not-hybrid", `${baseUrl(s).host} answered, but not as hybrid does (is another program on that port?)`, st);
    }
    return data as Record<string, unknown>;
  }

  async health(): Promise<{ status: string; vaults: string[] }> {
    const data = await this.call("/health");
    if (data.status !== "ok") throw new ApiError("not-hybrid", "the server's /health did not say ok");
    return { status: "ok", vaults: Array.isArray(data.vaults) ? data.vaults.map(String) : [] };
  }

  // Whether the token is accepted (/health needs none): an empty search, which the server refuses
  // as a search (400/422) only after the token passed.
  async checkAccess(): Promise<void> {
    try {
      await this.search({ query: "", top_k: 1 });
    } catch (err) {
      if (!(err instanceof ApiError && err.kind === "refused")) throw err;
    }
  }

  // POST /api/search; a 404 here means the program on the port is not hybrid.
  async search(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    try {
      return await this.call("/api/search", body);
    } catch (err) {
      if (err instanceof ApiError && err.kind === "not-found") {
        throw new ApiError("not-hybrid", `no hybrid search API at ${baseUrl(this.settings()).host} (is another program on that port?)`, 404);
      }
      throw err;
    }
  }

  // POST /api/related; ApiError "not-found" when the server predates it.
  async related(note: string, vault: string | undefined, topK: number): Promise<Record<string, unknown>> {
    const body: Record<string, unknown> = { note, top_k: topK };
    if (vault) body.vault = vault;
    return this.call("/api/related", body);
  }
}
