// listen's request inspector: the requests a listen received, live, with
// their signature checks, replay and diff. The lists it filters by (the
// verdicts, the message types, the events) are the server's, from GET
// /api/session's "meta".

import {$, h, clear, replace, isEditable, debounce, report, guarded} from './dom.js';
import {pad, fmtTime, fmtStamp, fmtBytes, fmtMs, statusClass, prettyJSON, jsonBlock, hexDump} from './format.js';
import {keyList, focusRow, ensureRoving, field, section, kvTable, select, fillSelect, copyText, keysHint, summaryItem} from './widgets.js';
import {diffValues, diffTable, pathSummary} from './diff.js';
import {connectEvents} from './sse.js';
import {showLogin} from './login.js';

// verdictMarks go before the verdicts' names in the filter.
const verdictMarks = {valid: '✓', invalid: '✗', unchecked: '–'};

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

export class ListenApp {
  constructor(client) {
    this.client = client;
    this.keep = 0;            // the requests kept: as many as the server keeps
    this.all = [];            // requests, newest first
    this.byId = new Map();
    this.hay = new Map();     // id → lower-case JSON, for the text filter
    this.types = new Set();
    this.filter = {type: '', verdict: '', text: ''};
    this.rows = new Map();    // id → <tr> currently rendered
    this.open = null;         // id shown in #detail
    this.compare = [];        // ids ticked for comparison, oldest tick first
    this.pickFor = null;      // id waiting for a partner from "Compare with…"
    this.replayUrl = null;    // what the user typed, kept across requests
    this.queue = [];          // arrivals waiting for the next frame
    this.flushing = false;
    this.fresh = [];          // arrivals on this event stream while a list load is pending
    this.loading = 0;
    this.detailSeq = 0;
    this.events = null;
    this.body = null;
    this.diffReturn = null;
    this.keys = false;        // the page's keys are bound
  }

  // noType is what the type filter, and the server's ?type=, call a
  // request without a type.
  get noType() { return this.client.meta.noType; }

  start() {
    document.body.classList.add('mode-listen');
    $('#mode-name').textContent = 'listen inspector';
    if (this.client.session.auth === false) { this.showLogin(this.client.listenToken ? 'That token is not this listen\'s.' : ''); return; }
    this.client.onUnauthorized = () => { if (this.events) this.events.stop(); this.showLogin('listen wants its token again (was it restarted with another?).'); };
    const s = this.client.session.listen || {};
    this.keep = s.keep;
    replace($('#summary'),
      summaryItem('listening', s.url),
      summaryItem('forward', s.forwardTo),
      summaryItem('scheme', s.scheme),
      summaryItem('secrets', s.secrets != null ? String(s.secrets) : null, s.secrets ? '' : 'No secret: signatures are not checked'),
      summaryItem('tolerance', s.tolerance),
      summaryItem('record', s.record || 'memory only', s.record ? 'The record file is the source of truth' : 'Kept in memory while listen runs'),
      summaryItem('version', this.client.session.version));
    this.buildLayout();
    this.loadRequests().catch(report);
    if (this.events) this.events.stop();
    // With a token, the stream is read by fetch, which sends it.
    this.events = connectEvents(this.client, this.client.meta.events, (name, r) => { if (this.loading) this.fresh.push(r); this.addRequest(r); }, async () => {
      // A new stream: what arrived on the old one is in the list it reloads.
      this.fresh = [];
      try {
        const s = await this.client.api('/api/session');
        // A restarted listen numbers its requests afresh (and has a new CSRF
        // token): what the page holds by id would be another request now.
        if (s.started !== this.client.session.started) { this.client.session = s; this.forgetRequests(); }
      } catch (e) { report(e); }
      this.loadRequests().catch(report);
    }, !!this.client.listenToken);
  }

  // showLogin asks for the token of a listen inspector that needs one.
  showLogin(note) {
    showLogin({
      title: 'Inspector token', inputId: 'listen-token', autocomplete: 'off', button: 'Open', error: note,
      help: 'This listen inspector needs its token: the one given with --ui-token, or the one listen printed after #token= in the inspector\'s address. It stays in this tab only.',
      onSubmit: token => {
        this.client.keepListenToken(token.trim());
        guarded(async () => { await this.client.loadSession(); this.start(); })();
      },
    });
  }

