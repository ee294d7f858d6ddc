/**
 * Prometheus metrics of the rollout server, on a registry of its own (so several servers in one process never clash).
 * Exposition format via prom-client: https://github.com/siimp/prom-client
 */
import { Counter, Gauge, Registry } from 'prom-client';

export interface RolloutMetrics {
  registry: Registry;
  tasksSubmitted: Counter;
  sessionsDispatched: Counter;
  sessionsRedispatched: Counter;
  sessionsHandedBack: Counter;
  sessionResults: Counter<'status'>;
  duplicateResults: Counter;
  staleResults: Counter;
  refusedDispatches: Counter;
  trainerCallbacks: Counter<'outcome'>;
  sessionsByStatus: Gauge<'status'>;
  nodes: Gauge<'state'>;
  groupsReady: Gauge;
}

/** A fresh registry with the rollout server's metrics (names prefixed `polar_rollout_`). */
export function createRolloutMetrics(): RolloutMetrics {
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    tasksSubmitted: new Counter({ name: 'polar_rollout_tasks_submitted_total', help: 'TaskRequests accepted', registers }),
    sessionsDispatched: new Counter({ name: 'polar_rollout_sessions_dispatched_total', help: 'Session dispatches to gateway nodes (re-dispatches included)', registers }),
    sessionsRedispatched: new Counter({ name: 'polar_rollout_sessions_redispatched_total', help: 'Sessions put back in the queue after their node failed or forgot them', registers }),
    sessionsHandedBack: new Counter({ name: 'polar_rollout_sessions_handed_back_total', help: 'Unstarted sessions a gateway whose engine was down gave back (POST /nodes/{id}/handback), queued again for another node', registers }),
    sessionResults: new Counter({ name: 'polar_rollout_session_results_total', help: 'Session results stored, by status', labelNames: ['status'], registers }),
    duplicateResults: new Counter({ name: 'polar_rollout_duplicate_results_total', help: 'Repeated deliveries of a session result (a callback after the one that delivered it), acknowledged and ignored; not a result this server fetched itself, nor the first result for a session it cancelled', registers }),
    staleResults: new Counter({ name: 'polar_rollout_stale_results_total', help: 'Session results of a dispatch attempt that is no longer current, recorded and ignored', registers }),
    refusedDispatches: new Counter({ name: 'polar_rollout_refused_dispatches_total', help: 'Sessions a gateway refused at dispatch (4xx); each fails alone', registers }),
    trainerCallbacks: new Counter({ name: 'polar_rollout_trainer_callbacks_total', help: 'Trainer callback POSTs by outcome: delivered, retry (failed, tried again later), failed (given up)', labelNames: ['outcome'], registers }),
    sessionsByStatus: new Gauge({ name: 'polar_rollout_sessions', help: 'Unfinished sessions by status (REGISTERED, then the live statuses the nodes report: INITIALIZING, READY, RUNNING, POST_RUN, BUILDING, EVALUATING)', labelNames: ['status'], registers }),
    nodes: new Gauge({ name: 'polar_rollout_nodes', help: 'Gateway nodes by state (healthy, unhealthy, draining)', labelNames: ['state'], registers }),
    groupsReady: new Gauge({ name: 'polar_rollout_groups_ready', help: 'Evaluated groups not yet acknowledged by a trainer', registers }),
  };
}
