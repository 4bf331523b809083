/**
 * The quota's name of an Express 5 request, made only of the patterns the app was built
 * with (see `expressRoute` in `express.ts` for the rules). Kept apart from the middleware:
 * this is the part that reads Express's router internals.
 */
import { type IncomingMessage, METHODS } from 'node:http';
import { InvalidInputError } from '../errors.js';

/** The part of an Express request the adapter reads. */
export interface ExpressRequestLike extends IncomingMessage {
  readonly baseUrl?: string;
  /** Express's `Route` object of the matched route (its `path`, `methods` and `stack`). */
  readonly route?: {
    readonly path?: unknown;
    readonly methods?: unknown;
    readonly stack?: unknown;
  };
  /** The Express application handling the request (`.parent`, `.mountpath`, `.router`). */
  readonly app?: unknown;
}

// ---------------------------------------------------------------------------------------
// Finding the mount chain. Express 5 (`router` 2.x) keeps, on each layer of a router's
// `stack`, the pattern it was registered with (`rawPath`) and a `match(path)` that returns
// `{ path }` (the matched prefix) or `false`; a route's layer holds the `Route` object that
// Express sets as `req.route`; a mounted router's layer has the router (with its `stack`)
// as `handle`; `app.use(path, subApp)` adds a `mounted_app` wrapper layer to the parent's
// router and sets `subApp.parent` and `subApp.mountpath`.
// ---------------------------------------------------------------------------------------

/** A layer of an Express router stack, as far as this module reads it. */
interface LayerLike {
  readonly route?: unknown;
  readonly handle?: unknown;
  readonly rawPath?: unknown;
  readonly method?: unknown;
  match?(path: string): unknown;
}

/** One way from the top app down to the route: the mount layers, then the route's layer. */
interface Chain {
  readonly mounts: readonly LayerLike[];
  readonly routeLayer: LayerLike;
  /** The template (without method) this chain names. */
  readonly template: string;
  /** Every sub-app wrapper on the way was mounted at the sub-app's own `mountpath`. */
  readonly exact: boolean;
}

/** The chains of one route, and the stack lengths seen when they were searched. */
interface Found {
  readonly chains: readonly Chain[];
  readonly stacks: ReadonlyMap<readonly unknown[], number>;
}

const MAX_DEPTH = 32;
const MAX_CHAINS = 64;
const MAX_APPS = 32;
/** Layers one search may look at, so that a pathological mount graph stays cheap. */
const MAX_LAYERS = 100_000;

/** Per top app, per `Route` object: where that route is mounted. */
const found = new WeakMap<object, WeakMap<object, Found>>();

const isObject = (value: unknown): value is Record<string, unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null;

function noTemplate(expected: string, value: unknown): InvalidInputError {
  return new InvalidInputError('route', expected, value);
}

/**
 * `<METHOD><template>` of a request; `handler` is the middleware asking (its registration
 * decides `ALL`), or undefined.
 */
export function routeName(req: ExpressRequestLike, handler: unknown): string {
  const route = req.route;
  if (!isObject(route)) {
    throw noTemplate(
      'known from the route the middleware is mounted on — mount it on a route ' +
        '(app.post(path, limit, handler), router.get(path, limit, handler)), not with ' +
        'app.use()/router.use() — or set options.route to a fixed template',
      route,
    );
  }
  return `${methodPart(req, route, handler)}${templateOf(req, route)}`;
}

/** The lower-case methods Express's `app.all()` registers a handler for: Node's. */
const EVERY_METHOD = METHODS.map((method) => method.toLowerCase());

/** Whether handlers registered for `methods` run whatever method the client sends. */
const anyMethod = (methods: (method: string) => unknown): boolean =>
  EVERY_METHOD.every((method) => methods(method) === true);

/**
 * The method part of the name. For the middleware asking (`handler`), where it is registered
 * on this route: `ALL` when on `.all()` or on every method; its methods sorted and joined by
 * `,` (`DELETE,GET,POST,PUT`, `HEAD` named `GET`) when on several, one quota for all of them;
 * else the request's method, with `HEAD` named `GET`. For other code (`expressRoute`): `ALL`
 * where the client can choose the method (a Route `.all()` handler, or `app.all()`, which
 * registers the handler for every method), else the request's method, `HEAD` as `GET`.
 */
