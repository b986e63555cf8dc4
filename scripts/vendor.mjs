// Copy the browser builds of the front-end libraries from node_modules/ into static/vendor/.
// Idempotent: a file is rewritten only when its content differs. Needs no network.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const modules = join(root, "node_modules");
const vendor = join(root, "static", "vendor");

// [source under node_modules/, destination under static/vendor/]
const FILES = [
  ["socket.io-client/dist/socket.io.esm.min.js", "socket.io/socket.io.esm.min.js"],
  ["socket.io-client/dist/socket.io.esm.min.js.map", "socket.io/socket.io.esm.min.js.map"],
  ["socket.io-client/LICENSE", "socket.io/LICENSE"],
  ["marked/lib/marked.esm.js", "marked/marked.esm.js"],
  ["marked/lib/marked.esm.js.map", "marked/marked.esm.js.map"],
  ["marked/LICENSE", "marked/LICENSE"],
  ["dompurify/dist/purify.es.mjs", "dompurify/purify.es.js"],
  ["dompurify/dist/purify.es.mjs.map", "dompurify/purify.es.mjs.map"],
  ["dompurify/LICENSE", "dompurify/LICENSE"],
  ["@highlightjs/cdn-assets/es/highlight.min.js", "highlight/highlight.min.js"],
  ["@highlightjs/cdn-assets/styles/github.min.css", "highlight/github.min.css"],
  ["@highlightjs/cdn-assets/styles/github-dark.min.css", "highlight/github-dark.min.css"],
  ["@highlightjs/cdn-assets/LICENSE", "highlight/LICENSE"],
  ["@xterm/xterm/lib/xterm.mjs", "xterm/xterm.mjs"],
  ["@xterm/xterm/lib/xterm.mjs.map", "xterm/xterm.mjs.map"],
  ["@xterm/xterm/css/xterm.css", "xterm/xterm.css"],
  ["@xterm/xterm/LICENSE", "xterm/LICENSE"],
  ["@xterm/addon-fit/lib/addon-fit.mjs", "xterm/addon-fit.mjs"],
  ["@xterm/addon-fit/lib/addon-fit.mjs.map", "xterm/addon-fit.mjs.map"],
  ["@xterm/addon-fit/LICENSE", "xterm/addon-fit.LICENSE"],
];

function copyIfChanged(source, destination) {
  return copyData(readFileSync(source), destination);
}

function copyData(data, destination) {
  if (existsSync(destination) && readFileSync(destination).equals(data)) return false;
  mkdirSync(dirname(destination), { recursive: true });
  writeFileSync(destination, data);
  return true;
}

// The editor's CodeMirror modules import each other by bare name: bundled into one ES module at install.
const EDITOR_BUNDLE = "codemirror/codemirror.js";
const EDITOR_LICENSES = ["codemirror", "@codemirror/view", "@codemirror/merge", "@lezer/common"];

async function bundleEditor() {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [join(root, "scripts", "editor-entry.mjs")],
    bundle: true, format: "esm", minify: true, legalComments: "none", write: false, target: "es2022",
  });
  let changed = copyData(result.outputFiles[0].contents, join(vendor, EDITOR_BUNDLE)) ? 1 : 0;
  for (const name of EDITOR_LICENSES) {
    const license = join(modules, name, "LICENSE");
    if (copyData(readFileSync(license), join(vendor, "codemirror", `LICENSE.${name.replace("@", "").replace("/", "-")}`))) changed += 1;
  }
  return changed;
}

const missing = FILES.filter(([source]) => !existsSync(join(modules, source)));
if (missing.length) {
  console.error(`vendor: missing in node_modules (run npm ci first): ${missing.map(([s]) => s).join(", ")}`);
  process.exit(1);
}
let changed = 0;
for (const [source, destination] of FILES) {
  if (copyIfChanged(join(modules, source), join(vendor, destination))) changed += 1;
}
changed += await bundleEditor();
console.log(`vendor: ${FILES.length} files and the editor's bundle in static/vendor/ (${changed} updated)`);
