// vitest's global setup: a real hybrid server on 127.0.0.1 over a copy of the sample vault
// (plus a note whose text is HTML, to prove it is shown as text), indexed with the fast hash
// embedder. Three addresses are handed to the tests: the server without a token, the same index
// served with a token, and a forwarding proxy that answers 404 on /api/related (a server from
// before related notes); plus a port where nothing listens.
// The Python is the repo's .venv/bin/python, or $HYBRID_PYTHON.
import { spawn, spawnSync, ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";

const here = path.dirname(new URL(import.meta.url).pathname);
export const repoRoot = path.resolve(here, "../../..");
export const TOKEN = "plugin-test-token";

export const INJECTION_NOTE = `# Zanzibar <img src=x onerror="window.__pwned=1">

The zanzibar ledger <script>window.__pwned=2</script> keeps <b>bold</b> claims & <img src=y onerror=alert(1)> tags.
`;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

async function waitHealthy(url: string, proc: ChildProcess, log: string): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`hybrid serve exited (${proc.exitCode}):\n${fs.readFileSync(log, "utf8")}`);
    try {
      const r = await fetch(url + "/health");
      if (r.ok) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`hybrid serve did not answer at ${url}:\n${fs.readFileSync(log, "utf8")}`);
}

function listNotes(dir: string, base = dir): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? listNotes(p, base) : [path.relative(base, p).split(path.sep).join("/")];
  });
}

export default async function setup(project: TestProject) {
  const python = process.env.HYBRID_PYTHON || path.join(repoRoot, ".venv/bin/python");
  if (!fs.existsSync(python)) throw new Error(`no Python at ${python}: run scripts/bootstrap.sh or set HYBRID_PYTHON`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "hybrid-plugin-test-"));
  const vault = path.join(tmp, "vault");
  fs.cpSync(path.join(repoRoot, "hybrid/sample_vault"), vault, { recursive: true });
  fs.writeFileSync(path.join(vault, "misc/zanzibar.md"), INJECTION_NOTE);
  const home = path.join(tmp, "home");
  fs.mkdirSync(home);
  fs.writeFileSync(path.join(home, "config.toml"),
    `[settings]\nembedder = "hash:64"\n\n[vaults.sample]\npath = ${JSON.stringify(vault)}\n`);
  const env: NodeJS.ProcessEnv = { ...process.env, HYBRID_HOME: home, PYTHONPATH: repoRoot };
  delete env.HYBRID_TOKEN;
  const indexed = spawnSync(python, ["-m", "hybrid", "index"], { env, encoding: "utf8" });
  if (indexed.status !== 0) throw new Error(`hybrid index failed:\n${indexed.stdout}\n${indexed.stderr}`);

  const procs: ChildProcess[] = [];
  const serve = async (extra: string[], name: string) => {
    const port = await freePort();
    const log = path.join(tmp, `${name}.log`);
    const out = fs.openSync(log, "w");
    const proc = spawn(python, ["-m", "hybrid", "serve", "--http", "--host", "127.0.0.1", "--port", String(port), ...extra],
      { env, stdio: ["ignore", out, out] });
    procs.push(proc);
    const url = `http://127.0.0.1:${port}`;
    await waitHealthy(url, proc, log);
    return url;
  };
  const [open, withToken] = await Promise.all([serve([], "open"), serve(["--token", TOKEN], "token")]);

  // a server from before /api/related: everything forwarded but that route
  const target = new URL(open);
  const legacy = http.createServer((req, res) => {
    if (req.url === "/api/related") {
      res.writeHead(404, { "content-type": "text/plain" }).end("Not Found");
      return;
    }
    const fwd = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method,
      headers: { ...req.headers, host: target.host } }, (r) => {
      res.writeHead(r.statusCode || 502, r.headers);
      r.pipe(res);
    });
    fwd.on("error", () => res.writeHead(502).end());
    req.pipe(fwd);
  });
  const legacyPort = await freePort();
  await new Promise<void>((r) => legacy.listen(legacyPort, "127.0.0.1", r));

  project.provide("servers", {
    open, token: withToken, legacy: `http://127.0.0.1:${legacyPort}`, dead: `http://127.0.0.1:${await freePort()}`,
    secret: TOKEN, vaultFolder: "vault", notes: listNotes(vault),
  });

  return async () => {
    legacy.close();
    for (const p of procs) p.kill("SIGTERM");
    await Promise.all(procs.map((p) => new Promise((r) => (p.exitCode !== null ? r(null) : p.on("exit", r)))));
    fs.rmSync(tmp, { recursive: true, force: true });
  };
}

export interface Servers {
  open: string; token: string; legacy: string; dead: string; secret: string; vaultFolder: string; notes: string[];
}

declare module "vitest" {
  export interface ProvidedContext {
    servers: Servers;
  }
}
