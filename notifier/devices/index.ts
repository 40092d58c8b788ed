/**
 * The device registry (README, "Devices"): a user's push tokens, registered and unregistered through
 * `/api/v1/users/{user_id}/devices`. A push send goes to every token {@link listDeviceTokens}
 * returns; a token the provider reports as unregistered (or invalid) is dropped with
 * {@link removeDeviceToken}, so later sends no longer see it.
 */
import { deleteDevice, listDevices, type Queryable } from './store.js';

export { PLATFORMS, MAX_DEVICES_PER_USER, type Platform } from './device.js';
export { listDevices, listTokensOf as listDeviceTokensOf, type Device } from './store.js';
export { registerDeviceRoutes } from './routes.js';

/** The user's push tokens, most recently registered first; empty when none. */
export async function listDeviceTokens(db: Queryable, userId: string): Promise<string[]> {
  return (await listDevices(db, userId)).map((d) => d.token);
}

/** Removes one token of the user (pruning after the provider reported it unregistered). Idempotent. */
export async function removeDeviceToken(db: Queryable, userId: string, token: string): Promise<void> {
  await deleteDevice(db, userId, token);
}