function methodPart(
  req: ExpressRequestLike,
  route: Record<string, unknown>,
  handler: unknown,
): string {
  const method = typeof req.method === 'string' ? req.method.toUpperCase() : '';
  const named = method === 'HEAD' ? 'GET' : method;
  const stack: unknown[] = Array.isArray(route.stack) ? route.stack : [];
  if (typeof handler === 'function') {
    const registered = registrationOf(route, stack, handler);
    // Known middleware: what matters is which methods it is registered for on this route.
    if (registered.found) return registered.part ?? named;
  }
  // Unknown middleware: if the route takes any method, so may the code that asks.
  const methods = route.methods;
  return isObject(methods) && (methods._all === true || anyMethod((m) => methods[m]))
    ? 'ALL'
    : named;
}

/** Where one middleware is registered on one `Route`, as far as the method part goes. */
interface Registration {
  /** The length of the route's stack when it was read: at another length, read it again. */
  readonly length: number;
  /** Whether the middleware is on the route's stack at all. */
  readonly found: boolean;
  /** `ALL`, or its methods joined; `undefined` for one method: the request's names it. */
  readonly part: string | undefined;
}

/** Per middleware, per `Route` object: its registration, read once per stack length. */
const registrations = new WeakMap<object, WeakMap<object, Registration>>();

function registrationOf(route: object, stack: readonly unknown[], handler: object): Registration {
  let byRoute = registrations.get(handler);
  if (byRoute === undefined) {
    byRoute = new WeakMap();
    registrations.set(handler, byRoute);
  }
  let registration = byRoute.get(route);
  if (registration === undefined || registration.length !== stack.length) {
    registration = readRegistration(stack, handler);
    byRoute.set(route, registration);
  }
  return registration;
}

function readRegistration(stack: readonly unknown[], handler: object): Registration {
  const { length } = stack;
  // A layer's `method` is the lower-case method it was registered for; undefined for .all().
  const methods = new Set<unknown>();
  for (const layer of stack) {
    if (isObject(layer) && layer.handle === handler) methods.add(layer.method);
  }
  if (methods.size === 0) return { length, found: false, part: undefined };
  if (methods.has(undefined) || anyMethod((m) => methods.has(m))) {
    return { length, found: true, part: 'ALL' };
  }
  const names = new Set<string>();
  for (const m of methods) {
    const upper = String(m).toUpperCase();
    names.add(upper === 'HEAD' ? 'GET' : upper);
  }
  return { length, found: true, part: names.size > 1 ? [...names].sort().join(',') : undefined };
}

function templateOf(req: ExpressRequestLike, route: Record<string, unknown>): string {
  const ancestors = appsAbove(req.app);
  const top = ancestors[0];
  const routerOfTop = top === undefined ? undefined : routerOf(top);
  if (top === undefined || routerOfTop === undefined) {
    // Not an Express 5 request: the route's pattern is the whole template only if nothing
    // was mounted above it.
    const own = route.path;
    if ((req.baseUrl ?? '') === '' && (typeof own === 'string' || isObject(own))) {
      return render(own, false);
    }
    throw noTemplate(
      'known from the Express app (req.app) that holds the route; set options.route',
      route.path,
    );
  }
  let byRoute = found.get(top);
  if (byRoute === undefined) {
    byRoute = new WeakMap();
    found.set(top, byRoute);
  }
  const path = requestPath(req);
  let entry = byRoute.get(route);
  let picked = entry && pick(entry.chains, path);
  if (typeof picked !== 'object' && (entry === undefined || changed(entry))) {
    // First request on this route, or the app gained mounts since: search again.
    entry = search(ancestors, routerOfTop, route);
    byRoute.set(route, entry);
    picked = pick(entry.chains, path);
  }
  if (typeof picked === 'object') return picked.template;
  const chains = entry?.chains ?? [];
  if (picked === undefined) {
    // No chain explains this request's path (req.url was rewritten after routing, or an
    // outer prefix is invisible): use the template only if every candidate agrees on it.
    for (const candidates of [chains.filter((c) => c.exact), chains]) {
      const templates = new Set(candidates.map((c) => c.template));
      if (templates.size === 1) return [...templates][0] as string;
    }
  }
  throw noTemplate(
    chains.length === 0
      ? 'a route reachable through mounts Express records (app.use(path, router), ' +
          'router.use(path, router), app.use(path, subApp)); this one is not (a router ' +
          'called from inside a handler?): set options.route to its template'
      : picked === 'ambiguous'
        ? 'a route with one mount chain that explains the request; this sub-app is mounted ' +
          'more than once and Express does not record which mount it came through: mount ' +
          'it once (app.use([path1, path2], subApp)) or set options.route to its template'
        : 'a route whose mount chain matches the request path; several chains reach this ' +
          'route and none matches: set options.route to its template',
    route.path,
  );
}

