/**
 * The recorder: turns one engine completion into a CompletionRecord and commits it before the reply's last byte
 * (docs/architecture.md#data-model: "written the moment it completes and never dropped"). Failed engine calls are not records (they
 * are counted); completions with a capture error are records (the error is stored and counted).
 */
import type { Clock } from '../core/clock.ts';
import { asError, attemptEach } from '../core/errors.ts';
import type { DialectName, IRRequest, Warning } from '../core/ir.ts';
import type { CompletionRecord } from '../core/records.ts';
import { definePromptIds } from '../core/int32-twin.ts';
import type { EngineClient, EngineCompletion } from '../engines/types.ts';
import type { ProxyCounters, ProxyStore } from './types.ts';

export interface RecordInput {
  completionId: string;
  sessionId: string;
  /** The session's dispatch attempt (ProxySessionInfo.attempt; absent = 0). */
  attempt?: number;
  dialect: DialectName;
  requestBody: unknown;
  /** The request body's exact JSON text as received, stored as is (no re-serialisation on the hot path). */
  requestText?: string;
  /** The request body's exact UTF-8 bytes as received, when valid UTF-8 (stored as they are; win over `requestText`). */
  requestBytes?: Uint8Array;
  irRequest: IRRequest;
  completion: EngineCompletion;
  /** Resolved policy version (admin version in force at entry, else engine-reported, else the session's). */
  policyVersion: string | null;
  /** Extra warnings from the proxy itself (e.g. straddled a pause). */
  warnings: Warning[];
  /** Clock value when the request arrived, ms. */
  startedAt: number;
}

/** `code: message` strings, the record's warning format. */
export function warningStrings(warnings: readonly Warning[]): string[] {
  return warnings.map((w) => `${w.code}: ${w.message}`);
}

/** A built record waiting for the next group commit. */
interface Pending {
  record: CompletionRecord;
  opts: { requestBodyJson?: string; requestBodyUtf8?: Uint8Array } | undefined;
  resolve: (record: CompletionRecord) => void;
  reject: (error: Error) => void;
}

export class Recorder {
  /** Records built since the last group commit, in call order. */
  private queue: Pending[] = [];
  /** Whether a group commit is scheduled (or waiting for the store's write hold). */
  private scheduled = false;
  /** Whether the scheduled group commit is waiting for the store's write hold (records queued now wait too). */
  private held = false;
  /**
   * Sessions with records queued or being committed: the next seq to hand out and how many are outstanding. The
   * store's own next-seq answer counts only inserted rows, so while a session has records in the queue its seqs are
   * handed out from here; the entry goes when the last one is settled.
   */
  private readonly reserved = new Map<string, { next: number; outstanding: number }>();

  constructor(
    private readonly store: ProxyStore,
    private readonly engine: EngineClient,
    private readonly clock: Clock,
    private readonly counters: ProxyCounters,
    private readonly onRecord?: (rec: CompletionRecord) => void,
  ) {}

  /**
   * Build the record and commit it; resolves once it is committed (the caller replies only then). Commits are
   * grouped: every record built in one turn of the event loop is inserted in one transaction at the end of that
   * turn (`setImmediate`), so concurrent calls share one WAL append (store insertMany; a store without it gets
   * one insert per record). When the store holds writes (its WAL checkpointer is copying the WAL back, see
   * store/checkpointer.ts) the group waits for the hold to end first, a few ms, without blocking the thread.
   * `seq` is handed out when the record is built, so concurrent calls of a session get distinct seqs in call
   * order, and they are inserted in that order. Rejects only when the store refuses this record (the caller turns
   * that into a 500: a reply whose capture was lost must not look successful); another record's failure does not
   * reject this one.
   */
  async commit(input: RecordInput): Promise<CompletionRecord> {
    const { completion } = input;
    const capture = completion.capture;
    const captureError = capture ? capture.captureError : `engine kind "${this.engine.kind}" captures no token ids or logprobs`;
    const now = this.clock();
    const promptIds = capture?.promptIds ?? [];
    const record: CompletionRecord = {
      completion_id: input.completionId,
      session_id: input.sessionId,
      seq: this.reserveSeq(input.sessionId),
      attempt: input.attempt ?? 0,
      dialect: input.dialect,
      request_body: input.requestBody,
      ir_request: input.irRequest,
      ir_response: completion.recordToolCalls ? { ...completion.response, toolCalls: completion.recordToolCalls } : completion.response,
      finish_reason: completion.response.finishReason,
      prompt_ids: promptIds instanceof Int32Array ? [] : promptIds,
      response_ids: capture?.responseIds ?? [],
      logprobs: capture?.logprobs ?? [],
      policy_version: input.policyVersion,
      engine_id: completion.engineId ?? this.engine.id,
      logprob_semantics: capture?.logprobSemantics ?? 'none',
      mode: this.engine.mode,
      capture_error: captureError,
      warnings: warningStrings([...input.irRequest.warnings, ...completion.warnings, ...completion.response.warnings, ...input.warnings]),
      timings: { engine_ms: Math.round(completion.engineMs), total_ms: Math.round(now - input.startedAt) },
      created_at: now,
    };
    // Ids read from the engine's answer as an Int32Array: the record's JS array is built only when something reads it
    // (the store and the metrics read the Int32Array).
    if (promptIds instanceof Int32Array) definePromptIds(record, promptIds);
    const opts = input.requestText === undefined && input.requestBytes === undefined ? undefined : { requestBodyJson: input.requestText, requestBodyUtf8: input.requestBytes };
    return new Promise((resolve, reject) => {
      this.queue.push({ record, opts, resolve, reject });
      if (this.held) this.counters.heldCommits++;
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  /** The session's next seq, counting records not yet inserted. */
  private reserveSeq(sessionId: string): number {
    const known = this.reserved.get(sessionId);
    if (known !== undefined) {
      known.outstanding++;
      return known.next++;
    }
    const seq = this.store.completions.nextSeq(sessionId);
    this.reserved.set(sessionId, { next: seq + 1, outstanding: 1 });
    return seq;
  }

  /** One group commit: wait out a write hold, insert the queue, settle every record. */
  private async flush(): Promise<void> {
    const gate = this.store.writeGate?.();
    if (gate) {
      this.held = true;
      this.counters.heldCommits += this.queue.length;
      await gate;
      this.held = false;
    }
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
    let errors: (Error | null)[];
    try {
      errors = this.insert(batch);
    } catch (thrown) {
      const failure = asError(thrown);
      errors = batch.map(() => failure);
    }
    for (let i = 0; i < batch.length; i++) {
      const { record, resolve, reject } = batch[i]!;
      const entry = this.reserved.get(record.session_id);
      if (entry !== undefined && --entry.outstanding === 0) this.reserved.delete(record.session_id);
      const error = errors[i];
      if (error) {
        reject(error);
        continue;
      }
      this.counters.completions++;
      if (record.capture_error !== null) this.counters.captureErrors++;
      if (this.onRecord) {
        try {
          this.onRecord(record);
        } catch {
          this.counters.hookErrors++;
        }
      }
      resolve(record);
    }
  }

  private insert(batch: readonly Pending[]): (Error | null)[] {
    const completions = this.store.completions;
    if (completions.insertMany) return completions.insertMany(batch.map(({ record, opts }) => ({ rec: record, opts })));
    return attemptEach(batch, ({ record, opts }) => completions.insert(record, opts));
  }
}
