/**
 * Every console page, in nav order. A new page: a module in this folder exporting a
 * `ConsolePage` (page.ts), and one line here.
 */
import type { ConsolePage } from '../page.js';
import { campaignsPage } from './campaigns.js';
import { clientsPage } from './clients.js';
import { providersPage } from './providers.js';
import { segmentsPage } from './segments.js';
import { suppressionsPage } from './suppressions.js';

export const pages: readonly ConsolePage[] = [segmentsPage, campaignsPage, suppressionsPage, providersPage, clientsPage];
