// serve's charts: a card per endpoint with its breaker state and its last
// hour, attempts per minute stacked by series (the counts GET /api/stats
// gives each minute, as the server names them) and latency as lines; and
// (minutesChart) a destination's deliveries per minute, settled, without
// latency.

import {$, h, svg, replace} from './dom.js';
import {pad, fmtMs, fmtStamp} from './format.js';

// renderChart draws the endpoints of GET /api/stats; series are the counts
// of a minute, bottom of the stack first.
export function renderChart(endpoints, series) {
  const chart = $('#chart');
  if (!chart) return;
  if (!endpoints.length) { replace(chart, h('p', {class: 'muted pad', text: 'No endpoint has been tried yet.'})); return; }
  replace(chart, endpoints.map(ep => endpointCard(ep, series)),
    h('div', {class: 'legend', 'aria-hidden': 'true'},
      series.map(k => h('span', {class: 'lg'}, h('i', {class: 'sw sw-' + k}), k)),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-avg'}), 'latency avg'),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-max'}), 'latency max')));
}

function endpointCard(ep, series) {
  const state = ep.state || 'closed';
  const facts = [];
  if (ep.since) facts.push('since ' + fmtStamp(ep.since));
  if (ep.failures) facts.push(ep.failures + ' failure' + (ep.failures === 1 ? '' : 's'));
  if (ep.nextProbe) facts.push('next probe ' + fmtStamp(ep.nextProbe));
  return h('div', {class: 'endpoint', data: {url: ep.url, state, source: ep.source || ''}},
    h('div', {class: 'ep-head'},
      h('span', {class: 'badge br-' + state, title: 'Circuit breaker', text: state}), ' ',
      h('span', {class: 'muted', text: ep.source || ''}), ' ',
      h('span', {class: 'mono ep-url', title: ep.url, text: ep.url})),
    h('div', {class: 'ep-facts muted small'}, facts.join(' · '), ep.lastError ? [facts.length ? ' · ' : '', h('span', {class: 'error', text: 'last error: ' + ep.lastError})] : null),
    minutesChart(ep.minutes, series, 'Attempts per minute to ' + ep.url, ' Breaker ' + state + '.'));
}

// markEndpoint applies an `endpoint` event at once; the stats follow.
export function markEndpoint(ev) {
  for (const card of document.querySelectorAll('#chart .endpoint')) {
    if (card.dataset.url !== ev.url || (ev.source && card.dataset.source && card.dataset.source !== ev.source)) continue;
    card.dataset.state = ev.state;
    const badge = $('.badge', card);
    badge.className = 'badge br-' + ev.state;
    badge.textContent = ev.state;
  }
}

