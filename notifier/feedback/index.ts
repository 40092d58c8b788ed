/**
 * Provider feedback: the e-mail events webhook (SES through SNS), the SMS status callbacks
 * (Twilio), the writer that records and applies them, and the e-mail suppression list with its
 * operator API.
 */
export { CertCache, httpCertFetch, certUrlProblem, providerUrlProblem, type CertPolicy } from './certs.js';
export { FeedbackWriter, type FeedbackMetrics, type EventResult } from './writer.js';
export { registerWebhookRoutes, SES_WEBHOOK_PATH, TWILIO_WEBHOOK_PATH } from './routes.js';
export { registerSuppressionRoutes } from './suppression-routes.js';
export { suppressedAmong, suppressedReason, type SuppressionView } from './suppressions.js';
