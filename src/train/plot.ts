/**
 * A small SVG line chart of pass@1 per training step, one line per run (sync / async). Written by hand: a fixed
 * 0..1 y-axis, integer steps on x and a legend need ~60 lines, less than wiring a charting library into a Bun binary.
 */

export interface PlotSeries {
  label: string;
  points: { step: number; value: number }[];
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

const escapeXml = (text: string) => text.replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]!);

/**
 * SVG text of the series (values in [0, 1]) against step.
 * @param title drawn above the chart.
 */
export function renderLineChartSvg(series: readonly PlotSeries[], opts: { title: string; yLabel: string }): string {
  const width = 640;
  const height = 400;
  const left = 60;
  const right = 150;
  const top = 40;
  const bottom = 50;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const maxStep = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p.step)));
  const x = (step: number) => left + (maxStep === 1 ? plotW / 2 : ((step - 1) / (maxStep - 1)) * plotW);
  const y = (v: number) => top + (1 - Math.min(1, Math.max(0, v))) * plotH;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${left + plotW / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(opts.title)}</text>`);
  for (let i = 0; i <= 10; i++) {
    const v = i / 10;
    out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="${i % 5 === 0 ? '#999' : '#e5e5e5'}"/>`);
    if (i % 2 === 0) out.push(`<text x="${left - 8}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(1)}</text>`);
  }
  for (let step = 1; step <= maxStep; step++) {
    out.push(`<line x1="${x(step)}" x2="${x(step)}" y1="${top + plotH}" y2="${top + plotH + 5}" stroke="#333"/>`);
    out.push(`<text x="${x(step)}" y="${top + plotH + 18}" text-anchor="middle">${step}</text>`);
  }
  out.push(`<text x="${left + plotW / 2}" y="${height - 10}" text-anchor="middle">step</text>`);
  out.push(`<text x="16" y="${top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${top + plotH / 2})">${escapeXml(opts.yLabel)}</text>`);
  out.push(`<rect x="${left}" y="${top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = [...s.points].sort((a, b) => a.step - b.step);
    if (pts.length > 0) out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${x(p.step).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ')}"/>`);
    for (const p of pts) out.push(`<circle cx="${x(p.step).toFixed(1)}" cy="${y(p.value).toFixed(1)}" r="3.5" fill="${color}"><title>${escapeXml(`${s.label} step ${p.step}: ${p.value.toFixed(3)}`)}</title></circle>`);
    const ly = top + 10 + i * 20;
    out.push(`<line x1="${left + plotW + 15}" x2="${left + plotW + 40}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${left + plotW + 46}" y="${ly + 4}">${escapeXml(s.label)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
