/**
 * The part of cli-progress 3.12 that `polar run` uses (the package ships no types; @types/cli-progress is not a
 * dependency). Source: https://github.com/npkg/cli-progress README (SingleBar options and methods).
 */
declare module 'cli-progress' {
  export interface Options {
    format?: string;
    stream?: NodeJS.WritableStream;
    hideCursor?: boolean;
    clearOnComplete?: boolean;
    barsize?: number;
    noTTYOutput?: boolean;
  }
  export class SingleBar {
    constructor(options: Options, preset?: unknown);
    start(total: number, startValue: number, payload?: Record<string, unknown>): void;
    update(value: number, payload?: Record<string, unknown>): void;
    setTotal(total: number): void;
    stop(): void;
  }
}
