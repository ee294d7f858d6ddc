/** Test helper: the dashboard's source over a store, as the rollout server builds it (src/rollout/routes.ts dashboardSource), without nodes. */
import type { DashboardSource } from '../../src/observe/dashboard/state.ts';
import type { Store } from '../../src/store/index.ts';

/** A DashboardSource reading `store`: its tasks, sessions and results; no nodes, no health extras. */
export function storeDashboardSource(store: Store): DashboardSource {
  return {
    tasks: () => store.tasks.list(), sessions: (id) => store.sessions.listByTask(id), results: (id) => store.results.listByTask(id),
    result: (id) => store.results.get(id), session: (id) => store.sessions.get(id), nodes: () => [], health: () => ({}),
  };
}
