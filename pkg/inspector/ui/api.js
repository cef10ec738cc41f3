// The client of this origin's inspector API: what a call carries (serve's
// session, listen's token, the CSRF token of listen's POSTs) and what an
// error answer becomes.

// The serve inspector's session: an id that POST /api/session answers,
// held by this tab (sessionStorage is per origin, port included, and per
// tab) and sent as a header with every call. No cookie: nothing that the
// browser sends by itself to other ports of this host opens the inspector.
const SESSION_KEY = 'evfwd-session';
const SESSION_HEADER = 'X-Evfwd-Session';

// The token a listen inspector needs (listen --ui-token, or the one listen
// made up and printed, beyond loopback): from the address's #token=,
// which takeListenToken then removes from it, or typed in; kept by this
// tab like serve's session.
const LISTEN_TOKEN_KEY = 'evfwd-listen-token';

const CSRF_HEADER = 'X-CSRF-Token';

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// stored reads this tab's sessionStorage; '' when the browser refuses it.
function stored(key) {
  try { return sessionStorage.getItem(key) || ''; } catch (e) { return ''; }
}

function store(key, value) {
  try {
    if (value) sessionStorage.setItem(key, value);
    else sessionStorage.removeItem(key);
  } catch (e) { /* storage refused: the value lives until the page is left */ }
}

export class Client {
  constructor() {
    // session is the last answer of GET /api/session (mode, auth, csrf,
    // meta...); onUnauthorized runs on a 401.
    this.session = null;
    this.onUnauthorized = null;
    this.memorySession = ''; // when the browser refuses sessionStorage
    this.signInCode = '';    // a sign-in link's code, until redeemed
    this.listenToken = stored(LISTEN_TOKEN_KEY);
  }

  sessionID() { return stored(SESSION_KEY) || this.memorySession; }

  keepSession(id) {
    store(SESSION_KEY, id);
    this.memorySession = id || '';
  }

  keepListenToken(token) {
    this.listenToken = token || '';
    store(LISTEN_TOKEN_KEY, token);
  }

  // takeListenToken keeps the address's #token= and removes it from the
  // address bar and the history.
  takeListenToken() {
    const m = /^#token=([A-Za-z0-9._~-]+)$/.exec(location.hash);
    if (!m) return;
    this.keepListenToken(decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }

  // takeSignInCode keeps the address's #signin= (the one-time link serve
  // --ui prints) for the serve app to redeem, and removes it from the
  // address bar and the history first, so that it is never shown, kept or
  // shared.
  takeSignInCode() {
    const m = /^#signin=([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (!m) return;
    this.signInCode = m[1];
    history.replaceState(null, '', location.pathname + location.search);
  }

  // authHeaders are the headers that carry the session or the token, when
  // there is one.
  authHeaders(headers) {
    const out = Object.assign({}, headers || {});
    const id = this.sessionID();
    if (id) out[SESSION_HEADER] = id;
    if (this.listenToken) out.Authorization = 'Bearer ' + this.listenToken;
    return out;
  }

  unauthorized() { if (this.onUnauthorized) this.onUnauthorized(); }

  // loadSession reads GET /api/session into this.session.
  async loadSession() {
    this.session = await this.api('/api/session');
    return this.session;
  }

  // meta is what the server names for the page (statuses, verdicts...).
  get meta() { return (this.session && this.session.meta) || {}; }

  // api calls this origin's API. as: 'json' (default), 'text' or 'bytes'.
  // A 4xx/5xx answer becomes an ApiError carrying the server's "error".
  async api(path, opts) {
    opts = opts || {};
    let res;
    try {
      res = await fetch(path, {method: opts.method || 'GET', headers: this.authHeaders(opts.headers), body: opts.body,
        credentials: 'omit', cache: 'no-store'});
    } catch (e) {
      throw new ApiError(0, 'cannot reach evfwd (' + e.message + '): is it still running?');
    }
    if (!res.ok) {
      let msg = res.status + ' ' + res.statusText;
      try { const j = await res.json(); if (j && j.error) msg = j.error; } catch (e) { /* not JSON: keep the status */ }
      if (res.status === 401) this.unauthorized();
      throw new ApiError(res.status, path.split('?')[0] + ': ' + msg);
    }
    if (opts.as === 'text') return res.text();
    if (opts.as === 'bytes') return new Uint8Array(await res.arrayBuffer());
    return res.json();
  }

  // post sends a state-changing call: JSON body and the session's CSRF
  // token. A restarted evfwd has a new token: on a 403 the page asks for
  // it and tries once more.
  async post(path, body, noCSRF) {
    const send = () => {
      const headers = {'Content-Type': 'application/json'};
      if (!noCSRF) headers[CSRF_HEADER] = (this.session && this.session.csrf) || '';
      return this.api(path, {method: 'POST', headers, body: JSON.stringify(body)});
    };
    try {
      return await send();
    } catch (e) {
      if (noCSRF || e.status !== 403) throw e;
      const fresh = await this.api('/api/session');
      if (!fresh.csrf || fresh.csrf === this.session.csrf) throw e;
      this.session.csrf = fresh.csrf;
      return send();
    }
  }
}
