// The form that asks for a token: serve's admin token, or the token of a
// listen inspector reachable beyond loopback. What a token opens (a serve
// session, a listen token kept by the tab) is the Client's; this is the
// page signed out.

import {$, h, clear, replace, setLive} from './dom.js';

// showLogin replaces the page with a token form. opts: title, help (the
// text under it), inputId, autocomplete, button (its label), error (a
// message to show at once), extra (nodes before the field), and
// onSubmit(value, errorLine), called on submit.
export function showLogin(opts) {
  setLive('closed', 'signed out');
  clear($('#summary'));
  const token = h('input', {id: opts.inputId, type: 'password', autocomplete: opts.autocomplete, required: true, 'aria-describedby': 'login-help'});
  const err = h('p', {id: 'login-error', class: 'error', role: 'alert', text: opts.error || ''});
  const form = h('form', {class: 'login', 'aria-labelledby': 'login-title'},
    h('h1', {id: 'login-title', text: opts.title}),
    h('p', {id: 'login-help', class: 'muted', text: opts.help}),
    opts.extra,
    h('label', {class: 'ctl-block'}, h('span', {text: 'Token'}), token),
    h('button', {type: 'submit', id: 'login', class: 'primary', text: opts.button}),
    err);
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    opts.onSubmit(token.value, err);
  });
  replace($('#app'), form);
  token.focus();
}
