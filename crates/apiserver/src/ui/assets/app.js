// The minik8s view: plain JavaScript, no build step. Everything it shows
// comes from /ui/api/*, answered as the signed-in user.
'use strict';

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
};

async function getJSON(path) {
  const r = await fetch(path, {credentials: 'same-origin', headers: {Accept: 'application/json'}});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.message || (r.status + ' ' + r.statusText));
  return body;
}

const params = new URLSearchParams(location.search);
let namespace = params.get('namespace') || '';
$('namespace').value = namespace;

// ---- nodes and pods -------------------------------------------------------

function podButton(p, extraClass = '') {
  const label = `${p.namespace}/${p.name}`;
  return el('button', {
    class: `pod ${p.phase} ${extraClass}`.trim(), type: 'button', 'data-pod': label,
    'aria-label': `pod ${label}, ${p.phase}, ready ${p.ready}; show its journey`,
    onclick: () => showJourney('pods', '', p.namespace, p.name),
  }, el('span', {class: 'name'}, p.name), ' ',
  el('span', {class: 'meta'}, `${p.phase}${p.deleting ? ' (terminating)' : ''} · ${p.ready}${p.restarts ? ' · ' + p.restarts + ' restarts' : ''}${p.namespace !== 'default' ? ' · ' + p.namespace : ''}`));
}

// LeaderWorkerSet groups as leader + workers, DisaggregatedSet roles side by side.
function podList(pods) {
  const list = el('ul', {class: 'pods'});
  const groups = new Map();
  const roles = new Map();
  for (const p of pods) {
    if (p.group) {
      const key = `${p.namespace}/${p.group.name}/${p.group.index}`;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(p);
    } else if (p.role) {
      const key = p.owner || p.role;
      if (!roles.has(key)) roles.set(key, new Map());
      const byRole = roles.get(key);
      if (!byRole.has(p.role)) byRole.set(p.role, []);
      byRole.get(p.role).push(p);
    } else {
      list.append(el('li', {}, podButton(p)));
    }
  }
  for (const [key, members] of groups) {
    members.sort((a, b) => Number(a.group.worker) - Number(b.group.worker));
    const [ns, name, index] = key.split('/');
    const box = el('li', {class: 'group', 'aria-label': `LeaderWorkerSet ${name} group ${index}`},
      el('div', {class: 'title'}, `LeaderWorkerSet ${name} · group ${index}`));
    const inner = el('ul', {class: 'pods'});
    for (const m of members) inner.append(el('li', {}, podButton(m, m.group.role)));
    box.append(inner);
    list.append(box);
  }
  for (const [owner, byRole] of roles) {
    const box = el('li', {class: 'roles', 'aria-label': `roles of ${owner}`});
    for (const [role, members] of byRole) {
      const col = el('div', {}, el('div', {class: 'title'}, role));
      const inner = el('ul', {class: 'pods'});
      for (const m of members) inner.append(el('li', {}, podButton(m)));
      col.append(inner);
      box.append(col);
    }
    list.append(box);
  }
  return list;
}

async function loadOverview() {
  const q = namespace ? `?namespace=${encodeURIComponent(namespace)}` : '';
  let o;
  try { o = await getJSON('/ui/api/overview' + q); } catch (e) {
    $('nodes').replaceChildren(el('p', {role: 'alert'}, `Cannot show pods: ${e.message}`));
    return;
  }
  // A user shown one namespace looks for journeys there first.
  if (o.namespace && !journeyShown && $('j-namespace').value === 'default') $('j-namespace').value = o.namespace;
  $('who').textContent = `Signed in as ${o.user}` + (o.namespace ? ` · namespace ${o.namespace}` : ' · all namespaces') +
    (o.nodesVisible ? '' : ' · nodes named by your pods only');
  const nodes = o.nodes.map((n) => el('article', {class: 'node', 'data-node': n.name},
    el('h3', {}, n.name, el('span', {class: 'state'}, n.ready === true ? 'Ready' : n.ready === false ? 'NotReady' : '')),
    n.pods.length ? podList(n.pods) : el('p', {class: 'hint'}, 'no pods')));
  $('nodes').replaceChildren(...nodes);
  $('unscheduled').replaceChildren(...(o.unscheduled.length
    ? [el('h3', {}, 'Not yet on a node'), podList(o.unscheduled)] : []));
}

let pending = null;
function soon() { clearTimeout(pending); pending = setTimeout(loadOverview, 150); }

function follow() {
  const events = new EventSource('/ui/api/watch');
  events.addEventListener('change', soon);
  events.onerror = () => { events.close(); setTimeout(follow, 3000); setTimeout(loadOverview, 3000); };
}

$('scope').addEventListener('submit', (e) => {
  e.preventDefault();
  namespace = $('namespace').value.trim();
  const u = new URL(location.href);
  if (namespace) u.searchParams.set('namespace', namespace); else u.searchParams.delete('namespace');
  history.replaceState(null, '', u);
  loadOverview();
});

// ---- journeys -------------------------------------------------------------

const ms = (ns) => (ns / 1e6);
const fmt = (x) => x < 10 ? x.toFixed(1) : Math.round(x).toString();

