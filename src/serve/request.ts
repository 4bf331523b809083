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

/**
 * A field's path, built only when an error names it: the hot path builds no text (a request
 * of 3 descriptors would otherwise format a dozen paths per call).
 */
type Path = () => string;

/** A field under its proto name or its protojson (lowerCamelCase) name. */
function field(object: Fields, name: string, json: string): unknown {
  const value = object[name];
  if (value !== undefined || name === json || name in object) return value;
  return object[json];
}

function fields(value: unknown, path: Path): Fields {
  if (value === undefined || value === null) return EMPTY;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new BadRequestError(`${path()} must be an object`);
  }
  return value as Fields;
}

const EMPTY: Fields = Object.freeze({});

function text(value: unknown, path: Path): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  throw new BadRequestError(`${path()} must be a string`);
}

/** A uint field: a number, or (uint64 in protojson and proto-loader) a decimal string. */
function uint(value: unknown, path: Path): number {
  if (value === undefined || value === null) return 0;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new BadRequestError(`${path()} must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
  }
  return n;
}

/**
 * Checks a decoded request.
 *
 * @throws {BadRequestError} an empty domain, no descriptors, a field of the wrong type.
 */
export function readRequest(value: unknown): ServeRequest {
  const request = fields(value, () => 'request');
  const domain = text(field(request, 'domain', 'domain'), () => 'domain');
  if (domain === '') throw new BadRequestError('rate limit domain must not be empty');
  const list = field(request, 'descriptors', 'descriptors') ?? [];
  if (!Array.isArray(list)) throw new BadRequestError('descriptors must be a list');
  if (list.length === 0) throw new BadRequestError('rate limit descriptor list must not be empty');
  const descriptors: RequestDescriptor[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) descriptors[i] = readDescriptor(list[i], i);
  return {
    domain,
    descriptors,
    hitsAddend: uint(field(request, 'hits_addend', 'hitsAddend'), () => 'hits_addend'),
  };
}

function readDescriptor(value: unknown, i: number): RequestDescriptor {
  const path = () => `descriptors[${i}]`;
  const d = fields(value, path);
  const list = field(d, 'entries', 'entries') ?? [];
  if (!Array.isArray(list)) throw new BadRequestError(`${path()}.entries must be a list`);
  const entries: { key: string; value: string }[] = new Array(list.length);
  for (let j = 0; j < list.length; j++) {
    const at = () => `${path()}.entries[${j}]`;
    const entry = fields(list[j], at);
    entries[j] = {
      key: text(field(entry, 'key', 'key'), () => `${at()}.key`),
      value: text(field(entry, 'value', 'value'), () => `${at()}.value`),
    };
  }
  const limit = field(d, 'limit', 'limit');
  let override: RequestDescriptor['override'];
  if (limit !== undefined && limit !== null) {
    const l = fields(limit, () => `${path()}.limit`);
    const requestsPerUnit = uint(
      field(l, 'requests_per_unit', 'requestsPerUnit'),
      () => `${path()}.limit.requests_per_unit`,
    );
    const unit = overrideUnit(field(l, 'unit', 'unit'));
    // The reference applies an override as given; one it cannot count is ignored here.
    if (unit !== undefined && requestsPerUnit > 0) override = { requestsPerUnit, unit };
  }
  const hits = field(d, 'hits_addend', 'hitsAddend');
  let hitsAddend: number | undefined;
  if (hits !== undefined && hits !== null) {
    // proto-loader: { value: "5" }; protojson: the wrapper's value itself, "5" or 5.
    hitsAddend = uint(
      typeof hits === 'object' ? (hits as Fields).value : hits,
      () => `${path()}.hits_addend`,
    );
  }
  const negative = field(d, 'is_negative_hits', 'isNegativeHits');
  return { entries, override, hitsAddend, negativeHits: negative === true };
}
