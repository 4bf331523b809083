/**
 * The quota's name of a NestJS route, made only of the templates the app was declared with:
 * the `RouterModule` path of the controller's module, the controller's path and the
 * handler's path (`PATH_METADATA`), its method (`METHOD_METADATA`) and its version
 * (`VERSION_METADATA`) — never of the URL the client sent.
 */

import type { Type } from '@nestjs/common';
import {
  METHOD_METADATA,
  MODULE_PATH,
  PATH_METADATA,
  VERSION_METADATA,
} from '@nestjs/common/constants.js';
import type { ModulesContainer, Reflector } from '@nestjs/core';
import { InvalidInputError } from '../errors.js';

/**
 * Nest's `RequestMethod` enum by value. Kept here rather than read from the enum so that a
 * value Nest adds later is refused (`route`) instead of named `undefined`.
 */
const METHODS = [
  'GET',
  'POST',
  'PUT',
  'DELETE',
  'PATCH',
  'ALL',
  'OPTIONS',
  'HEAD',
  'SEARCH',
  'PROPFIND',
  'PROPPATCH',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'UNLOCK',
  'QUERY',
];

/** A path template's segments, without empty ones: `"/orders/"` → `["orders"]`. */
const segments = (path: unknown): string[] => {
  if (typeof path !== 'string') return [];
  return path.split('/').filter((part) => part.length > 0);
};

/** A path option as Nest takes it: one template, or several (aliases of one route). */
const pathList = (value: unknown): unknown[] =>
  Array.isArray(value) ? (value.length === 0 ? [undefined] : value) : [value];

/**
 * The path part: module path, controller path, handler path, joined with `/` (each
 * template's own leading and trailing slashes add nothing). A controller or handler with
 * several paths is one quota for all of them, named by the JSON array of its full paths.
 */
function pathPart(modulePath: unknown, controller: unknown, handler: unknown): string {
  const paths = new Set<string>();
  for (const c of pathList(controller)) {
    for (const h of pathList(handler)) {
      paths.add(`/${[...segments(modulePath), ...segments(c), ...segments(h)].join('/')}`);
    }
  }
  const list = [...paths];
  return list.length === 1 ? (list[0] as string) : JSON.stringify(list);
}

/** `;version=1` (or `;version=1,2`) for a versioned handler or controller; `""` otherwise. */
function versionPart(version: unknown): string {
  const versions = (Array.isArray(version) ? version : [version]).filter(
    (v): v is string => typeof v === 'string', // VERSION_NEUTRAL is a symbol: no version
  );
  return versions.length === 0 ? '' : `;version=${[...new Set(versions)].sort().join(',')}`;
}

/**
 * Names the quotas of NestJS routes. The module path of each controller is found once (a
 * `WeakMap` per controller class).
 */
export class NestRouteNamer {
  private readonly modulePaths = new WeakMap<object, string | undefined>();

  constructor(
    private readonly reflector: Reflector,
    private readonly modules: ModulesContainer | undefined,
  ) {}

  /**
   * The quota's name of a handler of a controller:
   * `<METHOD><module path><controller path><handler path>[;version=<v>]`, e.g.
   * `"POST/orders/:id"` for `@Controller('orders')` + `@Post(':id')`, or
   * `"POST/admin/orders/:id"` when `RouterModule` mounts the module at `admin`.
   *
   * - `HEAD` is named `GET` (Express and Fastify serve `HEAD` from the `GET` route);
   *   `@All()` is `ALL`, one quota whatever method the client picks.
   * - The version is the handler's `@Version`, else the controller's (`VERSION_NEUTRAL`
   *   adds nothing): two controllers serving one path in two versions are two quotas.
   * - The app's global prefix (`app.setGlobalPrefix`) is not part of the name: it is the
   *   same for every route of the app.
   *
   * @throws {InvalidInputError} (`route`) for a handler without Nest's route metadata (not
   *   a `@Get()`, `@Post()`… method): name its quota with `route`.
   */
  name(controller: Type<unknown>, handler: (...args: never[]) => unknown): string {
    const method = this.reflector.get<unknown>(METHOD_METADATA, handler);
    const handlerPath = this.reflector.get<unknown>(PATH_METADATA, handler);
    const methodName = typeof method === 'number' ? METHODS[method] : undefined;
    if (methodName === undefined || handlerPath === undefined) {
      throw new InvalidInputError(
        'route',
        `a handler declared with @Get(), @Post()… (${controller.name}.${handler.name} has no route metadata), or a route in @RateLimit()`,
        handlerPath,
      );
    }
    const path = pathPart(
      this.modulePath(controller),
      this.reflector.get<unknown>(PATH_METADATA, controller),
      handlerPath,
    );
    const version = this.reflector.getAllAndOverride<unknown>(VERSION_METADATA, [
      handler,
      controller,
    ]);
    return `${methodName === 'HEAD' ? 'GET' : methodName}${path}${versionPart(version)}`;
  }

  /** The `RouterModule` path of the module that declares `controller`, if any. */
  private modulePath(controller: object): string | undefined {
    if (this.modulePaths.has(controller)) return this.modulePaths.get(controller);
    let path: string | undefined;
    for (const module of this.modules?.values() ?? []) {
      if (!module.controllers.has(controller as Type<unknown>)) continue;
      const id = (this.modules as ModulesContainer).applicationId;
      path =
        this.reflector.get<string | undefined>(`${MODULE_PATH}${id}`, module.metatype) ??
        this.reflector.get<string | undefined>(MODULE_PATH, module.metatype);
      break;
    }
    this.modulePaths.set(controller, path);
    return path;
  }
}
