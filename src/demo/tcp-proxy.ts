/**
 * A TCP proxy on loopback between Redis clients and a Redis server, with switches to
 * cut the network path — for the demo ("Redis becomes unreachable") and the tests
 * ("the connection is lost after the command was sent").
 */
import { createServer, type Server, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** Fault modes; `'pass'` forwards everything. */
export type ProxyMode =
  /** Forward both ways. */
  | 'pass'
  /** Forward the client's bytes to Redis, then destroy both sockets before any reply. */
  | 'cut-after-send'
  /** Forward the client's bytes to Redis, then reset the client's connection (TCP RST). */
  | 'reset-after-send'
  /** Forward both ways, holding every reply back for `delayMs` first. */
  | 'delay'
  /** Accept and read, but forward nothing either way (a black hole); bytes are held and
   *  delivered, in order, once the mode changes (the partition heals). */
  | 'blackhole';

export interface TcpProxy {
  /** The port clients connect to (127.0.0.1). */
  readonly port: number;
  /** Current fault mode; applies to data arriving from now on. */
  mode: ProxyMode;
  /** How long `'delay'` holds each reply, in ms (default 1000). */
  delayMs: number;
  /** Client connections open now. */
  readonly connections: number;
  /** Destroys every open connection (clients see a reset/close) but keeps listening. */
  dropConnections(): void;
  /** Stops listening and destroys every connection: the upstream is unreachable. */
  close(): Promise<void>;
}

/** Starts a proxy on a free 127.0.0.1 port that forwards to `upstreamHost:upstreamPort`. */
export function startTcpProxy(upstreamHost: string, upstreamPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  /** Each connection's bytes held during a black hole, released in order when it ends. */
  const releases = new Set<() => void>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  };
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  let mode: ProxyMode = 'pass';
  let delayMs = 1000;
  const server: Server = createServer((client) => {
    track(client);
    clients.add(client);
    const upstream = new Socket();
    track(upstream);
    upstream.connect(upstreamPort, upstreamHost);
    // Like TCP, the proxy never reorders or loses bytes on a live connection: a black hole
    // holds them (a partition that heals delivers them late), and replies released after a
    // delay keep their order ahead of later ones.
    const heldRequests: Buffer[] = [];
    const heldReplies: Buffer[] = [];
    let replies: Promise<void> = Promise.resolve();
    const toUpstream = (chunk: Buffer) => {
      upstream.write(chunk);
      if (mode === 'cut-after-send') {
        // Let the bytes reach Redis, then cut both sides before the reply comes back.
        upstream.end(() => {
          client.destroy();
        });
      } else if (mode === 'reset-after-send') {
        upstream.end(() => {
          client.resetAndDestroy();
        });
      }
    };
    const toClient = (chunk: Buffer) => {
      if (mode !== 'pass' && mode !== 'delay') return; // cut modes: the reply never arrives
      // Each reply is held `delayMs` from its arrival, and never overtakes an earlier one.
      const due = mode === 'delay' ? performance.now() + delayMs : 0;
      replies = replies
        .then(() => {
          const wait = due - performance.now();
          return wait > 0 ? sleep(wait, undefined, { ref: false }) : undefined;
        })
        .then(() => {
          if (client.destroyed) return;
          // The mode may have changed while the reply waited.
          if (mode === 'blackhole') heldReplies.push(chunk);
          else if (mode === 'pass' || mode === 'delay') client.write(chunk);
        });
    };
    const release = () => {
      for (const chunk of heldRequests.splice(0)) toUpstream(chunk);
      for (const chunk of heldReplies.splice(0)) toClient(chunk);
    };
    releases.add(release);
    client.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') heldRequests.push(chunk);
      else toUpstream(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') heldReplies.push(chunk);
      else toClient(chunk);
    });
    client.once('close', () => {
      clients.delete(client);
      releases.delete(release);
      upstream.destroy();
    });
    upstream.once('close', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : -1;
      resolve({
        port,
        get mode() {
          return mode;
        },
        set mode(next: ProxyMode) {
          mode = next;
          if (next !== 'blackhole') for (const release of releases) release();
        },
        get delayMs() {
          return delayMs;
        },
        set delayMs(ms: number) {
          delayMs = ms;
        },
        get connections() {
          return clients.size;
        },
        dropConnections: dropAll,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            dropAll();
          }),
      });
    });
  });
}
