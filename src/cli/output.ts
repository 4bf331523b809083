/**
 * Everything the CLI prints goes through here. Text that came from a user — a tenant id, a
 * route, a policy name, a file's path or content, a URL, a value read from Redis — may hold
 * control characters that a terminal acts on (ESC starts a sequence that can clear the
 * screen or rewrite what was printed, CR overwrites a line, LF fakes one). Printed as text,
 * each line has its control characters shown escaped (`\x1b`, `\r`, `\n`, `\u0085`), so none
 * reaches the terminal raw; a line printed here never holds a control character on purpose.
 * JSON output is escaped by `JSON.stringify`, and here also for DEL and the C1 controls,
 * which it leaves raw: the parsed values are exactly those given.
 *
 * Kept free of heavy imports: `main` prints its usage errors with it.
 */

/** C0 controls (tab, LF and CR included), DEL and C1 controls. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its job.
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

/** DEL and the C1 controls: inside JSON strings only, where `\u` escapes mean the same. */
const RAW_IN_JSON = /[\u007f-\u009f]/g;

const NAMED: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

const hex = (c: string, digits: number) =>
  (c.codePointAt(0) as number).toString(16).padStart(digits, '0');

/**
 * `text` with each control character escaped: `\t`, `\n`, `\r`, else `\xHH` for the other
 * C0 controls and DEL, `\uHHHH` for the C1 controls. Other characters are kept as they are;
 * escaping twice changes nothing more.
 */
export function escapeControls(text: string): string {
  return text.replace(
    CONTROLS,
    (c) => NAMED[c] ?? (c < '\u0080' ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`),
  );
}

/** One line of text on stdout. */
export function print(line: string): void {
  console.log(escapeControls(line));
}

/** One line of text on stderr. */
export function printError(line: string): void {
  console.error(escapeControls(line));
}

/** `JSON.stringify`, with DEL and the C1 controls escaped too. */
export function jsonText(
  value: unknown,
  replacer?: ((key: string, value: unknown) => unknown) | null,
  space?: number,
): string {
  return JSON.stringify(value, replacer ?? undefined, space).replace(
    RAW_IN_JSON,
    (c) => `\\u${hex(c, 4)}`,
  );
}

/** One JSON answer on stdout. */
export function printJson(
  value: unknown,
  replacer?: ((key: string, value: unknown) => unknown) | null,
  space?: number,
): void {
  console.log(jsonText(value, replacer, space));
}
