/**
 * The runtime (sandbox) interface every session runs in: local process groups, docker/podman containers or apptainer
 * instances. Source: docs/architecture.md#staging-model (runtimes).
 */

/** Options of one command run inside a runtime. */
export interface ExecOptions {
  /** Kill the command's process group after this many ms (result has `timedOut: true`). */
  timeoutMs?: number;
  /** Aborting kills the command's process group; the promise still resolves (exitCode null). */
  signal?: AbortSignal;
  /** Extra environment on top of the runtime's scrubbed base environment. */
  env?: Record<string, string>;
  /** Working directory inside the runtime; defaults to the runtime's `workDir`. */
  cwd?: string;
}

/** Outcome of `exec`. `exitCode` is null when the process was killed by a signal (timeout, cancel). */
export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Options of a long-running process (the harness). */
export interface SpawnOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Close stdin (Codex waits for input otherwise). Default true. */
  closeStdin?: boolean;
}

/** A long-running process started with `spawn`; it leads its own process group. */
export interface RuntimeProcess {
  /** Host pid of the process (group leader), null for runtimes that cannot tell. */
  readonly pid: number | null;
  /** Resolves when the process exits; `exitCode` null when it died from a signal. */
  readonly exited: Promise<{ exitCode: number | null; signal: string | null }>;
  /** Output collected so far (capped at `OUTPUT_CAP_BYTES`, keeping the tail). */
  stdout(): string;
  stderr(): string;
  /** SIGKILL the whole process group (grandchildren included); resolves once the leader exited. */
  kill(): Promise<void>;
}

/** One sandbox. Paths passed to methods are paths inside the runtime. */
export interface Runtime {
  readonly kind: string;
  /** The task's working tree inside the runtime (absolute). */
  readonly workDir: string;
  /** The session HOME inside the runtime (absolute); harness config files go here. */
  readonly homeDir: string;
  /** Create the sandbox (directories, container, instance). Throws when the runtime cannot start. */
  start(signal?: AbortSignal): Promise<void>;
  /** Remove the sandbox; idempotent, never throws for an already-stopped runtime. */
  stop(): Promise<void>;
  /** Run `command` (a shell string run by `sh -c`, or an argv) to completion. */
  exec(command: string | string[], opts?: ExecOptions): Promise<ExecResult>;
  /** Start a long-running process as its own process group. */
  spawn(argv: string[], opts?: SpawnOptions): RuntimeProcess;
  /** Copy a host file or directory into the runtime (`remotePath` relative paths resolve against `workDir`). */
  upload(localPath: string, remotePath: string): Promise<void>;
  /** Copy a file or directory out of the runtime to the host. */
  download(remotePath: string, localPath: string): Promise<void>;
  /** Write a text file inside the runtime, creating parent directories. */
  writeFile(remotePath: string, content: string): Promise<void>;
}

/** Output kept per stream of a spawned process or exec (tail kept beyond it). */
export const OUTPUT_CAP_BYTES = 8 * 1024 * 1024;

/** Runs a host command (argv) to completion; injected so container runtimes are testable without their CLIs. */
export type CommandRunner = (argv: string[], opts?: { timeoutMs?: number; signal?: AbortSignal; stdin?: string; cwd?: string }) => Promise<ExecResult>;

/** Starts a host process as its own process group (injected like CommandRunner). */
export type ProcessSpawner = (argv: string[], opts?: { env?: Record<string, string>; cwd?: string; closeStdin?: boolean }) => RuntimeProcess;
