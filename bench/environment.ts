/**
 * What the numbers were measured on: CPU, OS, Node, Redis, package versions, the
 * repository's commit, and a fingerprint of src/ taken at the start and at the end of the
 * run (each child imports the measured build afresh, so a change in between mixes two
 * versions).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { SLUICE_BUILD } from './contenders/build.js';

export interface Environment {
  readonly date: string;
  readonly cpuModel: string;
  readonly cpuCount: number;
  readonly memoryGiB: number;
  readonly os: string;
  readonly node: string;
  readonly redis: string;
  readonly packages: Record<string, string>;
  readonly git: string;
  /** SHA-256 over src/ (paths and contents), first 12 hex digits, at start and end. */
  readonly srcFingerprint: string;
  readonly srcChangedDuringRun: boolean;
  /** What the sluice contenders ran: `dist` (the build) or `src` (the source under tsx). */
  readonly build?: 'dist' | 'src';
}

/** The state of the measured source: commit (+ dirty flag) and a hash of src/. */
export interface SourceState {
  readonly git: string;
  readonly fingerprint: string;
}

const PACKAGES = [
  'redis',
  'ioredis',
  'rate-limiter-flexible',
  'rate-limit-redis',
  'express-rate-limit',
  'tsx',
];

const ROOT = new URL('../', import.meta.url);

function packageVersion(name: string): string {
  try {
    const manifest = readFileSync(new URL(`node_modules/${name}/package.json`, ROOT), 'utf8');
    return (JSON.parse(manifest) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

function gitDescription(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    const commit = git('rev-parse', '--short', 'HEAD');
    const dirty = git('status', '--porcelain', '--', 'src') !== '';
    return dirty ? `${commit} + uncommitted changes in src/` : commit;
  } catch {
    return 'unknown';
  }
}

function srcFingerprint(): string {
  const hash = createHash('sha256');
  const src = new URL('src/', ROOT);
  const files = readdirSync(src, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => `${entry.parentPath}/${entry.name}`)
    .sort();
  for (const file of files) hash.update(file).update('\0').update(readFileSync(file)).update('\0');
  return hash.digest('hex').slice(0, 12);
}

export function sourceState(): SourceState {
  return { git: gitDescription(), fingerprint: srcFingerprint() };
}

/** `redisVersion` comes from the private server's INFO; `atStart` from {@link sourceState}. */
export function describeEnvironment(redisVersion: string, atStart: SourceState): Environment {
  const atEnd = sourceState();
  const cpus = os.cpus();
  const sluice = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as {
    version: string;
  };
  return {
    date: new Date().toISOString(),
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    redis: redisVersion,
    packages: {
      sluice: sluice.version,
      ...Object.fromEntries(PACKAGES.map((name) => [name, packageVersion(name)])),
    },
    git: atStart.git,
    srcFingerprint: atStart.fingerprint,
    // By src/'s contents: a commit of docs or tests during a run changes nothing measured.
    srcChangedDuringRun: atStart.fingerprint !== atEnd.fingerprint,
    build: SLUICE_BUILD,
  };
}
