/**
 * The error of a rule file that cannot be served: `<file>: <path>: <reason>`, the path in
 * the reference's terms (`descriptors[0].rate_limit.unit`).
 */
import { InvalidInputError } from '../../errors.js';

/** A rule file (YAML of the reference service) that is not valid, with where and why. */
export class RuleFileError extends InvalidInputError {
  /** The file, as it was named when loaded. */
  readonly file: string;
  /** The path of the offending field in the file, e.g. `descriptors[1].rate_limit.unit`. */
  readonly path: string;
  /** What is wrong, in words. */
  readonly reason: string;

  constructor(file: string, path: string, reason: string) {
    super(`${file}: ${path}`, reason, undefined, '');
    this.file = file;
    this.path = path;
    this.reason = reason;
    this.message = `${file}: ${path}: ${reason}`;
  }
}
