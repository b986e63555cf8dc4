// @ts-check
// The page's commands in the command menu besides /skill and /agent (composer.js): each one presses the page's
// own button for it, so there is one way to do each thing.

/** @typedef {import("./commandmenu.js").Command} Command */

/** @param {{session: import("./session.js").Session, chat: import("./chat.js").ChatView,
 *   statusBar: import("./statusbar.js").StatusBar, memory: {open: () => void}, newButton: HTMLElement}} parts
 * @returns {Command[]} */
export function pageCommands({ session, chat, statusBar, memory, newButton }) {
  const compact = statusBar.compactButton;
  const lastUndo = () => chat.safety.lastUndo();
  return [
    {
      name: "compact", aliases: ["condense"], description: "Condense the context: summarise the older turns",
      unavailable: () => (!session.cid ? "Open a conversation first" : compact.disabled ? "It is being condensed" : null),
      run: () => compact.click(),
    },
    {
      name: "undo", description: "Undo the last task: put back the files it changed",
      unavailable: () => (lastUndo() ? null : "No task shown here has changes to undo"),
      run: () => lastUndo()?.click(),
    },
    { name: "memory", description: "View and edit what the agent remembers", run: () => memory.open() },
    { name: "new", aliases: ["clear"], description: "Start a new conversation", run: () => newButton.click() },
  ];
}
