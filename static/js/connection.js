// @ts-check
// The Socket.IO connection: requests with acks, server events, connection state.
import { io } from "../vendor/socket.io/socket.io.esm.min.js";
import { DELTAS_EVENT, SERVER_EVENTS } from "./events.js";

/** @typedef {import("./events.js").ServerEventArgs} ServerEventArgs */
/** @typedef {import("./events.js").DeltasEvent} DeltasEvent */
/** @typedef {(...event: ServerEventArgs) => void} EventListener */
/** @typedef {"connected" | "reconnecting" | "refused" | "disconnected"} ConnectionState */
/** @typedef {(state: ConnectionState, detail: {first?: boolean, reason?: string, code?: string, attempt?: number}) => void} StateListener */

const DEFAULT_TIMEOUT_MS = 20_000;

export class Connection {
  /** onEvent(name, payload); onState(state, detail) with state connected|reconnecting|refused|disconnected.
   * @param {{token: string, onEvent: EventListener, onState: StateListener}} parts */
  constructor({ token, onEvent, onState }) {
    this.connectedOnce = false;
    // batch_deltas: a stream pouring in comes as `deltas` events of several token/thinking
    // deltas (web/transport/delta_batcher.py): a few hundred messages for a long answer, not
    // thousands.
    /** @type {import("socket.io-client").Socket} */
    this.socket = io({ auth: { token, batch_deltas: true }, reconnectionDelay: 500, reconnectionDelayMax: 4000 });
    for (const name of SERVER_EVENTS) {
      this.socket.on(name, (payload) => onEvent(name, payload ?? {}));
    }
    this.socket.on(DELTAS_EVENT, /** @param {DeltasEvent} deltas */ ({ of, texts, first_seq: first, seq: _last, ...shared }) => {
      texts.forEach((text, i) => onEvent(of, { ...shared, text, seq: first + i }));
    });
    this.socket.on("connect", () => {
      const first = !this.connectedOnce;
      this.connectedOnce = true;
      onState("connected", { first });
    });
    this.socket.on("disconnect", (reason) => {
      // The server closing the socket on purpose stops automatic reconnection.
      onState(this.socket.active ? "reconnecting" : "disconnected", { reason });
    });
    this.socket.on("connect_error", (/** @type {Error & {data?: {code?: string}}} */ error) => {
      // Refused by the server: data.code says why (wrong_token, too_many_attempts).
      onState(this.socket.active ? "reconnecting" : "refused", { reason: error?.message ?? "", code: error?.data?.code });
    });
    this.socket.io.on("reconnect_attempt", (attempt) => onState("reconnecting", { attempt }));
  }

  get connected() {
    return this.socket.connected;
  }

  reconnect() {
    this.socket.connect();
  }

  /** Emit an event and resolve with its ack ({} when the server acked nothing). A request that gets no
   * answer resolves too, to an ack with ok false: code "disconnected" when the connection dropped before
   * the answer came (Socket.IO gives up every pending ack then), "timeout" when none came in time.
   * @template {string} N
   * @param {N} event
   * @param {object} [payload]
   * @param {number} [timeoutMs]
   * @returns {Promise<import("./requests.js").AckOf<N>>} */
  async request(event, payload = {}, timeoutMs = DEFAULT_TIMEOUT_MS) {
    try {
      return (await this.socket.timeout(timeoutMs).emitWithAck(event, payload)) ?? {};
    } catch {
      const error = this.socket.connected
        ? { code: "timeout", message: `The server did not answer within ${Math.round(timeoutMs / 1000)} s.` }
        : { code: "disconnected", message: "The connection to the server was lost before it answered; try again once it is back." };
      return /** @type {import("./requests.js").AckOf<N>} */ ({ ok: false, error });
    }
  }
}
