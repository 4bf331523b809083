import { type NextRequest, NextResponse } from 'next/server';
import { fixedWindow } from 'sluice';
import { fetchRateLimit } from 'sluice/fetch';
import { limiter, verifiedTenantOf } from './lib/sluice';

// An outer limit on every API call of a tenant, before any route runs. One fixed name for
// every path the matcher sends here: the proxy sees the URL, not the route it leads to.
const limitApi = fetchRateLimit({
  limiter,
  policy: fixedWindow({ name: 'api', limit: 100, windowMs: 10_000 }),
  route: 'ALL/api',
  identify: verifiedTenantOf,
});

export async function proxy(request: NextRequest): Promise<Response> {
  const verdict = await limitApi.check(request);
  if (!verdict.pass) return verdict.response;
  const response = NextResponse.next();
  for (const [name, value] of Object.entries(verdict.headers)) response.headers.set(name, value);
  return response;
}

// Next.js 16 runs proxy.ts on Node.js only. On 15.5, name this file middleware.ts, the
// function middleware, and add runtime: 'nodejs' here.
export const config = { matcher: '/api/:path*' };
