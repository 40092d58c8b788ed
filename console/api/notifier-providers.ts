/** The notifier's provider ramp (notifier/ramp/routes.ts, README "Replacing a provider"), as the console calls it. */
import { seg, type ServiceClient } from './client.js';

export type RampChannel = 'push' | 'email' | 'sms';

export interface RampProvider {
  name: string;
  role: 'old' | 'new' | 'secondary';
  /** Share of live deliveries, percent; absent for a secondary (failovers only). */
  weight_percent?: number;
}

export interface RampView {
  channel: RampChannel;
  providers: RampProvider[];
  shadow_percent: number;
  shadow: 'validate_only' | 'test_recipients' | null;
  updated_by: string | null;
  /** Epoch seconds. */
  updated_at: number | null;
}

export interface RampChange {
  id: number;
  weight_percent: number;
  shadow_percent: number;
  previous_weight_percent: number;
  previous_shadow_percent: number;
  changed_by: string;
  /** Epoch seconds. */
  changed_at: number;
}

const BASE = '/api/v1/admin/providers';

export async function listRamps(api: ServiceClient): Promise<RampView[]> {
  return (await api.get<{ channels: RampView[] }>(BASE)).data.channels;
}

export async function getRamp(api: ServiceClient, channel: RampChannel): Promise<RampView> {
  return (await api.get<RampView>(`${BASE}/${seg(channel)}`)).data;
}

/** Changes the weights (naming the old and the new provider, adding up to 100) and/or the shadow share. */
export async function putRamp(
  api: ServiceClient,
  channel: RampChannel,
  change: { weights?: Record<string, number>; shadow_percent?: number },
): Promise<RampView> {
  return (await api.put<RampView>(`${BASE}/${seg(channel)}`, change)).data;
}

/** The audit, newest first. */
export async function listRampChanges(api: ServiceClient, channel: RampChannel, limit = 20): Promise<RampChange[]> {
  return (await api.get<{ changes: RampChange[] }>(`${BASE}/${seg(channel)}/changes`, { query: { limit } })).data.changes;
}
