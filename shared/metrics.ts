/**
 * Prometheus metrics: one registry per process, default Node metrics, and the text exposition.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';

export { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A new registry with the default process metrics, labelled with the service name. */
export function createRegistry(service: string, opts: { defaults?: boolean } = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  if (opts.defaults !== false) collectDefaultMetrics({ register: registry });
  return registry;
}

/** The body and content type of a /metrics response. */
export async function exposition(registry: Registry): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}
