/**
 * The server limit: `redis-benchmark` (shipped with Redis) sending sluice's script by
 * EVALSHA to the private server, 50 connections × 16 pipelined, with no Node client in the
 * path. What Redis alone sustains for this script on this machine (redis-benchmark shares
 * the 2 cores with the server).
 */
import { spawn } from 'node:child_process';

export interface ServerLimit {
  readonly label: string;
  readonly command: string;
  readonly requestsPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export interface ServerLimitCase {
  readonly label: string;
  /** Arguments after `EVALSHA <sha>`; `__rand_int__` is replaced by redis-benchmark (-r). */
  readonly args: readonly string[];
}

export const SERVER_LIMIT_CASES: readonly ServerLimitCase[] = [
  { label: 'random keys', args: ['1', 'rb:{__rand_int__}', '1000', '60000', '1'] },
  { label: 'hot key', args: ['1', 'rb:hot', '10', '60000', '1'] },
];

/** Runs redis-benchmark for one case and parses its CSV line. */
export function runServerLimit(
  port: number,
  sha: string,
  testCase: ServerLimitCase,
  requests = 200_000,
): Promise<ServerLimit> {
  const args = [
    ...['-h', '127.0.0.1', '-p', String(port)],
    ...['-n', String(requests), '-c', '50', '-P', '16', '-r', '1000000', '--csv'],
    'EVALSHA',
    sha,
    ...testCase.args,
  ];
  const command = `redis-benchmark ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    const child = spawn('redis-benchmark', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",…
      const lines = stdout.trim().split('\n');
      const header = parseCsvLine(lines[0] ?? '');
      const row = parseCsvLine(lines.at(-1) ?? '');
      const field = (name: string) => Number(row[header.indexOf(name)]);
      const requestsPerSec = field('rps');
      if (code !== 0 || !Number.isFinite(requestsPerSec) || lines.length < 2) {
        reject(new Error(`redis-benchmark failed (exit ${code}): ${stderr || stdout}`));
        return;
      }
      resolve({
        label: testCase.label,
        command,
        requestsPerSec,
        p50Ms: field('p50_latency_ms'),
        p99Ms: field('p99_latency_ms'),
      });
    });
  });
}

function parseCsvLine(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"/g)].map((m) => m[1] as string);
}
