// @ts-check
// A task's first event, `user_message` (docs/protocol.md §4.2), in the open conversation: the message that
// started a task in another tab, a terminal or a client program shows above its answer, once, where it belongs.
import { UserMessage } from "./messages.js";

/** @typedef {import("./session.js").Session} Session */
/** @typedef {import("./events.js").UserMessageEvent} UserMessageEvent */

/** Show the message a task started with, unless it is shown already: read with the conversation, or sent from
 * this tab (its ack may still be on its way). A message that does not follow the newest one shown (a branch,
 * or a history this tab has not read to its end) is shown by opening the conversation again.
 * @param {Session} session
 * @param {UserMessageEvent} payload */
export function showUserMessage(session, payload) {
  const { chat, index } = session;
  const id = payload.message_id;
  if (chat.views.some((view) => view.messageId === id)) return;
  const sentHere = chat.views.find((view) => view instanceof UserMessage && !view.messageId && view.text === payload.text);
  if (sentHere) {
    sentHere.el.dataset.messageId = id;
    return;
  }
  const follows = index !== null && index.latestLeaf === payload.parent_id && session.viewLeaf === index.latestLeaf;
  if (!follows) {
    if (session.cid) session.open(session.cid);
    return;
  }
  const { skill, attachments } = payload;
  const message = chat.addUserMessage(payload.text, { skill, attachments });
  message.setPending(false);
  message.setRecord({ id, parent_id: payload.parent_id, role: "user", content: payload.text, meta: { skill, attachments } });
}
