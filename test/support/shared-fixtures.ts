/**
 * Where the shared recorded harness traffic lives: `../shared/fixtures/harness-traffic` beside the repository (as in CI:
 * a clone with shared/ next to it), or $POLAR_SHARED_DIR/fixtures/harness-traffic.
 */
import { join } from 'node:path';

export const SHARED_DIR = process.env.POLAR_SHARED_DIR ?? join(import.meta.dir, '..', '..', '..', 'shared');
export const HARNESS_TRAFFIC = join(SHARED_DIR, 'fixtures', 'harness-traffic');
