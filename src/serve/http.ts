/**
 * The HTTP side, as the reference serves it: `GET /healthcheck` (200 `OK`; 500 while Redis is
 * unreachable or no valid configuration is loaded), `POST /json` (a protojson
 * `RateLimitRequest`, answered as protojson: 200, 429 when over the limit, 400 for a bad
 * request, 503 when it could not be decided), and `GET /metrics` (Prometheus).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface HttpHandlers {
  /** Undefined when healthy, else why not. */
  unhealthy(): string | undefined;
  /** Decides a protojson request: the HTTP status and the JSON body. */
  json(body: unknown): Promise<{ status: number; body: unknown }>;
  metrics(): string;
}

/** Largest `POST /json` body, in bytes; past it, 413. */
export const MAX_BODY = 1_048_576;
/**
 * A request's headers and body must arrive within this, in ms (else 408 and the socket
 * closed), so that a slow or stalled client holds no socket for long, nor a shutdown.
 */
export const HTTP_REQUEST_TIMEOUT_MS = 10_000;

export function httpServer(handlers: HttpHandlers): Server {
  const options = {
    headersTimeout: HTTP_REQUEST_TIMEOUT_MS,
    requestTimeout: HTTP_REQUEST_TIMEOUT_MS,
    // How often those are checked (Node's default, 30 s, would triple them).
    connectionsCheckingInterval: 1000,
  };
  return createServer(options, (req, res) => {
    route(handlers, req, res).catch(() => {
      if (!res.headersSent) send(res, 500, 'text/plain', 'internal error\n');
      else res.destroy();
    });
  });
}

async function route(handlers: HttpHandlers, req: IncomingMessage, res: ServerResponse) {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthcheck' && (req.method === 'GET' || req.method === 'HEAD')) {
    const why = handlers.unhealthy();
    if (why === undefined) send(res, 200, 'text/plain', 'OK');
    else send(res, 500, 'text/plain', `${why}\n`);
    return;
  }
  if (path === '/metrics' && req.method === 'GET') {
    send(res, 200, 'text/plain; version=0.0.4', handlers.metrics());
    return;
  }
  if (path === '/json' && req.method === 'POST') {
    const text = await body(req);
    if (text === undefined) {
      // Answered, then the socket closed (the rest of the body is not read).
      res.setHeader('connection', 'close');
      send(res, 413, 'text/plain', `request body over ${MAX_BODY} bytes\n`);
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      send(res, 400, 'text/plain', 'the body is not JSON\n');
      return;
    }
    const answer = await handlers.json(parsed);
    send(res, answer.status, 'application/json', `${JSON.stringify(answer.body)}\n`);
    return;
  }
  send(res, 404, 'text/plain', 'not found\n');
}

function send(res: ServerResponse, status: number, type: string, text: string): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function body(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        chunks.length = 0;
        resolve(undefined);
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
