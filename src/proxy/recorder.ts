/**
 * The recorder: turns one engine completion into a CompletionRecord and commits it before the reply's last byte
 * (docs/architecture.md#data-model: "written the moment it completes and never dropped"). Failed engine calls are not records (they
 * are counted); completions with a capture error are records (the error is stored and counted).
 */
import type { Clock } from '../core/clock.ts';
import type { DialectName, IRRequest, Warning } from '../core/ir.ts';
import type { CompletionRecord } from '../core/records.ts';
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

export class Recorder {
  constructor(
    private readonly store: ProxyStore,
    private readonly engine: EngineClient,
    private readonly clock: Clock,
    private readonly counters: ProxyCounters,
    private readonly onRecord?: (rec: CompletionRecord) => void,
  ) {}

  /**
   * Build and commit the record. When the store holds writes (its WAL checkpointer is copying the WAL back, see
   * store/checkpointer.ts) the commit waits for the hold to end first, a few ms, without blocking the thread; the
   * reply still goes only after the commit. `seq` is taken and the row inserted in one synchronous step, so
   * concurrent calls of a session get distinct, commit-ordered seqs. Rejects only when the store fails (the caller
   * turns that into a 500: a reply whose capture was lost must not look successful).
   */
  async commit(input: RecordInput): Promise<CompletionRecord> {
    const gate = this.store.writeGate?.();
    if (gate) {
      this.counters.heldCommits++;
      await gate;
    }
    const { completion } = input;
    const capture = completion.capture;
    const captureError = capture ? capture.captureError : `engine kind "${this.engine.kind}" captures no token ids or logprobs`;
    const now = this.clock();
    const record: CompletionRecord = {
      completion_id: input.completionId,
      session_id: input.sessionId,
      seq: 0,
      attempt: input.attempt ?? 0,
      dialect: input.dialect,
      request_body: input.requestBody,
      ir_request: input.irRequest,
      ir_response: completion.recordToolCalls ? { ...completion.response, toolCalls: completion.recordToolCalls } : completion.response,
      finish_reason: completion.response.finishReason,
      prompt_ids: capture?.promptIds ?? [],
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
    record.seq = this.store.completions.nextSeq(input.sessionId);
    this.store.completions.insert(record, input.requestText === undefined && input.requestBytes === undefined ? undefined : { requestBodyJson: input.requestText, requestBodyUtf8: input.requestBytes });
    this.counters.completions++;
    if (captureError !== null) this.counters.captureErrors++;
    if (this.onRecord) {
      try {
        this.onRecord(record);
      } catch {
        this.counters.hookErrors++;
      }
    }
    return record;
  }
}
