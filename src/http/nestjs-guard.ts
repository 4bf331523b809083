/**
 * sluice's NestJS guard: the module that holds the shared options, the `@RateLimit()` and
 * `@SkipRateLimit()` decorators, and `SluiceGuard`, which runs `createGuard`'s decision for
 * the route and answers as every adapter does.
 *
 * The decorators are plain functions over `SetMetadata`, and the guard's constructor
 * parameters are injected by explicit tokens, so nothing here needs `emitDecoratorMetadata`
 * or decorator syntax in sluice's own build.
 */

import {
  type CanActivate,
  type DynamicModule,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  Optional,
  type OptionalFactoryDependency,
  type Provider,
  SetMetadata,
  type Type,
} from '@nestjs/common';
import { HttpAdapterHost, ModulesContainer, Reflector } from '@nestjs/core';
import { fixedWindow } from '../algorithms/fixed-window.js';
import { isPolicy } from '../algorithms/policy.js';
import { InvalidInputError } from '../errors.js';
import { rejectUnknownKeys } from '../validate.js';
import type { HttpResponseSpec } from './core.js';
import { releaseWhenDone } from './guard/leases.js';
import { GUARD_OPTION_KEYS, guardConfig } from './guard/options.js';
import { type NodeResponseLike, settleWhenDone } from './guard/settle.js';
import type { Guard, GuardOptions, RouteLimitSettings } from './guard/types.js';
import { createGuard } from './guard.js';
import { type LimitsOption, resolveLimits } from './limits.js';
import { NestRouteNamer } from './nestjs-route.js';
import { checkSettledRoutes } from './nestjs-settle-check.js';

/** The injection token of the module's options (see {@link SluiceModule}). */
export const SLUICE_OPTIONS: unique symbol = Symbol.for('sluice.nestjs.options');
/** The metadata key `@RateLimit()` writes (a {@link RateLimitSetting}'s settings object). */
export const RATE_LIMIT_METADATA = 'sluice:rate-limit';
/** The metadata key `@SkipRateLimit()` writes (a boolean). */
export const SKIP_RATE_LIMIT_METADATA = 'sluice:skip-rate-limit';

/**
 * Options of {@link SluiceModule}: `GuardOptions` shared by every limited route, for the
 * platform's request type `Req` (Express's `Request` on `@nestjs/platform-express`). No
 * `route` (each route is named by its own templates, or by its `@RateLimit({ route })`);
 * `policy` is optional: when set, it limits every route the guard runs on that has no
 * `@RateLimit()` of its own (with `SluiceGuard` as an `APP_GUARD`: every route of the app).
 */
export type SluiceModuleOptions<Req = unknown> = Omit<GuardOptions<Req>, 'policy' | 'route'> & {
  readonly policy?: LimitsOption<Req>;
};

/** Options of {@link SluiceModule.forRootAsync}: a factory of the options and its dependencies. */
export interface SluiceModuleAsyncOptions<Req = unknown> extends Pick<ModuleMetadata, 'imports'> {
  readonly useFactory: (
    // biome-ignore lint/suspicious/noExplicitAny: the factory takes whatever `inject` names, as in Nest's own async modules.
    ...args: any[]
  ) => SluiceModuleOptions<Req> | Promise<SluiceModuleOptions<Req>>;
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
}

/**
 * What `@RateLimit()` takes: the route's limits (a policy, an array of them, `{ policy, per }`,
 * or a plan function `(req, tenant) => …`), or settings `{ policy, route?, cost?,
 * failureMode?, … }` that override the module's options on this route — e.g. a policy
 * file's `routes.get('POST/orders')`, whose `route` names the quota. An object with `per` is
 * a scoped limit, never settings.
 */
export type RateLimitSetting<Req = unknown> = LimitsOption<Req> | RouteLimitSettings<Req>;

/** The keys `@RateLimit({ … })` settings may have. */
const SETTING_KEYS = GUARD_OPTION_KEYS.filter(
  (key) => !['limiter', 'identify', 'metrics', 'requestId'].includes(key),
);