// What a step decided, in words: its attributes and events.
function details(step) {
  const items = [];
  for (const ev of step.events || []) {
    const a = ev.attributes || {};
    const parts = Object.entries(a).filter(([k]) => k !== 'message').map(([k, v]) => `${k} ${v}`);
    items.push(el('li', {}, ev.name + (parts.length ? ': ' + parts.join(', ') : '')));
  }
  const skip = new Set(['otel.name', 'journey.start', 'component', 'pod', 'user', 'verb', 'resource', 'subresource', 'namespace', 'name']);
  const attrs = Object.entries(step.attributes || {}).filter(([k, v]) => !skip.has(k) && v !== '');
  return {items, attrs};
}

let journeyTimer = null;
let journeyShown = null;

async function loadJourney() {
  const j = journeyShown;
  if (!j) return;
  const q = new URLSearchParams({resource: j.resource, group: j.group, namespace: j.namespace, name: j.name});
  let data;
  try { data = await getJSON('/ui/api/journey?' + q); } catch (e) {
    $('journey-title').textContent = `No journey for ${j.resource} ${j.namespace}/${j.name}: ${e.message}`;
    $('steps').replaceChildren();
    return;
  }
  const steps = data.steps;
  $('journey-title').textContent = steps.length
    ? `${data.object.kind} ${j.namespace}/${j.name}: ${steps.length} steps, trace ${data.traceId}`
    : `${data.object.kind} ${j.namespace}/${j.name}: ${data.empty || 'no steps yet'}`;
  if (!steps.length) { $('steps').replaceChildren(); return; }
  const t0 = Math.min(...steps.map((s) => s.startUnixNano));
  const t1 = Math.max(...steps.map((s) => s.endUnixNano));
  const span = Math.max(t1 - t0, 1);
  const rows = steps.map((s) => {
    const {items, attrs} = details(s);
    const took = ms(s.endUnixNano - s.startUnixNano);
    const bar = el('div', {class: 'bar', style: `margin-left:${(100 * (s.startUnixNano - t0) / span).toFixed(2)}%;width:${(100 * (s.endUnixNano - s.startUnixNano) / span).toFixed(2)}%`});
    const what = el('div', {class: 'what'}, `+${fmt(ms(s.startUnixNano - t0))} ms · took ${fmt(took)} ms` +
      (attrs.length ? ' · ' + attrs.map(([k, v]) => `${k} ${v}`).join(', ') : ''));
    return el('li', {class: `step c-${s.component}`, 'data-component': s.component, 'data-step': s.name},
      el('span', {class: 'who'}, s.component),
      el('div', {}, el('strong', {}, s.name), bar, what, items.length ? el('ul', {}, ...items) : null));
  });
  $('steps').replaceChildren(...rows);
}

function showJourney(resource, group, ns, name) {
  journeyShown = {resource, group, namespace: ns, name};
  $('j-namespace').value = ns; $('j-name').value = name;
  location.hash = `journey/${resource}${group ? '.' + group : ''}/${ns}/${name}`;
  clearInterval(journeyTimer);
  loadJourney();
  // A new object's steps keep arriving for a while: refresh for a minute.
  let left = 60;
  journeyTimer = setInterval(() => { if (--left <= 0) clearInterval(journeyTimer); loadJourney(); }, 1000);
}

$('journey-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const [resource, group = ''] = $('j-resource').value.split(' ');
  showJourney(resource, group, $('j-namespace').value.trim() || 'default', $('j-name').value.trim());
});

function fromHash() {
  const m = location.hash.match(/^#journey\/([^/]+)\/([^/]+)\/([^/]+)$/);
  if (!m) return;
  const [resource, ...group] = m[1].split('.');
  if (!journeyShown || journeyShown.name !== m[3] || journeyShown.namespace !== m[2]) showJourney(resource, group.join('.'), m[2], m[3]);
}
window.addEventListener('hashchange', fromHash);

// ---- controllers ----------------------------------------------------------

let previous = null;
async function loadControllers() {
  let c;
  try { c = await getJSON('/ui/api/controllers'); } catch (e) {
    $('loops-note').textContent = `Not shown: ${e.message}`;
    return;
  }
  $('loops-note').textContent = '';
  const before = new Map((previous ? previous.controllers : []).map((x) => [x.name, x.reconciles]));
  const seconds = previous ? (c.time - previous.time) / 1000 : 0;
  const rows = c.controllers.map((x) => {
    const rate = seconds > 0 && before.has(x.name) ? (x.reconciles - before.get(x.name)) / seconds : 0;
    return el('tr', {'data-loop': x.name}, el('th', {scope: 'row'}, x.name), el('td', {class: 'num'}, String(x.depth)),
      el('td', {class: 'num'}, rate.toFixed(1)), el('td', {class: 'num'}, String(x.reconciles)), el('td', {class: 'num'}, String(x.errors)));
  });
  $('controllers').replaceChildren(...rows);
  previous = c;
}

loadOverview();
follow();
fromHash();
loadControllers();
setInterval(loadControllers, 2000);
