// The dashboard: live charts of the server's /metrics (Prometheus text), sampled once a
// second while the view is open. It shows what the server exports; without /metrics it
// falls back to /health (running, waiting, KV usage).
import { call } from './api.js';

const $ = (id) => document.getElementById(id);
const KEEP = 120;  // samples (two minutes)

// Prometheus text format -> Map(name -> [{labels, value}]).
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) for (const p of m[2].slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"/g)) labels[p[1]] = p[2];
    const v = Number(m[3]);
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: v });
  }
  return out;
}

const sum = (m, names) => {
  for (const n of names) {
    const s = m.get(n);
    if (s) return s.reduce((a, x) => a + x.value, 0);
  }
  return undefined;
};
const findName = (m, re) => [...m.keys()].find((k) => re.test(k));

// Quantile of a histogram's increase between two scrapes (buckets summed over labels).
function quantile(prev, cur, name, q) {
  const buckets = (m) => {
    const b = new Map();
    for (const x of m.get(`${name}_bucket`) || []) b.set(x.labels.le, (b.get(x.labels.le) || 0) + x.value);
    return b;
  };
  const a = buckets(prev);
  const b = buckets(cur);
  const les = [...b.keys()].sort((x, y) => (x === '+Inf' ? 1 : y === '+Inf' ? -1 : Number(x) - Number(y)));
  const inc = les.map((le) => [le, (b.get(le) || 0) - (a.get(le) || 0)]);
  const total = inc.length ? inc[inc.length - 1][1] : 0;
  if (total <= 0) return undefined;
  let lo = 0;
  let prevCount = 0;
  for (const [le, c] of inc) {
    if (c >= q * total) {
      if (le === '+Inf') return lo;
      const hi = Number(le);
      const frac = c === prevCount ? 0 : (q * total - prevCount) / (c - prevCount);
      return lo + (hi - lo) * frac;
    }
    lo = le === '+Inf' ? lo : Number(le);
    prevCount = c;
  }
  return undefined;
}

const charts = [
  { id: 'tps', title: 'Output tokens/s', unit: '' },
  { id: 'running', title: 'Running requests', unit: '' },
  { id: 'waiting', title: 'Waiting requests', unit: '' },
  { id: 'kv', title: 'KV cache usage', unit: '%' },
  { id: 'hit', title: 'Prefix-cache hit rate', unit: '%' },
  { id: 'ttft50', title: 'TTFT p50', unit: ' ms' },
  { id: 'ttft99', title: 'TTFT p99', unit: ' ms' },
  { id: 'power', title: 'GPU power', unit: ' W' },
];
const series = Object.fromEntries(charts.map((c) => [c.id, []]));
let timer = null;
let prev = null;
let prevT = 0;
let window30 = [];  // scrapes of the last 30 s, for the TTFT quantiles

function draw() {
  const box = $('charts');
  if (!box.childElementCount) {
    for (const c of charts) {
      const fig = document.createElement('figure');
      fig.className = 'chart';
      fig.id = `chart-${c.id}`;
      fig.innerHTML = `<figcaption><span class="chart-title"></span><span class="chart-value"></span></figcaption>
        <svg viewBox="0 0 300 80" preserveAspectRatio="none" role="img"><polyline fill="none" stroke-width="2" points=""/></svg>`;
      fig.querySelector('.chart-title').textContent = c.title;
      fig.querySelector('svg').setAttribute('aria-label', `${c.title} over the last two minutes`);
      box.append(fig);
    }
  }
  for (const c of charts) {
    const fig = $(`chart-${c.id}`);
    const s = series[c.id];
    const last = s.length ? s[s.length - 1] : undefined;
    fig.classList.toggle('missing', last === undefined);
    fig.querySelector('.chart-value').textContent = last === undefined ? 'not exported'
      : `${last >= 100 ? Math.round(last) : last.toFixed(last >= 10 ? 1 : 2)}${c.unit}`;
    const vals = s.filter((v) => v !== undefined);
    const max = Math.max(1e-9, ...vals) * 1.1;
    const pts = s.map((v, i) => (v === undefined ? null : `${(i / (KEEP - 1)) * 300},${80 - (v / max) * 76}`)).filter(Boolean);
    fig.querySelector('polyline').setAttribute('points', pts.join(' '));
  }
}

function push(id, v) {
  const s = series[id];
  s.push(v);
  if (s.length > KEEP) s.shift();
}

async function sample() {
  let m = null;
  let health = null;
  try {
    m = parseMetrics(await call('GET', '/metrics'));
    $('dash-note').textContent = 'Live from /metrics, sampled every second.';
  } catch {
    $('dash-note').textContent = 'This server exports no /metrics; showing /health.';
  }
  if (!m) {
    try { health = await call('GET', '/health'); } catch { /* server away */ }
  }
  const t = performance.now();
  const dt = (t - prevT) / 1000;
  if (m) {
    const gen = sum(m, ['vllm:generation_tokens_total', 'tandem_generation_tokens_total']);
    const pgen = prev && sum(prev, ['vllm:generation_tokens_total', 'tandem_generation_tokens_total']);
    push('tps', gen !== undefined && pgen !== undefined && dt > 0 ? Math.max(0, (gen - pgen) / dt) : undefined);
    push('running', sum(m, ['vllm:num_requests_running', 'tandem_requests_running']));
    push('waiting', sum(m, ['vllm:num_requests_waiting', 'tandem_requests_waiting']));
    const kv = sum(m, ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc']);
    push('kv', kv === undefined ? undefined : kv * 100);
    const hits = ['vllm:prefix_cache_hits_total', 'vllm:prefix_cache_hits'];
    const queries = ['vllm:prefix_cache_queries_total', 'vllm:prefix_cache_queries'];
    const h = sum(m, hits);
    const q = sum(m, queries);
    const dq = prev && q !== undefined ? q - (sum(prev, queries) ?? 0) : 0;
    push('hit', h !== undefined && dq > 0 ? ((h - (sum(prev, hits) ?? 0)) / dq) * 100 : undefined);
    window30.push({ t, m });
    while (window30.length && t - window30[0].t > 30000) window30.shift();
    const ttft = 'vllm:time_to_first_token_seconds';
    const p50 = quantile(window30[0].m, m, ttft, 0.5);
    const p99 = quantile(window30[0].m, m, ttft, 0.99);
    push('ttft50', p50 === undefined ? undefined : p50 * 1000);
    push('ttft99', p99 === undefined ? undefined : p99 * 1000);
    const pw = findName(m, /gpu.*power|power.*watt/i);
    push('power', pw ? sum(m, [pw]) : undefined);
    prev = m;
  } else {
    push('tps', undefined);
    push('running', health?.running);
    push('waiting', health?.waiting);
    push('kv', health?.kv_usage === undefined ? undefined : health.kv_usage * 100);
    for (const id of ['hit', 'ttft50', 'ttft99', 'power']) push(id, undefined);
  }
  prevT = t;
  draw();
}

export function showDashboard(on) {
  $('dashboard-view').hidden = !on;
  $('chat-view').hidden = on;
  $('view-toggle').setAttribute('aria-pressed', String(on));
  $('view-toggle').textContent = on ? 'Chat' : 'Dashboard';
  clearInterval(timer);
  timer = null;
  if (on) {
    draw();
    sample();
    timer = setInterval(sample, 1000);
  }
}
