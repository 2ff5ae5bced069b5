// A GraphQL-over-WebSocket client as a JavaScript application runs it:
// graphql-ws's createClient on the ws package (Node 20 has no global
// WebSocket). The Go test drives it with one JSON command per line on
// standard input and reads one JSON event per line on standard output:
//
//   {"op": "connect", "conn": "c1", "url": "ws://…/graphql", "token": "…", "origin": "https://…", "localAddress": "127.0.0.2", "eager": true}
//   {"op": "subscribe", "conn": "c1", "id": "s1", "query": "subscription …", "variables": {…}}
//   {"op": "dispose", "conn": "c1"}
//
// Events: connected, closed (code, reason), socketError (message), next
// (data, errors, at), error (errors, or code and reason of a close),
// complete, disposed, and failed for a command it could not carry out.
// "at" is the receipt time in ms since the Unix epoch, with a fraction.
import { createInterface } from "node:readline";
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const now = () => performance.timeOrigin + performance.now();
const clients = new Map();

function connect({ conn, url, token, origin, localAddress, eager }) {
  // A browser sends its page's Origin; ws sends one only when told. A
  // local address stands for another client machine.
  const options = {};
  if (origin) options.origin = origin;
  if (localAddress) options.localAddress = localAddress;
  class ClientWebSocket extends WebSocket {
    constructor(address, protocols) {
      super(address, protocols, options);
    }
  }
  const client = createClient({
    url,
    webSocketImpl: ClientWebSocket,
    connectionParams: token ? { Authorization: `Bearer ${token}` } : {},
    retryAttempts: 0, // the test reconnects when it means to
    // Eager: the socket opens at once and stays open between operations,
    // as Apollo Client's and urql's do when it is their only link.
    lazy: !eager,
    on: {
      connected: () => emit({ ev: "connected", conn }),
      closed: (e) => emit({ ev: "closed", conn, code: e?.code, reason: e?.reason }),
      error: (e) => emit({ ev: "socketError", conn, message: String(e?.message ?? e?.error?.message ?? e) }),
    },
  });
  clients.set(conn, client);
}

function subscribe({ conn, id, query, variables }) {
  const client = clients.get(conn);
  if (!client) return emit({ ev: "failed", conn, id, message: `no connection ${conn}` });
  client.subscribe({ query, variables }, {
    next: (result) => emit({ ev: "next", conn, id, at: now(), data: result.data, errors: result.errors }),
    error: (err) => {
      if (Array.isArray(err)) return emit({ ev: "error", conn, id, errors: err });
      if (err && typeof err.code === "number") return emit({ ev: "error", conn, id, code: err.code, reason: err.reason });
      emit({ ev: "error", conn, id, message: String(err?.message ?? err) });
    },
    complete: () => emit({ ev: "complete", conn, id }),
  });
}

async function dispose({ conn }) {
  const client = clients.get(conn);
  clients.delete(conn);
  if (client) await client.dispose();
  emit({ ev: "disposed", conn });
}

const ops = { connect, subscribe, dispose };
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    const op = ops[cmd.op];
    if (!op) throw new Error(`unknown op ${cmd.op}`);
    await op(cmd);
  } catch (err) {
    emit({ ev: "failed", conn: cmd?.conn, id: cmd?.id, message: String(err?.message ?? err) });
  }
}
// Standard input closed: the test is done with this client.
await Promise.all([...clients.values()].map((c) => c.dispose()));
process.exit(0);
