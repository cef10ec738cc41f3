// evfwd inspector: the page behind `evfwd listen --ui` and `evfwd serve --ui`.
// Plain DOM, no build step, nothing loaded from elsewhere (docs/INSPECTOR.md).
// Request data only ever reaches the page as text nodes and attributes:
// never innerHTML, so a webhook body cannot run script here.
'use strict';
(function () {

// ---------------------------------------------------------------- helpers

const $ = (sel, root) => (root || document).querySelector(sel);
const SVG = 'http://www.w3.org/2000/svg';

// h builds an element. props: class, text, data (dataset), on<event>
// (listeners), value/checked/disabled/hidden (properties), anything else an
// attribute. Children may be strings, nodes, arrays or falsy (skipped).
function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, kids);
  return el;
}

// svg builds an SVG element; attrs are attributes (never style).
function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG, tag);
  for (const k in attrs || {}) if (attrs[k] != null) el.setAttribute(k, attrs[k]);
  append(el, kids);
  return el;
}

function setProps(el, props) {
  for (const k in props || {}) {
    const v = props[k];
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'data') for (const d in v) el.dataset[d] = v[d];
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
}

function append(el, kids) {
  for (const k of kids) {
    if (k == null || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else el.append(k instanceof Node ? k : String(k));
  }
}

function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }

function replace(el, ...kids) { clear(el); append(el, kids); return el; }

const pad = (n, w) => String(n).padStart(w || 2, '0');

// fmtTime gives local wall time with milliseconds: requests come fast.
function fmtTime(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return iso || '';
  return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + '.' + pad(d.getMilliseconds(), 3);
}

// fmtStamp gives the time, and the date too when it is not today.
function fmtStamp(iso) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return iso || '';
  const t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  if (d.toDateString() === new Date().toDateString()) return t;
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
}

function fmtBytes(n) {
  if (n == null) return '';
  if (n < 1024) return n + ' B';
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
  return (n / 1024 / 1024).toFixed(1) + ' MB';
}

function fmtMs(ms) {
  if (ms == null || isNaN(ms)) return '';
  if (ms === 0) return '0 ms';
  if (ms < 0.01) return '<0.01 ms';
  if (ms < 10) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return ms.toFixed(0) + ' ms';
  return (ms / 1000).toFixed(2) + ' s';
}

function statusClass(code) {
  if (!code) return 's-none';
  return 's-' + String(code)[0] + 'xx';
}

function isEditable(el) {
  return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

// throttle runs fn at most once per ms, always once more after the last
// call, so a burst of live events becomes one refresh a second.
function throttle(fn, ms) {
  let timer = null, last = 0;
  return function () {
    if (timer) return;
    const wait = Math.max(0, last + ms - Date.now());
    timer = setTimeout(() => { timer = null; last = Date.now(); fn(); }, wait);
  };
}

function debounce(fn, ms) {
  let timer = null;
  return function (...args) { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// ---------------------------------------------------------------- toasts

// toast shows a message in #toast. Errors stay until dismissed or
// replaced by newer ones: an API error is never silently dropped.
function toast(msg, kind) {
  const box = $('#toast');
  const item = h('div', {class: 'toast-item ' + (kind || 'info'), role: kind === 'error' ? 'alert' : null},
    h('span', {class: 'toast-text', text: msg}),
    h('button', {type: 'button', class: 'icon', 'aria-label': 'Dismiss', text: '×', onclick: () => item.remove()}));
  box.append(item);
  while (box.children.length > 4) box.firstChild.remove();
  if (kind !== 'error') setTimeout(() => item.remove(), 4000);
  else setTimeout(() => item.remove(), 30000);
}

function report(err) {
  console.warn(err);
  toast(err && err.message ? err.message : String(err), 'error');
}

// guarded wraps an async handler so that its failure reaches the user.
const guarded = fn => (...args) => Promise.resolve().then(() => fn(...args)).catch(report);

// ---------------------------------------------------------------- API

let session = null;
let onUnauthorized = null;

// The serve inspector's session: an id that POST /api/session answers,
// held by this tab (sessionStorage is per origin, port included, and per
// tab) and sent as a header with every call. No cookie: nothing that the
// browser sends by itself to other ports of this host opens the inspector.
const SESSION_KEY = 'evfwd-session';
const SESSION_HEADER = 'X-Evfwd-Session';
let memorySession = ''; // when the browser refuses sessionStorage

function sessionID() {
  try { return sessionStorage.getItem(SESSION_KEY) || ''; } catch (e) { return ''; }
}

function keepSession(id) {
  try {
    if (id) sessionStorage.setItem(SESSION_KEY, id);
    else sessionStorage.removeItem(SESSION_KEY);
  } catch (e) { /* storage refused: the session lives until the page is left */ }
  memorySession = id || '';
}

// authHeaders are the headers that carry the session, when there is one.
function authHeaders(headers) {
  const out = Object.assign({}, headers || {});
  const id = sessionID() || memorySession;
  if (id) out[SESSION_HEADER] = id;
  if (listenToken) out.Authorization = 'Bearer ' + listenToken;
  return out;
}

// listenToken is the token a listen inspector needs (listen --ui-token, or
// the one listen made up and printed, beyond loopback): from the address's
// #token=, which takeListenToken then removes from it, or typed in; kept
// by this tab like serve's session.
const LISTEN_TOKEN_KEY = 'evfwd-listen-token';
let listenToken = '';
try { listenToken = sessionStorage.getItem(LISTEN_TOKEN_KEY) || ''; } catch (e) { /* storage refused */ }

function keepListenToken(token) {
  listenToken = token || '';
  try {
    if (token) sessionStorage.setItem(LISTEN_TOKEN_KEY, token);
    else sessionStorage.removeItem(LISTEN_TOKEN_KEY);
  } catch (e) { /* storage refused: it lives until the page is left */ }
}

function takeListenToken() {
  const m = /^#token=([A-Za-z0-9._~-]+)$/.exec(location.hash);
  if (!m) return;
  keepListenToken(decodeURIComponent(m[1]));
  history.replaceState(null, '', location.pathname + location.search);
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// api calls this origin's API. as: 'json' (default), 'text' or 'bytes'.
// A 4xx/5xx answer becomes an ApiError carrying the server's "error".
async function api(path, opts) {
  opts = opts || {};
  let res;
  try {
    res = await fetch(path, {method: opts.method || 'GET', headers: authHeaders(opts.headers), body: opts.body,
      credentials: 'omit', cache: 'no-store'});
  } catch (e) {
    throw new ApiError(0, 'cannot reach evfwd (' + e.message + '): is it still running?');
  }
  if (!res.ok) {
    let msg = res.status + ' ' + res.statusText;
    try { const j = await res.json(); if (j && j.error) msg = j.error; } catch (e) { /* not JSON: keep the status */ }
    if (res.status === 401 && onUnauthorized) onUnauthorized();
    throw new ApiError(res.status, path.split('?')[0] + ': ' + msg);
  }
  if (opts.as === 'text') return res.text();
  if (opts.as === 'bytes') return new Uint8Array(await res.arrayBuffer());
  return res.json();
}

// post sends a state-changing call: JSON body and the session's CSRF token.
// A restarted evfwd has a new token: on a 403 the page asks for it and
// tries once more.
async function post(path, body, noCSRF) {
  const send = () => {
    const headers = {'Content-Type': 'application/json'};
    if (!noCSRF) headers['X-CSRF-Token'] = (session && session.csrf) || '';
    return api(path, {method: 'POST', headers, body: JSON.stringify(body)});
  };
  try {
    return await send();
  } catch (e) {
    if (noCSRF || e.status !== 403) throw e;
    const fresh = await api('/api/session');
    if (!fresh.csrf || fresh.csrf === session.csrf) throw e;
    session.csrf = fresh.csrf;
    return send();
  }
}

// ---------------------------------------------------------------- live events

// StreamSource reads a server-sent event stream with fetch, so that the
// request carries authHeaders (EventSource cannot send headers). It offers
// what connectEvents uses of EventSource: onopen, onerror, readyState,
// addEventListener and close. A dropped stream or an HTTP error closes it
// (connectEvents then reconnects); a 401 signs the page out.
class StreamSource {
  constructor(url) {
    this.readyState = 0; // CONNECTING
    this.onopen = null;
    this.onerror = null;
    this.listeners = {};
    this.ctl = new AbortController();
    this.run(url).catch(() => this.fail());
  }
  addEventListener(name, fn) { (this.listeners[name] = this.listeners[name] || []).push(fn); }
  close() { this.readyState = 2; this.ctl.abort(); }
  fail() {
    if (this.readyState === 2) return;
    this.readyState = 2; // CLOSED
    if (this.onerror) this.onerror(new Event('error'));
  }
  async run(url) {
    const res = await fetch(url, {headers: authHeaders({Accept: 'text/event-stream'}), credentials: 'omit',
      cache: 'no-store', signal: this.ctl.signal});
    if (!res.ok || !res.body) {
      if (res.status === 401 && onUnauthorized) onUnauthorized();
      this.fail();
      return;
    }
    this.readyState = 1; // OPEN
    if (this.onopen) this.onopen(new Event('open'));
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '', name = '', data = [];
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length) for (const fn of this.listeners[name || 'message'] || []) fn({type: name || 'message', data: data.join('\n')});
          name = ''; data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') name = v;
        else if (field === 'data') data.push(v);
      }
    }
    this.fail();
  }
}

// connectEvents subscribes to /api/events and keeps #live honest. onOpen
// runs on every (re)connection, so that the page reloads what it missed.
// EventSource retries by itself after a dropped stream, but gives up after
// an HTTP error; then we retry with a growing delay.
function connectEvents(names, onEvent, onOpen, Source) {
  Source = Source || EventSource;
  const live = $('#live');
  let es = null, delay = 1000, stopped = false;
  function state(s, text, title) {
    live.dataset.state = s;
    live.textContent = text;
    live.title = title || '';
  }
  function open() {
    if (stopped) return;
    es = new Source('/api/events');
    es.onopen = () => {
      delay = 1000;
      state('open', 'live', 'Connected: new events appear as they happen');
      onOpen();
    };
    es.onerror = () => {
      state('reconnecting', 'reconnecting…', 'The event stream dropped; retrying');
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        setTimeout(open, delay);
        delay = Math.min(delay * 2, 15000);
      }
    };
    for (const name of names) {
      es.addEventListener(name, ev => {
        let data;
        try { data = JSON.parse(ev.data); } catch (e) { report(new Error('unreadable ' + name + ' event: ' + e.message)); return; }
        onEvent(name, data);
      });
    }
  }
  open();
  return {stop() { stopped = true; if (es) es.close(); state('closed', 'offline'); }};
}

