// evfwd inspector: the page behind `evfwd listen --ui` and `evfwd serve --ui`
// (docs/INSPECTOR.md). Plain ES modules, no build step, nothing loaded from
// elsewhere. This entry reads the session and starts the app its mode
// names: listen's request inspector or serve's delivery log.

import {$, h, replace, report} from './dom.js';
import {Client} from './api.js';

async function start() {
  const client = new Client();
  client.takeListenToken();
  client.takeSignInCode();
  try {
    await client.loadSession();
  } catch (e) {
    replace($('#app'), h('p', {class: 'error pad', text: 'Cannot start the inspector: ' + e.message}));
    report(e);
    return;
  }
  const app = client.session.mode === 'serve'
    ? new (await import('./serve.js')).ServeApp(client)
    : new (await import('./listen.js')).ListenApp(client);
  app.start();
}

window.addEventListener('unhandledrejection', ev => report(ev.reason));
start();
