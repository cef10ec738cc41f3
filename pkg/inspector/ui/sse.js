// Live events: /api/events as server-sent events, read by EventSource or,
// when a call needs a header, by fetch.

import {report, setLive} from './dom.js';

// StreamSource reads a server-sent event stream with fetch, so that the
// request carries the client's authHeaders (EventSource cannot send
// headers). It offers what connectEvents uses of EventSource: onopen,
// onerror, readyState, addEventListener and close. A dropped stream or an HTTP error closes it
// (connectEvents then reconnects); a 401 signs the page out.
class StreamSource {
  constructor(client, url) {
    this.client = client;
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
    const res = await fetch(url, {headers: this.client.authHeaders({Accept: 'text/event-stream'}), credentials: 'omit',
      cache: 'no-store', signal: this.ctl.signal});
    if (!res.ok || !res.body) {
      if (res.status === 401) this.client.unauthorized();
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
// an HTTP error; then we retry with a growing delay. withAuth reads the
// stream with fetch, to send the client's session or token.
export function connectEvents(client, names, onEvent, onOpen, withAuth) {
  const source = withAuth ? url => new StreamSource(client, url) : url => new EventSource(url);
  let es = null, delay = 1000, stopped = false;
  function open() {
    if (stopped) return;
    es = source('/api/events');
    es.onopen = () => {
      delay = 1000;
      setLive('open', 'live', 'Connected: new events appear as they happen');
      onOpen();
    };
    es.onerror = () => {
      setLive('reconnecting', 'reconnecting…', 'The event stream dropped; retrying');
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
  return {stop() { stopped = true; if (es) es.close(); setLive('closed', 'offline'); }};
}