/** `req.app`, its parent, its parent's parent… outermost first. */
function appsAbove(app: unknown): Record<string, unknown>[] {
  const apps: Record<string, unknown>[] = [];
  let current = app;
  while (isObject(current) && !apps.includes(current) && apps.length < MAX_APPS) {
    apps.unshift(current);
    current = current.parent;
  }
  return apps;
}

/** An Express app's root router (Express 5: `app.router`), if it has one. */
function routerOf(app: Record<string, unknown>): Record<string, unknown> | undefined {
  let router: unknown;
  try {
    router = app.router;
  } catch {
    return undefined; // Express 4 throws here
  }
  return isObject(router) && Array.isArray(router.stack) ? router : undefined;
}

const isExpressApp = (value: unknown): value is Record<string, unknown> =>
  isObject(value) && typeof value.handle === 'function' && typeof value.set === 'function';

/** Every mount chain from the top app's router to the layer of `route`, in Express's order. */
function search(
  ancestors: readonly Record<string, unknown>[],
  topRouter: Record<string, unknown>,
  route: object,
): Found {
  const chains: Chain[] = [];
  const stacks = new Map<readonly unknown[], number>();
  const onPath = new Set<unknown>();
  let budget = MAX_LAYERS;
  const visit = (
    router: Record<string, unknown>,
    appIndex: number,
    mounts: LayerLike[],
    exact: boolean,
  ): void => {
    const stack = router.stack as unknown[];
    stacks.set(stack, stack.length);
    if (onPath.has(router) || mounts.length > MAX_DEPTH) return;
    onPath.add(router);
    for (const item of stack) {
      if (chains.length >= MAX_CHAINS || --budget < 0) break;
      if (!isObject(item)) continue;
      const layer = item as LayerLike;
      if (layer.route !== undefined) {
        if (layer.route === route) {
          chains.push({ mounts, routeLayer: layer, template: templateFrom(mounts, layer), exact });
        }
        continue;
      }
      const handle = layer.handle;
      if (isObject(handle) && Array.isArray(handle.stack)) {
        visit(handle, -1, [...mounts, layer], exact); // a router
      } else if (isExpressApp(handle)) {
        // An app used as a plain function (router.use(path, app)).
        const inner = routerOf(handle);
        if (inner) visit(inner, ancestors.indexOf(handle), [...mounts, layer], exact);
      } else if (
        typeof handle === 'function' &&
        handle.name === 'mounted_app' &&
        appIndex >= 0 &&
        appIndex + 1 < ancestors.length
      ) {
        // app.use(path, subApp): the wrapper does not say which sub-app it holds; the one
        // on this request's way down is a candidate, matched by its mountpath first.
        const child = ancestors[appIndex + 1] as Record<string, unknown>;
        const inner = routerOf(child);
        const same = samePattern(layer.rawPath, child.mountpath);
        if (inner) visit(inner, appIndex + 1, [...mounts, layer], exact && same);
      }
    }
    onPath.delete(router);
  };
  visit(topRouter, 0, [], true);
  return { chains, stacks };
}

