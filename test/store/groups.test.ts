/** Migration 5: groups re-keyed by task_id, with group_id kept as a label; old rows keep their data and acks. */
import { Database } from 'bun:sqlite';
import { expect, test } from 'bun:test';
import { join } from 'node:path';
import { GROUP_EVALUATED, migrations, openStore } from '../../src/store/index.ts';
import { migrate } from '../../src/store/migrations.ts';
import { useTempStores } from '../support/temp-stores.ts';

const { stores, tempDir } = useTempStores('polar-store-groups-');

test('rows of a version-4 groups table move to the task_id key; acks, data and times survive; labels may then repeat', () => {
  const path = join(tempDir(), 'old.db');
  const db = new Database(path, { create: true });
  migrate(db, migrations.slice(0, 4), () => 1);
  const insert = db.query('INSERT INTO groups (group_id, task_id, status, data, created_at, updated_at, acked_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  insert.run('g-acked', 'task-a', GROUP_EVALUATED, JSON.stringify({ group_id: 'g-acked', task_id: 'task-a', rewards: [1, 0] }), 10, 11, 12);
  insert.run('task-b', 'task-b', GROUP_EVALUATED, JSON.stringify({ group_id: 'task-b', task_id: 'task-b', rewards: [0, 1] }), 20, 21, null);
  db.close();

  const store = openStore(path, { clock: () => 1000 });
  stores.push(store);
  expect(store.schemaVersion).toBe(migrations.length);
  expect(store.groups.get('task-a')).toEqual({ task_id: 'task-a', group_id: 'g-acked', status: GROUP_EVALUATED, data: { group_id: 'g-acked', task_id: 'task-a', rewards: [1, 0] }, created_at: 10, updated_at: 11, acked_at: 12 });
  expect(store.groups.get('g-acked')).toBeNull();
  expect(store.groups.listReady().map((g) => g.task_id)).toEqual(['task-b']);

  // What the old primary key forbade: a second task with the same label is its own, unacknowledged group.
  store.groups.upsert({ task_id: 'task-c', group_id: 'g-acked', status: GROUP_EVALUATED, data: { rewards: [1, 1] } });
  expect(store.groups.get('task-a')!.data).toEqual({ group_id: 'g-acked', task_id: 'task-a', rewards: [1, 0] });
  expect(store.groups.listReady().map((g) => g.task_id)).toEqual(['task-b', 'task-c']);
  expect(store.groups.ack('task-c')).toBe(true);
  expect(store.groups.get('task-a')!.acked_at).toBe(12);
});
