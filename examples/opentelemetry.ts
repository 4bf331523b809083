import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { fixedWindow, RateLimiter } from 'sluice';
import { connectRedis } from 'sluice/node-redis';
import { openTelemetryMetrics } from 'sluice/opentelemetry';

// Your SDK's setup: here the console exporter, every minute (use your OTLP exporter instead).
const exporter = new ConsoleMetricExporter();
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
const meterProvider = new MeterProvider({ readers: [reader] });
// One sink per meter; without options, the global MeterProvider's meter "sluice".
const metrics = openTelemetryMetrics({ meterProvider });

const redis = await connectRedis({
  url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  metrics,
});
const limiter = new RateLimiter({ client: redis, metrics });
const orders = fixedWindow({ name: 'orders', limit: 2, windowMs: 60_000 });
for (let i = 0; i < 3; i++) await limiter.take({ tenant: 'acme', route: 'POST/orders' }, orders);

await redis.close();
await meterProvider.shutdown(); // exports what it holds, then stops
