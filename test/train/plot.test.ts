import { expect, test } from 'bun:test';
import { renderLineChartSvg } from '../../src/train/plot.ts';

test('one polyline and legend entry per series; points placed on the 0..1 scale; text escaped', () => {
  const svg = renderLineChartSvg(
    [
      { label: 'sync', points: [{ step: 1, value: 0.5 }, { step: 2, value: 1 }] },
      { label: 'async <K=1>', points: [{ step: 2, value: 0 }, { step: 1, value: 0.25 }] },
    ],
    { title: 'pass@1 & more', yLabel: 'pass@1' },
  );
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  const polylines = [...svg.matchAll(/<polyline [^>]*points="([^"]+)"/g)].map((m) => m[1]!.split(' ').map((p) => p.split(',').map(Number)));
  expect(polylines).toHaveLength(2);
  // Plot area: y = 40 (value 1) .. 350 (value 0); x from step 1 at 60 to step 2 at 490.
  expect(polylines[0]).toEqual([[60, 195], [490, 40]]);
  expect(polylines[1]).toEqual([[60, 272.5], [490, 350]]);
  expect(svg).toContain('async &lt;K=1&gt;');
  expect(svg).toContain('pass@1 &amp; more');
  expect(svg.match(/<circle /g)).toHaveLength(4);
});