  // downloadWithToken saves what an <a download> links to, fetched with the
  // token (a link cannot send it); without one the link does it.
  downloadWithToken(ev) {
    if (!this.client.listenToken) return;
    ev.preventDefault();
    guarded(a => this.saveLink(a))(ev.currentTarget);
  }

  async saveLink(a) {
    const bytes = await this.client.api(a.getAttribute('href'), {as: 'bytes'});
    const url = URL.createObjectURL(new Blob([bytes]));
    const tmp = h('a', {href: url, download: a.getAttribute('download'), hidden: true});
    document.body.append(tmp);
    tmp.click();
    tmp.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  buildLayout() {
    const app = clear($('#app'));
    const onFilter = () => {
      this.filter.type = $('#filter-type').value;
      this.filter.verdict = $('#filter-verdict').value;
      this.filter.text = $('#filter-text').value.trim().toLowerCase();
      this.renderList();
    };
    const toolbar = h('div', {class: 'toolbar', role: 'search'},
      select('filter-type', 'Type', [['', 'All types']], '', onFilter),
      select('filter-verdict', 'Verdict', [['', 'All verdicts']].concat(this.client.meta.verdicts.map(v => [v, [verdictMarks[v], v].filter(Boolean).join(' ')])), '', onFilter),
      h('input', {id: 'filter-text', type: 'search', placeholder: 'Filter text  ( / )', 'aria-label': 'Filter by text in the request', autocomplete: 'off', spellcheck: 'false', oninput: debounce(onFilter, 120)}),
      h('span', {id: 'count', class: 'muted', 'aria-live': 'polite'}),
      h('span', {class: 'spacer'}),
      h('span', {id: 'pick-hint', class: 'hint', hidden: true}),
      keysHint([['j k ↑ ↓', 'move'], ['Enter', 'open'], ['Space', 'tick'], ['/', 'filter'], ['Esc', 'close']]),
      h('button', {type: 'button', id: 'compare', disabled: true, onclick: () => this.compareTicked(), title: 'Tick two requests, then compare their bodies and headers', text: 'Compare'}));
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
      this.openOrPick(Number(row.dataset.id));
    });
    tbody.addEventListener('change', ev => {
      if (ev.target.matches('input.compare')) this.tickCompare(Number(ev.target.closest('tr').dataset.id), ev.target.checked);
    });
    // Space or x ticks the focused row for comparison.
    tbody.addEventListener('keydown', ev => {
      const row = ev.target.closest('tr[data-id]');
      if (row && ev.target === row && (ev.key === ' ' || ev.key === 'x')) {
        ev.preventDefault();
        const box = $('input.compare', row);
        box.checked = !box.checked;
        this.tickCompare(Number(row.dataset.id), box.checked);
      }
    });
    const follow = debounce(id => { if (this.open != null) this.openDetail(Number(id)); }, 150);
    keyList(tbody, id => this.openOrPick(Number(id)), follow);
    if (!this.keys) { // once: the layout is built again after each login
      this.keys = true;
      document.addEventListener('keydown', ev => this.onKey(ev));
    }
  }

  onKey(ev) {
    if (!$('#requests')) return; // signed out
    if (ev.key === 'Escape') {
      if (!$('#diff').hidden) this.closeDiff();
      else if (this.pickFor != null) this.setPick(null);
      else if (!$('#detail').hidden) this.closeDetail();
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

  async loadRequests() {
    this.loading++;
    let data;
    try { data = await this.client.api('/api/requests'); } finally { this.loading--; }
    const list = data.requests || [];
    const maxId = list.reduce((m, r) => Math.max(m, r.id), 0);
    // Keep arrivals this stream delivered after the list was taken (not
    // older ones: a restarted listen numbers its requests afresh).
    const newer = this.fresh.filter(r => r.id > maxId);
    this.fresh = [];
    this.all = [];
    this.byId.clear();
    this.hay.clear();
    for (const r of newer.concat(list)) this.index(r);
    this.all.sort((a, b) => b.id - a.id);
    this.trimRequests();
    this.refreshTypes();
    this.renderList();
    if (this.open != null && !this.byId.has(this.open)) this.closeDetail();
  }

  index(r) {
    if (this.byId.has(r.id)) return false;
    this.all.push(r);
    this.byId.set(r.id, r);
    this.hay.set(r.id, JSON.stringify(r).toLowerCase());
    return true;
  }

  // trimRequests drops the oldest beyond the cap, returning their ids.
  trimRequests() {
    const dropped = [];
    while (this.all.length > this.keep) {
      const r = this.all.pop();
      this.byId.delete(r.id);
      this.hay.delete(r.id);
      dropped.push(r.id);
    }
    if (dropped.length) this.compare = this.compare.filter(id => !dropped.includes(id));
    return dropped;
  }

  // refreshTypes lists the message types the server knows, then any other
  // type seen, then "(no type)" once a request without one came.
  refreshTypes() {
    let changed = false;
    for (const r of this.all) {
      const t = r.type || this.noType;
      if (!this.types.has(t)) { this.types.add(t); changed = true; }
    }
    if (!changed && $('#filter-type').options.length > 1) return;
    const known = this.client.meta.types;
    const other = [...this.types].filter(t => t !== this.noType && !known.includes(t)).sort();
    const opts = [['', 'All types']].concat(known.concat(other).map(t => [t, t]));
    if (this.types.has(this.noType)) opts.push([this.noType, '(no type)']);
    fillSelect($('#filter-type'), opts, this.filter.type);
  }

  matches(r) {
    const f = this.filter;
    if (f.type && (r.type || this.noType) !== f.type) return false;
    if (f.verdict && verdictOf(r) !== f.verdict) return false;
    if (f.text && !this.hay.get(r.id).includes(f.text)) return false;
    return true;
  }

  renderList() {
    const tbody = $('#requests tbody');
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#requests tr[data-id]');
    const keep = focused ? focused.dataset.id : (tbody.querySelector('tr[tabindex="0"]') || {dataset: {}}).dataset.id;
    this.rows.clear();
    const frag = document.createDocumentFragment();
    for (const r of this.all) if (this.matches(r)) frag.append(this.requestRow(r));
    replace(tbody, frag);
    ensureRoving(tbody, keep);
    if (focused) { const row = tbody.querySelector('tr[data-id="' + keep + '"]'); if (row) row.focus(); }
    this.updateCount();
  }

  updateCount() {
    const shown = this.rows.size, total = this.all.length;
    $('#count').textContent = shown === total ? total + (total === 1 ? ' request' : ' requests') : shown + ' of ' + total + ' requests';
    const empty = $('#empty');
    empty.hidden = shown > 0;
    if (!shown) {
      const url = (this.client.session.listen && this.client.session.listen.url) || 'http://127.0.0.1:8788';
      replace(empty, total
        ? h('p', {text: 'No request matches the filters.'})
        : [h('p', {text: 'Waiting for requests to ' + url + ' …'}),
          h('p', {class: 'muted'}, 'Try ', h('code', {text: 'evfwd trigger track --url ' + url + (this.client.session.listen && this.client.session.listen.secrets ? ' --secret-file hook.secret' : '')}))]);
    }
    $('#compare').disabled = this.compare.length !== 2;
    $('#compare').textContent = 'Compare' + (this.compare.length ? ' (' + this.compare.length + '/2)' : '');
  }

  requestRow(r) {
    const v = verdictOf(r);
    const ticked = this.compare.includes(r.id);
    const flags = [];
    if (r.duplicate) flags.push(h('span', {class: 'flag', title: 'Same messageId as an earlier request', text: 'dup'}));
    if (r.replay) flags.push(h('span', {class: 'flag warn', title: 'A signed message seen before', text: 'replay'}));
    if (r.forward) flags.push(h('span', {class: 'flag', title: 'Forwarded to ' + r.forward.url, text: '→'}));
    const path = r.path + (r.query ? '?' + r.query : '');
    const tr = h('tr', {tabindex: '-1', class: this.open === r.id ? 'open' : null, 'aria-current': this.open === r.id ? 'true' : null,
      data: {id: r.id, verdict: v, type: r.type || this.noType}},
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
    this.rows.set(r.id, tr);
    return tr;
  }

  // addRequest takes a request from the stream. Arrivals are put on the
  // page once a frame, together: a burst of hundreds a second then costs one
  // layout a frame, not one each.
  addRequest(r) {
    if (this.byId.has(r.id)) return;
    this.queue.push(r);
    if (this.queue.length > this.keep) this.queue.shift();
    if (!this.flushing) { this.flushing = true; requestAnimationFrame(() => this.flushArrivals()); }
  }

  flushArrivals() {
    this.flushing = false;
    const added = this.queue.filter(r => this.index(r));
    this.queue = [];
    if (!added.length) return;
    this.all.sort((a, b) => b.id - a.id);
    for (const id of this.trimRequests()) { const row = this.rows.get(id); if (row) { row.remove(); this.rows.delete(id); } }
    if (added.some(r => !this.types.has(r.type || this.noType))) this.refreshTypes();
    const shown = added.filter(r => this.byId.has(r.id) && this.matches(r)).sort((a, b) => b.id - a.id);
    const tbody = $('#requests tbody'), list = $('#list');
    const top = list.scrollTop;
    const first = tbody.querySelector('tr[data-id]');
    const firstId = first ? Number(first.dataset.id) : -1;
    const frag = document.createDocumentFragment(), prepended = [];
    for (const r of shown) {
      const row = this.requestRow(r);
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
    this.updateCount();
  }

  openOrPick(id) {
    if (this.pickFor != null && this.pickFor !== id) {
      const a = this.pickFor;
      this.setPick(null);
      this.openDiff(a, id).catch(report);
      return;
    }
    this.openDetail(id);
  }

  setPick(id) {
    this.pickFor = id;
    const hint = $('#pick-hint');
    hint.hidden = id == null;
    hint.textContent = id == null ? '' : 'Choose a request to compare with #' + id + ' (Esc cancels)';
    document.body.classList.toggle('picking', id != null);
  }

  tickCompare(id, on) {
    this.compare = this.compare.filter(x => x !== id);
    if (on) this.compare.push(id);
    // Two at most: a third tick replaces the oldest.
    while (this.compare.length > 2) {
      const old = this.compare.shift();
      const row = this.rows.get(old);
      if (row) $('input.compare', row).checked = false;
    }
    this.updateCount();
  }

  compareTicked() {
    if (this.compare.length !== 2) return;
    const [a, b] = this.compare.slice().sort((x, y) => x - y);
    this.openDiff(a, b).catch(report);
  }

  markOpen(id) {
    for (const row of $('#requests tbody').querySelectorAll('tr.open')) { row.classList.remove('open'); row.removeAttribute('aria-current'); }
    const row = this.rows.get(id);
    if (row) { row.classList.add('open'); row.setAttribute('aria-current', 'true'); }
  }

  // forgetRequests drops what the page holds by request id.
  forgetRequests() {
    if (this.open != null) this.closeDetail();
    this.closeDiff();
    this.setPick(null);
    this.compare = [];
    this.body = null;
    this.all = [];
    this.byId.clear();
    this.hay.clear();
    this.updateCount();
  }

  closeDetail() {
    const id = this.open;
    this.open = null;
    this.markOpen(null);
    $('#detail').hidden = true;
    document.body.classList.remove('detail-open');
    const row = this.rows.get(id);
    if (row) focusRow($('#requests tbody'), row);
  }

  async openDetail(id) {
    const seq = ++this.detailSeq;
    this.open = id;
    this.markOpen(id);
    const panel = $('#detail');
    panel.hidden = false;
    document.body.classList.add('detail-open');
    const known = this.byId.get(id);
    replace(panel, this.detailHeader(id, known), h('p', {class: 'muted pad', text: 'Loading…'}));
    let data;
    try {
      data = await this.client.api('/api/requests/' + id);
    } catch (e) {
      if (seq === this.detailSeq) replace(panel, this.detailHeader(id, known), h('p', {class: 'error pad', text: e.message}));
      throw e;
    }
    if (seq !== this.detailSeq) return;
    this.renderDetail(panel, data.request, data.check);
    this.loadBody(id, seq).catch(report);
  }

  detailHeader(id, r) {
    return h('div', {class: 'panel-head'},
      h('h2', null, r ? r.method + ' ' + r.path + (r.query ? '?' + r.query : '') : 'Request', ' ', h('span', {class: 'muted', text: '#' + id})),
      h('button', {type: 'button', class: 'icon', 'aria-label': 'Close detail (Esc)', title: 'Close (Esc)', text: '×', onclick: () => this.closeDetail()}));
  }

  renderDetail(panel, r, check) {
    const id = r.id;
    const sig = r.signature || {};
    const copyHost = h('div', {class: 'copy-host'});
    const actions = h('div', {class: 'actions'},
      h('button', {type: 'button', id: 'copy-curl', title: 'A curl command that sends this request again', text: 'Copy as curl',
        onclick: guarded(async () => copyText(await this.client.api('/api/requests/' + id + '/curl', {as: 'text'}), copyHost, 'curl command'))}),
      h('a', {id: 'download-request', class: 'btn', href: '/api/requests/' + id + '/request', download: 'request-' + id + '.http', onclick: ev => this.downloadWithToken(ev),
        title: 'The request as an HTTP message, for evfwd verify --request FILE', text: 'Download for verify --request'}),
      h('button', {type: 'button', class: 'compare-with', title: 'Then choose the other request in the list', text: 'Compare with…',
        onclick: () => { this.setPick(id); const row = this.rows.get(id); if (row) focusRow($('#requests tbody'), row); }}),
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

    const bodyPre = h('pre', {id: 'body', class: 'code', tabindex: '0', 'aria-label': 'Body', 'aria-busy': 'true'}, h('span', {class: 'muted', text: 'Loading the body…'}));
    const bodySect = section('Body', true,
      h('div', {class: 'sect-tools'},
        h('button', {type: 'button', id: 'show-raw', 'aria-pressed': 'false', title: 'Toggle between pretty-printed and the exact bytes', text: 'Raw bytes',
          onclick: ev => this.toggleRaw(ev.currentTarget)}),
        h('span', {id: 'body-note', class: 'muted'})),
      bodyPre);

    const headersSect = section('Headers (' + Object.keys(r.headers || {}).length + ')', true, this.headersTable(r));

    panel.dataset.id = id;
    replace(panel, this.detailHeader(id, r), actions, copyHost,
      h('div', {class: 'panel-body'}, overview, checkSect, bodySect, headersSect, shapeSect, fwdSect, this.replaySection(r)));
  }

  // headersTable is a request's headers: the value of a sensitive one
  // (Cookie, Authorization...) is fetched and shown only on a click, so that
  // it is not on screen, in the list or in the page's memory until asked for.
  headersTable(r) {
    const sensitive = new Set(r.sensitive || []);
    if (!sensitive.size) return kvTable(r.headers, 'Request headers');
    const keys = Object.keys(r.headers || {}).sort((a, b) => a.localeCompare(b));
    return h('table', {class: 'kv', 'aria-label': 'Request headers'},
      h('tbody', null, keys.map(k => h('tr', null, h('th', {scope: 'row', text: k}),
        h('td', null, sensitive.has(k) ? this.revealButton(r.id, k) : r.headers[k])))));
  }

  revealButton(id, name) {
    const btn = h('button', {type: 'button', class: 'reveal', 'aria-label': 'Show the value of ' + name,
      title: 'A credential: shown only when asked for', text: 'show',
      onclick: guarded(async () => {
        const res = await this.client.api('/api/requests/' + id + '/headers');
        btn.replaceWith(document.createTextNode(res.headers[name] || ''));
      })});
    return btn;
  }

  // loadBody fetches the exact bytes once: the pretty view is built from
  // them (so numbers keep their spelling), the raw view shows them as is.
  async loadBody(id, seq) {
    const bytes = await this.client.api('/api/requests/' + id + '/body', {as: 'bytes'});
    if (seq !== this.detailSeq) return;
    let text = null;
    try { text = new TextDecoder('utf-8', {fatal: true}).decode(bytes); } catch (e) { /* binary */ }
    this.body = {id, bytes, text, raw: false};
    this.renderBody();
  }

  renderBody() {
    const b = this.body, pre = $('#body'), note = $('#body-note');
    if (!pre || !b) return;
    pre.removeAttribute('aria-busy');
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

  toggleRaw(btn) {
    if (!this.body) return;
    this.body.raw = !this.body.raw;
    btn.setAttribute('aria-pressed', String(this.body.raw));
    btn.textContent = this.body.raw ? 'Pretty' : 'Raw bytes';
    this.renderBody();
  }

  replaySection(r) {
    const s = this.client.session.listen || {};
    const noSecret = !s.secrets;
    const url = h('input', {id: 'replay-url', type: 'url', class: 'wide', value: this.replayUrl != null ? this.replayUrl : (s.forwardTo || s.url || ''),
      placeholder: s.forwardTo || s.url || 'http://…', 'aria-label': 'Replay to URL', spellcheck: 'false',
      oninput: ev => { this.replayUrl = ev.target.value; }});
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
      this.replay(r.id, url.value.trim(), resign.checked, btn, result).catch(report);
    });
    return h('details', {class: 'sect', id: 'replay-sect', open: true}, h('summary', {text: 'Replay'}), form);
  }

  async replay(id, url, resign, btn, out) {
    btn.disabled = true;
    replace(out, h('p', {class: 'muted', text: 'Sending…'}));
    const body = {id, resign};
    if (url) body.url = url;
    try {
      const res = await this.client.post('/api/replay', body);
      this.renderReplay(out, res);
    } catch (e) {
      replace(out, h('p', {class: 'error', text: e.message}));
      throw e;
    } finally {
      btn.disabled = false;
    }
  }

  renderReplay(out, res) {
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

  async openDiff(a, b) {
    const panel = $('#diff');
    this.diffReturn = document.activeElement;
    panel.hidden = false;
    replace(panel, this.diffHead(a, b), h('p', {class: 'muted pad', text: 'Loading…'}));
    panel.focus();
    const [ra, rb] = await Promise.all([this.client.api('/api/requests/' + a), this.client.api('/api/requests/' + b)]);
    const body = r => r.bodyBase64 != null ? '(binary) ' + r.bodyBase64 : r.bodyRaw != null ? r.bodyRaw : r.body;
    const sortKeys = o => Object.keys(o || {}).sort().reduce((m, k) => (m[k] = o[k], m), {});
    const la = '#' + a + ' ' + (ra.request.type || ra.request.path) + ' · ' + fmtTime(ra.request.receivedAt);
    const lb = '#' + b + ' ' + (rb.request.type || rb.request.path) + ' · ' + fmtTime(rb.request.receivedAt);
    const bodyDiff = diffValues(body(ra.request), body(rb.request));
    const headDiff = diffValues(sortKeys(ra.request.headers), sortKeys(rb.request.headers));
    const only = h('input', {type: 'checkbox', id: 'diff-only', onchange: ev => panel.classList.toggle('only-diff', ev.target.checked)});
    replace(panel, this.diffHead(a, b),
      h('div', {class: 'toolbar'}, h('label', {class: 'check'}, only, ' Only differing lines'),
        h('span', {class: 'legend'}, h('span', {class: 'lg d-chg', text: '~ changed'}), h('span', {class: 'lg d-del', text: '− only in #' + a}), h('span', {class: 'lg d-add', text: '+ only in #' + b}))),
      h('div', {class: 'diff-body'},
        h('h3', {text: 'Body'}), pathSummary(bodyDiff.paths), diffTable(bodyDiff, la, lb),
        h('h3', {text: 'Headers'}), pathSummary(headDiff.paths), diffTable(headDiff, la, lb)));
  }

  diffHead(a, b) {
    return h('div', {class: 'panel-head'},
      h('h2', {text: 'Compare #' + a + ' ↔ #' + b}),
      h('button', {type: 'button', class: 'icon', 'aria-label': 'Close comparison (Esc)', title: 'Close (Esc)', text: '×', onclick: () => this.closeDiff()}));
  }

  closeDiff() {
    $('#diff').hidden = true;
    const back = this.diffReturn;
    if (back && document.contains(back)) back.focus();
  }
}
