// @ts-check
// A proposed edit (propose_edit): its diff, and Apply / Discard while it is pending.
import { h, icon } from "./dom.js";
import { DiffView } from "./diffview.js";

const STATE_TEXT = {
  applied: "Applied",
  discarded: "Discarded",
  closed: "No longer pending (applied or discarded earlier)",
};

export class ProposalBox {
  /** proposal: {id, path, diff}; state: pending|applied|discarded|closed; actions: apply(id), discard(id) -> ack. */
  constructor(proposal, state, actions) {
    this.proposal = proposal;
    this.actions = actions;
    this.diff = new DiffView(proposal.diff);
    this.apply = h("button", { type: "button", class: "btn btn-primary btn-sm", "data-testid": "apply-edit", onclick: () => this.#decide("apply") }, icon("check"), "Apply");
    this.discard = h("button", { type: "button", class: "btn btn-danger-outline btn-sm", "data-testid": "discard-edit", onclick: () => this.#decide("discard") }, icon("close"), "Discard");
    this.footer = h("div", { class: "proposal-actions" });
    this.error = h("p", { class: "proposal-error", role: "alert", hidden: true });
    this.el = h(
      "section",
      { class: "proposal", "data-proposal-id": proposal.id, "aria-label": `Proposed edit to ${proposal.path}` },
      h("header", { class: "proposal-head" },
        h("span", { class: "proposal-title" }, "Proposed edit to ", h("code", { text: proposal.path })),
        this.diff.toggle),
      this.diff.el,
      this.footer,
      this.error,
    );
    /** @type {((state: string, ack: object) => void) | null} told once the user applied or discarded it */
    this.onDecided = null;
    this.setState(state);
  }

  get pending() {
    return this.state === "pending";
  }

  setState(state) {
    this.state = state;
    this.el.dataset.state = state;
    if (state === "pending") {
      this.footer.replaceChildren(this.apply, this.discard, h("span", { class: "hint", text: "Nothing is written until you apply it." }));
      return;
    }
    const cls = state === "applied" ? "ok" : state === "discarded" ? "muted" : "closed";
    this.footer.replaceChildren(h("span", { class: `proposal-outcome ${cls}`, "data-testid": "proposal-outcome", text: STATE_TEXT[state] ?? state }));
  }

  async #decide(what) {
    this.apply.disabled = true;
    this.discard.disabled = true;
    this.error.hidden = true;
    const ack = await this.actions[what](this.proposal.id);
    if (ack?.ok) {
      this.setState(what === "apply" ? "applied" : "discarded");
      this.onDecided?.(this.state, ack);
      return;
    }
    const code = ack?.error?.code;
    this.error.textContent = ack?.error?.message ?? `Could not ${what} this edit.`;
    this.error.hidden = false;
    if (code === "not_found") this.setState("closed");
    else {
      // A conflict stays one: the file changed under the proposal, so only Discard can help.
      this.apply.disabled = code === "conflict";
      this.discard.disabled = false;
    }
  }
}
