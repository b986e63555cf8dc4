// @ts-check
// What the user sends about the open conversation's task: a message (shown at once, taken back with its text
// put back when the server refuses it), a stop, an answer to an approval, a request to condense the context.

/** @typedef {import("./session.js").Session} Session */
/** @typedef {import("./history.js").Attachment} Attachment */
/** @typedef {import("./budget.js").RaisedLimit} RaisedLimit */

/**
 * How a message is sent (all optional): parentId its parent (a branch; null: at the root; absent: after the
 * branch shown), skill the skill it runs with, typed what the user typed (put back on failure), attachments the
 * files sent with it, budgetOverride send_message's budget_override (a higher limit for this task only).
 * @typedef {object} SendOptions
 * @property {string | null} [parentId]
 * @property {string} [skill]
 * @property {string} [typed]
 * @property {Attachment[]} [attachments]
 * @property {RaisedLimit} [budgetOverride]
 */

const SEND_TIMEOUT_MS = 30_000;

/** send_message's payload for a message of the open conversation (a new one when none is open).
 * @param {Session} session
 * @param {string} text
 * @param {SendOptions} options */
function sendPayload(session, text, { parentId, skill, attachments, budgetOverride }) {
  const { cid, composer, focus, index, viewLeaf } = session;
  /** @type {Record<string, unknown>} */
  const payload = { conversation_id: cid, text, ...composer.choices };
  if (composer.agent) payload.agent = composer.agent;
  if (skill) payload.skill = skill;
  if (budgetOverride) payload.budget_override = budgetOverride;
  if (attachments?.length) payload.attachments = attachments.map((attachment) => attachment.path);
  if (!cid && focus.paths.length) payload.focus = focus.paths;
  if (parentId !== undefined) payload.parent_id = parentId;
  else if (index && viewLeaf && viewLeaf !== index.latestLeaf) payload.parent_id = viewLeaf;
  return payload;
}

/** Send a message; resolves to whether the server took it.
 * @param {Session} session
 * @param {string} text
 * @param {SendOptions} [options]
 * @returns {Promise<boolean>} */
export async function sendMessage(session, text, options = {}) {
  const { chat, feed } = session;
  const cid = session.cid;
  const payload = sendPayload(session, text, options);
  const message = chat.addUserMessage(text, { skill: options.skill, attachments: options.attachments });
  const doneBefore = feed.sending(!cid);
  const ack = await session.request("send_message", payload, SEND_TIMEOUT_MS);
  const { held, doneSince } = feed.sent(!cid, doneBefore);
  if (!ack.ok) {
    chat.removeUserMessage(message);
    if (!chat.views.length && !session.cid) chat.showWelcome();
    session.composer.showError(ack.error?.message ?? "The message was not accepted.", options.typed ?? text);
    for (const event of held) session.events.handle(...event);
    return false;
  }
  if (!cid && session.cid === null) session.started(ack.conversation_id);
  message.setPending(false);
  if (ack.message_id) message.el.dataset.messageId = ack.message_id;
  chat.safety.place();
  session.conversations.refresh();
  // A task so short that its `done` beat the ack is not running any more.
  if (session.cid === ack.conversation_id && !doneSince) feed.setRunning(session.cid, true);
  for (const event of held) session.events.handle(...event);
  return true;
}

/** Stop the open conversation's task.
 * @param {Session} session */
export async function cancelTask(session) {
  if (!session.cid || !session.feed.isRunning(session.cid)) return;
  const ack = await session.request("cancel", { conversation_id: session.cid });
  if (ack.ok === false) session.composer.showError(`Could not stop: ${ack.error?.message ?? "unknown error"}`);
}

/** Answer a call waiting for approval (always: the tool runs without asking for the rest of the conversation).
 * @param {Session} session
 * @param {string} callId
 * @param {boolean} approved
 * @param {boolean} always */
export function approveCall(session, callId, approved, always) {
  return session.request("approve", { conversation_id: session.cid, call_id: callId, approved, always });
}

/** Summarise the older turns now (or before the running task's next model call).
 * @param {Session} session */
export async function compactContext(session) {
  const cid = session.cid;
  if (!cid) return;
  const ack = await session.request("compact", { conversation_id: cid }, SEND_TIMEOUT_MS);
  if (session.cid !== cid) return;
  if (!ack.ok) session.chat.showNotice(ack.error?.message ?? "The context could not be condensed.", "info");
  else if (ack.scheduled) session.chat.showNotice("The context will be condensed before the agent's next step.", "info");
}
