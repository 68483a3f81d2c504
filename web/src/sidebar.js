// The conversation list: newest first, a page at a time; full-text search; rename, delete;
// import of an exported conversation.
import { call } from './api.js';
import { chat, openConversation, newChat } from './chat.js';

const $ = (id) => document.getElementById(id);
let cursor = '';
let asked = 0;  // the newest search: answers to older ones are dropped

function item(c, snippet) {
  const li = document.createElement('li');
  li.className = 'conv-item';
  if (chat.conv?.id === c.id) li.setAttribute('aria-current', 'true');
  const open = document.createElement('button');
  open.type = 'button';
  open.className = 'conv-open';
  open.textContent = c.title || 'Untitled';
  open.addEventListener('click', () => { openConversation(c.id); closeDrawer(); });
  li.append(open);
  if (snippet) {
    // The server marks matched words with \x02 ... \x03; everything else is text.
    const p = document.createElement('p');
    p.className = 'snippet';
    snippet.split('\x02').forEach((part, i) => {
      const [hit, rest] = i === 0 ? ['', part] : part.split('\x03');
      if (hit) p.append(Object.assign(document.createElement('mark'), { textContent: hit }));
      if (rest) p.append(rest);
    });
    li.append(p);
  }
  const tools = document.createElement('span');
  tools.className = 'conv-tools';
  const rename = document.createElement('button');
  rename.type = 'button';
  rename.className = 'icon-btn small';
  rename.textContent = '✎';
  rename.setAttribute('aria-label', `Rename ${c.title || 'conversation'}`);
  rename.addEventListener('click', async () => {
    const title = prompt('New title', c.title);
    if (title === null) return;
    await call('PATCH', `/ui/api/conversations/${c.id}`, { title });
    if (chat.conv?.id === c.id) {
      chat.conv.title = title;
      $('chat-title').textContent = title;
    }
    refresh();
  });
  const del = document.createElement('button');
  del.type = 'button';
  del.className = 'icon-btn small';
  del.textContent = '✕';
  del.setAttribute('aria-label', `Delete ${c.title || 'conversation'}`);
  del.addEventListener('click', async () => {
    if (!confirm(`Delete “${c.title || 'Untitled'}”?`)) return;
    await call('DELETE', `/ui/api/conversations/${c.id}`);
    if (chat.conv?.id === c.id) newChat();
    refresh();
  });
  tools.append(rename, del);
  li.append(tools);
  return li;
}

export async function refresh(more = false) {
  const q = $('search-input').value.trim();
  const ul = $('conv-list');
  if (q) {
    const mine = ++asked;
    const r = await call('GET', `/ui/api/conversations/search?q=${encodeURIComponent(q)}&limit=50`);
    if (mine !== asked) return;
    ul.replaceChildren(...r.items.map((h) => item(h.conversation, h.snippet)));
    if (!r.items.length) ul.append(Object.assign(document.createElement('li'), { className: 'none', textContent: 'No matches' }));
    $('conv-more').hidden = true;
    return;
  }
  const r = await call('GET', `/ui/api/conversations?limit=30${more && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
  const items = r.items.map((c) => item(c));
  if (more) ul.append(...items);
  else ul.replaceChildren(...items);
  cursor = r.next_cursor || '';
  $('conv-more').hidden = !cursor;
}

function closeDrawer() {
  document.body.classList.remove('drawer-open');
  $('menu-btn').setAttribute('aria-expanded', 'false');
}

export function initSidebar() {
  chat.onChanged = () => refresh().catch(() => {});
  $('conv-more').addEventListener('click', () => refresh(true));
  $('search-input').addEventListener('input', () => refresh().catch(() => {}));
  $('menu-btn').addEventListener('click', () => {
    const open = document.body.classList.toggle('drawer-open');
    $('menu-btn').setAttribute('aria-expanded', String(open));
  });
  $('import-file').addEventListener('change', async (e) => {
    const f = e.target.files[0];
    e.target.value = '';
    if (!f) return;
    try {
      const r = await call('POST', '/ui/api/conversations/import', JSON.parse(await f.text()));
      await refresh();
      await openConversation(r.id);
    } catch (err) {
      alert(`Import failed: ${err.message}`);
    }
  });
}
