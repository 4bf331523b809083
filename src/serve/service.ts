/**
 * The rate limit service, put together: the rules (loaded, watched), the limiter on the
 * caller's Redis client, the decider, the gRPC and HTTP servers, the health state and the
 * metrics. Loaded by `createRateLimitService` once its peer dependencies are known to be
 * installed (see `index.ts`).
 */
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { InvalidInputError, isSluiceError, TimeoutError, UnavailableError } from '../errors.js';
import { RateLimiter } from '../limiter/rate-limiter.js';
import { storeFor } from '../redis/select.js';
import { Decider, NoConfigError } from './decide.js';
import { bind, grpcServer } from './grpc.js';
import { httpServer } from './http.js';
import { ServeMetrics } from './metrics.js';
import { Policies } from './policies.js';
import { BadRequestError, readRequest } from './request.js';
import { responseJson, type ServeResponse } from './response.js';
import type { RuleFileError } from './rules/errors.js';
import { RuleSource } from './rules/source.js';
import { answerSettings, runtimeDirectory } from './settings.js';
import { TurnGate } from './turn-gate.js';
import type { RateLimitService, RateLimitServiceOptions } from './types.js';

/** Past this, a shutdown stops waiting for in-flight calls, in ms (default). */
const SHUTDOWN_GRACE_MS = 10_000;
/** The Redis probe's period, in ms. */
const PROBE_MS = 1000;

/** A call the service did not decide: past its deadline, or over the in-flight cap. */
class NotDecidedError extends Error {}

/** Starts the service; see `createRateLimitService`. */
export async function startService(options: RateLimitServiceOptions): Promise<RateLimitService> {
  const env = options.env ?? process.env;
  const settings = answerSettings(env, options.compat);
  const log = options.log ?? ((line: string) => console.error(line));
  const timeoutMs = options.timeoutMs ?? 100;
  const maxInFlight = options.maxInFlight ?? 1000;
  const store = storeFor(options.client);
  const limiter = new RateLimiter({
    client: options.client,
    namespace: options.namespace ?? 'serve',
    timeoutMs,
    maxInFlight,
  });
  const metrics = new ServeMetrics();
  const listeners = new Set<() => void>();
  let closing = false;
  let lastServing = false;
  const serving = () => !closing && metrics.redisUp === 1 && rules.current !== undefined;
  const changed = () => {
    const now = serving();
    if (now === lastServing) return;
    lastServing = now;
    for (const listener of listeners) listener();
  };
  const policies = new Policies();
  const rules = new RuleSource({
    path: options.config ?? runtimeDirectory(env),
    policies,
    merge: settings.mergeDomains,
    pollMs: options.reloadPollMs ?? 1000,
    onReload: (event) => {
      metrics.reload(event.ok);
      if (event.ok) {
        metrics.configLoaded = 1;
        metrics.configError = 0;
        log(
          `sluice serve: loaded ${event.rules.rules.length} rules from ${event.rules.files.length} files`,
        );
      } else {
        metrics.configError = 1;
        log(
          `sluice serve: configuration not loaded (${rules.current === undefined ? 'none serving' : 'the last good one keeps serving'}): ${event.error.message}`,
        );
      }
      changed();
    },
  });
  const decider = new Decider({
    limiter,
    store,
    settings,
    policies,
    rules: () => rules.current,
    onDescriptor: (domain, key, outcome, detail) =>
      metrics.descriptor(domain, key, outcome, detail),
  });
  let redisKnown = false;
  const redisState = (up: boolean) => {
    if (redisKnown && metrics.redisUp === (up ? 1 : 0)) return;
    if (redisKnown || !up) {
      log(up ? 'sluice serve: Redis answers again' : 'sluice serve: Redis is unreachable');
    }
    redisKnown = true;
    metrics.redisUp = up ? 1 : 0;
    changed();
  };

  const gate = new TurnGate();
  /** One request, bounded: the in-flight cap and the deadline. */
  const decide = async (raw: unknown, deadlineMs: number): Promise<ServeResponse> => {
    const request = readRequest(raw);
    if (metrics.inFlight >= maxInFlight)
      throw new NotDecidedError(`${maxInFlight} calls in flight`);
    metrics.inFlight++;
    let timer: NodeJS.Timeout | undefined;
    try {
      const decided = gate.run(() => decider.decide(request));
      const answer =
        deadlineMs >= timeoutMs && settings.compat === 'sluice'
          ? await decided // the limiter's own deadline is the shorter
          : await Promise.race([
              decided,
              new Promise<never>((_, reject) => {
                timer = setTimeout(
                  () =>
                    reject(
                      new NotDecidedError(
                        `not decided within ${Math.min(deadlineMs, timeoutMs)} ms`,
                      ),
                    ),
                  Math.max(0, Math.min(deadlineMs, timeoutMs)),
                );
              }),
            ]);
      // Not a sign of Redis being back: the answer may have needed no Redis call (the probe says).
      return answer;
    } catch (error) {
      // Redis unreachable or silent; an overload or an error reply says nothing of that.
      if (error instanceof UnavailableError || error instanceof TimeoutError) redisState(false);
      throw error;
    } finally {
      clearTimeout(timer);
      metrics.inFlight--;
    }
  };

  const { server, endWatches } = grpcServer(grpc, protoLoader, {
    async shouldRateLimit(request, deadline) {
      const started = performance.now();
      const left = answerWithin(
        deadline instanceof Date ? deadline.getTime() : Number(deadline),
        Date.now(),
      );
      try {
        const response = await decide(request, left);
        metrics.request(
          response.overall_code === 'OK' ? 'ok' : 'over_limit',
          performance.now() - started,
        );
        return response;
      } catch (error) {
        const { code, name } = grpcStatus(error);
        metrics.request(name, performance.now() - started);
        throw Object.assign(new Error((error as Error).message), {
          code,
          details: (error as Error).message,
        });
      }
    },
    serving,
    maxInFlight,
    onServingChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  });
  const http = httpServer({
    unhealthy() {
      if (closing) return 'shutting down';
      if (rules.current === undefined) return 'no valid rate limit configuration is loaded';
      if (metrics.redisUp === 0) return 'Redis is unreachable';
      return undefined;
    },
    async json(body) {
      const started = performance.now();
      try {
        const response = await decide(body, Number.POSITIVE_INFINITY);
        const over = response.overall_code === 'OVER_LIMIT';
        metrics.request(over ? 'over_limit' : 'ok', performance.now() - started);
        return { status: over ? 429 : 200, body: responseJson(response) };
      } catch (error) {
        const { code, name } = grpcStatus(error);
        metrics.request(name, performance.now() - started);
        const status =
          code === grpc.status.UNAVAILABLE ? 503 : code === grpc.status.UNKNOWN ? 400 : 500;
        return { status, body: { error: (error as Error).message } };
      }
    },
    metrics: () => metrics.text(),
  });

  // Redis liveness, for /healthcheck and the health service: a peek that writes nothing.
  const probePolicy = fixedWindow({ limit: 1, windowMs: 1000 });
  const probe = async () => {
    try {
      await limiter.peek({ tenant: 'sluice-serve', route: 'health' }, probePolicy);
      redisState(true);
    } catch {
      redisState(false);
    }
  };
  await rules.start();
  // Serve once the client's first connections are up (every primary of a cluster); an
  // unreachable Redis is reported by the health state instead.
  await limiter.ready().catch(() => {});
  await probe();
  const probeTimer = setInterval(() => void probe(), PROBE_MS);
  probeTimer.unref();

  const host = options.host ?? env.GRPC_HOST ?? '0.0.0.0';
  let grpcPort: number;
  try {
    grpcPort = await bind(grpc, server, host, options.grpcPort ?? 8081);
  } catch (error) {
    clearInterval(probeTimer);
    rules.stop();
    throw error;
  }
  const httpPort = await new Promise<number>((resolve, reject) => {
    http.once('error', reject);
    http.listen(options.httpPort ?? 8080, options.httpHost ?? env.HOST ?? host, () => {
      resolve((http.address() as AddressInfo).port);
    });
  }).catch((error) => {
    server.forceShutdown();
    clearInterval(probeTimer);
    rules.stop();
    throw error;
  });

  let closed: Promise<void> | undefined;
  return {
    grpcPort,
    httpPort,
    reload: () => rules.check(),
    get lastConfigError(): RuleFileError | undefined {
      return rules.lastError;
    },
    close() {
      closed ??= (async () => {
        closing = true;
        changed();
        endWatches();
        clearInterval(probeTimer);
        rules.stop();
        const graceMs = options.shutdownGraceMs ?? SHUTDOWN_GRACE_MS;
        await Promise.all([shutdownGrpc(server, graceMs), closeHttp(http, graceMs)]);
      })();
      return closed;
    },
  };
}

