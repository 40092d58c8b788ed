/** The sandbox provider server: read config, start, drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { sandboxConfig } from './config.js';
import { startSandboxService } from './app.js';

await runService('sandbox', sandboxConfig, startSandboxService);
