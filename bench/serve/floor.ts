/**
 * The floor of `bench/serve/run.ts --server floor`: a bare `@grpc/grpc-js` server on the same
 * `.proto` files as `sluice serve` (loaded by `@grpc/proto-loader` with the service's own
 * options, the service's server options: the same bounds, channelz off), whose
 * `ShouldRateLimit` answers at once, without Redis, a constant `OK` with one status per
 * descriptor (`OK`, a current limit, a remaining count and a reset: the size of sluice's
 * answer). What it costs per call is what grpc-js, Node's HTTP/2 and protobufjs cost: what
 * `sluice serve` cannot go under on this machine.
 *
 * `--codec raw` (`--server floor-raw`): the request is not decoded and the response is a
 * constant buffer (grpc-js alone, no protobuf).
 *
 *   npm run build && node --import tsx bench/serve/floor.ts [--codec raw]
 *
 * Prints `gRPC on port N` on stderr, as `sluice serve` does; stops on SIGTERM.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { serverOptions } from '../../dist/serve/grpc.js';

const raw = process.argv.includes('raw');
const root = fileURLToPath(new URL('../../dist/serve/proto/', import.meta.url));
const definition = protoLoader.loadSync(['envoy/service/ratelimit/v3/rls.proto'], {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [root],
});
const loaded = grpc.loadPackageDefinition(definition) as unknown as {
  envoy: {
    service: { ratelimit: { v3: { RateLimitService: { service: grpc.ServiceDefinition } } } };
  };
};
const service = loaded.envoy.service.ratelimit.v3.RateLimitService.service;
const STATUS = {
  code: 'OK',
  current_limit: { requests_per_unit: 1_000_000_000, unit: 'HOUR', name: '' },
  limit_remaining: 999_999_999,
  duration_until_reset: { seconds: 3599, nanos: 0 },
};
const method = service.ShouldRateLimit as grpc.MethodDefinition<unknown, unknown>;
/** One encoded answer of one status: the constant of `--codec raw`. */
const ONE = method.responseSerialize({ overall_code: 'OK', statuses: [STATUS] });
const definitionUsed: grpc.ServiceDefinition = raw
  ? {
      ShouldRateLimit: {
        ...method,
        requestDeserialize: (bytes: Buffer) => bytes,
        responseSerialize: (value: unknown) => value as Buffer,
      },
    }
  : service;
const server = new grpc.Server(serverOptions(5000));
server.addService(definitionUsed, {
  ShouldRateLimit(
    call: grpc.ServerUnaryCall<{ descriptors: unknown[] }, unknown>,
    callback: grpc.sendUnaryData<unknown>,
  ) {
    if (raw) callback(null, ONE);
    else {
      callback(null, {
        overall_code: 'OK',
        statuses: call.request.descriptors.map(() => STATUS),
        response_headers_to_add: [],
      });
    }
  },
});
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  console.error(`floor: gRPC on port ${port} (${raw ? 'raw codec' : 'proto-loader'})`);
});
process.once('SIGTERM', () => server.forceShutdown());
