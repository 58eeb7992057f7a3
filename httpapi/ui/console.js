// seqkeeper status console. Plain JavaScript, no dependencies: every
// request goes to this replica's own /v1 API (the page's origin), with the
// bearer token from sessionStorage when the API asks for one. A replica of
// several roots (GET /v1/status lists them in roots) is shown one root at
// a time, picked in the header and kept in the URL's hash (#root=NAME):
// the root's routes are /v1/roots/{root}/...
'use strict';

(function () {
  const TOKEN_KEY = 'seqkeeper.token';
  const REFRESH_MS = 2000;
  const HISTORY_MS = 5000;
  const PAGE_SIZE = 50;
  const RATE_WINDOW_MS = 60000; // a standby estimates rates over this
  const DAY = 86400;
  // Unhealthy first: the order rows take within a page.
  const HEALTH_RANK = { broken: 0, exhausted: 1, at_ceiling: 2, waiting: 3, legacy: 4, ok: 5 };
  const HEALTH_CLASS = { ok: 'ok', legacy: '', at_ceiling: 'warn', waiting: 'warn', exhausted: 'bad', broken: 'bad' };
  const ZK_CLASS = { has_session: 'ok', connected: 'warn', connecting: 'warn', disconnected: 'warn', expired: 'bad', auth_failed: 'bad' };

  const $ = (id) => document.getElementById(id);

  const view = {
    pages: [''], // cursors of the pages seen: pages[i] starts page i
    page: 0,
    prefix: '',
    paused: false,
    locked: false,
    timer: 0,
    inflight: false,
    again: false,
    lastOK: null,
    lastHistory: 0,
    history: null,
    seen: new Map(), // name -> [[ms, next], ...] for standby rate estimates
    roots: null, // null: not asked yet; []: one root (/v1/...); else the roots' names
    root: '', // the root shown, with several
    gen: 0, // counts root switches: an answer for another root is dropped
  };

  class AuthError extends Error {}

  // parse keeps integers beyond 2^53 exact, as strings (IDs can be that
  // large), where the browser gives the reviver the source text.
  function parse(text) {
    return JSON.parse(text, function (key, value, ctx) {
      if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) && ctx && ctx.source) {
        return ctx.source;
      }
      return value;
    });
  }

  async function api(path) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    let resp;
    try {
      resp = await fetch(path, { headers: headers, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new Error('cannot reach this replica (stopped, or the network is down)');
    }
    if (resp.status === 401) {
      throw new AuthError(token ? 'wrong' : 'missing');
    }
    const text = await resp.text();
    let body = null;
    try { body = parse(text); } catch (e) { /* not JSON */ }
    if (!resp.ok) {
      const msg = body && body.error ? body.error.message : resp.status + ' ' + resp.statusText;
      const err = new Error(path.split('?')[0] + ': ' + msg);
      err.code = body && body.error ? body.error.code : '';
      throw err;
    }
    return body;
  }

  // ---- DOM helpers: text only, never HTML from the API ----

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function badge(text, cls) {
    return el('span', { class: 'badge ' + (cls || ''), text: text });
  }

  function details(id, pairs) {
    const dl = $(id);
    dl.replaceChildren();
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === '') continue;
      dl.append(el('dt', { text: k }), el('dd', {}, v));
    }
  }

  // ---- formatting ----

  const grouped = new Intl.NumberFormat('en-US');

  function fmtInt(v) {
    if (v === undefined || v === null) return '—';
    if (typeof v === 'string') return v.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
    return grouped.format(v);
  }

  function fmtRate(v) {
    if (v === undefined || v === null || !isFinite(v)) return '—';
    if (v === 0) return '0';
    if (v < 10) return v.toFixed(1);
    return grouped.format(Math.round(v));
  }

  function fmtSeconds(s) {
    if (s === undefined || s === null || !isFinite(s)) return '—';
    if (s >= DAY) return '≥ 1 d';
    if (s < 10) return s.toFixed(1) + ' s';
    if (s < 120) return Math.round(s) + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }

  // fmtAxisSeconds labels a chart axis: round values, no needless decimals.
  function fmtAxisSeconds(s) {
    if (s === 0) return '0';
    if (s < 120) return (Math.round(s * 10) / 10) + ' s';
    if (s < 7200) return (Math.round(s / 6) / 10) + ' min';
    return (Math.round(s / 360) / 10) + ' h';
  }

  function fmtAxisRate(v) {
    if (v === 0) return '0';
    if (v >= 10000) return (Math.round(v / 100) / 10) + 'k';
    return String(Math.round(v * 10) / 10);
  }

  function fmtClock(t) {
    const d = t instanceof Date ? t : new Date(t);
    return d.toLocaleTimeString('en-GB', { hour12: false });
  }

  function fmtAgo(iso) {
    if (!iso) return null;
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 1.5) return 'just now';
    if (s < 90) return Math.round(s) + ' s ago';
    if (s < 5400) return Math.round(s / 60) + ' min ago';
    return fmtClock(iso);
  }

  function replicaLine(r) {
    if (!r) return null;
    return r.address ? r.id + ' · ' + r.address : r.id;
  }

  // ---- status ----

  function renderStatus(st) {
    const me = st.replica || null;
    const leading = !!st.leading;
    $('replica-id').textContent = me ? me.id + (me.version ? ' · ' + me.version : '') : 'replica';
    const role = $('role');
    if (!me) {
      role.textContent = 'no status';
      role.className = 'badge';
    } else {
      role.textContent = leading ? 'PRIMARY' : 'STANDBY';
      role.className = 'badge ' + (leading ? 'primary' : 'standby');
    }

    const p = st.primary;
    $('primary').replaceChildren(p ? p.id : 'none');
    const reserve = st.reserve || null;
    details('primary-detail', [
      ['address', p && p.address],
      ['version', p && p.version],
      ['this replica', p && me ? (p.id === me.id ? 'is the primary' : 'is a standby') : null],
      ['fencing epoch', reserve ? String(reserve.epoch) : null],
      ['ZooKeeper epoch', reserve ? String(reserve.zookeeper_epoch) : null],
      ['last sweep', reserve ? fmtAgo(reserve.last_sweep) : null],
    ]);

    $('replica').replaceChildren(me ? me.id : '—');
    const allocs = st.allocators || [];
    const served = allocs.reduce((n, a) => n + (a.served || 0), 0);
    details('replica-detail', [
      ['address', me && me.address],
      ['version', me && me.version],
      ['allocators', String(allocs.length)],
      ['IDs served', fmtInt(served)],
    ]);

    const zs = st.zookeeper_state;
    $('zk').replaceChildren(zs ? badge(zs.replace('_', ' '), ZK_CLASS[zs] || 'warn') : '—');
    details('zk-detail', [['session', st.zookeeper_session ? el('span', { class: 'mono', text: st.zookeeper_session }) : null]]);

    const store = st.store;
    $('store').replaceChildren(store ? badge(store.healthy ? 'healthy' : 'unhealthy', store.healthy ? 'ok' : 'bad') : '—');
    details('store-detail', store ? [
      ['url', el('span', { class: 'mono', text: store.url })],
      ['last request', fmtAgo(store.last_request) || 'none yet'],
      ['error', store.error],
    ] : []);

    const list = $('handovers');
    list.replaceChildren();
    for (const h of st.handovers || []) {
      list.append(el('li', {},
        el('time', { datetime: h.at, text: fmtClock(h.at) }),
        el('span', {}, h.primary ? el('b', { class: 'mono', text: h.primary.id }) : 'no primary',
          h.primary && h.primary.address ? ' ' + h.primary.address : '')));
    }
    if (!list.children.length) list.append(el('li', { text: 'none seen' }));
    const e = st.election;
    details('election-detail', e ? [
      ['terms here', String(e.terms)],
      ['losses', String(e.losses)],
      ['resignations', String(e.resignations)],
    ] : []);

    // Attention: what the primary finds wrong, whatever page it is on.
    const box = $('attention');
    const bad = reserve ? reserve.sequences.filter((s) => !s.healthy) : [];
    const notes = [];
    if (st.replica && !p) notes.push(el('li', { text: 'No primary: no replica leads, so no ceiling is raised.' }));
    if (store && !store.healthy) notes.push(el('li', { text: 'The store is unhealthy: ' + (store.error || 'unknown error') }));
    for (const s of bad.slice(0, 5)) {
      notes.push(el('li', {}, el('b', { class: 'mono', text: s.name }), ': ' + (s.problem || 'unhealthy')));
    }
    if (bad.length > 5) notes.push(el('li', { text: 'and ' + (bad.length - 5) + ' more sequences' }));
    box.hidden = notes.length === 0;
    if (notes.length) box.replaceChildren(el('b', { text: 'Needs attention' }), el('ul', {}, ...notes));
  }

  // ---- charts ----

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) {
      if (v <= m * p) return m * p;
    }
    return 10 * p;
  }

  // drawChart plots points ({t: ms, v: number or null}; null breaks the
  // line) over the last minutes, in an SVG drawn by hand.
  function drawChart(box, points, fmt, emptyText) {
    const W = Math.max(240, box.clientWidth || 400);
    const H = 150;
    const L = 52, R = 10, T = 10, B = 22;
    const s = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
    const have = points.filter((p) => p.v !== null && p.v !== undefined);
    if (have.length === 0) {
      s.append(svg('text', { class: 'empty', x: W / 2, y: H / 2, 'text-anchor': 'middle' }, emptyText));
      box.replaceChildren(s);
      return;
    }
    const last = points[points.length - 1].t;
    const span = Math.min(15 * 60e3, Math.max(60e3, last - points[0].t));
    const first = last - span;
    const top = niceMax(Math.max(...have.map((p) => p.v)) * 1.1);
    const x = (t) => L + ((t - first) / span) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);

    for (const f of [0, 0.5, 1]) {
      const yy = y(top * f);
      s.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: yy, y2: yy }));
      s.append(svg('text', { class: 'axis', x: L - 6, y: yy + 4, 'text-anchor': 'end' }, fmt(top * f)));
    }
    s.append(svg('text', { class: 'axis', x: L, y: H - 5 }, fmtClock(first)));
    s.append(svg('text', { class: 'axis', x: W - R, y: H - 5, 'text-anchor': 'end' }, fmtClock(last)));

    // Runs of consecutive non-null points.
    let run = [];
    const runs = [];
    for (const p of points) {
      if (p.t < first) continue;
      if (p.v === null || p.v === undefined) {
        if (run.length) runs.push(run);
        run = [];
      } else {
        run.push(p);
      }
    }
    if (run.length) runs.push(run);
    for (const r of runs) {
      const line = r.map((p) => x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1)).join(' ');
      if (r.length > 1) {
        const area = x(r[0].t).toFixed(1) + ',' + y(0) + ' ' + line + ' ' + x(r[r.length - 1].t).toFixed(1) + ',' + y(0);
        s.append(svg('polygon', { class: 'area', points: area }));
        s.append(svg('polyline', { class: 'line', points: line }));
      }
      const end = r[r.length - 1];
      s.append(svg('circle', { class: 'dot', cx: x(end.t), cy: y(end.v), r: 3 }));
    }
    box.replaceChildren(s);
  }

  function renderHistory() {
    const h = view.history;
    if (!h) return;
    const samples = h.samples || [];
    const rate = samples.map((s) => ({ t: Date.parse(s.at), v: s.ids_per_second }));
    const runway = samples.map((s) => ({ t: Date.parse(s.at), v: s.min_runway_seconds }));
    const collecting = 'collecting: one sample every ' + (h.interval_seconds || 5) + ' s';
    drawChart($('chart-rate'), rate, fmtAxisRate, collecting);
    const anyLeading = samples.some((s) => s.leading);
    drawChart($('chart-runway'), runway, fmtAxisSeconds,
      samples.length === 0 ? collecting : anyLeading ? 'no sequences' : 'the primary keeps the runway; this replica is a standby');
  }

  // ---- sequences ----

  // issued counts the IDs a sequence handed to clients, up to a constant:
  // next, less what open windows and the recycled list still hold (a
  // window opened moves next and fills the window alike).
  function issued(s) {
    if (typeof s.next !== 'number' || typeof s.available !== 'number') return null;
    if (s.kind !== 'sequence') return s.next;
    const fresh = s.ceiling >= s.next ? s.ceiling - s.next + 1 : 0;
    return s.next - (s.available - fresh);
  }

  // estimateRate estimates a sequence's rate on a standby from how many IDs
  // it handed out over the last minute (every replica's takes, in batches).
  function estimateRate(s, now) {
    const n = issued(s);
    if (n === null || !isFinite(n)) return null;
    const hist = view.seen.get(s.name) || [];
    hist.push([now, n]);
    while (hist.length > 2 && now - hist[0][0] > RATE_WINDOW_MS) hist.shift();
    view.seen.set(s.name, hist);
    const [t0, n0] = hist[0];
    if (now - t0 < 1500 || n < n0) return null;
    return (n - n0) / ((now - t0) / 1000);
  }

  function renderSequences(page, reserve) {
    const now = Date.now();
    const byName = new Map();
    for (const r of (reserve && reserve.sequences) || []) byName.set(r.name, r);
    const rows = (page.sequences || []).map((s) => {
      const r = byName.get(s.name);
      const estimate = r ? null : estimateRate(s, now);
      const row = { s: s, r: r, rate: r ? r.rate_per_second : estimate, approx: !r };
      if (s.health === 'exhausted') row.runway = undefined; // nothing left to last
      else if (r) row.runway = r.runway_seconds;
      else if (row.rate > 0 && typeof s.available === 'number') row.runway = Math.min(DAY, s.available / row.rate);
      else if (row.rate === 0) row.runway = DAY;
      row.rank = HEALTH_RANK[s.health] === undefined ? -1 : HEALTH_RANK[s.health];
      if (row.rank === HEALTH_RANK.ok && r && !r.healthy) row.rank = HEALTH_RANK.ok - 0.5;
      return row;
    });
    for (const name of view.seen.keys()) {
      if (!rows.some((row) => row.s.name === name)) view.seen.delete(name);
    }
    rows.sort((a, b) => a.rank - b.rank || (a.s.name < b.s.name ? -1 : a.s.name > b.s.name ? 1 : 0));

    const body = $('sequences');
    body.replaceChildren();
    for (const { s, r, rate, runway, approx, rank } of rows) {
      const tip = approx ? 'estimated on this standby from the change of next; the primary knows better' : null;
      const name = el('td', { class: 'name' }, s.name);
      const problem = s.error || (r && !r.healthy ? r.problem : null);
      if (problem) name.append(el('span', { class: 'problem', text: problem }));
      const runwayCell = el('td', { class: 'num runway' + (runway !== undefined && runway < 10 ? ' low' : ''), title: tip },
        (approx && runway !== undefined && runway < DAY ? '~' : '') + fmtSeconds(runway));
      body.append(el('tr', { 'data-name': s.name, class: rank < HEALTH_RANK.ok ? 'unhealthy' : null },
        name,
        el('td', { class: 'health' }, badge(s.health.replace('_', ' '), HEALTH_CLASS[s.health])),
        el('td', { class: 'num next', text: fmtInt(s.next) }),
        el('td', { class: 'num ceiling', text: s.ceiling ? fmtInt(s.ceiling) : '—' }),
        el('td', { class: 'num available', text: fmtInt(s.available) }),
        runwayCell,
        el('td', { class: 'num rate', title: tip }, (approx && rate !== null ? '~' : '') + fmtRate(rate)),
        el('td', { class: 'num windows', title: s.windows ? 'configured; open windows now' : null },
          s.windows ? String(s.windows) : '—',
          s.windows ? el('span', { class: 'approx', text: ' · ' + s.open_windows + ' open' }) : null)));
    }
    if (!rows.length) {
      body.append(el('tr', {}, el('td', { class: 'empty', colspan: 8,
        text: view.prefix ? 'no sequence starts with “' + view.prefix + '”' : 'no sequences yet: seqkeeper create NAME' })));
    }
    if (page.next_cursor) view.pages[view.page + 1] = page.next_cursor;
    else view.pages.length = view.page + 1;
    $('prev').disabled = view.page === 0;
    $('next').disabled = !page.next_cursor;
    $('page').textContent = 'page ' + (view.page + 1);
    $('seq-note').textContent = reserve ? 'rates and runway: this primary\'s view'
      : 'rates and runway estimated here (~); the primary\'s console has its view';
  }

  // base is where the shown root's routes start: /v1 on a replica of one
  // root, /v1/roots/{root} on one of several.
  function base() {
    return view.roots && view.roots.length ? '/v1/roots/' + encodeURIComponent(view.root) : '/v1';
  }

  function statusPath(names) {
    const q = new URLSearchParams({ sequences: 'unhealthy' });
    for (const n of names) q.append('name', n);
    return base() + '/status?' + q.toString();
  }

  function listPath() {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (view.prefix) q.set('prefix', view.prefix);
    if (view.pages[view.page]) q.set('cursor', view.pages[view.page]);
    return base() + '/sequences?' + q.toString();
  }

  // ---- roots ----

  // discover asks the replica whether it serves several roots (the
  // process's status, without any reserve) and shows the picker if so.
  async function discover() {
    const st = await api('/v1/status?sequences=none');
    const names = ((st && st.roots) || []).map((r) => r.name);
    view.roots = names;
    const pick = $('root');
    pick.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
    $('root-pick').hidden = names.length === 0;
    if (!names.length) {
      view.root = '';
      if (location.hash.startsWith('#root=')) history.replaceState(null, '', location.pathname + location.search);
      return;
    }
    const want = rootInHash();
    showRoot(names.includes(want) ? want : names.includes(view.root) ? view.root : names[0]);
  }

  function rootInHash() {
    const m = /^#root=(.*)$/.exec(location.hash);
    if (!m) return '';
    try { return decodeURIComponent(m[1]); } catch (e) { return ''; }
  }

  // showRoot switches the page to root name: what it shows of another root
  // goes at once, and an answer still on its way for it is dropped.
  function showRoot(name) {
    $('root').value = name;
    const hash = '#root=' + encodeURIComponent(name);
    if (location.hash !== hash) history.replaceState(null, '', hash);
    if (name === view.root) return;
    view.root = name;
    view.gen++;
    view.pages = [''];
    view.page = 0;
    view.seen.clear();
    view.history = null;
    view.lastHistory = 0;
    $('sequences').replaceChildren();
    $('chart-rate').replaceChildren();
    $('chart-runway').replaceChildren();
    document.title = 'seqkeeper console · ' + name;
  }

  // ---- the loop ----

  function showError(msgs) {
    const box = $('error');
    box.hidden = msgs.length === 0;
    box.textContent = msgs.join(' · ');
  }

  function lock(reason) {
    view.locked = true;
    sessionStorage.removeItem(TOKEN_KEY); // a refused token is not kept
    clearTimeout(view.timer);
    document.body.classList.add('locked');
    $('auth').hidden = false;
    $('auth-why').firstChild.textContent = reason === 'wrong'
      ? 'The token was refused (401): enter the bearer token this replica was started with ('
      : 'The API answers 401: enter the bearer token it was started with (';
    $('role').textContent = 'token needed';
    $('role').className = 'badge warn';
    showError([]);
    $('token').focus();
  }

  function unlock() {
    view.locked = false;
    document.body.classList.remove('locked');
    $('auth').hidden = true;
  }

  async function refresh() {
    if (view.locked) return;
    if (view.inflight) {
      view.again = true; // a page or prefix changed meanwhile
      return;
    }
    view.inflight = true;
    view.again = false;
    try {
      if (view.roots === null) {
        try {
          await discover();
        } catch (e) {
          if (e instanceof AuthError) {
            lock(e.message);
            return;
          }
          throw e;
        }
      }
      const gen = view.gen;
      const wantHistory = Date.now() - view.lastHistory >= HISTORY_MS;
      const [page, history] = await Promise.allSettled([
        api(listPath()),
        wantHistory ? api(base() + '/history') : Promise.resolve(null),
      ]);
      // Then the status, with the primary's reserve of the unhealthy
      // sequences and of this page's: never the whole list, which is
      // megabytes at 100,000 sequences.
      const names = page.status === 'fulfilled' && page.value ? (page.value.sequences || []).map((s) => s.name) : [];
      const [status] = await Promise.allSettled([api(statusPath(names))]);
      if (gen !== view.gen) {
        view.again = true; // another root was picked meanwhile
        return;
      }
      const results = [status, page, history];
      const auth = results.find((r) => r.status === 'rejected' && r.reason instanceof AuthError);
      if (auth) {
        lock(auth.reason.message);
        return;
      }
      const failed = results.filter((r) => r.status === 'rejected');
      // A replica restarted with other roots: ask again which it serves.
      if (failed.some((r) => r.reason.code === 'unknown_root' || r.reason.code === 'root_required')) view.roots = null;
      const errors = [...new Set(failed.map((r) => r.reason.message || String(r.reason)))];
      let reserve = null;
      if (status.status === 'fulfilled' && status.value) {
        renderStatus(status.value);
        reserve = status.value.reserve || null;
      }
      if (page.status === 'fulfilled' && page.value) renderSequences(page.value, reserve);
      if (history.status === 'fulfilled' && history.value) {
        view.history = history.value;
        view.lastHistory = Date.now();
      }
      renderHistory();
      showError(errors);
      const stale = failed.length === (wantHistory ? 3 : 2); // every request failed
      document.body.classList.toggle('stale', stale);
      if (stale) {
        $('role').textContent = 'unreachable';
        $('role').className = 'badge bad';
        $('updated').textContent = view.lastOK ? 'not updated since ' + fmtClock(view.lastOK) : 'not loaded yet';
      } else {
        view.lastOK = new Date();
        $('updated').textContent = (errors.length ? 'partly updated ' : 'updated ') + fmtClock(view.lastOK);
      }
    } catch (e) {
      showError([e.message || String(e)]);
    } finally {
      view.inflight = false;
      if (view.again && !view.locked) refresh();
      else schedule();
    }
  }

  function schedule() {
    clearTimeout(view.timer);
    if (!view.paused && !view.locked) view.timer = setTimeout(refresh, REFRESH_MS);
  }

  function reloadSequences() {
    view.pages = [''];
    view.page = 0;
    clearTimeout(view.timer);
    refresh();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('auth-form').addEventListener('submit', (ev) => {
      ev.preventDefault(); // the token never goes into a URL
      const input = $('token');
      const v = input.value.trim();
      if (!v) return;
      sessionStorage.setItem(TOKEN_KEY, v);
      input.value = '';
      unlock();
      refresh();
    });
    $('pause').addEventListener('click', () => {
      view.paused = !view.paused;
      $('pause').textContent = view.paused ? 'Resume' : 'Pause';
      $('pause').setAttribute('aria-pressed', String(view.paused));
      if (view.paused) clearTimeout(view.timer);
      else refresh();
    });
    let typing = 0;
    $('prefix').addEventListener('input', () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        view.prefix = $('prefix').value.trim();
        view.seen.clear();
        reloadSequences();
      }, 250);
    });
    $('prev').addEventListener('click', () => {
      if (view.page > 0) { view.page--; clearTimeout(view.timer); refresh(); }
    });
    $('next').addEventListener('click', () => {
      if (view.pages[view.page + 1]) { view.page++; clearTimeout(view.timer); refresh(); }
    });
    $('root').addEventListener('change', () => {
      showRoot($('root').value);
      clearTimeout(view.timer);
      refresh();
    });
    window.addEventListener('hashchange', () => {
      const want = rootInHash();
      if (view.roots && view.roots.includes(want) && want !== view.root) {
        showRoot(want);
        clearTimeout(view.timer);
        refresh();
      }
    });
    window.addEventListener('resize', renderHistory);
    refresh();
  });
})();
