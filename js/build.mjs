// Bundle the anywidget front ends into ../mmsp_notebook/static (ESM, minified, no external imports).
//   node build.mjs          build
//   node build.mjs --check  build into a temp dir and verify the committed outputs are up to date
import * as esbuild from "esbuild";
import { readFileSync, mkdtempSync, mkdirSync, existsSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join, dirname } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes("--check");
const outdir = check ? mkdtempSync(join(tmpdir(), "mmsp-build-")) : join(here, "..", "mmsp_notebook", "static");
mkdirSync(outdir, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  legalComments: "none",
  logLevel: "warning",
  absWorkingDir: here,
  // markdown-it runs with linkify: false, so linkify-it is replaced by a stub
  alias: { "linkify-it": "./src/linkify-stub.js" },
};

await esbuild.build({
  ...common,
  entryPoints: { turn: "src/turn.js", chat: "src/chat.js" },
  outdir,
});
await esbuild.build({ ...common, entryPoints: { widget: "src/widget.css" }, outdir, loader: { ".css": "css" } });

let failed = false;
for (const name of ["turn.js", "chat.js", "widget.css"]) {
  const file = join(outdir, name);
  const code = readFileSync(file);
  const text = code.toString("utf8");
  if (name.endsWith(".js")) {
    // no imports at all may remain: everything is bundled (no CDN, no bare specifiers)
    const bad = /(^|[;}\s])import\s*(?:[\w*{}\s,$]+from\s*)?["']|import\(\s*["']|from\s*["']https?:/m.exec(text);
    if (bad) {
      console.error(`${name}: external import left in the bundle: ${text.slice(bad.index, bad.index + 80)}`);
      failed = true;
    }
    if (!/export\s*\{[^}]*\bas default\b/.test(text) && !/export default/.test(text)) {
      console.error(`${name}: no default export`);
      failed = true;
    }
  }
  console.log(`${name.padEnd(11)} ${(code.length / 1024).toFixed(1).padStart(6)} KB raw  ${(gzipSync(code).length / 1024).toFixed(1).padStart(6)} KB gzip`);
  if (check) {
    const committed = join(here, "..", "mmsp_notebook", "static", name);
    if (!existsSync(committed) || readFileSync(committed).toString("utf8") !== text) {
      console.error(`${name}: mmsp_notebook/static/${name} is out of date — run npm run build and commit it`);
      failed = true;
    }
  }
}
if (failed) process.exit(1);