// minutesChart draws counts per minute (stacked bars) and, when the minutes
// have it, latency (lines) over the last 60 minutes, the newest at the
// right. what and tail frame the chart's spoken summary.
export function minutesChart(minutes, series, what, tail) {
  const W = 640, H = 132, L0 = 34, R0 = 46, T0 = 8, B0 = 110;
  const pw = W - L0 - R0, ph = B0 - T0, slot = pw / 60;
  const end = Math.floor(Date.now() / 60000) * 60000, start = end - 59 * 60000;
  const slots = new Array(60).fill(null);
  const timed = (minutes || []).some(m => m.latencyMs);
  for (const m of minutes || []) {
    const i = Math.round((Date.parse(m.t) - start) / 60000);
    if (i >= 0 && i < 60) slots[i] = m;
  }
  const total = m => series.reduce((n, k) => n + (m[k] || 0), 0);
  const maxN = niceMax(Math.max(1, ...slots.map(m => (m ? total(m) : 0))));
  const maxMs = niceMax(Math.max(1, ...slots.map(m => (m && m.latencyMs ? m.latencyMs.max || m.latencyMs.avg || 0 : 0))));
  const y = (v, max) => B0 - (v / max) * ph;
  const sum = Object.fromEntries(series.map(k => [k, 0]));
  const bars = svg('g', {class: 'bars'});
  slots.forEach((m, i) => {
    if (!m || !total(m)) return;
    const x = L0 + i * slot + 1;
    let base = B0;
    const g = svg('g', {class: 'minute'}, svg('title', null, minuteTitle(m, series)));
    for (const k of series) {
      const v = m[k] || 0;
      sum[k] += v;
      if (!v) continue;
      const hgt = (v / maxN) * ph;
      g.append(svg('rect', {class: 'bar-' + k, x: x.toFixed(1), y: (base - hgt).toFixed(1), width: (slot - 2).toFixed(1), height: Math.max(0.5, hgt).toFixed(1)}));
      base -= hgt;
    }
    bars.append(g);
  });
  const line = key => {
    let d = '', pen = false;
    slots.forEach((m, i) => {
      const v = m && m.latencyMs && total(m) ? m.latencyMs[key] : null;
      if (v == null) { pen = false; return; }
      // A step across each minute's slot: one minute alone still shows.
      const yy = y(v, maxMs).toFixed(1);
      d += (pen ? 'L' : 'M') + (L0 + i * slot).toFixed(1) + ' ' + yy + 'L' + (L0 + (i + 1) * slot).toFixed(1) + ' ' + yy;
      pen = true;
    });
    return d ? svg('path', {class: 'lat-' + key, d}) : null;
  };
  const avgs = slots.filter(m => m && m.latencyMs && total(m)).map(m => m.latencyMs.avg);
  const avgAll = avgs.length ? avgs.reduce((a, b) => a + b, 0) / avgs.length : null;
  const label = what + ', last hour: ' + counts(sum, series) +
    (avgAll != null ? '; latency about ' + fmtMs(avgAll) + ' on average' : '') + '.' + (tail || '');
  const id = 'chart-title-' + Math.random().toString(36).slice(2);
  return svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'spark', role: 'img', 'aria-labelledby': id, preserveAspectRatio: 'xMidYMid meet'},
    svg('title', {id}, label),
    svg('line', {class: 'axis', x1: L0, x2: W - R0, y1: B0, y2: B0}),
    svg('line', {class: 'grid-line', x1: L0, x2: W - R0, y1: T0, y2: T0}),
    svg('line', {class: 'grid-line', x1: L0, x2: W - R0, y1: (T0 + B0) / 2, y2: (T0 + B0) / 2}),
    svg('text', {class: 'tick', x: L0 - 4, y: T0 + 4, 'text-anchor': 'end'}, String(maxN)),
    svg('text', {class: 'tick', x: L0 - 4, y: B0, 'text-anchor': 'end'}, '0'),
    timed ? [
      svg('text', {class: 'tick lat', x: W - R0 + 4, y: T0 + 4}, fmtTick(maxMs)),
      svg('text', {class: 'tick lat', x: W - R0 + 4, y: (T0 + B0) / 2 + 3}, fmtTick(maxMs / 2)),
      svg('text', {class: 'tick lat', x: W - R0 + 4, y: B0}, '0 ms')] : null,
    svg('text', {class: 'tick', x: L0, y: H - 6}, '−60 min'),
    svg('text', {class: 'tick', x: L0 + pw / 2, y: H - 6, 'text-anchor': 'middle'}, '−30 min'),
    svg('text', {class: 'tick', x: W - R0, y: H - 6, 'text-anchor': 'end'}, 'now'),
    bars, line('max'), line('avg'));
}

function fmtTick(ms) { return ms >= 1000 ? (ms / 1000).toFixed(ms >= 10000 ? 0 : 1) + ' s' : Math.round(ms) + ' ms'; }

// counts says a minute's (or an hour's) counts: "3 delivered, 1 retried...".
function counts(m, series) { return series.map(k => (m[k] || 0) + ' ' + k).join(', '); }

function minuteTitle(m, series) {
  const d = new Date(m.t);
  let t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ' · ' + counts(m, series);
  if (m.latencyMs) t += ' · latency avg ' + fmtMs(m.latencyMs.avg) + ', max ' + fmtMs(m.latencyMs.max);
  return t;
}

// niceMax rounds an axis maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 2, 5, 10]) if (f * p >= v) return f * p;
  return 10 * p;
}
