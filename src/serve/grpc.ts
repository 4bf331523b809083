/**
 * The gRPC side: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and the
 * standard health service (`grpc.health.v1.Health`, service name `ratelimit` or `""`), both
 * from sluice's own `.proto` files (`proto/`), on `@grpc/grpc-js`.
 */
import { fileURLToPath } from 'node:url';
import type * as Grpc from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';

/** The gRPC health service's name for this service. */
export const HEALTH_SERVICE_NAME = 'ratelimit';

/** How the service answers calls: the handlers `service.ts` gives. */
export interface GrpcHandlers {
  /** Decides one request: resolves the response, or rejects with a `ServiceError`. */
  shouldRateLimit(request: unknown, deadline: Grpc.Deadline): Promise<unknown>;
  /** True while the service can decide (Redis answers, a configuration is loaded). */
  serving(): boolean;
  /** Registers a listener of serving-state changes; returns its removal. */
  onServingChange(listener: () => void): () => void;
  /** The service's in-flight cap: each connection's streams are capped at twice that. */
  readonly maxInFlight: number;
}

/** The largest request message accepted, in bytes: 16 limited descriptors take < 4 KiB. */
export const MAX_REQUEST_BYTES = 64 * 1024;

/**
 * The server's bounds. A connection carries at most twice `maxInFlight` concurrent calls
 * (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`; the client queues the excess): what one
 * connection can make the server hold is bounded, while past the service-wide cap a call is
 * answered UNAVAILABLE at once (so that Envoy's `failure_mode_deny` decides now rather than
 * at its timeout) instead of waiting in the client's queue; a request message of more than
 * {@link MAX_REQUEST_BYTES} is refused (`RESOURCE_EXHAUSTED`) before it is decoded, so that no
 * call holds the event loop; the server pings a connection silent for 30 s and drops it when
 * the ping is not answered in 10 s (a half-open connection, a peer gone without a FIN), and
 * lets a connection idle for an hour go. Channelz, which counts every call, is off.
 */
export function serverOptions(maxInFlight: number): Grpc.ServerOptions {
  return {
    'grpc.max_concurrent_streams': 2 * maxInFlight,
    'grpc.max_receive_message_length': MAX_REQUEST_BYTES,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.max_connection_idle_ms': 3_600_000,
    'grpc.enable_channelz': 0,
  };
}

/** The proto-loader options: the proto's field names, longs as strings, enums by name. */
const LOAD_OPTIONS: ProtoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

/**
 * Builds the gRPC server with both services (not bound yet).
 *
 * @param grpc the `@grpc/grpc-js` module; `protoLoader` the `@grpc/proto-loader` module.
 */
export function grpcServer(
  grpc: typeof Grpc,
  protoLoader: typeof ProtoLoader,
  handlers: GrpcHandlers,
): { server: Grpc.Server; endWatches: () => void } {
  const root = fileURLToPath(new URL('./proto/', import.meta.url));
  const definition = protoLoader.loadSync(
    ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'],
    { ...LOAD_OPTIONS, includeDirs: [root] },
  );
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: {
      service: { ratelimit: { v3: { RateLimitService: { service: Grpc.ServiceDefinition } } } };
    };
    grpc: { health: { v1: { Health: { service: Grpc.ServiceDefinition } } } };
  };
  const server = new grpc.Server(serverOptions(handlers.maxInFlight));
  server.addService(loaded.envoy.service.ratelimit.v3.RateLimitService.service, {
    ShouldRateLimit(
      call: Grpc.ServerUnaryCall<unknown, unknown>,
      callback: Grpc.sendUnaryData<unknown>,
    ) {
      handlers.shouldRateLimit(call.request, call.getDeadline()).then(
        (response) => callback(null, response),
        (error: Grpc.ServiceError) => callback(error),
      );
    },
  });
  const status = (service: string) =>
    service !== '' && service !== HEALTH_SERVICE_NAME
      ? 'SERVICE_UNKNOWN'
      : handlers.serving()
        ? 'SERVING'
        : 'NOT_SERVING';
  const watches = new Set<Grpc.ServerWritableStream<unknown, unknown>>();
  server.addService(loaded.grpc.health.v1.Health.service, {
    Check(
      call: Grpc.ServerUnaryCall<{ service: string }, unknown>,
      callback: Grpc.sendUnaryData<unknown>,
    ) {
      const answer = status(call.request.service);
      if (answer === 'SERVICE_UNKNOWN') {
        callback({
          code: grpc.status.NOT_FOUND,
          details: `unknown service ${call.request.service}`,
        });
      } else callback(null, { status: answer });
    },
    Watch(call: Grpc.ServerWritableStream<{ service: string }, unknown>) {
      let last = '';
      const send = () => {
        const answer = status(call.request.service);
        if (answer !== last) {
          last = answer;
          call.write({ status: answer });
        }
      };
      send();
      const unsubscribe = handlers.onServingChange(send);
      watches.add(call);
      const remove = () => {
        unsubscribe();
        watches.delete(call);
      };
      call.on('cancelled', remove);
      call.on('close', remove);
    },
  });
  // At shutdown, after NOT_SERVING was sent: a watch would hold the graceful shutdown open.
  const endWatches = () => {
    for (const call of watches) call.end();
    watches.clear();
  };
  return { server, endWatches };
}

/** Binds `server` to `host:port` (0: any free port); resolves the port bound. */
export function bind(
  grpc: typeof Grpc,
  server: Grpc.Server,
  host: string,
  port: number,
): Promise<number> {
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => {
      if (error) reject(error);
      else resolve(bound);
    });
  });
}
