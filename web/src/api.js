// Talking to the server: JSON calls and Server-Sent Events read with fetch (EventSource
// cannot send the API key). The key, when the server asks for one, lives in localStorage.
const KEY = 'tandem.apiKey';

export const auth = {
  get key() { return localStorage.getItem(KEY) || ''; },
  set key(v) { if (v) localStorage.setItem(KEY, v); else localStorage.removeItem(KEY); },
  onRequired: null,  // called when the server answers 401
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(json) {
  const h = {};
  if (json) h['content-type'] = 'application/json';
  if (auth.key) h.authorization = `Bearer ${auth.key}`;
  return h;
}

async function fail(res) {
  let msg = `${res.status} ${res.statusText}`;
  try {
    const j = await res.json();
    msg = j?.error?.message || (typeof j?.error === 'string' ? j.error : msg);
  } catch { /* not JSON */ }
  if (res.status === 401 && auth.onRequired) auth.onRequired(msg);
  throw new ApiError(res.status, msg);
}

export async function call(method, path, body) {
  const res = await fetch(path, { method, headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) await fail(res);
  const type = res.headers.get('content-type') || '';
  return type.includes('json') ? res.json() : res.text();
}

// Reads an SSE response, calling onEvent(event, data, id) for each event as its bytes
// arrive. Resolves when the stream ends; rejects on network errors (the caller re-attaches).
export async function streamEvents(method, path, body, onEvent, signal) {
  const res = await fetch(path, { method, headers: headers(body !== undefined), signal,
    body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) await fail(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let ev = { event: 'message', data: '', id: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (ev.data !== '' || ev.event !== 'message') onEvent(ev.event, ev.data, ev.id);
        ev = { event: 'message', data: '', id: null };
      } else if (line.startsWith('data:')) {
        ev.data += (ev.data ? '\n' : '') + line.slice(line[5] === ' ' ? 6 : 5);
      } else if (line.startsWith('event:')) {
        ev.event = line.slice(6).trim();
      } else if (line.startsWith('id:')) {
        ev.id = line.slice(3).trim();
      }
    }
  }
}
