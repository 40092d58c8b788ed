/**
 * Per-user preferences (README, "Notification types, preferences and policies"): the document and
 * its validation (document.ts), the store and the write that applies at once (store.ts), each
 * replica's cache (cache.ts) and the HTTP routes (routes.ts).
 */
export {
  EMPTY_PREFERENCES,
  parsePreferencePatch,
  applyPreferencePatch,
  preferencesJson,
  storedPreferences,
  type PreferenceDoc,
  type PreferencePatch,
  type QuietHoursSetting,
} from './document.js';
export {
  loadPreferences,
  loadPreferencesInTransaction,
  readWithTimeout,
  patchPreferences,
  LOCK_USERS_SHARED,
  PREFERENCES_CHANNEL,
  PREFERENCE_LOCK_NAMESPACE,
} from './store.js';
export { PreferenceCache } from './cache.js';
export { registerPreferenceRoutes } from './routes.js';
