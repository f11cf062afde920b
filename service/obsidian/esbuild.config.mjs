// Bundles src/main.ts into main.js, the file Obsidian loads (CommonJS, `obsidian` left to the app).
// `node esbuild.config.mjs [outdir]`: outdir defaults to this folder.
import esbuild from "esbuild";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] || here);

await esbuild.build({
  entryPoints: [path.join(here, "src/main.ts")],
  bundle: true,
  format: "cjs",
  platform: "browser",
  target: "es2021",
  external: ["obsidian", "electron", "@codemirror/*"],
  outfile: path.join(outdir, "main.js"),
  logLevel: "warning",
  legalComments: "none",
});
