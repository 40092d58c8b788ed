/**
 * What every `main.ts` does: load and validate its config (one line and exit on a bad value),
 * build the logger, start the service core, and drain it on SIGTERM/SIGINT or when the supervisor
 * that started it exits.
 */
import { loadConfig, type ConfigOf, type VarSpec } from './config.js';
import { createLogger, type Logger } from './log.js';
import { fatal, installSignalHandlers, onShutdown, shutdown, watchParent } from './lifecycle.js';

export interface Started {
  /** Stops taking work, drains what is in flight, releases resources. */
  close(): Promise<void>;
  /** Printed once the service is up. */
  urls?: Record<string, string>;
}

export async function runService<
  S extends Record<string, VarSpec<unknown>> & { LOG_LEVEL: VarSpec<string>; SHUTDOWN_GRACE: VarSpec<number> },
>(name: string, spec: S, start: (config: ConfigOf<S>, log: Logger) => Promise<Started>): Promise<void> {
  let config: ConfigOf<S>;
  try {
    config = loadConfig(spec);
  } catch (err) {
    fatal(err);
  }
  const log = createLogger({ service: name, level: config.LOG_LEVEL });
  // Under the supervisor (`npm start`) the child has an IPC channel to it: when the supervisor
  // dies, even by SIGKILL and even while this service is still starting, the service drains and
  // exits instead of running on as an orphan.
  watchParent({ onGone: (reason) => void shutdown(reason, { log, graceMs: config.SHUTDOWN_GRACE }) });
  let started: Started;
  try {
    started = await start(config, log);
  } catch (err) {
    fatal(err, log);
  }
  onShutdown(name, () => started.close());
  installSignalHandlers({ log, graceMs: config.SHUTDOWN_GRACE });
  log.info({ urls: started.urls }, `${name} ready`);
}
