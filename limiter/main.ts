/** The sidecar: read config, start (one thread, or LIMITER_WORKERS worker threads), drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { limiterConfig } from './config.js';
import { startSidecar } from './sidecar.js';
import { startWorkers } from './workers.js';

await runService('limiter', limiterConfig, async (config, log) => {
  const s = config.LIMITER_WORKERS > 1 ? await startWorkers(config, log) : await startSidecar(config, log);
  return { urls: s.urls, close: () => s.close(config.SHUTDOWN_GRACE) };
});
