export { CampaignWorker, type CampaignWorkerOptions } from './fanout.js';
export { CampaignPump, type PumpOptions } from './pump.js';
export { CAMPAIGN_STOP_CHANNEL, KillSwitch, stopCampaign, type StopResult } from './kill-switch.js';
export { registerCampaignRoutes } from './routes.js';
export { campaignsPendingApproval, fanoutLag } from './progress.js';
export { ShardRescue, type ShardRescueOptions } from './shard-rescue.js';