/** A setting as settings: limits alone become `{ policy }`. */
function settingsOf(setting: unknown): RouteLimitSettings<unknown> {
  if (
    typeof setting === 'function' ||
    Array.isArray(setting) ||
    isPolicy(setting) ||
    (typeof setting === 'object' && setting !== null && 'per' in setting)
  ) {
    return Object.freeze({ policy: setting as LimitsOption<unknown> });
  }
  if (typeof setting !== 'object' || setting === null) {
    throw new InvalidInputError(
      'RateLimit',
      'a policy, an array of limits, a plan function, or { policy, … }',
      setting,
    );
  }
  rejectUnknownKeys(setting, SETTING_KEYS, 'RateLimit');
  return setting as RouteLimitSettings<unknown>;
}

/**
 * Limits a controller (every handler of it) or one handler; a handler's `@RateLimit()`
 * replaces its controller's. Apply it as a decorator (`@RateLimit(orders)`, with
 * `experimentalDecorators`) or as a function (`RateLimit(orders)(Controller)`).
 *
 * The argument is checked here, when the class is declared: an unknown settings key or
 * invalid fixed limits throw at once.
 *
 * @throws {InvalidInputError} (`RateLimit`, `policy`) for a setting that is none of the
 *   accepted shapes, an unknown key, or invalid fixed limits (see `resolveLimits`).
 */
export function RateLimit<Req = unknown>(
  setting: RateLimitSetting<Req>,
  ...extra: never[]
): ClassDecorator & MethodDecorator {
  if (extra.length > 0) {
    throw new InvalidInputError(
      'RateLimit',
      'one argument (stacked limits are one array: @RateLimit([perTenant, perUser]))',
      `${extra.length + 1} arguments`,
    );
  }
  const settings = settingsOf(setting);
  if (typeof settings.policy !== 'function') resolveLimits(settings.policy, 'policy');
  checkOverrides(settings);
  return SetMetadata(RATE_LIMIT_METADATA, settings);
}

/** Stands in for what the module gives every route, to check a route's own settings alone. */
const PLACEHOLDERS = Object.freeze({
  limiter: Object.freeze({ take: () => Promise.reject(new Error('placeholder')) }),
  identify: () => undefined,
  user: () => undefined,
  route: 'GET/placeholder',
});

/**
 * Checks what a route's settings set by themselves — `failureMode`, `cost`, `route`,
 * `shadow`, `headers`, `responses`, … — as the guard will, so a misspelt override fails when
 * the class is declared, not on every request to the route. What the module's options
 * complete (a `failOpenLimit` for a fail-open route) is checked when the guard is made.
 */
function checkOverrides(settings: RouteLimitSettings<unknown>): void {
  const failOpen = settings.failureMode === 'fail-open' && settings.failOpenLimit === undefined;
  guardConfig({
    ...PLACEHOLDERS,
    ...(failOpen ? { failOpenLimit: 1 } : {}),
    ...settings,
  } as unknown as GuardOptions<unknown>);
}

/**
 * Exempts a controller or a handler from the guard: nothing is spent, no headers. A
 * handler's `@SkipRateLimit(false)` limits it again inside a skipped controller.
 */
export function SkipRateLimit(skip = true): ClassDecorator & MethodDecorator {
  if (typeof skip !== 'boolean')
    throw new InvalidInputError('SkipRateLimit', 'true or false', skip);
  return SetMetadata(SKIP_RATE_LIMIT_METADATA, skip);
}

/**
 * The refusal `SluiceGuard` throws: an `HttpException` whose response is the guard's body
 * (the RFC 9457 object; a `responses` hook's text body stays text) and whose status is the
 * guard's (`429`, `503`, `401`). The guard sets the refusal's headers on the response before
 * throwing, so Nest's exception filter answers with them; a filter of your own can read them
 * from `spec`.
 */
export class RateLimitException extends HttpException {
  /** The guard's whole answer: status, headers and body text. */
  readonly spec: HttpResponseSpec;

  constructor(spec: HttpResponseSpec) {
    super(bodyOf(spec), spec.status);
    this.spec = spec;
  }
}

/** The body as Nest's exception filter sends it: the parsed JSON object, else the text. */
function bodyOf(spec: HttpResponseSpec): string | object {
  try {
    const body: unknown = JSON.parse(spec.body);
    if (typeof body === 'object' && body !== null) return body;
  } catch {
    // A hook's body that is not JSON: passed on as text.
  }
  return spec.body;
}

/** A placeholder policy and route, to check the module's options when it is made. */
const CHECK = {
  policy: fixedWindow({ name: 'options-check', limit: 1, windowMs: 1000 }),
  route: 'options-check',
};

