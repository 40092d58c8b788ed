/** The quota control plane: read config, start, drain on SIGTERM. */
import { runService } from '../../shared/main.js';
import { controlPlaneConfig } from './config.js';
import { startControlPlane } from './app.js';

await runService('control-plane', controlPlaneConfig, startControlPlane);
