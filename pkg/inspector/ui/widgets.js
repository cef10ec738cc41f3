// Parts of the page both apps build with: navigable lists, detail fields,
// filters, the clipboard and the header's summary.

import {h, clear, replace, toast} from './dom.js';

// keyList makes a table body navigable: arrows or j/k move between rows
// (one row in the tab order at a time), Home/End jump, Enter opens.
export function keyList(tbody, open, onMove) {
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

export function focusRow(tbody, row) {
  setRoving(tbody, row);
  row.focus();
  row.scrollIntoView({block: 'nearest'});
}

// ensureRoving keeps exactly one row tabbable after a re-render.
export function ensureRoving(tbody, id) {
  const row = (id != null && tbody.querySelector('tr[data-id="' + id + '"]')) || tbody.querySelector('tr[data-id]');
  setRoving(tbody, row);
}

export function field(label, value, cls) {
  if (value == null || value === '') return null;
  return [h('dt', {text: label}), h('dd', {class: cls || null}, value)];
}

export function section(title, open, ...kids) {
  return h('details', {class: 'sect', open}, h('summary', {text: title}), kids);
}

export function kvTable(obj, label) {
  const keys = Object.keys(obj || {}).sort((a, b) => a.localeCompare(b));
  if (!keys.length) return h('p', {class: 'muted', text: 'none'});
  return h('table', {class: 'kv', 'aria-label': label},
    h('tbody', null, keys.map(k => h('tr', null, h('th', {scope: 'row', text: k}), h('td', {text: obj[k]})))));
}

export function select(id, label, options, value, onchange) {
  const sel = h('select', {id, 'aria-label': label, onchange});
  fillSelect(sel, options, value);
  return h('label', {class: 'ctl'}, h('span', {class: 'ctl-label', text: label}), sel);
}

// fillSelect sets a select's options ([value, text] pairs), keeping value.
export function fillSelect(sel, options, value) {
  replace(sel, options.map(([v, t]) => h('option', {value: v, text: t})));
  sel.value = options.some(o => o[0] === value) ? value : '';
}

export function copyText(text, fallbackHost, what) {
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
export function keysHint(pairs) {
  return h('span', {class: 'keys muted', 'aria-label': 'Keyboard: ' + pairs.map(p => p[0] + ' ' + p[1]).join(', ')},
    pairs.map(([k, what]) => h('span', {'aria-hidden': 'true'}, k.split(' ').map(x => h('kbd', {text: x})), ' ' + what)));
}

export function summaryItem(label, value, title) {
  if (value == null || value === '') return null;
  return h('span', {class: 'kv-item', title: title || null}, h('span', {class: 'k', text: label}), ' ', h('span', {class: 'v', text: value}));
}
