/**
 * A map with a byte budget over its values, least recently set first out: the per-session memories of the chat engine
 * (engines/body-memo.ts, engines/answer-json.ts) each keep one value per session and must stay bounded when sessions
 * end without being forgotten. Recency is refreshed by `set` only (each user sets after every get).
 * With `sizeOf = () => 1` the budget is an entry count: the per-session maps that hold small objects (the proxy's
 * ad-hoc session keys, the replica router's session affinity) use it so sessions that are never ended stay bounded.
 */
export class ByteLru<V> {
  /** Insertion order = LRU order: the first key is the least recently set. */
  private readonly held = new Map<string, V>();
  private total = 0;

  /**
   * @param maxBytes budget over all values, bytes (0: nothing is kept).
   * @param sizeOf a value's resident size in bytes; must not change while the value is held.
   */
  constructor(
    private readonly maxBytes: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  get(key: string): V | undefined {
    return this.held.get(key);
  }

  /** Replace the key's value (a value over the whole budget is not kept, and the old one is dropped), then evict. */
  set(key: string, value: V): void {
    this.delete(key);
    const size = this.sizeOf(value);
    if (size > this.maxBytes) return;
    this.held.set(key, value);
    this.total += size;
    for (const [oldest, kept] of this.held) {
      if (this.total <= this.maxBytes) break;
      this.total -= this.sizeOf(kept);
      this.held.delete(oldest);
    }
  }

  delete(key: string): void {
    const old = this.held.get(key);
    if (old === undefined) return;
    this.total -= this.sizeOf(old);
    this.held.delete(key);
  }

  /** The entries held, least recently set first. */
  entries(): IterableIterator<[string, V]> {
    return this.held.entries();
  }

  /** The values held, least recently set first. */
  values(): IterableIterator<V> {
    return this.held.values();
  }

  /** Number of keys held. */
  get size(): number {
    return this.held.size;
  }

  /** Bytes held over all values. */
  get bytes(): number {
    return this.total;
  }
}
