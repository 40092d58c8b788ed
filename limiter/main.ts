/** The sidecar: read config, start, drain on SIGTERM. */
import { loadConfig } from '../shared/config.js';
import { fatal } from '../shared/lifecycle.js';
import { limiterConfig } from './config.js';

// uWS reads its header-size limit from the environment once, when its binary loads: set it from
// our validated config before anything imports uWS.
try {
  process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(loadConfig(limiterConfig).LIMITER_MAX_HEADERS_SIZE);
} catch (err) {
  fatal(err);
}
const { runService } = await import('../shared/main.js');
const { startSidecar } = await import('./sidecar.js');
await runService('limiter', limiterConfig, async (config, log) => {
  const s = await startSidecar(config, log);
  return { urls: s.urls, close: () => s.close(config.SHUTDOWN_GRACE) };
});