/** Checks the module's options as `createGuard` does; returns them. */
function checkModuleOptions<Req>(options: SluiceModuleOptions<Req>): SluiceModuleOptions<Req> {
  if (typeof options === 'object' && options !== null && 'route' in options) {
    // One name for every route would merge their quotas.
    throw new InvalidInputError(
      'route',
      "absent from SluiceModule's options: each route is named by its templates, or by @RateLimit({ route })",
      (options as { route?: unknown }).route,
    );
  }
  createGuard({
    ...CHECK,
    ...options,
    policy: options?.policy ?? CHECK.policy,
  } as GuardOptions<Req>);
  return options;
}

/** The requests a `SluiceGuard` has decided, so that a second run on one spends nothing. */
const decidedRequests = new WeakSet<object>();

/**
 * The NestJS guard: for a route with a `@RateLimit()` (the handler's, else the
 * controller's) or under a module `policy`, it decides the request with one `take` or one
 * atomic `takeAll` before the handler, sets the RateLimit headers on an admitted request's
 * response, and throws a {@link RateLimitException} (`429`, `503`, `401`, with its headers
 * set) for a refused one. Routes with `@SkipRateLimit()` or without any limit pass untouched.
 * A request is decided once, also where the guard runs twice on it (as an `APP_GUARD` and
 * in a `@UseGuards()`): the second run passes it without spending.
 *
 * Each route's quota is named by its settings' `route` when it has one, else by
 * `NestRouteNamer` from the route's templates. Guards run in order: put `SluiceGuard` after
 * the guard that authenticates (`@UseGuards(AuthGuard, SluiceGuard)`), so `identify` sees
 * the verified user.
 *
 * With the module's `settle` option, the guard checks every limited handler's options when
 * it is made (the app's start): an `InvalidInputError` there (e.g. `policy.limit`, a sliding
 * window log above `MAX_PRICED_LOG_LIMIT`) fails `NestFactory.create`.
 *
 * At request time, an error of `identify`, a `cost`, `route` or `policy` function, a route
 * with no template to name it, or a non-HTTP context (a gateway, a microservice) under a
 * limit is thrown as is: Nest answers `500`.
 */
export class SluiceGuard implements CanActivate {
  private readonly guards = new WeakMap<object, Map<string, Guard<unknown>>>();
  private readonly namer: NestRouteNamer;
  private readonly defaults: RouteLimitSettings<unknown> | undefined;

