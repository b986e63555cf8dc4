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
  const data = readFileSync(source);
  if (existsSync(destination) && readFileSync(destination).equals(data)) return false;
  mkdirSync(dirname(destination), { recursive: true });
  writeFileSync(destination, data);
  return true;
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
console.log(`vendor: ${FILES.length} files in static/vendor/ (${changed} updated)`);
