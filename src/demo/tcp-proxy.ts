/**
 * A TCP proxy on loopback between Redis clients and a Redis server, with switches to
 * cut the network path — for the demo ("Redis becomes unreachable") and the tests
 * ("the connection is lost after the command was sent").
 */
import { createServer, type Server, Socket } from 'node:net';

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
  /** Accept and read, but forward nothing either way (a black hole). */
  | 'blackhole';

export interface TcpProxy {
  /** The port clients connect to (127.0.0.1). */
  readonly port: number;
  /** Current fault mode; applies to data arriving from now on. */
  mode: ProxyMode;
  /** How long `'delay'` holds each reply, in ms (default 1000). */
  delayMs: number;
  /** Destroys every open connection (clients see a reset/close) but keeps listening. */
  dropConnections(): void;
  /** Stops listening and destroys every connection: the upstream is unreachable. */
  close(): Promise<void>;
}

/** Starts a proxy on a free 127.0.0.1 port that forwards to `upstreamHost:upstreamPort`. */
export function startTcpProxy(upstreamHost: string, upstreamPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  };
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  let proxy: TcpProxy;
  const server: Server = createServer((client) => {
    track(client);
    const upstream = new Socket();
    track(upstream);
    upstream.connect(upstreamPort, upstreamHost);
    client.on('data', (chunk) => {
      if (proxy.mode === 'blackhole') return;
      upstream.write(chunk);
      if (proxy.mode === 'cut-after-send') {
        // Let the bytes reach Redis, then cut both sides before the reply comes back.
        upstream.end(() => {
          client.destroy();
        });
      } else if (proxy.mode === 'reset-after-send') {
        upstream.end(() => {
          client.resetAndDestroy();
        });
      }
    });
    upstream.on('data', (chunk) => {
      if (proxy.mode === 'pass') client.write(chunk);
      else if (proxy.mode === 'delay') {
        setTimeout(() => {
          if (!client.destroyed) client.write(chunk);
        }, proxy.delayMs).unref();
      }
    });
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : -1;
      proxy = {
        port,
        mode: 'pass',
        delayMs: 1000,
        dropConnections: dropAll,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            dropAll();
          }),
      };
      resolve(proxy);
    });
  });
}
