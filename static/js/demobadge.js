// @ts-check
// The demo banner: says that a scripted model answers (AGENT_PROVIDER=demo), offers its tasks,
// and "Start over" (demo_reset: the sample workspace back, the demo's conversations gone).
import { choose } from "./dialog.js";
import { h, icon } from "./dom.js";

/** Show the banner for a get_status answer with `demo: true`, hide it otherwise.
 *  onPick(text) puts a suggested task in the message box; with `demo_reset` in the status,
 *  "Start over" confirms, asks the server through request(event, payload, timeoutMs), and calls
 *  onStartedOver() once it is done (or onFailed(message)).
 * @param {HTMLElement} banner
 * @param {import("./requests.js").StatusAck} status
 * @param {{onPick: (text: string) => void, request: import("./requests.js").Request, onStartedOver: () => void,
 *   onFailed: (message: string) => void}} hooks */
export function renderDemoBanner(banner, status, { onPick, request, onStartedOver, onFailed }) {
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
  const startOver = status.demo_reset
    ? h("button", {
      type: "button",
      class: "demo-start-over",
      "data-testid": "demo-start-over",
      title: "Put the sample workspace back and delete this demo's conversations",
      onclick: async (event) => {
        const button = event.currentTarget;
        if (!await confirmStartOver()) return;
        button.disabled = true;
        const ack = await request("demo_reset", {}, 30_000);
        button.disabled = false;
        if (ack.ok) onStartedOver();
        else onFailed(ack.error?.message ?? "Could not start over.");
      },
    }, icon("refresh"), h("span", { text: "Start over" }))
    : null;
  banner.replaceChildren(
    h("span", { class: "demo-badge", "data-testid": "demo-badge", text: "Demo" }),
    h("span", { class: "demo-text", text: "A scripted model answers: no API key, no network. The tools are real and work on this workspace. Try:" }),
    h("span", { class: "demo-suggestions" }, suggestions),
    startOver,
  );
  banner.hidden = false;
}

async function confirmStartOver() {
  const answer = await choose({
    title: "Start the demo over?",
    body: [
      h("p", { text: "The workspace goes back to the sample as it was (calc.py with its bug, no SUMMARY.md), and every conversation of this demo is deleted, with its proposals and memory." }),
      h("p", { text: "A task still running is stopped first. This cannot be undone." }),
    ],
    choices: [{ label: "Start over", value: "reset", kind: "danger" }],
    testid: "demo-reset-dialog",
  });
  return answer === "reset";
}
