/**
 * The shapes of `sluice/serve`: the options of `createRateLimitService` and the running
 * service it resolves.
 */
import type { AcceptedClient } from '../redis/select.js';
import type { RuleFileError } from './rules/errors.js';
import type { Compat } from './settings.js';

/** Options of {@link createRateLimitService}. */
export interface RateLimitServiceOptions {
  /** The Redis client, of any kind a `RateLimiter` takes (single node, Cluster, Sentinel). */
  readonly client: AcceptedClient;
  /**
   * The rule files: a directory (every file in it whose name does not start with a dot) or
   * one file. Default: `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY` of `env`,
   * as the reference (`/srv/runtime_data/current/config`).
   */
  readonly config?: string;
  /**
   * How descriptors are counted: `"sluice"` (default; all or nothing, windows anchored at
   * first hit) or `"reference"` (every matched descriptor incremented, clock-aligned
   * windows). Default: `SLUICE_COMPAT` of `env`, else `"sluice"`.
   */
  readonly compat?: Compat;
  /** Address both servers listen on. Default: `GRPC_HOST` of `env`, else `0.0.0.0`. */
  readonly host?: string;
  /** Address of the HTTP server, when not `host`. Default: `HOST` of `env`, else `host`. */
  readonly httpHost?: string;
  /** gRPC port; 0 = any free port (see {@link RateLimitService.grpcPort}). Default 8081. */
  readonly grpcPort?: number;
  /** HTTP port; 0 = any free port. Default 8080. */
  readonly httpPort?: number;
  /**
   * Deadline of one decision, in ms: past it (or past the gRPC call's own deadline, when
   * shorter) the call fails with `UNAVAILABLE`. Default 100; keep it below Envoy's timeout
   * (20 ms by default) to answer before Envoy gives up.
   */
  readonly timeoutMs?: number;
  /** Calls decided at once; past it, `UNAVAILABLE`. Default 1000. */
  readonly maxInFlight?: number;
  /** The limiter's namespace (the start of every key of sluice's counting). Default `"serve"`. */
  readonly namespace?: string;
  /**
   * The environment the reference's settings are read from (`SHADOW_MODE`,
   * `LIMIT_RESPONSE_HEADERS_ENABLED`, `MERGE_DOMAIN_CONFIG`, …; see docs/serve.md).
   * Default `process.env`.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** How often the rule files are compared for a change, in ms; 0 = only on file events. Default 1000. */
  readonly reloadPollMs?: number;
  /**
   * How long `close()` waits for calls in flight, in ms; past it the sockets still open are
   * destroyed (HTTP) and the gRPC server forced down. Default 10000.
   */
  readonly shutdownGraceMs?: number;
  /** Where log lines go. Default: stderr. */
  readonly log?: (line: string) => void;
}

/** A running service. */
export interface RateLimitService {
  /** The gRPC port bound. */
  readonly grpcPort: number;
  /** The HTTP port bound. */
  readonly httpPort: number;
  /** The last reload's error while the files on disk do not load; else undefined. */
  readonly lastConfigError: RuleFileError | undefined;
  /** Reloads the rule files now, if they changed. */
  reload(): Promise<void>;
  /**
   * Graceful shutdown: reports NOT_SERVING, stops accepting calls, waits for those in flight
   * (at most `shutdownGraceMs`, 10 s by default), then destroys the connections still open.
   * The Redis client is the caller's to close, after.
   */
  close(): Promise<void>;
}