// ---------------------------------------------------------------- JSON view

const JSON_TOKEN = /\s*(?:("(?:[^"\\]|\\.)*")(\s*:)?|(-?\d[\d.eE+-]*)|(true|false|null)|([{}[\],]))/y;

// prettyJSON renders JSON text indented, with spans for colour. It works on
// the text, not a parsed value, so numbers show exactly as sent (99.90
// stays 99.90). Returns null when text is not JSON.
function prettyJSON(text) {
  try { JSON.parse(text); } catch (e) { return null; }
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
function jsonBlock(value, cls) {
  const pre = h('pre', {class: 'code ' + (cls || '')});
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const frag = text != null && text.length < 2e6 ? prettyJSON(text) : null;
  if (frag) pre.append(frag); else pre.textContent = text == null ? '' : text;
  return pre;
}

// hexDump shows bytes that are not UTF-8 text, 16 a line.
function hexDump(bytes, max) {
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

// ---------------------------------------------------------------- diff

// diffValues lays out a and b as two columns of JSON lines, aligned, with
// each line marked same, chg (changed), del (only in a) or add (only in b).
// Objects are matched by key, arrays by index. paths collects what differs.
function diffValues(a, b) {
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
function diffTable(result, leftLabel, rightLabel) {
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

// ---------------------------------------------------------------- lists

// keyList makes a table body navigable: arrows or j/k move between rows
// (one row in the tab order at a time), Home/End jump, Enter opens.
function keyList(tbody, open, onMove) {
  tbody.addEventListener('keydown', ev => {
    const row = ev.target.closest('tr[data-id]');
    if (!row || ev.target !== row || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    let next = null;
    switch (ev.key) {
      case 'ArrowDown': case 'j': next = nextRow(row, 1); break;
      case 'ArrowUp': case 'k': next = nextRow(row, -1); break;
      case 'Home': next = tbody.querySelector('tr[data-id]'); break;
      case 'End': next = lastRow(tbody); break;
      case 'PageDown': next = nextRow(row, 15); break;
      case 'PageUp': next = nextRow(row, -15); break;
      case 'Enter': open(row.dataset.id); ev.preventDefault(); return;
      default: return;
    }
    ev.preventDefault();
    if (next) { focusRow(tbody, next); if (onMove) onMove(next.dataset.id); }
  });
  tbody.addEventListener('focusin', ev => {
    const row = ev.target.closest('tr[data-id]');
    if (row) setRoving(tbody, row);
  });
}

function nextRow(row, n) {
  let r = row, last = row;
  const step = n > 0 ? 'nextElementSibling' : 'previousElementSibling';
  for (let i = 0; i < Math.abs(n) && (r = r[step]); i++) if (r.dataset.id) last = r;
  return last === row ? null : last;
}

function lastRow(tbody) { const rows = tbody.querySelectorAll('tr[data-id]'); return rows[rows.length - 1]; }

function setRoving(tbody, row) {
  for (const r of tbody.querySelectorAll('tr[tabindex="0"]')) if (r !== row) r.tabIndex = -1;
  if (row) row.tabIndex = 0;
}

function focusRow(tbody, row) {
  setRoving(tbody, row);
  row.focus();
  row.scrollIntoView({block: 'nearest'});
}

// ensureRoving keeps exactly one row tabbable after a re-render.
function ensureRoving(tbody, id) {
  const row = (id != null && tbody.querySelector('tr[data-id="' + id + '"]')) || tbody.querySelector('tr[data-id]');
  setRoving(tbody, row);
}

function field(label, value, cls) {
  if (value == null || value === '') return null;
  return [h('dt', {text: label}), h('dd', {class: cls || null}, value)];
}

function section(title, open, ...kids) {
  return h('details', {class: 'sect', open}, h('summary', {text: title}), kids);
}

function kvTable(obj, label) {
  const keys = Object.keys(obj || {}).sort((a, b) => a.localeCompare(b));
  if (!keys.length) return h('p', {class: 'muted', text: 'none'});
  return h('table', {class: 'kv', 'aria-label': label},
    h('tbody', null, keys.map(k => h('tr', null, h('th', {scope: 'row', text: k}), h('td', {text: obj[k]})))));
}

function select(id, label, options, value, onchange) {
  const sel = h('select', {id, 'aria-label': label, onchange});
  fillSelect(sel, options, value);
  return h('label', {class: 'ctl'}, h('span', {class: 'ctl-label', text: label}), sel);
}

// fillSelect sets a select's options ([value, text] pairs), keeping value.
function fillSelect(sel, options, value) {
  replace(sel, options.map(([v, t]) => h('option', {value: v, text: t})));
  sel.value = options.some(o => o[0] === value) ? value : '';
}

function copyText(text, fallbackHost, what) {
  const fallback = () => {
    const ta = h('textarea', {class: 'copy-box', readonly: true, rows: 8, 'aria-label': what, value: text});
    replace(fallbackHost,
      h('p', {class: 'muted', text: 'The clipboard is not available here: press Ctrl+C (⌘C) to copy.'}), ta,
      h('button', {type: 'button', text: 'Close', onclick: () => clear(fallbackHost)}));
    ta.focus();
    ta.select();
  };
  if (!navigator.clipboard || !window.isSecureContext) { fallback(); return; }
  navigator.clipboard.writeText(text).then(() => toast(what + ' copied to the clipboard'), fallback);
}

// keysHint lists the keyboard shortcuts, for those who look for them.
function keysHint(pairs) {
  return h('span', {class: 'keys muted', 'aria-label': 'Keyboard: ' + pairs.map(p => p[0] + ' ' + p[1]).join(', ')},
    pairs.map(([k, what]) => h('span', {'aria-hidden': 'true'}, k.split(' ').map(x => h('kbd', {text: x})), ' ' + what)));
}

function summaryItem(label, value, title) {
  if (value == null || value === '') return null;
  return h('span', {class: 'kv-item', title: title || null}, h('span', {class: 'k', text: label}), ' ', h('span', {class: 'v', text: value}));
}

// ================================================================ LISTEN

const MAX_REQUESTS = 1000;

const L = {
  all: [],            // requests, newest first
  byId: new Map(),
  hay: new Map(),     // id → lower-case JSON, for the text filter
  types: new Set(),
  filter: {type: '', verdict: '', text: ''},
  rows: new Map(),    // id → <tr> currently rendered
  open: null,         // id shown in #detail
  compare: [],        // ids ticked for comparison, oldest tick first
  pickFor: null,      // id waiting for a partner from "Compare with…"
  replayUrl: null,    // what the user typed, kept across requests
  queue: [],          // arrivals waiting for the next frame
  flushing: false,
  fresh: [],          // arrivals on this event stream while a list load is pending
  loading: 0,
  detailSeq: 0,
};

function verdictOf(r) { return (r.signature && r.signature.verdict) || 'unchecked'; }

function verdictText(sig) {
  const v = (sig && sig.verdict) || 'unchecked';
  const reason = sig && sig.reason;
  if (v === 'valid') return '✓ valid' + (reason && reason !== 'ok' ? ' (' + reason + ')' : '');
  if (v === 'invalid') return '✗ ' + (reason || 'invalid');
  return '– ' + (reason && reason !== 'unchecked' ? 'unchecked (' + reason + ')' : 'unchecked');
}

function verdictTitle(sig) {
  if (!sig) return '';
  return [sig.scheme, sig.message].filter(Boolean).join(': ');
}

function startListen() {
  document.body.classList.add('mode-listen');
  $('#mode-name').textContent = 'listen inspector';
  if (session.auth === false) { showListenLogin(listenToken ? 'That token is not this listen\'s.' : ''); return; }
  onUnauthorized = () => { if (L.events) L.events.stop(); showListenLogin('listen wants its token again (was it restarted with another?).'); };
  const s = session.listen || {};
  replace($('#summary'),
    summaryItem('listening', s.url),
    summaryItem('forward', s.forwardTo),
    summaryItem('scheme', s.scheme),
    summaryItem('secrets', s.secrets != null ? String(s.secrets) : null, s.secrets ? '' : 'No secret: signatures are not checked'),
    summaryItem('tolerance', s.tolerance),
    summaryItem('record', s.record || 'memory only', s.record ? 'The record file is the source of truth' : 'Kept in memory while listen runs'),
    summaryItem('version', session.version));
  buildListenLayout();
  loadRequests().catch(report);
  if (L.events) L.events.stop();
  // With a token, the stream is read by fetch, which sends it.
  L.events = connectEvents(['request'], (name, r) => { if (L.loading) L.fresh.push(r); addRequest(r); }, async () => {
    // A new stream: what arrived on the old one is in the list it reloads.
    L.fresh = [];
    try {
      const s = await api('/api/session');
      // A restarted listen numbers its requests afresh (and has a new CSRF
      // token): what the page holds by id would be another request now.
      if (s.started !== session.started) { session = s; forgetRequests(); }
    } catch (e) { report(e); }
    loadRequests().catch(report);
  }, listenToken ? StreamSource : undefined);
}

// showListenLogin asks for the token of a listen inspector that needs one.
function showListenLogin(note) {
  const live = $('#live');
  live.dataset.state = 'closed';
  live.textContent = 'signed out';
  clear($('#summary'));
  const token = h('input', {id: 'listen-token', type: 'password', autocomplete: 'off', required: true, 'aria-describedby': 'login-help'});
  const err = h('p', {id: 'login-error', class: 'error', role: 'alert', text: note || ''});
  const form = h('form', {class: 'login', 'aria-labelledby': 'login-title'},
    h('h1', {id: 'login-title', text: 'Inspector token'}),
    h('p', {id: 'login-help', class: 'muted', text: 'This listen inspector needs its token: the one given with --ui-token, or the one listen printed after #token= in the inspector\'s address. It stays in this tab only.'}),
    h('label', {class: 'ctl-block'}, h('span', {text: 'Token'}), token),
    h('button', {type: 'submit', id: 'login', class: 'primary', text: 'Open'}),
    err);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    keepListenToken(token.value.trim());
    guarded(async () => { session = await api('/api/session'); startListen(); })();
  });
  replace($('#app'), form);
  token.focus();
}

// downloadWithToken saves what an <a download> links to, fetched with the
// token (a link cannot send it); without one the link does it.
function downloadWithToken(ev) {
  if (!listenToken) return;
  ev.preventDefault();
  guarded(saveLink)(ev.currentTarget);
}

async function saveLink(a) {
  const bytes = await api(a.getAttribute('href'), {as: 'bytes'});
  const url = URL.createObjectURL(new Blob([bytes]));
  const tmp = h('a', {href: url, download: a.getAttribute('download'), hidden: true});
  document.body.append(tmp);
  tmp.click();
  tmp.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function buildListenLayout() {
  const app = clear($('#app'));
  const onFilter = () => {
    L.filter.type = $('#filter-type').value;
    L.filter.verdict = $('#filter-verdict').value;
    L.filter.text = $('#filter-text').value.trim().toLowerCase();
    renderList();
  };
  const toolbar = h('div', {class: 'toolbar', role: 'search'},
    select('filter-type', 'Type', [['', 'All types']], '', onFilter),
    select('filter-verdict', 'Verdict', [['', 'All verdicts'], ['valid', '✓ valid'], ['invalid', '✗ invalid'], ['unchecked', '– unchecked']], '', onFilter),
    h('input', {id: 'filter-text', type: 'search', placeholder: 'Filter text  ( / )', 'aria-label': 'Filter by text in the request', autocomplete: 'off', spellcheck: 'false', oninput: debounce(onFilter, 120)}),
    h('span', {id: 'count', class: 'muted', 'aria-live': 'polite'}),
    h('span', {class: 'spacer'}),
    h('span', {id: 'pick-hint', class: 'hint', hidden: true}),
    keysHint([['j k ↑ ↓', 'move'], ['Enter', 'open'], ['Space', 'tick'], ['/', 'filter'], ['Esc', 'close']]),
    h('button', {type: 'button', id: 'compare', disabled: true, onclick: () => compareTicked(), title: 'Tick two requests, then compare their bodies and headers', text: 'Compare'}));
  const thead = h('thead', null, h('tr', null,
    h('th', {class: 'c-cmp', scope: 'col'}, h('span', {class: 'sr-only', text: 'Compare'})),
    ['Time', 'Method', 'Path', 'Type', 'Event', 'User', 'Signature', 'Status', 'Size', 'Latency'].map(t =>
      h('th', {scope: 'col', class: 'c-' + t.toLowerCase(), text: t}))));
  const tbody = h('tbody');
  const table = h('table', {id: 'requests', class: 'grid', 'aria-label': 'Requests, newest first'}, thead, tbody);
  const empty = h('div', {id: 'empty', class: 'empty'});
  const detail = h('aside', {id: 'detail', class: 'panel', 'aria-label': 'Request detail', hidden: true, tabindex: '-1'});
  const diff = h('section', {id: 'diff', class: 'overlay', role: 'dialog', 'aria-label': 'Compare two requests', hidden: true, tabindex: '-1'});
  app.append(toolbar, h('div', {class: 'split'}, h('div', {class: 'list', id: 'list'}, table, empty), detail), diff);

  tbody.addEventListener('click', ev => {
    const row = ev.target.closest('tr[data-id]');
    if (!row || ev.target.closest('input.compare')) return;
    openOrPick(Number(row.dataset.id));
  });
  tbody.addEventListener('change', ev => {
    if (ev.target.matches('input.compare')) tickCompare(Number(ev.target.closest('tr').dataset.id), ev.target.checked);
  });
  // Space or x ticks the focused row for comparison.
  tbody.addEventListener('keydown', ev => {
    const row = ev.target.closest('tr[data-id]');
    if (row && ev.target === row && (ev.key === ' ' || ev.key === 'x')) {
      ev.preventDefault();
      const box = $('input.compare', row);
      box.checked = !box.checked;
      tickCompare(Number(row.dataset.id), box.checked);
    }
  });
  const follow = debounce(id => { if (L.open != null) openDetail(Number(id)); }, 150);
  keyList(tbody, id => openOrPick(Number(id)), follow);
  document.addEventListener('keydown', listenKeys);
}

function listenKeys(ev) {
  if (ev.key === 'Escape') {
    if (!$('#diff').hidden) closeDiff();
    else if (L.pickFor != null) setPick(null);
    else if (!$('#detail').hidden) closeDetail();
    else if (ev.target.id === 'filter-text' && ev.target.value) { ev.target.value = ''; ev.target.dispatchEvent(new Event('input')); }
    else return;
    ev.preventDefault();
    return;
  }
  if (isEditable(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === '/') { ev.preventDefault(); $('#filter-text').focus(); $('#filter-text').select(); return; }
  // j/k from anywhere outside the list land on it.
  if ((ev.key === 'j' || ev.key === 'k') && !ev.target.closest('#requests') && $('#diff').hidden) {
    const tbody = $('#requests tbody');
    const row = tbody.querySelector('tr[tabindex="0"]') || tbody.querySelector('tr[data-id]');
    if (row) { ev.preventDefault(); focusRow(tbody, row); }
  }
}

async function loadRequests() {
  L.loading++;
  let data;
  try { data = await api('/api/requests'); } finally { L.loading--; }
  const list = data.requests || [];
  const maxId = list.reduce((m, r) => Math.max(m, r.id), 0);
  // Keep arrivals this stream delivered after the list was taken (not
  // older ones: a restarted listen numbers its requests afresh).
  const newer = L.fresh.filter(r => r.id > maxId);
  L.fresh = [];
  L.all = [];
  L.byId.clear();
  L.hay.clear();
  for (const r of newer.concat(list)) index(r);
  L.all.sort((a, b) => b.id - a.id);
  trimRequests();
  refreshTypes();
  renderList();
  if (L.open != null && !L.byId.has(L.open)) closeDetail();
}

function index(r) {
  if (L.byId.has(r.id)) return false;
  L.all.push(r);
  L.byId.set(r.id, r);
  L.hay.set(r.id, JSON.stringify(r).toLowerCase());
  return true;
}

// trimRequests drops the oldest beyond the cap, returning their ids.
function trimRequests() {
  const dropped = [];
  while (L.all.length > MAX_REQUESTS) {
    const r = L.all.pop();
    L.byId.delete(r.id);
    L.hay.delete(r.id);
    dropped.push(r.id);
  }
  if (dropped.length) L.compare = L.compare.filter(id => !dropped.includes(id));
  return dropped;
}

function refreshTypes() {
  let changed = false;
  for (const r of L.all) {
    const t = r.type || 'none';
    if (!L.types.has(t)) { L.types.add(t); changed = true; }
  }
  if (!changed && $('#filter-type').options.length > 1) return;
  const named = [...L.types].filter(t => t !== 'none').sort();
  const opts = [['', 'All types']].concat(named.map(t => [t, t]));
  if (L.types.has('none')) opts.push(['none', '(no type)']);
  fillSelect($('#filter-type'), opts, L.filter.type);
}

function matches(r) {
  const f = L.filter;
  if (f.type && (r.type || 'none') !== f.type) return false;
  if (f.verdict && verdictOf(r) !== f.verdict) return false;
  if (f.text && !L.hay.get(r.id).includes(f.text)) return false;
  return true;
}

function renderList() {
  const tbody = $('#requests tbody');
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#requests tr[data-id]');
  const keep = focused ? focused.dataset.id : (tbody.querySelector('tr[tabindex="0"]') || {dataset: {}}).dataset.id;
  L.rows.clear();
  const frag = document.createDocumentFragment();
  for (const r of L.all) if (matches(r)) frag.append(requestRow(r));
  replace(tbody, frag);
  ensureRoving(tbody, keep);
  if (focused) { const row = tbody.querySelector('tr[data-id="' + keep + '"]'); if (row) row.focus(); }
  updateCount();
}

function updateCount() {
  const shown = L.rows.size, total = L.all.length;
  $('#count').textContent = shown === total ? total + (total === 1 ? ' request' : ' requests') : shown + ' of ' + total + ' requests';
  const empty = $('#empty');
  empty.hidden = shown > 0;
  if (!shown) {
    const url = (session.listen && session.listen.url) || 'http://127.0.0.1:8788';
    replace(empty, total
      ? h('p', {text: 'No request matches the filters.'})
      : [h('p', {text: 'Waiting for requests to ' + url + ' …'}),
        h('p', {class: 'muted'}, 'Try ', h('code', {text: 'evfwd trigger track --url ' + url + (session.listen && session.listen.secrets ? ' --secret-file hook.secret' : '')}))]);
  }
  $('#compare').disabled = L.compare.length !== 2;
  $('#compare').textContent = 'Compare' + (L.compare.length ? ' (' + L.compare.length + '/2)' : '');
}

function requestRow(r) {
  const v = verdictOf(r);
  const ticked = L.compare.includes(r.id);
  const flags = [];
  if (r.duplicate) flags.push(h('span', {class: 'flag', title: 'Same messageId as an earlier request', text: 'dup'}));
  if (r.replay) flags.push(h('span', {class: 'flag warn', title: 'A signed message seen before', text: 'replay'}));
  if (r.forward) flags.push(h('span', {class: 'flag', title: 'Forwarded to ' + r.forward.url, text: '→'}));
  const path = r.path + (r.query ? '?' + r.query : '');
  const tr = h('tr', {tabindex: '-1', class: L.open === r.id ? 'open' : null, 'aria-current': L.open === r.id ? 'true' : null,
    data: {id: r.id, verdict: v, type: r.type || 'none'}},
    h('td', {class: 'c-cmp'}, h('input', {type: 'checkbox', class: 'compare', tabindex: '-1', checked: ticked, 'aria-label': 'Compare request ' + r.id})),
    h('td', {class: 'c-time', title: r.receivedAt, text: fmtTime(r.receivedAt)}),
    h('td', {class: 'c-method', text: r.method}),
    h('td', {class: 'c-path', title: path}, h('span', {class: 'path', text: path}), flags),
    h('td', {class: 'c-type', text: r.type || ''}),
    h('td', {class: 'c-event', title: r.event || '', text: r.event || ''}),
    h('td', {class: 'c-user', title: r.userId || '', text: r.userId || ''}),
    h('td', {class: 'c-signature verdict v-' + v, title: verdictTitle(r.signature), text: verdictText(r.signature)}),
    h('td', {class: 'c-status ' + statusClass(r.status), title: r.refused ? 'refused: ' + r.refused : null, text: r.status || '–'}),
    h('td', {class: 'c-size num', text: fmtBytes(r.size) + (r.bodyOmitted ? '*' : '')}),
    h('td', {class: 'c-latency num', text: fmtMs(r.latencyMs)}));
  L.rows.set(r.id, tr);
  return tr;
}

// addRequest takes a request from the stream. Arrivals are put on the
// page once a frame, together: a burst of hundreds a second then costs one
// layout a frame, not one each.
function addRequest(r) {
  if (L.byId.has(r.id)) return;
  L.queue.push(r);
  if (L.queue.length > MAX_REQUESTS) L.queue.shift();
  if (!L.flushing) { L.flushing = true; requestAnimationFrame(flushArrivals); }
}

function flushArrivals() {
  L.flushing = false;
  const added = L.queue.filter(index);
  L.queue = [];
  if (!added.length) return;
  L.all.sort((a, b) => b.id - a.id);
  for (const id of trimRequests()) { const row = L.rows.get(id); if (row) { row.remove(); L.rows.delete(id); } }
  if (added.some(r => !L.types.has(r.type || 'none'))) refreshTypes();
  const shown = added.filter(r => L.byId.has(r.id) && matches(r)).sort((a, b) => b.id - a.id);
  const tbody = $('#requests tbody'), list = $('#list');
  const top = list.scrollTop;
  const first = tbody.querySelector('tr[data-id]');
  const firstId = first ? Number(first.dataset.id) : -1;
  const frag = document.createDocumentFragment(), prepended = [];
  for (const r of shown) {
    const row = requestRow(r);
    row.classList.add('new');
    if (r.id > firstId) { frag.append(row); prepended.push(row); continue; }
    // Rare: an id older than the newest shown goes to its place.
    let before = null;
    for (const tr of tbody.children) if (Number(tr.dataset.id) < r.id) { before = tr; break; }
    tbody.insertBefore(row, before);
  }
  tbody.prepend(frag);
  // Someone reading further down keeps their place.
  if (top > 0) list.scrollTop = top + prepended.reduce((n, row) => n + row.offsetHeight, 0);
  if (!tbody.querySelector('tr[tabindex="0"]')) ensureRoving(tbody, null);
  updateCount();
}

function openOrPick(id) {
  if (L.pickFor != null && L.pickFor !== id) {
    const a = L.pickFor;
    setPick(null);
    openDiff(a, id).catch(report);
    return;
  }
  openDetail(id);
}

function setPick(id) {
  L.pickFor = id;
  const hint = $('#pick-hint');
  hint.hidden = id == null;
  hint.textContent = id == null ? '' : 'Choose a request to compare with #' + id + ' (Esc cancels)';
  document.body.classList.toggle('picking', id != null);
}

function tickCompare(id, on) {
  L.compare = L.compare.filter(x => x !== id);
  if (on) L.compare.push(id);
  // Two at most: a third tick replaces the oldest.
  while (L.compare.length > 2) {
    const old = L.compare.shift();
    const row = L.rows.get(old);
    if (row) $('input.compare', row).checked = false;
  }
  updateCount();
}

function compareTicked() {
  if (L.compare.length !== 2) return;
  const [a, b] = L.compare.slice().sort((x, y) => x - y);
  openDiff(a, b).catch(report);
}

function markOpen(id) {
  for (const row of $('#requests tbody').querySelectorAll('tr.open')) { row.classList.remove('open'); row.removeAttribute('aria-current'); }
  const row = L.rows.get(id);
  if (row) { row.classList.add('open'); row.setAttribute('aria-current', 'true'); }
}

// forgetRequests drops what the page holds by request id.
function forgetRequests() {
  if (L.open != null) closeDetail();
  closeDiff();
  setPick(null);
  L.compare = [];
  L.body = null;
  L.all = [];
  L.byId.clear();
  L.hay.clear();
  updateCount();
}

function closeDetail() {
  const id = L.open;
  L.open = null;
  markOpen(null);
  $('#detail').hidden = true;
  document.body.classList.remove('detail-open');
  const row = L.rows.get(id);
  if (row) focusRow($('#requests tbody'), row);
}

async function openDetail(id) {
  const seq = ++L.detailSeq;
  L.open = id;
  markOpen(id);
  const panel = $('#detail');
  panel.hidden = false;
  document.body.classList.add('detail-open');
  const known = L.byId.get(id);
  replace(panel, detailHeader(id, known), h('p', {class: 'muted pad', text: 'Loading…'}));
  let data;
  try {
    data = await api('/api/requests/' + id);
  } catch (e) {
    if (seq === L.detailSeq) replace(panel, detailHeader(id, known), h('p', {class: 'error pad', text: e.message}));
    throw e;
  }
  if (seq !== L.detailSeq) return;
  renderDetail(panel, data.request, data.check);
  loadBody(id, seq).catch(report);
}

function detailHeader(id, r) {
  return h('div', {class: 'panel-head'},
    h('h2', null, r ? r.method + ' ' + r.path + (r.query ? '?' + r.query : '') : 'Request', ' ', h('span', {class: 'muted', text: '#' + id})),
    h('button', {type: 'button', class: 'icon', 'aria-label': 'Close detail (Esc)', title: 'Close (Esc)', text: '×', onclick: closeDetail}));
}

function renderDetail(panel, r, check) {
  const id = r.id;
  const sig = r.signature || {};
  const copyHost = h('div', {class: 'copy-host'});
  const actions = h('div', {class: 'actions'},
    h('button', {type: 'button', id: 'copy-curl', title: 'A curl command that sends this request again', text: 'Copy as curl',
      onclick: guarded(async () => copyText(await api('/api/requests/' + id + '/curl', {as: 'text'}), copyHost, 'curl command'))}),
    h('a', {id: 'download-request', class: 'btn', href: '/api/requests/' + id + '/request', download: 'request-' + id + '.http', onclick: downloadWithToken,
      title: 'The request as an HTTP message, for evfwd verify --request FILE', text: 'Download for verify --request'}),
    h('button', {type: 'button', class: 'compare-with', title: 'Then choose the other request in the list', text: 'Compare with…',
      onclick: () => { setPick(id); const row = L.rows.get(id); if (row) focusRow($('#requests tbody'), row); }}),
    h('button', {type: 'button', title: 'Jump to the replay form', text: 'Replay…',
      onclick: () => { const s = $('#replay-sect'); s.open = true; $('#replay-url').focus(); }}));

  const overview = h('dl', {class: 'fields'},
    field('Received', fmtStamp(r.receivedAt) + '.' + pad(new Date(r.receivedAt).getMilliseconds(), 3), 'mono'),
    field('Status', h('span', {class: statusClass(r.status), text: String(r.status || '–') + (r.refused ? ' (refused: ' + r.refused + ')' : '')})),
    field('Latency', fmtMs(r.latencyMs)),
    field('Size', r.size + ' bytes' + (r.bodyOmitted ? ' (body omitted from the list)' : '')),
    field('Type', r.type), field('Event', r.event), field('User', r.userId), field('Message', r.messageId, 'mono'),
    field('Signature', h('span', {class: 'verdict v-' + verdictOf(r), text: verdictText(sig) + (sig.scheme ? ' · ' + sig.scheme : '')})),
    field('', sig.message, 'muted'));

  const steps = ((check && check.steps) || []).map(s => {
    const ok = s.ok === true ? 'true' : s.ok === false ? 'false' : 'null';
    const icon = {true: '✓', false: '✗', null: '–'}[ok];
    return h('li', {data: {ok}, class: 'step ok-' + ok},
      h('span', {class: 'step-icon', 'aria-hidden': 'true', text: icon}),
      h('span', {class: 'sr-only', text: {true: 'passed: ', false: 'failed: ', null: 'not applied: '}[ok]}),
      h('span', {class: 'step-name', text: s.step}),
      h('span', {class: 'step-text', text: s.text}));
  });
  const checkSect = section('Signature check', true,
    check ? h('p', {class: 'verdict-line'}, h('span', {class: 'verdict v-' + (check.verdict || 'unchecked'), text: verdictText(check)}),
      check.scheme ? ' under ' + check.scheme : '') : null,
    h('ol', {id: 'check-steps', class: 'steps'}, steps),
    steps.length ? null : h('p', {class: 'muted', text: 'No check was recorded.'}));

  const findings = [];
  const shape = r.shape || {};
  findings.push(h('li', {class: shape.ok ? 'good' : 'bad'}, shape.ok ? '✓ the body has the shape of a webhook message' : '✗ shape: ' + (shape.reason || 'not a webhook message')));
  findings.push(h('li', {class: r.duplicate ? 'bad' : 'good', text: r.duplicate ? '⚠ duplicate: an earlier request carried messageId ' + (r.messageId || '') : '✓ not a duplicate messageId'}));
  findings.push(h('li', {class: r.replay ? 'bad' : 'good', text: r.replay ? '⚠ replay: this signed message came before' : '✓ not a replay'}));
  if (r.refused) findings.push(h('li', {class: 'bad', text: '✗ refused: ' + r.refused}));
  const shapeSect = section('Shape and flags', true, h('ul', {class: 'findings'}, findings));

  const fwd = r.forward;
  const fwdSect = fwd ? section('Forwarded', true, h('dl', {class: 'fields'},
    field('URL', fwd.url, 'mono'),
    field('Status', h('span', {class: statusClass(fwd.status), text: String(fwd.status || '–')})),
    field('Latency', fmtMs(fwd.latencyMs)),
    field('Error', fwd.error, 'error')),
    fwd.body != null ? jsonBlock(fwd.body) : null) : null;

  const bodyPre = h('pre', {id: 'body', class: 'code', tabindex: '0', 'aria-label': 'Body'}, h('span', {class: 'muted', text: 'Loading the body…'}));
  const bodySect = section('Body', true,
    h('div', {class: 'sect-tools'},
      h('button', {type: 'button', id: 'show-raw', 'aria-pressed': 'false', title: 'Toggle between pretty-printed and the exact bytes', text: 'Raw bytes',
        onclick: ev => toggleRaw(ev.currentTarget)}),
      h('span', {id: 'body-note', class: 'muted'})),
    bodyPre);

  const headersSect = section('Headers (' + Object.keys(r.headers || {}).length + ')', true, headersTable(r));

  panel.dataset.id = id;
  replace(panel, detailHeader(id, r), actions, copyHost,
    h('div', {class: 'panel-body'}, overview, checkSect, bodySect, headersSect, shapeSect, fwdSect, replaySection(r)));
}

// headersTable is a request's headers: the value of a sensitive one
// (Cookie, Authorization...) is fetched and shown only on a click, so that
// it is not on screen, in the list or in the page's memory until asked for.
function headersTable(r) {
  const sensitive = new Set(r.sensitive || []);
  if (!sensitive.size) return kvTable(r.headers, 'Request headers');
  const keys = Object.keys(r.headers || {}).sort((a, b) => a.localeCompare(b));
  return h('table', {class: 'kv', 'aria-label': 'Request headers'},
    h('tbody', null, keys.map(k => h('tr', null, h('th', {scope: 'row', text: k}),
      h('td', null, sensitive.has(k) ? revealButton(r.id, k) : r.headers[k])))));
}

function revealButton(id, name) {
  const btn = h('button', {type: 'button', class: 'reveal', 'aria-label': 'Show the value of ' + name,
    title: 'A credential: shown only when asked for', text: 'show',
    onclick: guarded(async () => {
      const res = await api('/api/requests/' + id + '/headers');
      btn.replaceWith(document.createTextNode(res.headers[name] || ''));
    })});
  return btn;
}

// loadBody fetches the exact bytes once: the pretty view is built from
// them (so numbers keep their spelling), the raw view shows them as is.
async function loadBody(id, seq) {
  const bytes = await api('/api/requests/' + id + '/body', {as: 'bytes'});
  if (seq !== L.detailSeq) return;
  let text = null;
  try { text = new TextDecoder('utf-8', {fatal: true}).decode(bytes); } catch (e) { /* binary */ }
  L.body = {id, bytes, text, raw: false};
  renderBody();
}

function renderBody() {
  const b = L.body, pre = $('#body'), note = $('#body-note');
  if (!pre || !b) return;
  pre.classList.toggle('raw', b.raw);
  if (!b.bytes.length) { replace(pre, h('span', {class: 'muted', text: '(empty body)'})); note.textContent = ''; return; }
  if (b.text == null) {
    pre.textContent = hexDump(b.bytes);
    note.textContent = b.bytes.length + ' bytes, not UTF-8 text: shown as hex';
    return;
  }
  const pretty = !b.raw && b.text.length < 2e6 ? prettyJSON(b.text) : null;
  if (pretty) { replace(pre, pretty); note.textContent = 'JSON, pretty-printed'; }
  else { pre.textContent = b.text; note.textContent = b.bytes.length + ' bytes' + (b.raw ? ', exactly as received' : ', text'); }
}

function toggleRaw(btn) {
  if (!L.body) return;
  L.body.raw = !L.body.raw;
  btn.setAttribute('aria-pressed', String(L.body.raw));
  btn.textContent = L.body.raw ? 'Pretty' : 'Raw bytes';
  renderBody();
}

function replaySection(r) {
  const s = session.listen || {};
  const noSecret = !s.secrets;
  const url = h('input', {id: 'replay-url', type: 'url', class: 'wide', value: L.replayUrl != null ? L.replayUrl : (s.forwardTo || s.url || ''),
    placeholder: s.forwardTo || s.url || 'http://…', 'aria-label': 'Replay to URL', spellcheck: 'false',
    oninput: ev => { L.replayUrl = ev.target.value; }});
  const resign = h('input', {id: 'replay-resign', type: 'checkbox', disabled: noSecret});
  const result = h('div', {id: 'replay-result', 'aria-live': 'polite'});
  const btn = h('button', {type: 'submit', id: 'replay', class: 'primary', text: 'Replay'});
  const form = h('form', {class: 'replay-form', novalidate: true},
    h('label', {class: 'ctl-block'}, h('span', {text: 'URL'}), url),
    h('label', {class: 'check'}, resign, ' Re-sign with the first secret and a fresh timestamp'),
    noSecret ? h('p', {class: 'note', text: 'Re-signing needs a secret: listen runs without --secret, so the request goes as captured.'}) : null,
    h('div', {class: 'row'}, btn, h('span', {class: 'muted', text: 'Sent from evfwd itself, headers and body ' + (noSecret ? 'as captured' : 'as captured unless re-signed')})),
    result);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    replay(r.id, url.value.trim(), resign.checked, btn, result).catch(report);
  });
  return h('details', {class: 'sect', id: 'replay-sect', open: true}, h('summary', {text: 'Replay'}), form);
}

async function replay(id, url, resign, btn, out) {
  btn.disabled = true;
  replace(out, h('p', {class: 'muted', text: 'Sending…'}));
  const body = {id, resign};
  if (url) body.url = url;
  try {
    const res = await post('/api/replay', body);
    renderReplay(out, res);
  } catch (e) {
    replace(out, h('p', {class: 'error', text: e.message}));
    throw e;
  } finally {
    btn.disabled = false;
  }
}

function renderReplay(out, res) {
  const ok = res.status >= 200 && res.status < 300;
  out.dataset.status = res.status;
  replace(out, h('div', {class: 'result ' + (ok ? 'good' : 'bad')},
    h('p', {class: 'result-line'},
      h('strong', {class: 'status-big ' + statusClass(res.status), text: String(res.status)}), ' ',
      res.status ? '' : 'no answer ', '· ' + fmtMs(res.latencyMs) + ' · ', h('span', {class: 'mono', text: res.url || ''})),
    res.signed ? h('p', {class: 'muted', text: 'Re-signed under ' + res.signed + ' with a fresh timestamp.'}) : null,
    res.error ? h('p', {class: 'error', text: res.error}) : null,
    res.headers && Object.keys(res.headers).length ? section('Response headers', false, kvTable(res.headers, 'Response headers')) : null,
    res.body ? [h('p', {class: 'muted', text: 'Response body (excerpt):'}), jsonBlock(res.body)] : null));
}

// ---------------------------------------------------------------- compare

async function openDiff(a, b) {
  const panel = $('#diff');
  L.diffReturn = document.activeElement;
  panel.hidden = false;
  replace(panel, diffHead(a, b), h('p', {class: 'muted pad', text: 'Loading…'}));
  panel.focus();
  const [ra, rb] = await Promise.all([api('/api/requests/' + a), api('/api/requests/' + b)]);
  const body = r => r.bodyBase64 != null ? '(binary) ' + r.bodyBase64 : r.bodyRaw != null ? r.bodyRaw : r.body;
  const sortKeys = o => Object.keys(o || {}).sort().reduce((m, k) => (m[k] = o[k], m), {});
  const la = '#' + a + ' ' + (ra.request.type || ra.request.path) + ' · ' + fmtTime(ra.request.receivedAt);
  const lb = '#' + b + ' ' + (rb.request.type || rb.request.path) + ' · ' + fmtTime(rb.request.receivedAt);
  const bodyDiff = diffValues(body(ra.request), body(rb.request));
  const headDiff = diffValues(sortKeys(ra.request.headers), sortKeys(rb.request.headers));
  const only = h('input', {type: 'checkbox', id: 'diff-only', onchange: ev => panel.classList.toggle('only-diff', ev.target.checked)});
  replace(panel, diffHead(a, b),
    h('div', {class: 'toolbar'}, h('label', {class: 'check'}, only, ' Only differing lines'),
      h('span', {class: 'legend'}, h('span', {class: 'lg d-chg', text: '~ changed'}), h('span', {class: 'lg d-del', text: '− only in #' + a}), h('span', {class: 'lg d-add', text: '+ only in #' + b}))),
    h('div', {class: 'diff-body'},
      h('h3', {text: 'Body'}), pathSummary(bodyDiff.paths), diffTable(bodyDiff, la, lb),
      h('h3', {text: 'Headers'}), pathSummary(headDiff.paths), diffTable(headDiff, la, lb)));
}

function pathSummary(paths) {
  if (!paths.length) return h('p', {class: 'muted', text: 'Identical.'});
  const words = {chg: 'changed', add: 'added', del: 'removed'};
  const shown = paths.slice(0, 40).map(p => h('li', {class: 'd-' + p.k}, h('span', {class: 'tag', text: words[p.k]}), ' ', h('code', {text: p.path || '(the whole value)'})));
  return h('ul', {class: 'paths', 'aria-label': 'What differs'}, shown, paths.length > 40 ? h('li', {class: 'muted', text: '… ' + (paths.length - 40) + ' more'}) : null);
}

function diffHead(a, b) {
  return h('div', {class: 'panel-head'},
    h('h2', {text: 'Compare #' + a + ' ↔ #' + b}),
    h('button', {type: 'button', class: 'icon', 'aria-label': 'Close comparison (Esc)', title: 'Close (Esc)', text: '×', onclick: closeDiff}));
}

function closeDiff() {
  $('#diff').hidden = true;
  const back = L.diffReturn;
  if (back && document.contains(back)) back.focus();
}

// ================================================================ SERVE

const STATUSES = ['pending', 'delivered', 'failed', 'dead', 'cancelled'];

const S = {
  deliveries: [],
  next: null,
  filter: {source: '', status: '', endpoint: ''},
  open: null,
  seq: 0,
  detailSeq: 0,
  events: null,
  tick: null,  // the chart's refresh timer
  keys: false, // the page's keys are bound
};

function startServe() {
  document.body.classList.add('mode-serve');
  $('#mode-name').textContent = 'serve inspector';
  onUnauthorized = () => {
    // Signed out (idle too long, logged out elsewhere, serve restarted):
    // stop what the signed-in page ran; a login starts it anew.
    signedOut('The session has ended: enter the admin token again.');
  };
  if (!session.auth) { showLogin(sessionID() ? 'The session has ended: enter the admin token again.' : ''); keepSession(''); return; }
  logoutButton().hidden = false;
  const s = session.serve || {};
  replace($('#summary'),
    summaryItem('serving', s.url),
    summaryItem('store', s.store),
    summaryItem('sources', String((s.sources || []).length), (s.sources || []).map(x => x.name).join(', ')),
    summaryItem('version', session.version));
  buildServeLayout();
  const refresh = throttle(() => { loadDeliveries(true).catch(report); loadStats().catch(report); }, 1000);
  const refreshStats = throttle(() => loadStats().catch(report), 1000);
  const refreshOpen = throttle(() => { if (S.open != null) openDelivery(S.open, true).catch(report); }, 1000);
  S.events = connectEvents(['attempt', 'delivery', 'endpoint', 'stored'], (name, ev) => {
    if (name === 'endpoint') { markEndpoint(ev); refreshStats(); return; }
    if (name === 'stored') { refresh(); return; }
    refresh();
    // Only the delivery on screen is re-read, so a reader is not disturbed.
    // An attempt's event comes before its outcome is on record; the
    // delivery's event, after.
    const id = name === 'delivery' ? ev.id : ev.delivery;
    if (id === S.open) refreshOpen();
  }, () => { refresh(); refreshOpen(); }, StreamSource);
  loadDeliveries(false).catch(report);
  loadStats().catch(report);
  // The chart's window moves on even when nothing happens.
  clearInterval(S.tick);
  S.tick = setInterval(() => loadStats().catch(report), 30000);
}

// signedOut stops what the signed-in page ran and asks for the token.
function signedOut(note) {
  keepSession('');
  if (S.events) { S.events.stop(); S.events = null; }
  clearInterval(S.tick);
  showLogin(note);
}

// logoutButton is the header's "Log out", made once.
function logoutButton() {
  let b = $('#logout');
  if (!b) {
    b = h('button', {type: 'button', id: 'logout', hidden: true, title: 'End this session: the page asks for the admin token again',
      text: 'Log out', onclick: guarded(logout)});
    $('#live').after(b);
  }
  return b;
}

// logout ends the session on the server (DELETE /api/session), then here.
async function logout() {
  try {
    await api('/api/session', {method: 'DELETE', as: 'text'});
  } finally {
    signedOut('Logged out.');
  }
}

function showLogin(note) {
  if ($('#logout')) $('#logout').hidden = true;
  const live = $('#live');
  live.dataset.state = 'closed';
  live.textContent = 'signed out';
  clear($('#summary'));
  const token = h('input', {id: 'token', type: 'password', autocomplete: 'current-password', required: true, 'aria-describedby': 'login-help'});
  const err = h('p', {id: 'login-error', class: 'error', role: 'alert'});
  const form = h('form', {class: 'login', 'aria-labelledby': 'login-title'},
    h('h1', {id: 'login-title', text: 'Admin token'}),
    h('p', {id: 'login-help', class: 'muted', text: note || 'evfwd serve asks for its admin token. The session stays in this tab only, and ends on Log out, after ' + idleText() + ' without use, or when serve restarts.'}),
    // Password managers want a user name beside a password.
    h('input', {type: 'text', name: 'username', autocomplete: 'username', value: 'evfwd admin', hidden: true, tabindex: '-1', 'aria-hidden': 'true'}),
    h('label', {class: 'ctl-block'}, h('span', {text: 'Token'}), token),
    h('button', {type: 'submit', id: 'login', class: 'primary', text: 'Sign in'}),
    err);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    login(token.value, err).catch(report);
  });
  replace($('#app'), form);
  token.focus();
}

function idleText() {
  const h = Math.round(((session && session.idleMs) || 12 * 3600 * 1000) / 3600000);
  return h === 1 ? 'an hour' : h + ' hours';
}

async function login(token, err) {
  err.textContent = '';
  try {
    const res = await post('/api/session', {token}, true);
    keepSession(res.session);
  } catch (e) {
    err.textContent = e.status === 403 ? 'That is not the admin token.' : e.message;
    $('#token').select();
    return;
  }
  session = await api('/api/session');
  if (!session.auth) { err.textContent = 'Signed in, but the session was not kept.'; return; }
  document.body.classList.remove('mode-serve');
  startServe();
}

function allEndpoints() {
  const set = new Set();
  for (const s of (session.serve && session.serve.sources) || []) for (const e of s.endpoints || []) set.add(e);
  return [...set];
}

function buildServeLayout() {
  const sources = (session.serve && session.serve.sources) || [];
  const onFilter = () => {
    S.filter.source = $('#filter-source').value;
    S.filter.status = $('#filter-status').value;
    S.filter.endpoint = $('#filter-endpoint').value;
    updateRetryButtons();
    loadDeliveries(false).catch(report);
  };
  const chart = h('section', {id: 'chart', class: 'chart', 'aria-label': 'Endpoints: attempts per minute and latency, last hour'},
    h('p', {class: 'muted pad', text: 'Loading the chart…'}));
  const toolbar = h('div', {class: 'toolbar', role: 'search'},
    select('filter-source', 'Source', [['', 'All sources']].concat(sources.map(s => [s.name, s.name])), '', onFilter),
    select('filter-status', 'Status', [['', 'All statuses']].concat(STATUSES.map(s => [s, s])), '', onFilter),
    select('filter-endpoint', 'Endpoint', [['', 'All endpoints']].concat(allEndpoints().map(u => [u, u])), '', onFilter),
    h('span', {id: 'count', class: 'muted', 'aria-live': 'polite'}),
    h('span', {class: 'spacer'}),
    h('button', {type: 'button', id: 'retry-failed', onclick: guarded(() => retryAll('failed'))}),
    h('button', {type: 'button', id: 'retry-dead', onclick: guarded(() => retryAll('dead'))}),
    h('button', {type: 'button', id: 'refresh', title: 'Reload the list and the chart', text: 'Refresh',
      onclick: () => { loadDeliveries(true).catch(report); loadStats().catch(report); }}));
  const thead = h('thead', null, h('tr', null,
    ['ID', 'Created', 'Source', 'Type', 'Message ID', 'Status', 'Attempts', 'Last error'].map(t =>
      h('th', {scope: 'col', class: 'c-' + t.toLowerCase().replace(/ /g, ''), text: t}))));
  const tbody = h('tbody');
  const table = h('table', {id: 'deliveries', class: 'grid', 'aria-label': 'Deliveries, newest first'}, thead, tbody);
  const more = h('button', {type: 'button', id: 'load-more', hidden: true, text: 'Load more', onclick: guarded(() => loadMore())});
  const detail = h('aside', {id: 'delivery', class: 'panel', 'aria-label': 'Delivery detail', hidden: true, tabindex: '-1'});
  replace($('#app'),
    h('details', {class: 'chart-wrap', open: true}, h('summary', {text: 'Endpoints, last hour'}), chart),
    toolbar,
    h('div', {class: 'split'}, h('div', {class: 'list', id: 'list'}, table, h('div', {id: 'empty', class: 'empty', hidden: true}), h('div', {class: 'more'}, more)), detail));
  updateRetryButtons();
  tbody.addEventListener('click', ev => {
    const row = ev.target.closest('tr[data-id]');
    if (row) openDelivery(Number(row.dataset.id)).catch(report);
  });
  keyList(tbody, id => openDelivery(Number(id)).catch(report),
    debounce(id => { if (S.open != null) openDelivery(Number(id)).catch(report); }, 150));
  if (!S.keys) { // once: the layout is built again after each login
    S.keys = true;
    document.addEventListener('keydown', ev => {
      if (!$('#delivery')) return;
      if (ev.key === 'Escape' && S.open != null && !$('#delivery').hidden) { ev.preventDefault(); closeDelivery(); return; }
      if (isEditable(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === '/') { ev.preventDefault(); $('#filter-source').focus(); }
    });
  }
}

function updateRetryButtons() {
  const {source, endpoint} = S.filter;
  const narrow = [source, endpoint && hostOf(endpoint)].filter(Boolean).join(', ');
  const of = (source ? ' of source ' + source : '') + (endpoint ? ' tried at ' + endpoint : '');
  $('#retry-failed').textContent = 'Retry all failed' + (narrow ? ' (' + narrow + ')' : '');
  $('#retry-dead').textContent = 'Retry all dead' + (narrow ? ' (' + narrow + ')' : '');
  $('#retry-failed').title = 'Send every failed delivery' + of + ' again';
  $('#retry-dead').title = 'Send every dead delivery' + of + ' again';
}

function hostOf(url) {
  try { return new URL(url).host; } catch (e) { return url; }
}

function deliveriesQuery(extra) {
  const q = new URLSearchParams();
  for (const k of ['source', 'status', 'endpoint']) if (S.filter[k]) q.set(k, S.filter[k]);
  for (const k in extra || {}) q.set(k, extra[k]);
  const s = q.toString();
  return '/api/deliveries' + (s ? '?' + s : '');
}

// loadDeliveries reloads the first page; keep=true (a live refresh) asks
// for as many as are shown, so that "load more" pages are not lost.
async function loadDeliveries(keep) {
  const seq = ++S.seq;
  const limit = keep ? Math.min(1000, Math.max(100, S.deliveries.length)) : 100;
  const data = await api(deliveriesQuery({limit}));
  if (seq !== S.seq) return;
  S.deliveries = data.deliveries || [];
  S.next = data.next != null ? data.next : null;
  renderDeliveries();
}

async function loadMore() {
  if (S.next == null) return;
  const seq = ++S.seq;
  const data = await api(deliveriesQuery({before: S.next, limit: 100}));
  if (seq !== S.seq) return;
  const have = new Set(S.deliveries.map(d => d.id));
  S.deliveries = S.deliveries.concat((data.deliveries || []).filter(d => !have.has(d.id)));
  S.next = data.next != null ? data.next : null;
  renderDeliveries();
}

function renderDeliveries() {
  const tbody = $('#deliveries tbody');
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#deliveries tr[data-id]');
  const keep = focused ? focused.dataset.id : (tbody.querySelector('tr[tabindex="0"]') || {dataset: {}}).dataset.id;
  // A live refresh keeps the rows that did not change, and the DOM is
  // not touched when none did: a click pressed on a row while the list
  // is redrawn would reach no row.
  const rows = S.deliveries.map(reuseRow);
  if (rows.length !== tbody.children.length || rows.some((r, i) => tbody.children[i] !== r)) replace(tbody, rows);
  S.rowCache = new Map(rows.map(r => [Number(r.dataset.id), r]));
  ensureRoving(tbody, keep);
  if (focused) { const row = tbody.querySelector('tr[data-id="' + keep + '"]'); if (row) row.focus(); }
  $('#load-more').hidden = S.next == null;
  const n = S.deliveries.length;
  $('#count').textContent = n + (n === 1 ? ' delivery' : ' deliveries') + (S.next != null ? ' (more below)' : '');
  const empty = $('#empty');
  empty.hidden = n > 0;
  if (!n) replace(empty, h('p', {text: S.filter.source || S.filter.status || S.filter.endpoint ? 'No delivery matches the filters.' : 'No deliveries yet.'}));
}

// reuseRow returns d's row as drawn before when d is unchanged, else a new
// one. (Which row is open is marked on the rows in place.)
function reuseRow(d) {
  const key = JSON.stringify(d);
  const old = S.rowCache && S.rowCache.get(d.id);
  if (old && old.rowKey === key) return old;
  const row = deliveryRow(d);
  row.rowKey = key;
  return row;
}

function deliveryRow(d) {
  return h('tr', {tabindex: '-1', class: S.open === d.id ? 'open' : null, 'aria-current': S.open === d.id ? 'true' : null,
    data: {id: d.id, status: d.status}},
    h('td', {class: 'c-id num', text: d.id}),
    h('td', {class: 'c-created', title: d.createdAt, text: fmtStamp(d.createdAt)}),
    h('td', {class: 'c-source', text: d.source}),
    h('td', {class: 'c-type', text: d.type || ''}),
    h('td', {class: 'c-messageid mono', title: d.messageId, text: d.messageId}),
    h('td', {class: 'c-status'}, h('span', {class: 'badge st-' + d.status, text: d.status})),
    h('td', {class: 'c-attempts num', text: d.attempts}),
    h('td', {class: 'c-lasterror', title: d.lastError || '', text: d.lastError || ''}));
}

function closeDelivery() {
  const id = S.open;
  S.open = null;
  $('#delivery').hidden = true;
  document.body.classList.remove('detail-open');
  for (const r of $('#deliveries tbody').querySelectorAll('tr.open')) { r.classList.remove('open'); r.removeAttribute('aria-current'); }
  const row = $('#deliveries tbody tr[data-id="' + id + '"]');
  if (row) focusRow($('#deliveries tbody'), row);
}

async function openDelivery(id, quiet) {
  const seq = ++S.detailSeq;
  S.open = id;
  for (const r of $('#deliveries tbody').querySelectorAll('tr[data-id]')) {
    const on = Number(r.dataset.id) === id;
    r.classList.toggle('open', on);
    if (on) r.setAttribute('aria-current', 'true'); else r.removeAttribute('aria-current');
  }
  const panel = $('#delivery');
  panel.hidden = false;
  document.body.classList.add('detail-open');
  if (!quiet) replace(panel, deliveryHead(id), h('p', {class: 'muted pad', text: 'Loading…'}));
  let d;
  try {
    d = await api('/api/deliveries/' + id);
  } catch (e) {
    if (seq === S.detailSeq) replace(panel, deliveryHead(id), h('p', {class: 'error pad', text: e.message}));
    throw e;
  }
  if (seq !== S.detailSeq) return;
  const top = panel.scrollTop;
  renderDelivery(panel, d);
  if (quiet) panel.scrollTop = top;
}

function deliveryHead(id, d) {
  return h('div', {class: 'panel-head'},
    h('h2', null, 'Delivery ', h('span', {class: 'muted', text: '#' + id}), d ? [' ', h('span', {class: 'badge st-' + d.status, text: d.status})] : null),
    h('button', {type: 'button', class: 'icon', 'aria-label': 'Close detail (Esc)', title: 'Close (Esc)', text: '×', onclick: closeDelivery}));
}

function renderDelivery(panel, d) {
  const canRetry = d.status === 'failed' || d.status === 'dead';
  const focusedRetry = document.activeElement && document.activeElement.id === 'retry';
  const retry = h('button', {type: 'button', id: 'retry', class: 'primary', disabled: !canRetry,
    title: canRetry ? 'Send this delivery again now' : 'Only failed or dead deliveries can be retried', text: 'Retry',
    onclick: guarded(async () => {
      const res = await post('/api/retry', {ids: [d.id]});
      toast(res.retried + ' retried');
      await Promise.all([loadDeliveries(true), openDelivery(d.id, true)]);
    })});
  const attempts = (d.attemptRecords || []).map((a, i) => h('li', {class: 'attempt', data: {status: a.status || 0, outcome: a.outcome || ''}},
    h('div', {class: 'attempt-line'},
      h('span', {class: 'muted', text: (i + 1) + '.'}), ' ',
      h('span', {class: 'mono', title: a.start, text: fmtStamp(a.start)}), ' ',
      h('strong', {class: statusClass(a.status), text: a.status ? String(a.status) : '–'}), ' ',
      h('span', {text: fmtMs(a.latencyMs)}), ' ',
      h('span', {class: 'tag', text: a.class}), ' ',
      h('span', {class: 'tag outcome-' + a.outcome, text: a.outcome})),
    h('div', {class: 'mono small', text: a.url}),
    a.error ? h('div', {class: 'error small', text: a.error}) : null,
    a.bodyExcerpt ? jsonBlock(a.bodyExcerpt, 'excerpt') : null));
  replace(panel, deliveryHead(d.id, d),
    h('div', {class: 'actions'}, retry, canRetry ? null : h('span', {class: 'muted', text: 'Retry applies to failed or dead deliveries.'})),
    h('div', {class: 'panel-body'},
      h('dl', {class: 'fields'},
        field('Source', d.source), field('Destination', d.destination), field('Type', d.type), field('User', d.userId),
        field('Message', d.messageId, 'mono'), field('Attempts', String(d.attempts)),
        field('Created', fmtStamp(d.createdAt), 'mono'), field('First attempt', fmtStamp(d.firstAttempt), 'mono'),
        field('Next attempt', fmtStamp(d.nextAttempt), 'mono'), field('Updated', fmtStamp(d.updatedAt), 'mono'),
        field('Last error', d.lastError, 'error')),
      section('Attempts (' + attempts.length + ')', true, attempts.length ? h('ol', {id: 'attempts', class: 'attempts'}, attempts) : [h('ol', {id: 'attempts', class: 'attempts'}), h('p', {class: 'muted', text: 'No attempt yet.'})]),
      section('Message', true, d.message != null ? jsonBlock(d.message) : h('p', {class: 'muted', text: 'No message body.'}))));
  if (focusedRetry) $('#retry').focus();
}

async function retryAll(status) {
  const body = {status};
  if (S.filter.source) body.source = S.filter.source;
  if (S.filter.endpoint) body.endpoint = S.filter.endpoint;
  const res = await post('/api/retry', body);
  const of = [body.source && 'of ' + body.source, body.endpoint && 'to ' + body.endpoint].filter(Boolean).join(' ');
  toast(res.retried + ' retried' + (res.retried ? '' : ': no ' + status + ' delivery' + (of ? ' ' + of : '')));
  await loadDeliveries(true);
  if (S.open != null) await openDelivery(S.open, true);
}

// ---------------------------------------------------------------- chart

async function loadStats() {
  const data = await api('/api/stats');
  renderChart(data.endpoints || []);
}

function renderChart(endpoints) {
  const chart = $('#chart');
  if (!chart) return;
  if (!endpoints.length) { replace(chart, h('p', {class: 'muted pad', text: 'No endpoint has been tried yet.'})); return; }
  replace(chart, endpoints.map(endpointCard),
    h('div', {class: 'legend', 'aria-hidden': 'true'},
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-delivered'}), 'delivered'),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-retried'}), 'retried'),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-failed'}), 'failed'),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-avg'}), 'latency avg'),
      h('span', {class: 'lg'}, h('i', {class: 'sw sw-max'}), 'latency max')));
}

