// The demo banner: says that a scripted model answers (AGENT_PROVIDER=demo), and offers its tasks.
import { h } from "./dom.js";

/** Show the banner for a get_status answer with `demo: true`, hide it otherwise; onPick(text)
 *  puts a suggested task in the message box. */
export function renderDemoBanner(banner, status, onPick) {
  if (!status?.demo) {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  const suggestions = (status.demo_suggestions ?? []).map((text) => h(
    "button",
    { type: "button", class: "demo-suggestion", "data-testid": "demo-suggestion", onclick: () => onPick(text) },
    text,
  ));
  banner.replaceChildren(
    h("span", { class: "demo-badge", "data-testid": "demo-badge", text: "Demo" }),
    h("span", { class: "demo-text", text: "A scripted model answers: no API key, no network. The tools are real and work on this workspace. Try:" }),
    ...suggestions,
  );
  banner.hidden = false;
}
