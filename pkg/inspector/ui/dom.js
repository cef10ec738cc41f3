// DOM helpers shared by both apps. Request data only ever reaches the page
// as text nodes and attributes: never innerHTML, so a webhook body cannot
// run script here.

export const $ = (sel, root) => (root || document).querySelector(sel);
const SVG = 'http://www.w3.org/2000/svg';

// h builds an element. props: class, text, data (dataset), on<event>
// (listeners), value/checked/disabled/hidden (properties), anything else an
// attribute. Children may be strings, nodes, arrays or falsy (skipped).
export function h(tag, props, ...kids) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, kids);
  return el;
}

// svg builds an SVG element; attrs are attributes (never style).
export function svg(tag, attrs, ...kids) {
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

export function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }

export function replace(el, ...kids) { clear(el); append(el, kids); return el; }

export function isEditable(el) {
  return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

// throttle runs fn at most once per ms, always once more after the last
// call, so a burst of live events becomes one refresh a second.
export function throttle(fn, ms) {
  let timer = null, last = 0;
  return function () {
    if (timer) return;
    const wait = Math.max(0, last + ms - Date.now());
    timer = setTimeout(() => { timer = null; last = Date.now(); fn(); }, wait);
  };
}

export function debounce(fn, ms) {
  let timer = null;
  return function (...args) { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// toast shows a message in #toast. Errors stay until dismissed or
// replaced by newer ones: an API error is never silently dropped.
export function toast(msg, kind) {
  const box = $('#toast');
  const item = h('div', {class: 'toast-item ' + (kind || 'info'), role: kind === 'error' ? 'alert' : null},
    h('span', {class: 'toast-text', text: msg}),
    h('button', {type: 'button', class: 'icon', 'aria-label': 'Dismiss', text: '×', onclick: () => item.remove()}));
  box.append(item);
  while (box.children.length > 4) box.firstChild.remove();
  if (kind !== 'error') setTimeout(() => item.remove(), 4000);
  else setTimeout(() => item.remove(), 30000);
}

export function report(err) {
  console.warn(err);
  toast(err && err.message ? err.message : String(err), 'error');
}

// guarded wraps an async handler so that its failure reaches the user.
export const guarded = fn => (...args) => Promise.resolve().then(() => fn(...args)).catch(report);

// setLive sets the header's connection state.
export function setLive(state, text, title) {
  const live = $('#live');
  live.dataset.state = state;
  live.textContent = text;
  live.title = title || '';
}
