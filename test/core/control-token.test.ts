/** The control-plane token in both spellings: `Authorization: Bearer` / POLAR_CONTROL_TOKEN and the Python Polar's `x-polar-control-token` / POLAR_CONTROL_PLANE_TOKEN. */
import { expect, test } from 'bun:test';
import { controlTokenFromEnv, controlTokenMatches } from '../../src/core/control-token.ts';

test('either header carries the token; anything else does not', () => {
  expect(controlTokenMatches(new Headers({ authorization: 'Bearer s3cret' }), 's3cret')).toBe(true);
  expect(controlTokenMatches(new Headers({ 'x-polar-control-token': 's3cret' }), 's3cret')).toBe(true);
  for (const h of [{}, { authorization: 'Bearer s3cre' }, { authorization: 's3cret' }, { 'x-polar-control-token': 'Bearer s3cret' }, { 'x-polar-control-token': 's3cretX' }]) {
    expect(controlTokenMatches(new Headers(h as Record<string, string>), 's3cret')).toBe(false);
  }
});

test('POLAR_CONTROL_TOKEN wins over POLAR_CONTROL_PLANE_TOKEN; empty values count as unset', () => {
  expect(controlTokenFromEnv({ POLAR_CONTROL_TOKEN: 'a', POLAR_CONTROL_PLANE_TOKEN: 'b' })).toBe('a');
  expect(controlTokenFromEnv({ POLAR_CONTROL_TOKEN: '', POLAR_CONTROL_PLANE_TOKEN: 'b' })).toBe('b');
  expect(controlTokenFromEnv({})).toBeUndefined();
});