/**
 * How long a call may take to be decided, in ms, given its gRPC deadline (epoch ms, or
 * `Infinity`): the time left less a margin for the answer to reach the client before the
 * deadline (the deadline travelled as a timeout, which starts late by the request's transit
 * time; the undecided calls of a burst time out together and are answered one after the
 * other) — 10 % of the time left, at least 2 ms (Envoy's 20 ms default timeout: 18 ms) — so
 * that an undecided call is UNAVAILABLE, not a client-side DEADLINE_EXCEEDED.
 */
function answerWithin(deadlineMs: number, nowMs: number): number {
  if (deadlineMs === Number.POSITIVE_INFINITY) return deadlineMs;
  const left = deadlineMs - nowMs;
  return left - Math.max(2, left / 10);
}

/** The gRPC status of a failure, and its name for metrics. */
function grpcStatus(error: unknown): { code: grpc.status; name: string } {
  if (error instanceof BadRequestError || error instanceof InvalidInputError) {
    return { code: grpc.status.UNKNOWN, name: 'bad_request' };
  }
  if (error instanceof NoConfigError) return { code: grpc.status.UNAVAILABLE, name: 'no_config' };
  if (error instanceof NotDecidedError || isSluiceError(error)) {
    return { code: grpc.status.UNAVAILABLE, name: 'unavailable' };
  }
  return { code: grpc.status.INTERNAL, name: 'internal' };
}

/** Stops accepting calls and waits for those in flight (at most the grace period). */
function shutdownGrpc(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    timer.unref();
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Stops accepting; past the grace period, destroys the sockets still open (stalled clients). */
function closeHttp(http: HttpServer, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => http.closeAllConnections(), graceMs);
    timer.unref();
    http.close(() => {
      clearTimeout(timer);
      resolve();
    });
    http.closeIdleConnections();
  });
}
