// The comparison of two requests: two JSON values laid out side by side,
// line against line, with what differs marked and listed by path.

import {h} from './dom.js';

// diffValues lays out a and b as two columns of JSON lines, aligned, with
// each line marked same, chg (changed), del (only in a) or add (only in b).
// Objects are matched by key, arrays by index. paths collects what differs.
export function diffValues(a, b) {
  const rows = [], paths = [];
  walk(a, b, 0, '', '', '', '');
  return {rows, paths};

  // childPath spells a path as JavaScript would: properties.items[0].sku.
  function childPath(path, key, isArray) {
    if (isArray) return path + '[' + key + ']';
    if (/^[A-Za-z_$][\w$]*$/.test(key)) return path ? path + '.' + key : key;
    return path ? path + '[' + JSON.stringify(key) + ']' : key;
  }

  function walk(x, y, depth, prefix, ca, cb, path) {
    const kx = kind(x), ky = kind(y);
    if (kx === ky && (kx === 'object' || kx === 'array') && (size(x) || size(y))) {
      const open = kx === 'array' ? '[' : '{', close = kx === 'array' ? ']' : '}';
      rows.push({k: 'same', l: line(depth, prefix + open), r: line(depth, prefix + open)});
      const keys = kx === 'array' ? indices(x, y) : unionKeys(x, y);
      const lastX = lastPresent(keys, x), lastY = lastPresent(keys, y);
      for (const key of keys) {
        const inX = has(x, key), inY = has(y, key);
        const pre = kx === 'array' ? '' : JSON.stringify(key) + ': ';
        const p = childPath(path, key, kx === 'array');
        const cx = key === lastX ? '' : ',', cy = key === lastY ? '' : ',';
        if (inX && inY) walk(x[key], y[key], depth + 1, pre, cx, cy, p);
        else if (inX) { paths.push({k: 'del', path: p}); for (const l of lines(x[key], depth + 1, pre, cx)) rows.push({k: 'del', l, r: null}); }
        else { paths.push({k: 'add', path: p}); for (const r of lines(y[key], depth + 1, pre, cy)) rows.push({k: 'add', l: null, r}); }
      }
      rows.push({k: 'same', l: line(depth, close + ca), r: line(depth, close + cb)});
      return;
    }
    const lx = lines(x, depth, prefix, ca), ly = lines(y, depth, prefix, cb);
    const same = JSON.stringify(x) === JSON.stringify(y);
    if (!same) paths.push({k: 'chg', path});
    for (let i = 0; i < Math.max(lx.length, ly.length); i++) {
      rows.push({k: same ? 'same' : 'chg', l: lx[i] || null, r: ly[i] || null});
    }
  }
  function kind(v) { return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v; }
  function size(v) { return Array.isArray(v) ? v.length : Object.keys(v).length; }
  function has(v, k) { return Array.isArray(v) ? k < v.length : Object.prototype.hasOwnProperty.call(v, k); }
  function indices(x, y) { return Array.from({length: Math.max(x.length, y.length)}, (_, i) => i); }
  function unionKeys(x, y) { return Object.keys(x).concat(Object.keys(y).filter(k => !has(x, k))); }
  function lastPresent(keys, v) { for (let i = keys.length - 1; i >= 0; i--) if (has(v, keys[i])) return keys[i]; return undefined; }
  function line(depth, text) { return {d: depth, t: text}; }
  // lines prints one value as JSON lines (the undiffed form).
  function lines(v, depth, prefix, comma) {
    const k = kind(v);
    if ((k !== 'object' && k !== 'array') || !size(v)) {
      return [line(depth, prefix + (v === undefined ? 'undefined' : JSON.stringify(v)) + comma)];
    }
    const out = [line(depth, prefix + (k === 'array' ? '[' : '{'))];
    const keys = k === 'array' ? v.map((_, i) => i) : Object.keys(v);
    keys.forEach((key, i) => {
      const pre = k === 'array' ? '' : JSON.stringify(key) + ': ';
      out.push(...lines(v[key], depth + 1, pre, i === keys.length - 1 ? '' : ','));
    });
    out.push(line(depth, (k === 'array' ? ']' : '}') + comma));
    return out;
  }
}

// diffTable renders diffValues' rows as two aligned columns.
export function diffTable(result, leftLabel, rightLabel) {
  const marks = {same: ' ', chg: '~', del: '−', add: '+'};
  const grid = h('div', {class: 'diff-grid', role: 'table', 'aria-label': 'Differences: ' + leftLabel + ' and ' + rightLabel},
    h('div', {class: 'diff-row diff-head', role: 'row'},
      h('div', {class: 'diff-cell', role: 'columnheader', text: leftLabel}),
      h('div', {class: 'diff-cell', role: 'columnheader', text: rightLabel})));
  for (const r of result.rows) {
    const cell = (side, present) => h('div', {class: 'diff-cell' + (present ? '' : ' empty'), role: 'cell'},
      h('span', {class: 'diff-mark', 'aria-hidden': 'true', text: r.k === 'same' ? ' ' : present ? marks[r.k] : ' '}),
      present ? '  '.repeat(side.d) + side.t : '');
    grid.append(h('div', {class: 'diff-row d-' + r.k, role: 'row'}, cell(r.l, r.l), cell(r.r, r.r)));
  }
  return grid;
}

// pathSummary lists what differs by path, the first 40.
export function pathSummary(paths) {
  if (!paths.length) return h('p', {class: 'muted', text: 'Identical.'});
  const words = {chg: 'changed', add: 'added', del: 'removed'};
  const shown = paths.slice(0, 40).map(p => h('li', {class: 'd-' + p.k}, h('span', {class: 'tag', text: words[p.k]}), ' ', h('code', {text: p.path || '(the whole value)'})));
  return h('ul', {class: 'paths', 'aria-label': 'What differs'}, shown, paths.length > 40 ? h('li', {class: 'muted', text: '… ' + (paths.length - 40) + ' more'}) : null);
}

