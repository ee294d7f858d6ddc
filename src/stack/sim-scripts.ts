/**
 * Behaviour scripts travel with their task (`metadata.sim_script`, see src/rollout/task-file.ts `toTaskRequest`), so a
 * task submitted from anywhere behaves as scripted. When the engine is the built-in simulator, the stack gives the
 * gateway node this hook: before each session's INIT it registers the task's script with `POST {sim}/sim/scripts`
 * (concurrent sessions of one task and script share the call in flight). Registering again is cheap and idempotent on
 * the simulator's side (src/sim/server.ts `registerScript` replaces the task's script with the same one), and it is
 * what keeps a restarted simulator, which has forgotten every script, from answering the sessions that follow with
 * its "no behaviour script" reply. The gateway itself knows nothing of the simulator.
 */
import type { TaskRequest } from '../core/records.ts';

/**
 * A `beforeSession` hook for a gateway node whose engine is the simulator at `simUrl`.
 * The hook throws Error when the simulator refuses the script or is unreachable (the session then fails in INIT).
 */
export function simScriptRegistrar(simUrl: string, doFetch: typeof fetch = fetch): (task: TaskRequest, signal: AbortSignal) => Promise<void> {
  const base = simUrl.replace(/\/+$/, '');
  const registrations = new Map<string, Promise<void>>();
  return (task, signal) => {
    const script = task.metadata?.sim_script;
    if (script === undefined || script === null) return Promise.resolve();
    const key = `${task.task_id}\n${JSON.stringify(script)}`;
    let registration = registrations.get(key);
    if (!registration) {
      registration = (async () => {
        const response = await doFetch(`${base}/sim/scripts`, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task_id: task.task_id, script }),
          signal: AbortSignal.timeout(30_000),
        }).catch((error: unknown) => {
          throw new Error(`cannot reach the simulator at ${base} to register the behaviour script of task ${task.task_id}: ${errorText(error)}`);
        });
        const text = await response.text();
        if (!response.ok) throw new Error(`the simulator at ${base} refused the behaviour script of task ${task.task_id} (HTTP ${response.status}): ${text.slice(0, 500)}`);
      })();
      registrations.set(key, registration);
      // Settled, it is forgotten: the next session registers again (the simulator may have restarted since).
      const forget = () => {
        if (registrations.get(key) === registration) registrations.delete(key);
      };
      registration.then(forget, forget);
    }
    return raceAbort(registration, signal);
  };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  })]);
}
