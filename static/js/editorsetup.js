// @ts-check
// CodeMirror 6 for the page's editor: one vendored bundle (static/vendor/codemirror/codemirror.js, built by
// scripts/vendor.mjs), loaded the first time a file is edited; the language of a path; the editor's extensions.

import { styleNonce } from "./dom.js";

const BUNDLE = new URL("../vendor/codemirror/codemirror.js", import.meta.url).href;
/** @type {Promise<any> | null} */
let loading = null;

/** The CodeMirror bundle's exports (loaded once). */
export function loadCodeMirror() {
  loading ??= import(BUNDLE).catch((error) => {
    loading = null;
    throw error;
  });
  return loading;
}

/** The language support of a file, by its name; null for plain text.
 * @param {any} cm
 * @param {string} path */
export function languageFor(cm, path) {
  const ext = path.slice(path.lastIndexOf(".") + 1).toLowerCase();
  switch (ext) {
    case "js": case "mjs": case "cjs": return cm.javascript();
    case "jsx": return cm.javascript({ jsx: true });
    case "ts": case "mts": case "cts": return cm.javascript({ typescript: true });
    case "tsx": return cm.javascript({ typescript: true, jsx: true });
    case "py": case "pyi": return cm.python();
    case "html": case "htm": return cm.html();
    case "css": return cm.css();
    case "json": case "jsonc": return cm.json();
    case "md": case "markdown": case "mdx": return cm.markdown();
    default: return null;
  }
}

/** Extensions of an editor on `path`: highlighting, search, line numbers, Mod-S saving, read-only when asked.
 * @param {any} cm
 * @param {{path: string, text: string, readOnly: boolean, onSave: () => void, onChange: () => void}} options */
export function editorExtensions(cm, { path, text, readOnly, onSave, onChange }) {
  const language = languageFor(cm, path);
  return [
    cm.keymap.of([{ key: "Mod-s", preventDefault: true, run: () => { onSave(); return true; } }, cm.indentWithTab]),
    cm.basicSetup,
    cm.EditorView.cspNonce.of(styleNonce()),
    ...(language ? [language] : []),
    ...(text.includes("\r\n") ? [cm.EditorState.lineSeparator.of("\r\n")] : []), // saved with the endings it had
    cm.EditorState.readOnly.of(readOnly),
    cm.EditorView.editable.of(!readOnly),
    cm.EditorView.updateListener.of((/** @type {any} */ update) => { if (update.docChanged) onChange(); }),
  ];
}
