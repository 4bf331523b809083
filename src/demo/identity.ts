/**
 * The demo's stand-in for a verified session: a bearer token `<tenant>.<hmac>` signed with
 * a secret the replicas share. A real service takes the tenant from its own authentication;
 * the point shown here is that the quota's identity is verified, never a field the client
 * can write freely.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

function sign(secret: string, tenant: string): string {
  return createHmac('sha256', secret).update(tenant).digest('base64url');
}

/** A bearer token for `tenant` (tenant ids must not contain `.`). */
export function issueToken(secret: string, tenant: string): string {
  return `${tenant}.${sign(secret, tenant)}`;
}

/** The verified tenant of a request, or `undefined` when its token is missing or forged. */
export function verifiedTenant(secret: string, req: IncomingMessage): string | undefined {
  return tenantFromAuthorization(secret, req.headers.authorization);
}

/** The verified tenant of an `Authorization: Bearer <tenant>.<hmac>` value, or `undefined`. */
export function tenantFromAuthorization(
  secret: string,
  header: string | null | undefined,
): string | undefined {
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return undefined;
  const token = header.slice('Bearer '.length);
  const dot = token.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const tenant = token.slice(0, dot);
  const given = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(sign(secret, tenant));
  return given.length === expected.length && timingSafeEqual(given, expected) ? tenant : undefined;
}
