// What every report page shares: its data block, its style sheet, small DOM helpers.
import css from './report.css';

// The JSON that tessera writes into <script type="application/json" id="tessera-data">.
export function reportData() {
  return JSON.parse(document.getElementById('tessera-data').textContent);
}

export function injectStyle() {
  const s = document.createElement('style');
  s.textContent = css;
  document.head.appendChild(s);
}

// el('td', {class: 'x'}, 'text', child, ...)
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

export function header(data, subtitle) {
  return el('header', {}, el('h1', {}, data.title), el('p', { class: 'sub' }, subtitle));
}

export function table(columns, rows, id) {
  const t = el('table', id ? { id } : {});
  t.append(el('thead', {}, el('tr', {}, ...columns.map((c) => el('th', {}, c)))));
  const body = el('tbody');
  for (const r of rows) body.append(el('tr', {}, ...r.map((c) => el('td', {}, c))));
  t.append(body);
  return t;
}

export function swatch(rgb) {
  return el('span', { class: 'swatch', style: `background: rgb(${rgb.join(',')})` });
}

// Decodes base64 into an ArrayBuffer (data embedded in the page: nothing is fetched).
export function base64ToBuffer(b64) {
  const bin = atob(b64);
  const u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  return u.buffer;
}

export function fixed(x, digits) {
  return x === null || x === undefined ? '–' : Number(x).toFixed(digits);
}

// Marks the page ready once its viewer has drawn (tests wait for this).
export function ready() {
  document.body.dataset.ready = '1';
}
