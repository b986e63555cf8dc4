// @ts-check
// An attached image's small picture, for the composer's chips and the sent message: served by
// the download route as the preview's images are (GET /api/download?view=image, the page's
// cookie carries the token; img-src 'self'); anything else, or an image it will not serve, keeps
// its icon.
import { h, icon } from "./dom.js";

const IMAGE_LIMIT_BYTES = 20 * 1024 * 1024; // what GET /api/download?view=image serves

/** The chip's picture of a workspace file: a thumbnail for an image the route serves, else an icon.
 * @param {{path?: string, kind?: string, size?: number, name?: string}} file */
export function attachmentPicture(file) {
  const image = file.kind === "image";
  if (!image || !file.path || (file.size ?? 0) > IMAGE_LIMIT_BYTES) return icon(image ? "image" : "file");
  const thumb = h("img", {
    class: "attachment-thumb",
    "data-testid": "attachment-thumb",
    src: `/api/download?path=${encodeURIComponent(file.path)}&view=image`,
    alt: "",
    decoding: "async",
  });
  thumb.addEventListener("error", () => thumb.replaceWith(icon("image")), { once: true });
  return thumb;
}
