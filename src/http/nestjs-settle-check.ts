/**
 * `SluiceGuard`'s check at the app's start, for a module with the `settle` option: every
 * limited handler's guard options (the module's, with its `@RateLimit()` settings over them)
 * are checked as the guard will check them on the route's first request, so a limit the
 * guard could never reserve (a sliding window log above `MAX_PRICED_LOG_LIMIT`) fails the
 * app's start, not a request. A decorator cannot do it alone: it does not see the module's
 * `settle`.
 */
import type { Type } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { guardConfig } from './guard/options.js';
import type { GuardOptions, RouteLimitSettings } from './guard/types.js';

/** A handler's effective settings, as `SluiceGuard.canActivate` reads them; none when skipped. */
export type SettingsOf = (
  handler: (...args: never[]) => unknown,
  controller: Type<unknown>,
) => RouteLimitSettings<unknown> | undefined;

/** The methods of a controller class, its inherited ones too (not `Object`'s). */
function handlersOf(controller: { prototype?: unknown }): ((...args: never[]) => unknown)[] {
  const handlers: ((...args: never[]) => unknown)[] = [];
  const seen = new Set<string>();
  for (
    let proto = controller.prototype as object | null;
    proto !== null && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor' || seen.has(name)) continue;
      seen.add(name);
      const value = Object.getOwnPropertyDescriptor(proto, name)?.value;
      if (typeof value === 'function') handlers.push(value as (...args: never[]) => unknown);
    }
  }
  return handlers;
}

/**
 * Checks, when the module has `settle`, the guard options of every limited handler of the
 * app's controllers that has fixed limits (a `policy` function's answer is checked on the
 * request).
 *
 * @throws {InvalidInputError} as `createGuard`, e.g. `policy.limit` for a sliding window log
 *   above `MAX_PRICED_LOG_LIMIT`.
 */
export function checkSettledRoutes(
  options: GuardOptions<unknown> | Omit<GuardOptions<unknown>, 'policy' | 'route'>,
  modules: ModulesContainer | undefined,
  settingsOf: SettingsOf,
): void {
  if ((options as { settle?: unknown }).settle === undefined || modules === undefined) return;
  for (const module of modules.values()) {
    for (const token of module.controllers.keys()) {
      if (typeof token !== 'function') continue;
      const controller = token as Type<unknown>;
      for (const handler of handlersOf(controller)) {
        const settings = settingsOf(handler, controller);
        if (settings === undefined || typeof settings.policy === 'function') continue;
        guardConfig({ ...options, ...settings, route: settings.route ?? 'options-check' } as never);
      }
    }
  }
}
