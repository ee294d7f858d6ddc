/**
 * Per-replica Prometheus metrics of the engine router (src/engines/replicas.ts), names prefixed `polar_engine_replica_`.
 * They register on the registry given (the process's `/metrics` registry) or on prom-client's default registry, so they
 * merge with the other metrics of the process. Several routers in one process share the metrics (labels tell replicas
 * apart by URL). Exposition via prom-client: https://github.com/siimp/prom-client
 */
import { Counter, Gauge, register as defaultRegistry, type Registry } from 'prom-client';

export interface ReplicaMetrics {
  /** Engine calls started on a replica. */
  requests: Counter<'replica'>;
  /** Engine calls that failed on a replica. */
  errors: Counter<'replica'>;
  /** Calls in flight on a replica right now. */
  outstanding: Gauge<'replica'>;
  /** 1 when the last health check of the replica succeeded. */
  healthy: Gauge<'replica'>;
  /** 1 while the replica is draining (no new sessions, no moved sessions). */
  draining: Gauge<'replica'>;
  /** Calls routed by session affinity (`hit`), first calls of a session (`new`), calls of a session moved away from an unusable replica (`moved`). */
  routed: Counter<'replica' | 'reason'>;
}

const byRegistry = new WeakMap<Registry, ReplicaMetrics>();

/** The replica metrics on `registry` (default: prom-client's default registry), created once per registry. */
export function replicaMetrics(registry: Registry = defaultRegistry): ReplicaMetrics {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const registers = [registry];
  const metrics: ReplicaMetrics = {
    requests: new Counter({ name: 'polar_engine_replica_requests_total', help: 'Engine calls started, by replica URL', labelNames: ['replica'], registers }),
    errors: new Counter({ name: 'polar_engine_replica_errors_total', help: 'Engine calls that failed, by replica URL', labelNames: ['replica'], registers }),
    outstanding: new Gauge({ name: 'polar_engine_replica_outstanding', help: 'Engine calls in flight, by replica URL', labelNames: ['replica'], registers }),
    healthy: new Gauge({ name: 'polar_engine_replica_healthy', help: '1 when the replica answered its last health check', labelNames: ['replica'], registers }),
    draining: new Gauge({ name: 'polar_engine_replica_draining', help: '1 while the replica is draining', labelNames: ['replica'], registers }),
    routed: new Counter({ name: 'polar_engine_replica_routed_total', help: 'Routing decisions: hit (session affinity), new (first call of a session), moved (its replica was drained or down)', labelNames: ['replica', 'reason'], registers }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
