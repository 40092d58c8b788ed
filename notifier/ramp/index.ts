/**
 * The provider ramp (README, "Replacing a provider"): a new provider beside a channel's old one,
 * its weight and shadow share set by operators at run time, per-provider metrics.
 */
export { BUCKETS, NO_RAMP, bucket, onNewProvider, shadowed, testRecipient, type RampSettings } from './choice.js';
export { ProviderMeter, type SendMeasure } from './meter.js';
export { ProviderRamp, isRampChannel, type ProviderRampOptions, type RampableChannels, type ShadowPlan } from './providers.js';
export { registerRampRoutes, rampView, type RampRoutesOptions, type RampView } from './routes.js';
export { RAMP_CHANNEL, RAMP_CHANNELS, listRampChanges, loadRamps, saveRamp, type RampChannel, type StoredRamp } from './store.js';