function endpointCard(ep) {
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
    chartSvg(ep));
}

// markEndpoint applies an `endpoint` event at once; the stats follow.
function markEndpoint(ev) {
  for (const card of document.querySelectorAll('#chart .endpoint')) {
    if (card.dataset.url !== ev.url || (ev.source && card.dataset.source && card.dataset.source !== ev.source)) continue;
    card.dataset.state = ev.state;
    const badge = $('.badge', card);
    badge.className = 'badge br-' + ev.state;
    badge.textContent = ev.state;
  }
}

// chartSvg draws attempts per minute (stacked bars) and latency (lines)
// over the last 60 minutes, the newest at the right.
function chartSvg(ep) {
  const W = 640, H = 132, L0 = 34, R0 = 46, T0 = 8, B0 = 110;
  const pw = W - L0 - R0, ph = B0 - T0, slot = pw / 60;
  const end = Math.floor(Date.now() / 60000) * 60000, start = end - 59 * 60000;
  const slots = new Array(60).fill(null);
  for (const m of ep.minutes || []) {
    const i = Math.round((Date.parse(m.t) - start) / 60000);
    if (i >= 0 && i < 60) slots[i] = m;
  }
  const total = m => (m.delivered || 0) + (m.retried || 0) + (m.failed || 0);
  const maxN = niceMax(Math.max(1, ...slots.map(m => (m ? total(m) : 0))));
  const maxMs = niceMax(Math.max(1, ...slots.map(m => (m && m.latencyMs ? m.latencyMs.max || m.latencyMs.avg || 0 : 0))));
  const y = (v, max) => B0 - (v / max) * ph;
  let sum = {delivered: 0, retried: 0, failed: 0};
  const bars = svg('g', {class: 'bars'});
  slots.forEach((m, i) => {
    if (!m || !total(m)) return;
    const x = L0 + i * slot + 1;
    let base = B0;
    const g = svg('g', {class: 'minute'}, svg('title', null, minuteTitle(m)));
    for (const k of ['delivered', 'retried', 'failed']) {
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
  const label = 'Attempts per minute to ' + ep.url + ', last hour: ' + sum.delivered + ' delivered, ' + sum.retried + ' retried, ' + sum.failed + ' failed' +
    (avgAll != null ? '; latency about ' + fmtMs(avgAll) + ' on average' : '') + '. Breaker ' + (ep.state || 'closed') + '.';
  const id = 'chart-title-' + Math.random().toString(36).slice(2);
  return svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'spark', role: 'img', 'aria-labelledby': id, preserveAspectRatio: 'xMidYMid meet'},
    svg('title', {id}, label),
    svg('line', {class: 'axis', x1: L0, x2: W - R0, y1: B0, y2: B0}),
    svg('line', {class: 'grid-line', x1: L0, x2: W - R0, y1: T0, y2: T0}),
    svg('line', {class: 'grid-line', x1: L0, x2: W - R0, y1: (T0 + B0) / 2, y2: (T0 + B0) / 2}),
    svg('text', {class: 'tick', x: L0 - 4, y: T0 + 4, 'text-anchor': 'end'}, String(maxN)),
    svg('text', {class: 'tick', x: L0 - 4, y: B0, 'text-anchor': 'end'}, '0'),
    svg('text', {class: 'tick lat', x: W - R0 + 4, y: T0 + 4}, fmtTick(maxMs)),
    svg('text', {class: 'tick lat', x: W - R0 + 4, y: (T0 + B0) / 2 + 3}, fmtTick(maxMs / 2)),
    svg('text', {class: 'tick lat', x: W - R0 + 4, y: B0}, '0 ms'),
    svg('text', {class: 'tick', x: L0, y: H - 6}, '−60 min'),
    svg('text', {class: 'tick', x: L0 + pw / 2, y: H - 6, 'text-anchor': 'middle'}, '−30 min'),
    svg('text', {class: 'tick', x: W - R0, y: H - 6, 'text-anchor': 'end'}, 'now'),
    bars, line('max'), line('avg'));
}

function fmtTick(ms) { return ms >= 1000 ? (ms / 1000).toFixed(ms >= 10000 ? 0 : 1) + ' s' : Math.round(ms) + ' ms'; }

function minuteTitle(m) {
  const d = new Date(m.t);
  let t = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ' · ' + (m.delivered || 0) + ' delivered, ' + (m.retried || 0) + ' retried, ' + (m.failed || 0) + ' failed';
  if (m.latencyMs) t += ' · latency avg ' + fmtMs(m.latencyMs.avg) + ', max ' + fmtMs(m.latencyMs.max);
  return t;
}

// niceMax rounds an axis maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const f of [1, 2, 5, 10]) if (f * p >= v) return f * p;
  return 10 * p;
}

// ================================================================ start

async function start() {
  takeListenToken();
  try {
    session = await api('/api/session');
  } catch (e) {
    replace($('#app'), h('p', {class: 'error pad', text: 'Cannot start the inspector: ' + e.message}));
    report(e);
    return;
  }
  if (session.mode === 'serve') startServe();
  else startListen();
}

window.addEventListener('unhandledrejection', ev => report(ev.reason));
start();
})();
