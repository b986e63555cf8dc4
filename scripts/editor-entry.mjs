// What the page's editor (static/js/editor*.js) uses of CodeMirror 6, bundled by scripts/vendor.mjs into
// static/vendor/codemirror/codemirror.js: one ES module, so the page needs no import map (an inline one would
// need a hash in the Content-Security-Policy) and loads it only when a file is first edited.
export { EditorView, basicSetup } from "codemirror";
export { EditorState, Compartment } from "@codemirror/state";
export { keymap } from "@codemirror/view";
export { indentWithTab } from "@codemirror/commands";
export { openSearchPanel } from "@codemirror/search";
export { javascript } from "@codemirror/lang-javascript";
export { python } from "@codemirror/lang-python";
export { html } from "@codemirror/lang-html";
export { css } from "@codemirror/lang-css";
export { json } from "@codemirror/lang-json";
export { markdown } from "@codemirror/lang-markdown";
export { MergeView } from "@codemirror/merge";
