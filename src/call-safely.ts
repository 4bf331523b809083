/**
 * Calls a collaborator that should return a promise (a store, a Redis client) so that
 * nothing it does can escape the caller's promise: a synchronous throw becomes a
 * rejection, and a result that is not a promise becomes a rejection with `notAPromise()`.
 */
export function callSafely(call: () => unknown, notAPromise: () => Error): Promise<unknown> {
  try {
    const result: unknown = call();
    if (isThenable(result)) return Promise.resolve(result);
    return Promise.reject(notAPromise());
  } catch (error) {
    return Promise.reject(error);
  }
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
