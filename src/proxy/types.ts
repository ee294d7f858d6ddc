/**
 * The proxy's dependencies and options (docs/architecture.md#the-proxy). The gateway mounts `createProxyApp(deps)` as the
 * `fetch` fallback of its own Bun.serve; `polar proxy` serves it alone.
 */
import type { Clock } from '../core/clock.ts';
import type { DialectOptions } from '../core/dialect.ts';
import type { IdGenerator } from '../core/ids.ts';
import type { TaskSampling } from '../core/contracts/task-sampling.ts';
import type { CompletionRecord } from '../core/records.ts';
import type { EngineClient } from '../engines/types.ts';

/** What the proxy needs of the store; `Store` from src/store (openStore) satisfies it. */
export interface ProxyStore {
  /** Null, or a promise to await before inserting (the store's WAL checkpointer holds writes; Store.writeGate). */
  writeGate?(): Promise<void> | null;
  completions: {
    /** Synchronous; committed when it returns; throws when the store refuses the record. */
    insert(rec: CompletionRecord, opts?: { requestBodyJson?: string; requestBodyUtf8?: Uint8Array }): void;
    /**
     * Optional group commit: store the records in one transaction, each as `insert` would; one entry per item, null
     * when committed, else the error that refused that record (a failing record must not refuse the others).
     */
    insertMany?(items: readonly { rec: CompletionRecord; opts?: { requestBodyJson?: string; requestBodyUtf8?: Uint8Array } }[]): (Error | null)[];
    /** A session's records in `seq` order. */
    listBySession(sessionId: string): CompletionRecord[];
    /** The next 0-based seq of a session. */
    nextSeq(sessionId: string): number;
  };
}

/** A session the proxy may attribute calls to. */
export interface ProxySessionInfo {
  session_id: string;
  task_id?: string;
  /** The task's policy version (used when no admin version and no engine-reported version exists). */
  policy_version?: string;
  /**
   * 0-based dispatch attempt of the session (a resumed or re-dispatched session reuses its id with attempt + 1);
   * stored on every record so a trajectory is built from one attempt only. Absent = 0.
   */
  attempt?: number;
  /**
   * The task's own sampling (agent.settings.sampling_params / model_kwargs, src/core/contracts/task-sampling.ts),
   * laid over every call of the session (src/proxy/task-sampling.ts). Absent: the request's own.
   */
  sampling?: TaskSampling;
}

/**
 * Resolves the key a caller presented (path prefix, `x-polar-session`, or API key, docs/architecture.md#the-proxy) to a session.
 * `key` is `''` when the caller presented none. Null = unknown session → 401 in the caller's dialect.
 */
export interface SessionDirectory {
  resolve(key: string): ProxySessionInfo | null;
}

/** Default request body limit of the proxy, bytes (64 MiB: a long agent context with images fits with room). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

export interface ProxyOptions {
  /**
   * Largest request body accepted, bytes (default DEFAULT_MAX_BODY_BYTES); a larger one gets 413 in the caller's
   * provider shape. The server in front must allow at least this much (Bun.serve `maxRequestBodySize`, default
   * 128 MiB), or its own empty 413 answers first.
   */
  maxBodyBytes?: number;
  /**
   * Interval of keep-alive events on a stream while the engine works, ms (default 5000). A true Anthropic or Responses
   * stream also holds its status this long for the engine to answer, so an early engine error is a real status.
   */
  keepaliveIntervalMs?: number;
  /**
   * Abort the engine call when the client disconnects (default false: let it finish and record it, because a
   * captured completion is never dropped).
   */
  abortOnClientDisconnect?: boolean;
  /** Dialect codec options (e.g. strip Claude Code's billing header; default on). */
  dialectOptions?: DialectOptions;
  /** Policy version in force at start-up (default null until `POST /admin/policy_version`). */
  initialPolicyVersion?: string | null;
  /**
   * When set, `/admin/*` and `GET /sessions/{id}/completions` require `Authorization: Bearer <adminToken>` from any
   * caller. When unset (or ''), `/admin/*` answers loopback peers only and the completions listing is open (see
   * admin-access.ts). The gateway passes its control-plane token; `polar proxy` takes `--admin-token`.
   */
  adminToken?: string | null;
  /**
   * Chat mode: put back the reasoning a harness dropped from its history, from the session's own earlier answers,
   * before the engine renders it (src/proxy/reasoning-restore.ts). Default false. No effect in token mode.
   */
  restoreReasoning?: boolean;
}

/** The config file's `proxy` section (src/config/sections/proxy.ts), as far as the proxy reads it. */
export interface ProxySectionConfig {
  strip_billing_header: boolean;
  restore_reasoning?: boolean;
  keepalive_interval_ms: number;
  max_body_bytes: number;
}

/** Map the config's `proxy` section onto {@link ProxyOptions} (used by every gateway node: `polar serve`, `polar gateway`). */
export function proxyOptionsFromConfig(section: ProxySectionConfig): ProxyOptions {
  return {
    maxBodyBytes: section.max_body_bytes,
    keepaliveIntervalMs: section.keepalive_interval_ms,
    dialectOptions: { stripBillingHeader: section.strip_billing_header },
    ...(section.restore_reasoning ? { restoreReasoning: true } : {}),
  };
}

/** Counters the proxy keeps (exposed for metrics). */
export interface ProxyCounters {
  /** Records committed. */
  completions: number;
  /** Records committed with a capture error. */
  captureErrors: number;
  /** Engine calls that failed (no record). */
  engineErrors: number;
  /** Records flagged because sampling straddled a pause or a policy version change. */
  straddled: number;
  /** Client requests rejected before reaching the engine (bad JSON, invalid request, unknown session). */
  rejected: number;
  /** `onRecord` hooks that threw (the record was committed anyway). */
  hookErrors: number;
  /** Records flagged `client-disconnected`: the client left before its reply was sent (the record is kept). */
  clientDisconnects: number;
  /**
   * Streams whose client left after the record was committed (the reply's bytes were queued but not all delivered);
   * such a record cannot be flagged, since records are immutable once stored.
   */
  disconnectsAfterCommit: number;
  /** Records whose commit waited for the store's WAL write hold (store/checkpointer.ts) before inserting. */
  heldCommits: number;
}

export interface ProxyDeps {
  engine: EngineClient;
  store: ProxyStore;
  sessions: SessionDirectory;
  clock?: Clock;
  /** Ids of completions, responses and tool calls; default `timeOrderedId` (completion ids are the store's primary key). */
  newId?: IdGenerator;
  options?: ProxyOptions;
  /** Called after a record is committed; errors are counted, never surfaced to the client. */
  onRecord?: (rec: CompletionRecord) => void;
  /** Pass an object to read the counters from outside (the app mutates it). */
  counters?: ProxyCounters;
}

export function newProxyCounters(): ProxyCounters {
  return { completions: 0, captureErrors: 0, engineErrors: 0, straddled: 0, rejected: 0, hookErrors: 0, clientDisconnects: 0, disconnectsAfterCommit: 0, heldCommits: 0 };
}
