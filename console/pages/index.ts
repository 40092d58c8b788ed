/**
 * Every console page, in nav order, after the overview (the home page, pages/overview.ts, which
 * app.ts puts first: it needs the scraper). A new page: a module in this folder exporting a
 * `ConsolePage` (page.ts), and one line here.
 */
import type { ConsolePage } from '../page.js';
import { activityPage } from './activity.js';
import { campaignsPage } from './campaigns.js';
import { dlqPage } from './dlq.js';
import { notificationsPage } from './notifications.js';
import { quotasPage } from './quotas.js';
import { templatesPage } from './templates.js';
import { notificationTypesPage } from './types.js';
import { clientsPage } from './clients.js';
import { providersPage } from './providers.js';
import { segmentsPage } from './segments.js';
import { suppressionsPage } from './suppressions.js';

export const pages: readonly ConsolePage[] = [
  activityPage,
  quotasPage,
  notificationsPage,
  dlqPage,
  templatesPage,
  notificationTypesPage,
  segmentsPage,
  campaignsPage,
  suppressionsPage,
  providersPage,
  clientsPage,
];
