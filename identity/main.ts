/** The identity service: read config, start, drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { identityConfig } from './config.js';
import { startIdentity } from './app.js';

await runService('identity', identityConfig, startIdentity);