/** Whether a stack seen by the search has grown or shrunk since. */
function changed(entry: Found): boolean {
  for (const [stack, length] of entry.stacks) if (stack.length !== length) return true;
  return false;
}

/**
 * The first chain, in Express's order, whose mounts consume exactly the request's `baseUrl`
 * the way Express's router trims them and whose route pattern matches the rest — among
 * chains through sub-apps' own mount paths first. Through a wrapper that may belong to
 * another sub-app (a sub-app mounted twice), only when every such chain agrees on the
 * template; else `'ambiguous'`. `undefined` when no chain explains the request.
 */
function pick(
  chains: readonly Chain[],
  path: RequestPath | undefined,
): Chain | 'ambiguous' | undefined {
  if (path === undefined) return chains.length === 1 ? chains[0] : undefined;
  const exact = chains.find((chain) => chain.exact && explains(chain, path));
  if (exact !== undefined) return exact;
  const others = chains.filter((chain) => !chain.exact && explains(chain, path));
  if (others.length === 0) return undefined;
  return others.every((chain) => chain.template === others[0]?.template) ? others[0] : 'ambiguous';
}

interface RequestPath {
  /** `req.baseUrl` + the path of `req.url`: the path the outermost router matched. */
  readonly full: string;
  /** The path of `req.url`: what the route's own pattern matched. */
  readonly rest: string;
}

function requestPath(req: ExpressRequestLike): RequestPath | undefined {
  if (typeof req.url !== 'string') return undefined;
  let url = req.url;
  if (!url.startsWith('/')) {
    // Absolute form (GET http://host/path): drop the protocol and host, as Express does.
    const end = url.indexOf('?') === -1 ? url.length : url.indexOf('?');
    const scheme = url.slice(0, end).indexOf('://');
    if (scheme === -1) return undefined;
    const slash = url.indexOf('/', scheme + 3);
    url = slash === -1 ? '/' : url.slice(slash);
  }
  const query = url.search(/[?#]/);
  const rest = query === -1 ? url : url.slice(0, query);
  return { full: `${req.baseUrl ?? ''}${rest}`, rest };
}

function matchedPrefix(layer: LayerLike, path: string): string | undefined {
  try {
    const match = typeof layer.match === 'function' ? layer.match(path) : undefined;
    return isObject(match) && typeof match.path === 'string' ? match.path : undefined;
  } catch {
    return undefined; // e.g. a parameter that does not decode
  }
}

function explains(chain: Chain, request: RequestPath): boolean {
  let path = request.full;
  for (const mount of chain.mounts) {
    const prefix = matchedPrefix(mount, path);
    if (prefix === undefined || !path.startsWith(prefix)) return false;
    const next = path[prefix.length];
    if (next !== undefined && next !== '/') return false;
    path = path.slice(prefix.length);
    if (!path.startsWith('/')) path = `/${path}`;
  }
  return path === request.rest && matchedPrefix(chain.routeLayer, path) !== undefined;
}

/** The template of a chain: each mount's pattern (no trailing slash), then the route's. */
function templateFrom(mounts: readonly LayerLike[], routeLayer: LayerLike): string {
  return mounts.map((m) => render(m.rawPath, true)).join('') + render(routeLayer.rawPath, false);
}

/** A pattern as text: a string as is, a RegExp as `String(re)`, an array as JSON. */
function render(pattern: unknown, mount: boolean): string {
  if (typeof pattern === 'string') return mount ? pattern.replace(/\/+$/, '') : pattern;
  if (Array.isArray(pattern)) {
    return JSON.stringify(pattern.flat(Number.POSITIVE_INFINITY).map((p) => render(p, false)));
  }
  return String(pattern);
}

/** Whether a wrapper layer's pattern is the one a sub-app records as its `mountpath`. */
function samePattern(rawPath: unknown, mountpath: unknown): boolean {
  const norm = (p: unknown) =>
    render(Array.isArray(p) ? p.flat(Number.POSITIVE_INFINITY) : p, false);
  return mountpath !== undefined && norm(rawPath) === norm(mountpath);
}
