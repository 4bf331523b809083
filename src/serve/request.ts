/**
 * A `RateLimitRequest` as the service reads it — from gRPC (decoded by proto-loader with
 * `keepCase`, `longs: String`, `enums: String`, `defaults: true`) or from `POST /json`
 * (protojson: lowerCamelCase or the proto's names) — checked into one shape.
 */
import { overrideUnit, type Unit } from './rules/units.js';

/** One descriptor of a request, checked. */
export interface RequestDescriptor {
  readonly entries: readonly { readonly key: string; readonly value: string }[];
  /** The request's own limit for this descriptor (`limit`), when given and valid. */
  readonly override: { readonly requestsPerUnit: number; readonly unit: Unit } | undefined;
  /** The descriptor's `hits_addend`, when set (0 = check only). */
  readonly hitsAddend: number | undefined;
  readonly negativeHits: boolean;
}

/** A request, checked. */
export interface ServeRequest {
  readonly domain: string;
  readonly descriptors: readonly RequestDescriptor[];
  /** The request's `hits_addend`; 0 = unset (each descriptor then adds 1). */
  readonly hitsAddend: number;
}

/** A request the service cannot decide: answered as a gRPC error (`UNKNOWN`, as the reference). */
export class BadRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadRequestError';
  }
}

type Fields = Record<string, unknown>;

/** A field under its proto name or its protojson (lowerCamelCase) name. */
function field(object: Fields, name: string): unknown {
  if (name in object) return object[name];
  return object[name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())];
}

function fields(value: unknown, path: string): Fields {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new BadRequestError(`${path} must be an object`);
  }
  return value as Fields;
}

function text(value: unknown, path: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw new BadRequestError(`${path} must be a string`);
  return value;
}

/** A uint field: a number, or (uint64 in protojson and proto-loader) a decimal string. */
function uint(value: unknown, path: string): number {
  if (value === undefined || value === null) return 0;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new BadRequestError(`${path} must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
  }
  return n;
}

/**
 * Checks a decoded request.
 *
 * @throws {BadRequestError} an empty domain, no descriptors, a field of the wrong type.
 */
export function readRequest(value: unknown): ServeRequest {
  const request = fields(value, 'request');
  const domain = text(field(request, 'domain'), 'domain');
  if (domain === '') throw new BadRequestError('rate limit domain must not be empty');
  const list = field(request, 'descriptors') ?? [];
  if (!Array.isArray(list)) throw new BadRequestError('descriptors must be a list');
  if (list.length === 0) throw new BadRequestError('rate limit descriptor list must not be empty');
  return {
    domain,
    descriptors: list.map((d, i) => readDescriptor(d, `descriptors[${i}]`)),
    hitsAddend: uint(field(request, 'hits_addend'), 'hits_addend'),
  };
}

function readDescriptor(value: unknown, path: string): RequestDescriptor {
  const d = fields(value, path);
  const list = field(d, 'entries') ?? [];
  if (!Array.isArray(list)) throw new BadRequestError(`${path}.entries must be a list`);
  const entries = list.map((e, j) => {
    const entry = fields(e, `${path}.entries[${j}]`);
    return {
      key: text(field(entry, 'key'), `${path}.entries[${j}].key`),
      value: text(field(entry, 'value'), `${path}.entries[${j}].value`),
    };
  });
  const limit = field(d, 'limit');
  let override: RequestDescriptor['override'];
  if (limit !== undefined && limit !== null) {
    const l = fields(limit, `${path}.limit`);
    const requestsPerUnit = uint(field(l, 'requests_per_unit'), `${path}.limit.requests_per_unit`);
    const unit = overrideUnit(field(l, 'unit'));
    // The reference applies an override as given; one it cannot count is ignored here.
    if (unit !== undefined && requestsPerUnit > 0) override = { requestsPerUnit, unit };
  }
  const hits = field(d, 'hits_addend');
  let hitsAddend: number | undefined;
  if (hits !== undefined && hits !== null) {
    // proto-loader: { value: "5" }; protojson: the wrapper's value itself, "5" or 5.
    hitsAddend = uint(
      typeof hits === 'object' ? (hits as Fields).value : hits,
      `${path}.hits_addend`,
    );
  }
  const negative = field(d, 'is_negative_hits');
  return { entries, override, hitsAddend, negativeHits: negative === true };
}
