// serve's delivery log: deliveries with their attempts, retries, a
// per-minute chart per endpoint, and each source's destinations (what
// each takes and sends, pause and resume, its deliveries per minute). The
// statuses, the filters, the destinations, the chart's series and the
// events are the server's, from GET /api/session.

import {$, h, replace, isEditable, throttle, debounce, toast, report, guarded} from './dom.js';
import {fmtStamp, fmtMs, statusClass, jsonBlock} from './format.js';
import {keyList, focusRow, ensureRoving, field, section, select, summaryItem} from './widgets.js';
import {renderChart, markEndpoint, minutesChart} from './chart.js';
import {connectEvents} from './sse.js';
import {showLogin} from './login.js';

export class ServeApp {
  constructor(client) {
    this.client = client;
    this.deliveries = [];
    this.next = null;
    this.filter = {source: '', status: '', destination: '', endpoint: ''};
    this.dests = [];        // every source's destinations, as serve runs them
    this.destStats = [];    // GET /api/stats's destinations
    this.open = null;
    this.seq = 0;
    this.detailSeq = 0;
    this.events = null;
    this.tick = null;       // the chart's refresh timer
    this.keys = false;      // the page's keys are bound
    this.rowCache = null;
  }

  start() {
    document.body.classList.add('mode-serve');
    $('#mode-name').textContent = 'serve inspector';
    this.client.onUnauthorized = () => {
      // Signed out (idle too long, logged out elsewhere, serve restarted):
      // stop what the signed-in page ran; a login starts it anew.
      this.signedOut('The session has ended: enter the admin token again.');
    };
    const code = this.client.signInCode;
    this.client.signInCode = '';
    if (!this.client.session.auth && code) { this.redeem(code).catch(report); return; }
    if (!this.client.session.auth) { this.showLogin(this.client.sessionID() ? 'The session has ended: enter the admin token again.' : ''); this.client.keepSession(''); return; }
    this.logoutButton().hidden = false;
    const s = this.client.session.serve || {};
    replace($('#summary'),
      summaryItem('serving', s.url),
      summaryItem('store', s.store),
      summaryItem('sources', String((s.sources || []).length), (s.sources || []).map(x => x.name).join(', ')),
      summaryItem('version', this.client.session.version));
    this.dests = (s.sources || []).flatMap(src => (src.destinations || []).map(d => Object.assign({source: src.name}, d)));
    this.buildLayout();
    const refresh = throttle(() => { this.loadDeliveries(true).catch(report); this.loadStats().catch(report); }, 1000);
    const refreshStats = throttle(() => this.loadStats().catch(report), 1000);
    const refreshOpen = throttle(() => { if (this.open != null) this.openDelivery(this.open, true).catch(report); }, 1000);
    this.events = connectEvents(this.client, this.client.meta.events, (name, ev) => {
      if (name === 'endpoint') { markEndpoint(ev); refreshStats(); return; }
      if (name === 'stored') { refresh(); return; }
      if (name === 'destination') { this.updateDestination(ev); return; }
      refresh();
      // Only the delivery on screen is re-read, so a reader is not disturbed.
      // An attempt's event comes before its outcome is on record; the
      // delivery's event, after.
      const id = name === 'delivery' ? ev.id : ev.delivery;
      if (id === this.open) refreshOpen();
    }, () => { refresh(); refreshOpen(); }, true);
    this.loadDeliveries(false).catch(report);
    this.loadStats().catch(report);
    // The chart's window moves on even when nothing happens.
    clearInterval(this.tick);
    this.tick = setInterval(() => this.loadStats().catch(report), 30000);
  }

  // signedOut stops what the signed-in page ran and asks for the token.
  signedOut(note) {
    this.client.keepSession('');
    if (this.events) { this.events.stop(); this.events = null; }
    clearInterval(this.tick);
    this.showLogin(note);
  }

  // logoutButton is the header's "Log out", made once.
  logoutButton() {
    let b = $('#logout');
    if (!b) {
      b = h('button', {type: 'button', id: 'logout', hidden: true, title: 'End this session: the page asks for the admin token again',
        text: 'Log out', onclick: guarded(() => this.logout())});
      $('#live').after(b);
    }
    return b;
  }

  // logout ends the session on the server (DELETE /api/session), then here.
  async logout() {
    try {
      await this.client.api('/api/session', {method: 'DELETE', as: 'text'});
    } finally {
      this.signedOut('Logged out.');
    }
  }

