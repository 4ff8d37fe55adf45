// Bundle the anywidget front ends into ../mmsp_notebook/static (ESM, minified, no external imports).
//   node build.mjs               build
//   node build.mjs --outdir DIR  build into DIR instead
//   node build.mjs --check       build into a temp dir and verify the committed outputs are the same, byte for byte
// The build is deterministic: the same sources and lockfile give the same bytes (no paths, dates or
// source maps in the output), which is what lets tests/test_html.py refuse stale committed bundles.
import * as esbuild from "esbuild";
import { readFileSync, mkdtempSync, mkdirSync, existsSync, rmSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join, dirname, resolve } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

const OUTPUTS = ["turn.js", "chat.js", "compare.js", "explore.js", "katex.js", "widget.css", "compare.css", "explore.css"];

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes("--check");
const at = process.argv.indexOf("--outdir");
const committedDir = join(here, "..", "mmsp_notebook", "static");
const outdir = check
  ? mkdtempSync(join(tmpdir(), "mmsp-build-"))
  : at > 0 && process.argv[at + 1]
    ? resolve(process.argv[at + 1])
    : committedDir;
mkdirSync(outdir, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  legalComments: "none",
  sourcemap: false,
  logLevel: "warning",
  absWorkingDir: here,
  // markdown-it runs with linkify: false, so linkify-it is replaced by a stub
  alias: { "linkify-it": "./src/linkify-stub.js" },
};

// The widget bundles: without KaTeX (markdown-it-texmath's require("katex") gets a stub, never
// called); math.js loads katex.js from the kernel the first time a formula is to be drawn.
await esbuild.build({
  ...common,
  entryPoints: { turn: "src/turn.js", chat: "src/chat.js", compare: "src/compare.js", explore: "src/explore.js" },
  // entities: markdown-it's named references are decoded by the page itself (src/entities-stub.js)
  alias: { ...common.alias, katex: "./src/katex-stub.js", entities: "./src/entities-stub.js" },
  outdir,
});
// KaTeX on its own, as its ES module build
await esbuild.build({
  ...common,
  entryPoints: { katex: "src/katex.js" },
  alias: { ...common.alias, katex: "./node_modules/katex/dist/katex.mjs" },
  outdir,
});
await esbuild.build({ ...common, entryPoints: { widget: "src/widget.css", compare: "src/compare.css", explore: "src/explore.css" }, outdir, loader: { ".css": "css" } });

let failed = false;
for (const name of OUTPUTS) {
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
    if (name !== "katex.js" && text.includes("KaTeX parse error")) {
      console.error(`${name}: KaTeX is in the bundle (it is loaded on first use, from katex.js)`);
      failed = true;
    }
    if (!/export\s*\{[^}]*\bas default\b/.test(text) && !/export default/.test(text)) {
      console.error(`${name}: no default export`);
      failed = true;
    }
  }
  console.log(`${name.padEnd(11)} ${(code.length / 1024).toFixed(1).padStart(6)} KB raw  ${(gzipSync(code).length / 1024).toFixed(1).padStart(6)} KB gzip`);
  if (check) {
    const committed = join(committedDir, name);
    if (!existsSync(committed) || !readFileSync(committed).equals(code)) {
      console.error(`${name}: mmsp_notebook/static/${name} is out of date — run npm run build and commit it`);
      failed = true;
    }
  }
}
if (check) rmSync(outdir, { recursive: true, force: true });
if (failed) process.exit(1);
