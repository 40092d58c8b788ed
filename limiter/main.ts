/** The sidecar: read config, start, drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { limiterConfig } from './config.js';
import { startSidecar } from './sidecar.js';

await runService('limiter', limiterConfig, async (config, log) => {
  const s = await startSidecar(config, log);
  return { urls: s.urls, close: () => s.close(config.SHUTDOWN_GRACE) };
});
