/** The operator console: read config, start, drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { consoleConfig } from './config.js';
import { startConsole } from './app.js';

await runService('console', consoleConfig, startConsole);
