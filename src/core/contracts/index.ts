/**
 * Every shape that crosses a process boundary between the rollout server, gateway nodes, trainers and the simulator,
 * defined once as zod schemas with their `z.infer` types. The rollout server and the gateway both import from here and
 * never from each other (test/architecture.test.ts checks it).
 */
export * from './dispatch.ts';
export * from './issues.ts';
export * from './nodes.ts';
export * from './paths.ts';
export * from './reference-task.ts';
export * from './runtime.ts';
export * from './session.ts';
export * from './sim-script.ts';
export * from './task.ts';
export * from './task-sampling.ts';
export * from './harness-settings.ts';
export * from './runnable.ts';
