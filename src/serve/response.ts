/**
 * A `RateLimitResponse` in the shape proto-loader encodes (the proto's field names, enums by
 * name), and its protojson form for `POST /json`.
 */
import type { Unit } from './rules/units.js';

export type Code = 'OK' | 'OVER_LIMIT';

/** google.protobuf.Duration. */
export interface Duration {
  readonly seconds: number;
  readonly nanos: number;
}

export interface DescriptorStatus {
  readonly code: Code;
  readonly current_limit?: {
    readonly requests_per_unit: number;
    readonly unit: Unit;
    readonly name: string;
  };
  readonly limit_remaining: number;
  readonly duration_until_reset?: Duration;
}

/** google.protobuf.Value, the kinds the service writes (its fields camelCase, as protobufjs defines the well-known types). */
export type StructValue =
  | { readonly boolValue: boolean }
  | { readonly numberValue: number }
  | { readonly listValue: { readonly values: readonly StructValue[] } };

export interface ServeResponse {
  readonly overall_code: Code;
  readonly statuses: readonly DescriptorStatus[];
  readonly response_headers_to_add: readonly { readonly key: string; readonly value: string }[];
  readonly dynamic_metadata?: { readonly fields: Readonly<Record<string, StructValue>> };
}

/** The largest `limit_remaining` (uint32): what an unlimited descriptor answers. */
export const UNLIMITED_REMAINING = 4_294_967_295;

/** A duration of `ms` milliseconds. */
export function durationOf(ms: number): Duration {
  const whole = Math.max(0, Math.round(ms));
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 };
}

/** protojson of a Duration: `"1.500s"`. */
function durationJson(d: Duration): string {
  return d.nanos === 0
    ? `${d.seconds}s`
    : `${d.seconds}.${String(d.nanos / 1_000_000).padStart(3, '0')}s`;
}

function valueJson(v: StructValue): unknown {
  if ('boolValue' in v) return v.boolValue;
  if ('numberValue' in v) return v.numberValue;
  return v.listValue.values.map(valueJson);
}

/** The response as protojson (lowerCamelCase names, default values left out). */
export function responseJson(r: ServeResponse): Record<string, unknown> {
  const json: Record<string, unknown> = {
    overallCode: r.overall_code,
    statuses: r.statuses.map((s) => {
      const status: Record<string, unknown> = { code: s.code };
      if (s.current_limit !== undefined) {
        const limit: Record<string, unknown> = {
          requestsPerUnit: s.current_limit.requests_per_unit,
          unit: s.current_limit.unit,
        };
        if (s.current_limit.name !== '') limit.name = s.current_limit.name;
        status.currentLimit = limit;
      }
      if (s.limit_remaining !== 0) status.limitRemaining = s.limit_remaining;
      if (s.duration_until_reset !== undefined) {
        status.durationUntilReset = durationJson(s.duration_until_reset);
      }
      return status;
    }),
  };
  if (r.response_headers_to_add.length > 0) json.responseHeadersToAdd = r.response_headers_to_add;
  if (r.dynamic_metadata !== undefined) {
    json.dynamicMetadata = Object.fromEntries(
      Object.entries(r.dynamic_metadata.fields).map(([k, v]) => [k, valueJson(v)]),
    );
  }
  return json;
}
