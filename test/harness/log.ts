/**
 * A logger for code under test: silent unless LOG_LEVEL says otherwise (`npm test` sets it to
 * silent by default; `LOG_LEVEL=debug npm test -- <file>` shows everything).
 */
import { createLogger, type Logger } from '../../shared/log.js';

export function testLogger(service = 'test'): Logger {
  return createLogger({ service, level: process.env.LOG_LEVEL ?? 'silent' });
}
