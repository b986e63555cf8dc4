// @ts-check
// A conversation's export from its row's menu: "Export", then Markdown or JSON, downloaded from
// GET /api/conversations/ID/export (the page's cookie carries the token; the server names the
// file from the title).
import { h, icon } from "./dom.js";

const FORMATS = [["md", "Markdown"], ["json", "JSON"]];

/** The URL of a conversation's export as `format` (md or json).
 * @param {string} id
 * @param {string} format */
export function exportUrl(id, format) {
  return `/api/conversations/${encodeURIComponent(id)}/export?format=${format}`;
}

/** Menu items, one per format, each downloading the conversation; onPicked() after a download starts.
 * @param {string} id
 * @param {() => void} onPicked */
export function exportFormats(id, onPicked) {
  return FORMATS.map(([format, label]) => h("button", {
    type: "button", role: "menuitem", "data-testid": `menu-export-${format}`, title: `Download this conversation as ${label}`,
    onclick: () => {
      onPicked();
      download(exportUrl(id, format));
    },
  }, icon("down"), label));
}

/** The menu's "Export" item: it turns the menu into the choice of format.
 * @param {string} id
 * @param {() => HTMLElement} menu the menu it is in
 * @param {() => void} onPicked */
export function exportItem(id, menu, onPicked) {
  return h("button", {
    type: "button", role: "menuitem", "data-testid": "menu-export", title: "Download this conversation as Markdown or JSON",
    onclick: () => {
      const choices = exportFormats(id, onPicked);
      menu().replaceChildren(...choices);
      choices[0].focus();
    },
  }, icon("down"), "Export");
}

/** @param {string} url */
function download(url) {
  const link = h("a", { href: url, download: "", hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
}
