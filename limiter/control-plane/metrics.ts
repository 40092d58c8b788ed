/**
 * The control plane's Prometheus metrics (served on its HTTP port's /metrics):
 *
 * - `quota_connected_sidecars`: sidecars with an open Watch stream on this replica;
 * - `quota_sidecar_applied_version{sidecar}`: the table version each sidecar last acked;
 * - `quota_propagation_seconds`: from a write's commit on this replica to each sidecar's ack of it;
 * - `quota_table_version`: the version this replica serves;
 * - `quota_admin_calls_total{method,transport,code}`: admin calls (put, get, delete, list) over grpc
 *   or http, by outcome (`ok` or the stable error code, e.g. `invalid_field`, `not_found`);
 * - `quota_snapshots_sent_total{kind}`: snapshots sent to sidecars (full, delta, heartbeat), by
 *   Watch stream or Snapshot call;
 * - `quota_lookup_subjects_total{result}`: subjects sidecars looked up (found, unknown, failed);
 * - `quota_lookup_seconds`: time to answer one Lookup batch (PostgreSQL read included).
 */
import { Counter, Gauge, Histogram, type Registry } from '../../shared/metrics.js';

export interface ControlPlaneMetrics {
  connectedSidecars: Gauge;
  appliedVersion: Gauge<'sidecar'>;
  propagationSeconds: Histogram;
  tableVersion: Gauge;
  adminCalls: Counter<'method' | 'transport' | 'code'>;
  snapshotsSent: Counter<'kind'>;
  lookupSubjects: Counter<'result'>;
  lookupSeconds: Histogram;
}

export function createControlPlaneMetrics(registry: Registry): ControlPlaneMetrics {
  const registers = [registry];
  return {
    connectedSidecars: new Gauge({
      name: 'quota_connected_sidecars',
      help: 'Sidecars with an open Watch stream on this control-plane replica',
      registers,
    }),
    appliedVersion: new Gauge({
      name: 'quota_sidecar_applied_version',
      help: 'Quota table version each sidecar last acknowledged',
      labelNames: ['sidecar'],
      registers,
    }),
    propagationSeconds: new Histogram({
      name: 'quota_propagation_seconds',
      help: "Seconds from a quota write's commit on this replica to a sidecar's ack of that version",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    tableVersion: new Gauge({
      name: 'quota_table_version',
      help: 'Quota table version this replica serves to sidecars',
      registers,
    }),
    adminCalls: new Counter({
      name: 'quota_admin_calls_total',
      help: 'Admin calls by method (put, get, delete, list), transport (grpc, http) and outcome code (ok or the error code)',
      labelNames: ['method', 'transport', 'code'],
      registers,
    }),
    snapshotsSent: new Counter({
      name: 'quota_snapshots_sent_total',
      help: 'Quota snapshots sent to sidecars, by kind (full, delta, heartbeat)',
      labelNames: ['kind'],
      registers,
    }),
    lookupSubjects: new Counter({
      name: 'quota_lookup_subjects_total',
      help: 'Subjects sidecars looked up, by result (found, unknown, failed)',
      labelNames: ['result'],
      registers,
    }),
    lookupSeconds: new Histogram({
      name: 'quota_lookup_seconds',
      help: 'Seconds to answer one Lookup batch, the PostgreSQL read included',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
  };
}
