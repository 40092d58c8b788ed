/**
 * Every console page, in nav order. A new page: a module in this folder exporting a
 * `ConsolePage` (page.ts), and one line here.
 */
import type { ConsolePage } from '../page.js';

export const pages: readonly ConsolePage[] = [];
