import { fixedWindow } from 'sluice';
import { fetchRateLimit } from 'sluice/fetch';
import { limiter, verifiedTenantOf } from '../../../../lib/sluice';

const limitOrders = fetchRateLimit({
  limiter,
  policy: fixedWindow({ limit: 10, windowMs: 60_000 }),
  // The route's template, as the file system names it: every id shares one quota.
  route: 'POST/api/orders/[id]',
  identify: verifiedTenantOf,
});

export async function POST(
  request: Request,
  { params }: { params: Promise<{ id: string }> },
): Promise<Response> {
  const verdict = await limitOrders.check(request);
  if (!verdict.pass) return verdict.response; // 429, 503 or 401: no work done
  const { id } = await params;
  return Response.json({ created: id }, { status: 201, headers: verdict.headers });
}
