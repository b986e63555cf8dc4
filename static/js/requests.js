// @ts-check
// The page's requests to the server and their acks (docs/protocol.md §4.1), as the page reads them.

/** Why a request failed: one of the codes of docs/protocol.md §4.4 ("timeout" when the page gave up waiting).
 * @typedef {{code?: string, message: string}} ErrorBody */

/** Every ack: ok, or the error.
 * @typedef {{ok: boolean, error?: ErrorBody}} Ack */

export {};
