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
  /**
   * Freezes every connection open now, for good: its bytes are dropped both ways and it is
   * never closed (a load balancer that lost its state); connections opened later pass.
   */
  freezeConnections(): void;
  /** Stops listening and destroys every connection: the upstream is unreachable. */
  close(): Promise<void>;
}

/** What the connections of one proxy share: the mode, their sockets, the black hole's releases. */
interface ProxyState {
  mode: ProxyMode;
  delayMs: number;
  /** Every socket open now, both sides. */
  readonly sockets: Set<Socket>;
  /** The client side of each connection. */
  readonly clients: Set<Socket>;
  /** Each connection's bytes held during a black hole, released in order when it ends. */
  readonly releases: Set<() => void>;
  /** Each open connection's switch to frozen (see `freezeConnections`). */
  readonly freezes: Set<() => void>;
}

/** Starts a proxy on a free 127.0.0.1 port that forwards to `upstreamHost:upstreamPort`. */
export async function startTcpProxy(upstreamHost: string, upstreamPort: number): Promise<TcpProxy> {
  const state: ProxyState = {
    mode: 'pass',
    delayMs: 1000,
    sockets: new Set(),
    clients: new Set(),
    releases: new Set(),
    freezes: new Set(),
  };
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    new Relay(state, client, upstream); // lives as long as its sockets
    upstream.connect(upstreamPort, upstreamHost);
  });
  const port = await listen(server);
  return controls(state, server, port);
}

/** Listens on a free 127.0.0.1 port; resolves with it. */
function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : -1);
    });
  });
}

/** The proxy's switches, over its shared state. */
function controls(state: ProxyState, server: Server, port: number): TcpProxy {
  const dropAll = () => {
    for (const socket of state.sockets) socket.destroy();
  };
  return {
    port,
    get mode() {
      return state.mode;
    },
    set mode(next: ProxyMode) {
      state.mode = next;
      if (next !== 'blackhole') for (const release of state.releases) release();
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
    get connections() {
      return state.clients.size;
    },
    dropConnections: dropAll,
    freezeConnections: () => {
      for (const freeze of state.freezes) freeze();
    },
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        dropAll();
      }),
  };
}

/**
 * One client connection and its upstream connection, forwarding each way as the mode says.
 * Like TCP, it never reorders or loses bytes on a live connection: a black hole holds them
 * (a partition that heals delivers them late), and replies released after a delay keep
 * their order ahead of later ones.
 */
class Relay {
  readonly #heldRequests: Buffer[] = [];
  readonly #heldReplies: Buffer[] = [];
  /** The replies on their way to the client, each after the one before. */
  #replies: Promise<void> = Promise.resolve();
  /** Frozen for good: every byte is dropped, both ways. */
  #frozen = false;

  constructor(
    private readonly state: ProxyState,
    private readonly client: Socket,
    private readonly upstream: Socket,
  ) {
    this.#track(client);
    state.clients.add(client);
    this.#track(upstream);
    const release = () => this.#release();
    state.releases.add(release);
    const freeze = () => {
      this.#frozen = true;
      this.#heldRequests.length = 0;
      this.#heldReplies.length = 0;
    };
    state.freezes.add(freeze);
    client.on('data', (chunk: Buffer) => {
      if (this.#frozen) return;
      if (state.mode === 'blackhole') this.#heldRequests.push(chunk);
      else this.#toUpstream(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.#frozen) return;
      if (state.mode === 'blackhole') this.#heldReplies.push(chunk);
      else this.#toClient(chunk);
    });
    client.once('close', () => {
      state.clients.delete(client);
      state.releases.delete(release);
      state.freezes.delete(freeze);
      upstream.destroy();
    });
    upstream.once('close', () => client.destroy());
  }

  #track(socket: Socket): void {
    this.state.sockets.add(socket);
    socket.once('close', () => this.state.sockets.delete(socket));
    socket.on('error', () => {});
  }

  #toUpstream(chunk: Buffer): void {
    const { client, upstream } = this;
    upstream.write(chunk);
    if (this.state.mode === 'cut-after-send') {
      // Let the bytes reach Redis, then cut both sides before the reply comes back.
      upstream.end(() => {
        client.destroy();
      });
    } else if (this.state.mode === 'reset-after-send') {
      upstream.end(() => {
        client.resetAndDestroy();
      });
    }
  }

  #toClient(chunk: Buffer): void {
    const { state, client } = this;
    if (state.mode !== 'pass' && state.mode !== 'delay') return; // cut modes: the reply never arrives
    // Each reply is held `delayMs` from its arrival, and never overtakes an earlier one.
    const due = state.mode === 'delay' ? performance.now() + state.delayMs : 0;
    this.#replies = this.#replies
      .then(() => {
        const wait = due - performance.now();
        return wait > 0 ? sleep(wait, undefined, { ref: false }) : undefined;
      })
      .then(() => {
        if (client.destroyed || this.#frozen) return;
        // The mode may have changed while the reply waited.
        if (state.mode === 'blackhole') this.#heldReplies.push(chunk);
        else if (state.mode === 'pass' || state.mode === 'delay') client.write(chunk);
      });
  }

  #release(): void {
    for (const chunk of this.#heldRequests.splice(0)) this.#toUpstream(chunk);
    for (const chunk of this.#heldReplies.splice(0)) this.#toClient(chunk);
  }
}