  showLogin(note) {
    if ($('#logout')) $('#logout').hidden = true;
    showLogin({
      title: 'Admin token', inputId: 'token', autocomplete: 'current-password', button: 'Sign in',
      help: note || 'evfwd serve asks for its admin token. The session stays in this tab only, and ends on Log out, after ' + this.idleText() + ' without use, or when serve restarts.',
      // Password managers want a user name beside a password.
      extra: h('input', {type: 'text', name: 'username', autocomplete: 'username', value: 'evfwd admin', hidden: true, tabindex: '-1', 'aria-hidden': 'true'}),
      onSubmit: (token, err) => this.login(token, err).catch(report),
    });
  }

  idleText() {
    // Before a login, the session answer says nothing: serve's default.
    const hours = Math.round((this.client.session.idleMs || 12 * 3600 * 1000) / 3600000);
    return hours === 1 ? 'an hour' : hours + ' hours';
  }

  async login(token, err) {
    err.textContent = '';
    try {
      const res = await this.client.post('/api/session', {token}, true);
      this.client.keepSession(res.session);
    } catch (e) {
      err.textContent = e.status === 403 ? 'That is not the admin token.' : e.message;
      $('#token').select();
      return;
    }
    await this.client.loadSession();
    if (!this.client.session.auth) { err.textContent = 'Signed in, but the session was not kept.'; return; }
    document.body.classList.remove('mode-serve');
    this.start();
  }

  // redeem exchanges a sign-in link's code for a session, as login does
  // the admin token; a used or expired link asks for the token.
  async redeem(code) {
    try {
      const res = await this.client.post('/api/session', {code}, true);
      this.client.keepSession(res.session);
      await this.client.loadSession();
    } catch (e) {
      this.showLogin(e.status === 403 ? 'That sign-in link has been used or has expired: enter the admin token, or start evfwd serve --ui again for a new link.' : e.message);
      return;
    }
    document.body.classList.remove('mode-serve');
    this.start();
  }

  // destinationNames are the names GET /api/deliveries?destination= takes,
  // each once (sources may share one, "webhooks" the first).
  destinationNames() {
    return [...new Set(this.dests.map(d => d.name))];
  }

  allEndpoints() {
    const set = new Set();
    for (const s of (this.client.session.serve && this.client.session.serve.sources) || []) for (const e of s.endpoints || []) set.add(e);
    return [...set];
  }

