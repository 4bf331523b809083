/**
 * Calls a collaborator that should return a promise (a store, a Redis client) so that
 * nothing it does can escape the caller's promise: a synchronous throw becomes a
 * rejection, and a result that is not a promise becomes a rejection with `notAPromise()`.
 */
export function callSafely(call: () => unknown, notAPromise: () => Error): Promise<unknown> {
  try {
    return asPromise(call(), notAPromise);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * `result` as a promise: itself when it is one (any thenable, adopted), else a rejection with
 * `notAPromise()`. For a caller that makes the call in its own `try` (no closure per call).
 */
export function asPromise(result: unknown, notAPromise: () => Error): Promise<unknown> {
  return isThenable(result) ? Promise.resolve(result) : Promise.reject(notAPromise());
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * `object[name]` of a collaborator read by duck typing: `undefined` when it is not an object
 * or when reading throws (a getter, a Proxy).
 */
export function readProperty(object: unknown, name: string): unknown {
  try {
    return (object as Record<string, unknown> | null | undefined)?.[name];
  } catch {
    return undefined;
  }
}