  constructor(
    private readonly options: SluiceModuleOptions<unknown>,
    private readonly reflector: Reflector,
    private readonly adapterHost: HttpAdapterHost | undefined,
    modules: ModulesContainer | undefined,
  ) {
    this.namer = new NestRouteNamer(reflector, modules);
    this.defaults =
      options.policy === undefined ? undefined : Object.freeze({ policy: options.policy });
    // With `settle`, every limited handler's options are checked now: the app fails to start
    // on a limit the guard could never reserve, not on the route's first request.
    checkSettledRoutes(options, modules, (handler, controller) => {
      const targets = [handler, controller];
      if (reflector.getAllAndOverride<boolean | undefined>(SKIP_RATE_LIMIT_METADATA, targets)) {
        return undefined;
      }
      return (
        reflector.getAllAndOverride<RouteLimitSettings<unknown> | undefined>(
          RATE_LIMIT_METADATA,
          targets,
        ) ?? this.defaults
      );
    });
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean | undefined>(SKIP_RATE_LIMIT_METADATA, targets)) {
      return true;
    }
    const settings =
      this.reflector.getAllAndOverride<RouteLimitSettings<unknown> | undefined>(
        RATE_LIMIT_METADATA,
        targets,
      ) ?? this.defaults;
    if (settings === undefined) return true;
    if (context.getType() !== 'http') {
      throw new InvalidInputError(
        'context',
        'an HTTP request (SluiceGuard limits HTTP routes)',
        context.getType(),
      );
    }
    const http = context.switchToHttp();
    const req: unknown = http.getRequest();
    const res: unknown = http.getResponse();
    // A guard that runs twice on one request (an APP_GUARD and a @UseGuards) decides once.
    if (typeof req === 'object' && req !== null) {
      if (decidedRequests.has(req)) return true;
      decidedRequests.add(req);
    }
    const verdict = await this.guardOf(settings, context)(req);
    if (!verdict.pass) {
      this.setHeaders(res, verdict.response.headers);
      throw new RateLimitException(verdict.response);
    }
    // Express's response, or Fastify's reply around it.
    releaseWhenDone((res as { raw?: unknown } | null)?.raw ?? res, verdict);
    this.setHeaders(res, verdict.headers);
    // Express's response is a Node.js one; Fastify's reply has it as `raw`.
    const raw = (res as { raw?: unknown } | null)?.raw ?? res;
    settleWhenDone(raw as NodeResponseLike | undefined, verdict.settle);
    return true;
  }

  /**
   * One guard per settings object and route name, made on the route's first request: the
   * name alone decides the quota in Redis.
   */
  private guardOf(
    settings: RouteLimitSettings<unknown>,
    context: ExecutionContext,
  ): Guard<unknown> {
    const explicit = settings.route;
    const name =
      explicit === undefined
        ? this.namer.name(context.getClass(), context.getHandler() as (...args: never[]) => unknown)
        : '';
    let byName = this.guards.get(settings);
    if (byName === undefined) {
      byName = new Map();
      this.guards.set(settings, byName);
    }
    let guard = byName.get(name);
    if (guard === undefined) {
      guard = createGuard<unknown>({ ...this.options, ...settings, route: explicit ?? name });
      byName.set(name, guard);
    }
    return guard;
  }

  /** Sets headers through the platform's adapter (Express, Fastify), else `setHeader`. */
  private setHeaders(res: unknown, headers: Readonly<Record<string, string>>): void {
    const adapter = this.adapterHost?.httpAdapter;
    for (const [name, value] of Object.entries(headers)) {
      if (adapter !== undefined) adapter.setHeader(res, name, value);
      else (res as { setHeader(name: string, value: string): void }).setHeader(name, value);
    }
  }
}
Injectable()(SluiceGuard);
Inject(SLUICE_OPTIONS)(SluiceGuard, undefined, 0);
Inject(Reflector)(SluiceGuard, undefined, 1);
Inject(HttpAdapterHost)(SluiceGuard, undefined, 2);
Optional()(SluiceGuard, undefined, 2);
Inject(ModulesContainer)(SluiceGuard, undefined, 3);
Optional()(SluiceGuard, undefined, 3);

/**
 * The module that provides {@link SluiceGuard} and its options, global (so
 * `@UseGuards(SluiceGuard)` works in every module):
 *
 * ```ts
 * @Module({
 *   imports: [SluiceModule.forRoot({ limiter, identify: (req: Request) => req.user?.tenantId })],
 *   providers: [{ provide: APP_GUARD, useClass: SluiceGuard }], // or @UseGuards(SluiceGuard)
 * })
 * ```
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class; its factories are static, as in Nest's own modules.
export class SluiceModule {
  /**
   * The module with fixed options.
   *
   * @throws {InvalidInputError} as `createGuard` for the options (with the module's
   *   `policy`, or a placeholder one), and (`route`) when they have a `route`.
   */
  static forRoot<Req = unknown>(options: SluiceModuleOptions<Req>): DynamicModule {
    return SluiceModule.withOptions({
      provide: SLUICE_OPTIONS,
      useValue: checkModuleOptions(options),
    });
  }

  /**
   * The module with options made by a factory (e.g. once the Redis connection is made).
   * The factory's options are checked as in `forRoot`: a bad one fails the app's start.
   */
  static forRootAsync<Req = unknown>(options: SluiceModuleAsyncOptions<Req>): DynamicModule {
    const { useFactory, inject = [], imports = [] } = options;
    if (typeof useFactory !== 'function') {
      throw new InvalidInputError('useFactory', 'a function that returns the options', useFactory);
    }
    return {
      ...SluiceModule.withOptions({
        provide: SLUICE_OPTIONS,
        // biome-ignore lint/suspicious/noExplicitAny: as `useFactory`.
        useFactory: async (...args: any[]) => checkModuleOptions(await useFactory(...args)),
        inject,
      }),
      imports,
    };
  }

  private static withOptions(provider: Provider): DynamicModule {
    return {
      module: SluiceModule,
      global: true,
      providers: [provider, SluiceGuard],
      exports: [SLUICE_OPTIONS, SluiceGuard],
    };
  }
}
Module({})(SluiceModule as Type<unknown>);
