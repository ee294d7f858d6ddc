/** `store`: the SQLite database (WAL). */
import { z } from 'zod';

/** The `store` section. */
export const storeSchema = z
  .strictObject({
    /** Database file; relative paths resolve against the working directory. */
    path: z.string().min(1).default('.polar/polar.db').describe('SQLite database file (WAL mode) shared by the proxy and the rollout server unless they name their own; relative to the working directory.'),
  })
  .describe('The SQLite store.');

export type StoreConfig = z.output<typeof storeSchema>;
