/**
 * Trajectory builders, training filter, advantages, group math and verification.
 */
export { buildTrajectory, getBuilder, BUILDERS, BUILDER_NAMES } from './builders.ts';
export type { BuildTrajectoryOptions, TraceBuilder, BuilderOutput } from './builders.ts';
export { applyRewards, applyTrainingFilter } from './filter.ts';
export type { FilterReason, TraceFilterNote } from './filter.ts';
export { grpoAdvantages, leaveOneOutAdvantages } from './advantages.ts';
export { verifyTraces, formatVerifyReport } from './verify.ts';
export { attemptOf, latestAttempt, selectAttempt, trajectoryAttempt } from './attempts.ts';
export type { AttemptSelection } from './attempts.ts';
export type { VerifyReport, VerifyViolation, VerifyOptions, ViolationKind } from './verify.ts';
export { detectEotId, isStrictPrefix } from './prefix-merging.ts';
export { captureProblem, BREAK_REASONS } from './trace-parts.ts';
export type { BreakReason, ChainStart, BuildContext } from './trace-parts.ts';
export { renderTrace, traceStats, maskSpans } from './render.ts';
export type { RenderOptions, TraceStats } from './render.ts';
export { buildGroup, groupIdOf, groupLabelOf, isUsable, rewardOf, sampledPolicyVersions } from './groups.ts';
export type { GroupRecord, GroupSession } from './groups.ts';
export { CHAIN_ROLES, keepsTrace, labelChainRoles, parseBuilderConfig } from './roles.ts';
export type { BuilderConfig, ChainRole, RoleCounts } from './roles.ts';
