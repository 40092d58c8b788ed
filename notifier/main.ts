/** The notification daemon: read config, start, drain on SIGTERM. */
import { runService } from '../shared/main.js';
import { notifierConfig } from './config.js';
import { startNotifier } from './app.js';

await runService('notifier', notifierConfig, startNotifier);