  buildLayout() {
    const sources = (this.client.session.serve && this.client.session.serve.sources) || [];
    const meta = this.client.meta;
    const onFilter = () => {
      this.filter.source = $('#filter-source').value;
      this.filter.status = $('#filter-status').value;
      this.filter.destination = $('#filter-destination').value;
      this.filter.endpoint = $('#filter-endpoint').value;
      this.updateRetryButtons();
      this.loadDeliveries(false).catch(report);
    };
    const chart = h('section', {id: 'chart', class: 'chart', 'aria-label': 'Endpoints: attempts per minute and latency, last hour'},
      h('p', {class: 'muted pad', text: 'Loading the chart…'}));
    const toolbar = h('div', {class: 'toolbar', role: 'search'},
      select('filter-source', 'Source', [['', 'All sources']].concat(sources.map(s => [s.name, s.name])), '', onFilter),
      select('filter-status', 'Status', [['', 'All statuses']].concat(meta.statuses.map(s => [s, s])), '', onFilter),
      select('filter-destination', 'Destination', [['', 'All destinations']].concat(this.destinationNames().map(n => [n, n])), '', onFilter),
      select('filter-endpoint', 'Endpoint', [['', 'All endpoints']].concat(this.allEndpoints().map(u => [u, u])), '', onFilter),
      h('span', {id: 'count', class: 'muted', 'aria-live': 'polite'}),
      h('span', {class: 'spacer'}),
      meta.retryable.map(st => h('button', {type: 'button', id: 'retry-' + st, onclick: guarded(() => this.retryAll(st))})),
      h('button', {type: 'button', id: 'refresh', title: 'Reload the list and the chart', text: 'Refresh',
        onclick: () => { this.loadDeliveries(true).catch(report); this.loadStats().catch(report); }}));
    const thead = h('thead', null, h('tr', null,
      ['ID', 'Created', 'Source', 'Destination', 'Type', 'Message ID', 'Status', 'Attempts', 'Last error'].map(t =>
        h('th', {scope: 'col', class: 'c-' + t.toLowerCase().replace(/ /g, ''), text: t}))));
    const tbody = h('tbody');
    const table = h('table', {id: 'deliveries', class: 'grid', 'aria-label': 'Deliveries, newest first'}, thead, tbody);
    const more = h('button', {type: 'button', id: 'load-more', hidden: true, text: 'Load more', onclick: guarded(() => this.loadMore())});
    const detail = h('aside', {id: 'delivery', class: 'panel', 'aria-label': 'Delivery detail', hidden: true, tabindex: '-1'});
    const dests = h('section', {id: 'destinations', class: 'chart', 'aria-label': 'Destinations: what each takes and sends, and its deliveries per minute, last hour'});
    replace($('#app'),
      h('details', {class: 'chart-wrap', open: true}, h('summary', {text: 'Endpoints, last hour'}), chart),
      h('details', {class: 'chart-wrap', id: 'destinations-wrap', open: true}, h('summary', {text: 'Destinations, last hour'}), dests),
      toolbar,
      h('div', {class: 'split'}, h('div', {class: 'list', id: 'list'}, table, h('div', {id: 'empty', class: 'empty', hidden: true}), h('div', {class: 'more'}, more)), detail));
    this.updateRetryButtons();
    this.renderDestinations();
    tbody.addEventListener('click', ev => {
      const row = ev.target.closest('tr[data-id]');
      if (row) this.openDelivery(Number(row.dataset.id)).catch(report);
    });
    keyList(tbody, id => this.openDelivery(Number(id)).catch(report),
      debounce(id => { if (this.open != null) this.openDelivery(Number(id)).catch(report); }, 150));
    if (!this.keys) { // once: the layout is built again after each login
      this.keys = true;
      document.addEventListener('keydown', ev => {
        if (!$('#delivery')) return;
        if (ev.key === 'Escape' && this.open != null && !$('#delivery').hidden) { ev.preventDefault(); this.closeDelivery(); return; }
        if (isEditable(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
        if (ev.key === '/') { ev.preventDefault(); $('#filter-source').focus(); }
      });
    }
  }

  // updateRetryButtons says what "Retry all" of each status the server
  // retries would send again under the filters.
  updateRetryButtons() {
    const {source, destination, endpoint} = this.filter;
    const narrow = [source, destination && '→ ' + destination, endpoint && hostOf(endpoint)].filter(Boolean).join(', ');
    const of = (source ? ' of source ' + source : '') + (destination ? ' to destination ' + destination : '') + (endpoint ? ' tried at ' + endpoint : '');
    for (const st of this.client.meta.retryable) {
      const b = $('#retry-' + st);
      b.textContent = 'Retry all ' + st + (narrow ? ' (' + narrow + ')' : '');
      b.title = 'Send every ' + st + ' delivery' + of + ' again';
    }
  }

  deliveriesQuery(extra) {
    const q = new URLSearchParams();
    for (const k of ['source', 'status', 'destination', 'endpoint']) if (this.filter[k]) q.set(k, this.filter[k]);
    for (const k in extra || {}) q.set(k, extra[k]);
    const s = q.toString();
    return '/api/deliveries' + (s ? '?' + s : '');
  }

  // loadDeliveries reloads the first page; keep=true (a live refresh) asks
  // for as many as are shown, so that "load more" pages are not lost.
  async loadDeliveries(keep) {
    const seq = ++this.seq;
    const limit = keep ? Math.min(1000, Math.max(100, this.deliveries.length)) : 100;
    const data = await this.client.api(this.deliveriesQuery({limit}));
    if (seq !== this.seq) return;
    this.deliveries = data.deliveries || [];
    this.next = data.next != null ? data.next : null;
    this.renderDeliveries();
  }

  async loadMore() {
    if (this.next == null) return;
    const seq = ++this.seq;
    const data = await this.client.api(this.deliveriesQuery({before: this.next, limit: 100}));
    if (seq !== this.seq) return;
    const have = new Set(this.deliveries.map(d => d.id));
    this.deliveries = this.deliveries.concat((data.deliveries || []).filter(d => !have.has(d.id)));
    this.next = data.next != null ? data.next : null;
    this.renderDeliveries();
  }

  renderDeliveries() {
    const tbody = $('#deliveries tbody');
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#deliveries tr[data-id]');
    const keep = focused ? focused.dataset.id : (tbody.querySelector('tr[tabindex="0"]') || {dataset: {}}).dataset.id;
    // A live refresh keeps the rows that did not change, and the DOM is
    // not touched when none did: a click pressed on a row while the list
    // is redrawn would reach no row.
    const rows = this.deliveries.map(d => this.reuseRow(d));
    if (rows.length !== tbody.children.length || rows.some((r, i) => tbody.children[i] !== r)) replace(tbody, rows);
    this.rowCache = new Map(rows.map(r => [Number(r.dataset.id), r]));
    ensureRoving(tbody, keep);
    if (focused) { const row = tbody.querySelector('tr[data-id="' + keep + '"]'); if (row) row.focus(); }
    $('#load-more').hidden = this.next == null;
    const n = this.deliveries.length;
    $('#count').textContent = n + (n === 1 ? ' delivery' : ' deliveries') + (this.next != null ? ' (more below)' : '');
    const empty = $('#empty');
    empty.hidden = n > 0;
    if (!n) replace(empty, h('p', {text: Object.values(this.filter).some(Boolean) ? 'No delivery matches the filters.' : 'No deliveries yet.'}));
  }

  // reuseRow returns d's row as drawn before when d is unchanged, else a new
  // one. (Which row is open is marked on the rows in place.)
  reuseRow(d) {
    const key = JSON.stringify(d);
    const old = this.rowCache && this.rowCache.get(d.id);
    if (old && old.rowKey === key) return old;
    const row = this.deliveryRow(d);
    row.rowKey = key;
    return row;
  }

  deliveryRow(d) {
    return h('tr', {tabindex: '-1', class: this.open === d.id ? 'open' : null, 'aria-current': this.open === d.id ? 'true' : null,
      data: {id: d.id, status: d.status, destination: d.destination || ''}},
      h('td', {class: 'c-id num', text: d.id}),
      h('td', {class: 'c-created', title: d.createdAt, text: fmtStamp(d.createdAt)}),
      h('td', {class: 'c-source', text: d.source}),
      h('td', {class: 'c-destination', text: d.destination || ''}),
      h('td', {class: 'c-type', text: d.type || ''}),
      h('td', {class: 'c-messageid mono', title: d.messageId, text: d.messageId}),
      h('td', {class: 'c-status'}, h('span', {class: 'badge st-' + d.status, text: d.status})),
      h('td', {class: 'c-attempts num', text: d.attempts}),
      h('td', {class: 'c-lasterror', title: d.lastError || '', text: d.lastError || ''}));
  }

  closeDelivery() {
    const id = this.open;
    this.open = null;
    $('#delivery').hidden = true;
    document.body.classList.remove('detail-open');
    for (const r of $('#deliveries tbody').querySelectorAll('tr.open')) { r.classList.remove('open'); r.removeAttribute('aria-current'); }
    const row = $('#deliveries tbody tr[data-id="' + id + '"]');
    if (row) focusRow($('#deliveries tbody'), row);
  }

  async openDelivery(id, quiet) {
    const seq = ++this.detailSeq;
    this.open = id;
    for (const r of $('#deliveries tbody').querySelectorAll('tr[data-id]')) {
      const on = Number(r.dataset.id) === id;
      r.classList.toggle('open', on);
      if (on) r.setAttribute('aria-current', 'true'); else r.removeAttribute('aria-current');
    }
    const panel = $('#delivery');
    panel.hidden = false;
    document.body.classList.add('detail-open');
    if (!quiet) replace(panel, this.deliveryHead(id), h('p', {class: 'muted pad', text: 'Loading…'}));
    let d;
    try {
      d = await this.client.api('/api/deliveries/' + id);
    } catch (e) {
      if (seq === this.detailSeq) replace(panel, this.deliveryHead(id), h('p', {class: 'error pad', text: e.message}));
      throw e;
    }
    if (seq !== this.detailSeq) return;
    const top = panel.scrollTop;
    this.renderDelivery(panel, d);
    if (quiet) panel.scrollTop = top;
  }

  deliveryHead(id, d) {
    return h('div', {class: 'panel-head'},
      h('h2', null, 'Delivery ', h('span', {class: 'muted', text: '#' + id}), d ? [' ', h('span', {class: 'badge st-' + d.status, text: d.status})] : null),
      h('button', {type: 'button', class: 'icon', 'aria-label': 'Close detail (Esc)', title: 'Close (Esc)', text: '×', onclick: () => this.closeDelivery()}));
  }

  renderDelivery(panel, d) {
    const focused = document.activeElement && ['retry', 'resend'].includes(document.activeElement.id);
    const action = this.deliveryAction(d);
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
    replace(panel, this.deliveryHead(d.id, d),
      h('div', {class: 'actions'}, action),
      h('div', {class: 'panel-body'},
        h('dl', {class: 'fields'},
          field('Source', d.source), field('Destination', d.destination), field('Type', d.type), field('User', d.userId),
          field('Message', d.messageId, 'mono'), field('Attempts', String(d.attempts)),
          field('Created', fmtStamp(d.createdAt), 'mono'), field('First attempt', fmtStamp(d.firstAttempt), 'mono'),
          field('Next attempt', fmtStamp(d.nextAttempt), 'mono'), field('Updated', fmtStamp(d.updatedAt), 'mono'),
          field('Last error', d.lastError, 'error')),
        section('Attempts (' + attempts.length + ')', true, attempts.length ? h('ol', {id: 'attempts', class: 'attempts'}, attempts) : [h('ol', {id: 'attempts', class: 'attempts'}), h('p', {class: 'muted', text: 'No attempt yet.'})]),
        section('Message', true, d.message != null ? jsonBlock(d.message) : h('p', {class: 'muted', text: 'No message body.'}))));
    const again = $('#retry') || $('#resend');
    if (focused && again) again.focus();
  }

  // deliveryAction is the detail's button: Retry for what failed, Resend
  // (a new attempt, as Svix's and Stripe's resend) for what was delivered,
  // and a disabled Retry with the reason for the rest.
  deliveryAction(d) {
    const {retryable, resendable} = this.client.meta;
    const done = async (what, n) => {
      toast(what);
      if (n) await Promise.all([this.loadDeliveries(true), this.openDelivery(d.id, true)]);
    };
    if (retryable.includes(d.status)) {
      return h('button', {type: 'button', id: 'retry', class: 'primary', title: 'Send this delivery again now', text: 'Retry',
        onclick: guarded(async () => {
          const res = await this.client.post('/api/retry', {ids: [d.id]});
          await done(res.retried + ' retried', true);
        })});
    }
    if (resendable.includes(d.status)) {
      // A deletion request empties the message: nothing is left to send.
      const purged = d.message == null;
      return [h('button', {type: 'button', id: 'resend', class: 'primary', disabled: purged, text: 'Resend',
        title: purged ? 'Its message was withdrawn by a deletion request' : 'Send this delivery again as a new attempt; its earlier attempts stay listed',
        onclick: guarded(async () => {
          const res = await this.client.post('/api/resend', {ids: [d.id]});
          await done(res.resent ? res.resent + ' resent' : 'Not resent: ' + notResent(res), res.resent);
        })}),
      purged ? h('span', {class: 'muted', text: 'Its message was withdrawn by a deletion request: nothing to resend.'}) : null];
    }
    const which = retryable.join(' or ');
    return [h('button', {type: 'button', id: 'retry', class: 'primary', disabled: true, text: 'Retry',
      title: 'Only ' + which + ' deliveries can be retried'}),
    h('span', {class: 'muted', text: 'Retry applies to ' + which + ' deliveries, Resend to ' + resendable.filter(s => !retryable.includes(s)).join(' or ') + ' ones.'})];
  }

  async retryAll(status) {
    const body = {status};
    for (const k of ['source', 'destination', 'endpoint']) if (this.filter[k]) body[k] = this.filter[k];
    const res = await this.client.post('/api/retry', body);
    const of = [body.source && 'of ' + body.source, body.destination && 'for ' + body.destination, body.endpoint && 'to ' + body.endpoint].filter(Boolean).join(' ');
    toast(res.retried + ' retried' + (res.retried ? '' : ': no ' + status + ' delivery' + (of ? ' ' + of : '')));
    await this.loadDeliveries(true);
    if (this.open != null) await this.openDelivery(this.open, true);
  }

  async loadStats() {
    const data = await this.client.api('/api/stats');
    renderChart(data.endpoints || [], this.client.meta.series);
    this.destStats = data.destinations || [];
    // The stats say which destinations are paused now, whoever paused
    // them (this page, another, the admin API).
    for (const st of this.destStats) {
      const d = this.dests.find(x => x.source === st.source && x.name === st.name);
      if (d) d.paused = st.paused;
    }
    this.renderDestinations();
  }

  // updateDestination applies a destination's new state (a pause or a
  // resume's answer, or its event).
  updateDestination(ev) {
    const d = this.dests.find(x => x.source === ev.source && x.name === ev.name);
    if (d) d.paused = ev.paused;
    else this.dests.push(ev);
    this.renderDestinations();
  }

  // renderDestinations draws a card per destination: what it takes and how
  // it sends, its pause button, and its deliveries per minute.
  renderDestinations() {
    const box = $('#destinations');
    if (!box) return;
    if (!this.dests.length) { replace(box, h('p', {class: 'muted pad', text: 'No source forwards to a destination.'})); return; }
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#destinations .destination');
    const keep = focused && focused.dataset.source + '\0' + focused.dataset.name;
    const stats = new Map(this.destStats.map(st => [st.source + '\0' + st.name, st]));
    const series = this.client.meta.series;
    replace(box, this.dests.map(d => this.destinationCard(d, stats.get(d.source + '\0' + d.name), series)),
      h('div', {class: 'legend', 'aria-hidden': 'true'},
        h('span', {text: 'Deliveries per minute, as they settled: '}),
        series.map(k => h('span', {class: 'lg'}, h('i', {class: 'sw sw-' + k}), k))));
    if (keep) {
      for (const card of box.querySelectorAll('.destination')) {
        if (card.dataset.source + '\0' + card.dataset.name === keep) $('button.dest-toggle', card).focus();
      }
    }
  }

  destinationCard(d, st, series) {
    const state = d.paused ? 'paused' : 'running';
    const how = [];
    how.push(d.subscribe ? h('code', {class: 'dest-sub', title: 'Its subscription (Segment FQL): the messages it takes', text: d.subscribe})
      : h('span', {class: 'tag', title: 'No subscription: it takes every message', text: 'every message'}));
    if (d.maps) how.push(h('span', {class: 'tag dest-maps', title: 'A mapping shapes each body it sends', text: 'maps'}));
    if (d.batch) how.push(h('span', {class: 'tag dest-batch', title: 'Up to ' + d.batch + ' messages a request, as a JSON array', text: 'batches of ' + d.batch}));
    if (d.perSecond) how.push(h('span', {class: 'tag dest-pace', title: 'At most ' + d.perSecond + ' requests a second', text: d.perSecond + '/s'}));
    const label = (d.paused ? 'Resume ' : 'Pause ') + d.name + ' of ' + d.source;
    const toggle = h('button', {type: 'button', class: 'dest-toggle' + (d.paused ? ' primary' : ''), 'aria-label': label,
      title: d.paused ? 'Send its waiting deliveries again' : 'Keep its deliveries waiting in the store and send none until resumed (this serve process)',
      text: d.paused ? 'Resume' : 'Pause',
      onclick: guarded(async () => {
        const res = await this.client.post(d.paused ? '/api/resume' : '/api/pause', {source: d.source, destination: d.name});
        this.updateDestination(res);
        toast(res.name + ' of ' + res.source + (res.paused ? ' paused' : ' resumed'));
      })});
    return h('div', {class: 'destination', data: {source: d.source, name: d.name, paused: String(!!d.paused)}},
      h('div', {class: 'ep-head'},
        h('span', {class: 'badge dest-' + state, text: state}), ' ',
        h('strong', {class: 'dest-name', text: d.name}), ' ',
        h('span', {class: 'muted', text: d.source}),
        h('span', {class: 'spacer'}), toggle),
      h('div', {class: 'dest-how small'}, how),
      h('div', {class: 'mono small ep-url dest-endpoints', title: (d.endpoints || []).join('\n'), text: (d.endpoints || []).join(' → ')}),
      minutesChart(st ? st.minutes : [], series, 'Deliveries per minute of ' + d.name + ' of ' + d.source, d.paused ? ' Paused.' : ''));
  }
}

// notResent says why POST /api/resend left a delivery alone.
function notResent(res) {
  if (res.purged.length) return 'its message was withdrawn by a deletion request';
  if (res.pending.length) return 'it is pending already';
  return 'no such delivery (pruned?)';
}

function hostOf(url) {
  try { return new URL(url).host; } catch (e) { return url; }
}
