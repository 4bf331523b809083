/**
 * The optional peer dependencies of `sluice serve`, loaded only when the service starts:
 * `@grpc/grpc-js`, `@grpc/proto-loader` and `yaml`. A missing one is an error naming the
 * package to install, never a stack trace from deep inside.
 */

/** A package `sluice serve` needs is not installed. */
export class MissingPeerError extends Error {
  constructor(readonly packageName: string) {
    super(
      `sluice serve needs the package ${packageName}: npm install @grpc/grpc-js @grpc/proto-loader yaml`,
    );
    this.name = 'MissingPeerError';
  }
}

/** Imports `name`, or throws a {@link MissingPeerError} when it is not installed. */
export async function loadPeer<T>(name: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new MissingPeerError(name);
    }
    throw error;
  }
}
