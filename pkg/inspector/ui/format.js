// Formatting shared by both apps: times, sizes, latencies, HTTP statuses,
// and JSON shown indented with colour.

import {h} from './dom.js';

export const pad = (n, w) => String(n).padStart(w || 2, '0');

// fmtTime gives local wall time with milliseconds: requests come fast.
export function fmtTime(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return iso || '';
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + '.' + pad(d.getMilliseconds(), 3);
}

// fmtStamp gives the time, and the date too when it is not today.
export function fmtStamp(iso) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return iso || '';
  const t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  if (d.toDateString() === new Date().toDateString()) return t;
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
}

export function fmtBytes(n) {
  if (n == null) return '';
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
  return (n / 1024 / 1024).toFixed(1) + ' MB';
}

export function fmtMs(ms) {
  if (ms == null || isNaN(ms)) return '';
  if (ms === 0) return '0 ms';
  if (ms < 0.01) return '<0.01 ms';
  if (ms < 10) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return ms.toFixed(0) + ' ms';
  return (ms / 1000).toFixed(2) + ' s';
}

export function statusClass(code) {
  if (!code) return 's-none';
  return 's-' + String(code)[0] + 'xx';
}

// prettyJSON renders JSON text indented, with spans for colour. It works on
// the text, not a parsed value, so numbers show exactly as sent (99.90
// stays 99.90). Returns null when text is not JSON.
export function prettyJSON(text) {
  try { JSON.parse(text); } catch (e) { return null; }
  const JSON_TOKEN = /\s*(?:("(?:[^"\\]|\\.)*")(\s*:)?|(-?\d[\d.eE+-]*)|(true|false|null)|([{}[\],]))/y;
  const frag = document.createDocumentFragment();
  let buf = '', depth = 0, m;
  const flush = () => { if (buf) { frag.append(buf); buf = ''; } };
  const span = (cls, t) => { flush(); frag.append(h('span', {class: cls, text: t})); };
  const nl = () => { buf += '\n' + '  '.repeat(depth); };
  JSON_TOKEN.lastIndex = 0;
  while (JSON_TOKEN.lastIndex < text.length && (m = JSON_TOKEN.exec(text))) {
    if (m[1] !== undefined) {
      if (m[2] !== undefined) { span('j-key', m[1]); buf += ': '; } else span('j-str', m[1]);
    } else if (m[3] !== undefined) span('j-num', m[3]);
    else if (m[4] !== undefined) span(m[4] === 'null' ? 'j-null' : 'j-bool', m[4]);
    else if (m[5] === '{' || m[5] === '[') {
      // An empty container stays on one line.
      const close = m[5] === '{' ? '}' : ']';
      const rest = /\s*(.)/y;
      rest.lastIndex = JSON_TOKEN.lastIndex;
      const next = rest.exec(text);
      if (next && next[1] === close) { buf += m[5] + close; JSON_TOKEN.lastIndex = rest.lastIndex; continue; }
      buf += m[5]; depth++; nl();
    } else if (m[5] === '}' || m[5] === ']') { depth--; nl(); buf += m[5]; }
    else if (m[5] === ',') { buf += ','; nl(); }
    else break;
  }
  flush();
  return frag;
}

// jsonBlock is a <pre> holding value (any JSON value, or text) pretty-printed.
export function jsonBlock(value, cls) {
  const pre = h('pre', {class: 'code ' + (cls || '')});
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const frag = text != null && text.length < 2e6 ? prettyJSON(text) : null;
  if (frag) pre.append(frag); else pre.textContent = text == null ? '' : text;
  return pre;
}

// hexDump shows bytes that are not UTF-8 text, 16 a line.
export function hexDump(bytes, max) {
  const lines = [];
  const n = Math.min(bytes.length, max || 65536);
  for (let i = 0; i < n; i += 16) {
    const row = bytes.subarray(i, Math.min(i + 16, n));
    const hex = Array.from(row, b => pad(b.toString(16), 2)).join(' ');
    const asc = Array.from(row, b => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(pad(i.toString(16), 8) + '  ' + hex.padEnd(48) + ' ' + asc);
  }
  if (bytes.length > n) lines.push('… ' + (bytes.length - n) + ' more bytes');
  return lines.join('\n');
}
