/**
 * A lean gRPC load generator for `bench/serve/run.ts` (`--client h2`, the default): unary
 * `ShouldRateLimit` calls as raw HTTP/2 streams (`node:http2`, the gRPC framing and the
 * protobuf encoding written by hand), so that the client costs far less CPU per call than
 * the service and the service is what is measured — as under Envoy, whose C++ client is
 * cheap. `concurrency` callers send calls back to back over `channels` connections for
 * `durationMs`, each call with `descriptors` descriptors of a random user. A call counts
 * when it ends with `grpc-status: 0` and a response whose `overall_code` is read. Prints one
 * JSON line: calls, errors (and their kinds), over, decisions per second, p50/p99 in µs, client CPU in µs.
 *
 * With a `rate` (calls per second), an open loop instead: calls go out at that rate whatever
 * the answers, at most `concurrency` in flight, each call's latency counted from when it was
 * due (no coordinated omission) — the p99 a fleet of Envoys sees at that load.
 *
 *   node --import tsx bench/serve/load-h2.ts <port> <concurrency> <descriptors> <durationMs> [rate]
 */
import { type ClientHttp2Session, connect, constants } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { LatencyRecorder } from '../latency.js';
import { printResult } from './load-result.js';

const [port, concurrency, descriptors, durationMs, rate = 0] = process.argv
  .slice(2)
  .map(Number) as [number, number, number, number, number?];
const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** A length-delimited protobuf field. */
function delimited(tag: number, body: Buffer): Buffer {
  const length: number[] = [];
  let n = body.length;
  while (n > 0x7f) {
    length.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  length.push(n);
  return Buffer.concat([Buffer.from([tag, ...length]), body]);
}

const text = (tag: number, s: string) => delimited(tag, Buffer.from(s));
/** RateLimitDescriptor.Entry: key = 1, value = 2. */
const entry = (key: string, value: string) =>
  delimited(0x0a, Buffer.concat([text(0x0a, key), text(0x12, value)]));

/** A `RateLimitRequest` (domain = 1, descriptors = 2), gRPC-framed. */
function request(): Buffer {
  const user = `u${Math.floor(Math.random() * 10_000)}`;
  const all = [
    [entry('user', user)],
    [entry('route', 'POST/orders'), entry('user', user)],
    [entry('tenant', `t${Math.floor(Math.random() * 100)}`)],
  ];
  const body = Buffer.concat([
    text(0x0a, 'bench'),
    ...all.slice(0, descriptors).map((entries) => delimited(0x12, Buffer.concat(entries))),
  ]);
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

const channels = Math.min(4, concurrency);
const sessions: ClientHttp2Session[] = Array.from({ length: channels }, () =>
  connect(`http://127.0.0.1:${port}`),
);

/** One call; resolves `overall_code` (1 OK, 2 OVER_LIMIT). */
const call = (session: ClientHttp2Session) =>
  new Promise<number>((resolve, reject) => {
    const stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-timeout': '1000m',
    });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    stream.on('response', (headers) => {
      status = headers['grpc-status'] as string | undefined; // trailers-only answer
    });
    stream.on('trailers', (trailers) => {
      status = trailers['grpc-status'] as string | undefined;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', reject);
    stream.on('close', () => {
      const body = Buffer.concat(chunks);
      // overall_code = 1 (varint): the message's first field when set.
      if (status === '0' && body.length >= 7 && body[5] === 0x08) resolve(body[6] as number);
      else reject(new Error(`grpc-status ${status}`));
    });
    stream.end(request());
  });

const latencies = new LatencyRecorder(1 << 16);
let errors = 0;
let over = 0;
const errorKinds = new Map<string, number>();
// Warm up the connections and the server's caches.
await Promise.all(sessions.map((s) => call(s).catch(() => {})));
const cpu0 = process.cpuUsage();
const started = performance.now();
const end = started + durationMs;
if (rate > 0) {
  // Open loop: a call every 1/rate s whatever the answers (at most `concurrency` in flight:
  // past that a call counts as an error), each timed from when it was due.
  let due = 0;
  let inFlight = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      const calls = Math.floor(((Math.min(now, end) - started) * rate) / 1000);
      for (; due < calls; due++) {
        const at = started + (due * 1000) / rate;
        if (inFlight >= concurrency) {
          errors++;
          continue;
        }
        inFlight++;
        call(sessions[due % channels] as ClientHttp2Session).then(
          (code) => {
            inFlight--;
            if (code !== 1) over++;
            latencies.record(performance.now() - at);
          },
          (error: Error) => {
            inFlight--;
            errors++;
            errorKinds.set(error.message, (errorKinds.get(error.message) ?? 0) + 1);
          },
        );
      }
      if (now < end)
        setTimeout(tick, 1); // not setImmediate: a busy loop would take a core
      else {
        const drained = () => (inFlight === 0 ? resolve() : setTimeout(drained, 1));
        drained();
      }
    };
    tick();
  });
} else {
  await Promise.all(
    Array.from({ length: concurrency }, async (_, i) => {
      const session = sessions[i % channels] as ClientHttp2Session;
      while (performance.now() < end) {
        const t = performance.now();
        try {
          if ((await call(session)) !== 1) over++;
          latencies.record(performance.now() - t);
        } catch (error) {
          errors++;
          const kind = (error as Error).message;
          errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
        }
      }
    }),
  );
}
printResult(latencies, { errors, over, errorKinds }, started, cpu0);
for (const s of sessions) s.close();
