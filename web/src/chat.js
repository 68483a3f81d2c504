// The chat: one conversation's messages (the branch on show), the composer, and answers
// streamed from the server. An answer belongs to the server, not to this tab: it keeps
// going when the tab closes, and a view re-attaches from the last event it has shown.
import { call, streamEvents, ApiError } from './api.js';
import { MarkdownStream } from './stream_view.js';
import { renderMarkdown } from './markdown.js';
import { typeset } from './math.js';
import { markDirty, afterFrame } from './frame.js';
import { generationFields, settings } from './settings.js';

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};
const button = (label, cls, onClick, aria) => {
  const b = el('button', cls ? `btn small ${cls}` : 'btn small', label);
  b.type = 'button';
  if (aria) b.setAttribute('aria-label', aria);
  b.addEventListener('click', onClick);
  return b;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const chat = {
  conv: null,            // the conversation record, null for a new chat
  messages: new Map(),   // id -> message record (all branches)
  live: new Map(),       // message id -> AnswerView of an answer still running
  onChanged: null,       // the sidebar's refresh
};

let stick = true;  // keep the newest text in view unless the reader scrolled up
const list = () => $('messages');
afterFrame(() => {
  if (stick) list().scrollTop = list().scrollHeight;
});

function fmtMs(ms) { return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`; }

function statsText(meta) {
  if (!meta || meta.output_tokens === undefined) return '';
  const parts = [];
  if (meta.ttft_ms !== undefined) parts.push(`TTFT ${fmtMs(meta.ttft_ms)}`);
  if (meta.tokens_per_s) parts.push(`${meta.tokens_per_s.toFixed(1)} tok/s`);
  parts.push(`prompt ${meta.prompt_tokens ?? 0}`);
  parts.push(`cached ${meta.cached_tokens ?? 0}`);
  parts.push(`output ${meta.output_tokens}`);
  if (meta.think) parts.push(`thinking ${meta.think}`);
  return parts.join(' · ');
}

// One assistant answer, live or stored.
class AnswerView {
  constructor(msg, article) {
    this.id = msg.id;
    this.article = article;
    this.think = el('details', 'thinking');
    this.thinkSummary = el('summary', '', 'Thinking…');
    this.thinkBody = el('div', 'thinking-body md');
    this.think.append(this.thinkSummary, this.thinkBody);
    this.think.hidden = true;
    this.body = el('div', 'msg-body md');
    this.tools = el('div', 'tool-calls');
    this.stats = el('div', 'msg-stats');
    article.querySelector('.msg-content').append(this.think, this.body, this.tools, this.stats);
    this.reasoning = new MarkdownStream(this.thinkBody);
    this.content = new MarkdownStream(this.body);
    this.seq = 0;
    this.t0 = performance.now();
    this.tThinkStart = 0;
    this.tThinkEnd = 0;
    this.finished = false;
  }

  // A delta event from the server: text is appended now, shown in the next frame.
  delta(d) {
    if (d.r) {
      if (!this.tThinkStart) this.tThinkStart = performance.now();
      this.reasoning.append(d.r);
    }
    if (d.c) {
      if (this.tThinkStart && !this.tThinkEnd) this.tThinkEnd = performance.now();
      this.content.append(d.c);
    }
    if (d.t) this.addTools(d.t);
    markDirty(this, 1);
  }

  addTools(calls) {
    for (const c of calls) {
      const box = el('div', 'tool-call');
      box.append(el('span', 'tool-label', 'Tool call'), el('code', 'tool-name', c.name));
      box.append(el('pre', 'tool-args', c.arguments));
      this.tools.append(box);
    }
  }

  frame() {
    if (this.reasoning.text && this.think.hidden) {
      this.think.hidden = false;
      this.think.open = true;  // reasoning streams in view; it folds when the answer starts
    }
    this.reasoning.render();
    this.content.render();
    if (this.tThinkEnd && !this.folded) {
      this.folded = true;
      this.think.open = false;
      this.thinkSummary.textContent = `Thought for ${fmtMs(this.tThinkEnd - this.tThinkStart)}`;
    }
  }

  // The stored message (from the done event or the store): final text and statistics.
  finish(msg) {
    this.finished = true;
    this.article.removeAttribute('aria-busy');
    // The streamed text is the stored text; settle what was still open.
    this.reasoning.render(true);
    this.content.render(true);
    if (msg.reasoning) {
      this.think.hidden = false;
      const ms = msg.meta?.thinking_ms;
      this.thinkSummary.textContent = ms !== undefined ? `Thought for ${fmtMs(ms)}` : 'Thoughts';
    }
    if (msg.status === 'stopped') this.stats.before(el('div', 'msg-note', 'Stopped.'));
    if (msg.status === 'error') this.stats.before(el('div', 'msg-note error', msg.meta?.error || 'The answer failed.'));
    if (msg.status === 'interrupted') this.stats.before(el('div', 'msg-note', 'Interrupted: the server stopped before this answer finished.'));
    this.stats.textContent = statsText(msg.meta);
    this.article.dataset.status = msg.status;
  }
}

function siblingsOf(m) {
  const out = [];
  for (const x of chat.messages.values()) if (x.parent_id === m.parent_id) out.push(x);
  return out;
}

// The newest descendant chain from `id` (what a branch switch shows).
function deepestFrom(id) {
  let cur = id;
  for (;;) {
    let next = null;
    for (const x of chat.messages.values()) if (x.parent_id === cur) next = x;  // newest last
    if (!next) return cur;
    cur = next.id;
  }
}

function pathTo(leaf) {
  const out = [];
  let cur = leaf ? chat.messages.get(leaf) : null;
  while (cur) {
    out.unshift(cur);
    cur = cur.parent_id ? chat.messages.get(cur.parent_id) : null;
  }
  return out;
}

function messageArticle(m) {
  const a = el('article', `msg msg-${m.role}`);
  a.dataset.id = m.id;
  a.setAttribute('aria-label', m.role === 'user' ? 'Your message' : 'Answer');
  const head = el('div', 'msg-head');
  head.append(el('span', 'role', m.role === 'user' ? 'You' : 'tandem'));
  const sibs = siblingsOf(m);
  if (sibs.length > 1) {
    const i = sibs.findIndex((x) => x.id === m.id);
    const nav = el('span', 'branches');
    const prev = button('‹', 'ghost', () => switchBranch(sibs[i - 1].id), 'Previous version');
    const next = button('›', 'ghost', () => switchBranch(sibs[i + 1].id), 'Next version');
    prev.disabled = i === 0;
    next.disabled = i === sibs.length - 1;
    nav.append(prev, el('span', 'branch-pos', `${i + 1}/${sibs.length}`), next);
    head.append(nav);
  }
  a.append(head, el('div', 'msg-content'));
  return a;
}

function actions(m, view) {
  const row = el('div', 'msg-actions');
  row.append(button('Copy', 'ghost', () => navigator.clipboard?.writeText(
    view ? view.content.text : m.content), 'Copy message'));
  if (m.role === 'user') row.append(button('Edit', 'ghost', () => editMessage(m), 'Edit and resend'));
  if (m.role === 'assistant') row.append(button('Regenerate', 'ghost', () => regenerate(m), 'Regenerate answer'));
  row.append(button('Delete', 'ghost', () => deleteMessage(m), 'Delete message'));
  return row;
}

// Renders the branch ending at the conversation's leaf; attaches to running answers.
export function renderChat(followed = null) {
  const box = list();
  for (const v of chat.live.values()) v.detached = true;
  chat.live.clear();
  box.replaceChildren();
  $('chat-title').textContent = chat.conv?.title || 'New chat';
  $('export-btn').hidden = !chat.conv;
  if (!chat.conv) {
    box.append(el('p', 'empty', 'Ask anything. Answers stream as they are written and are kept on the server.'));
    return;
  }
  for (const m of pathTo(chat.conv.leaf_id)) {
    const a = messageArticle(m);
    box.append(a);
    if (m.role === 'assistant') {
      const v = new AnswerView(m, a);
      if (m.status === 'streaming') {
        a.setAttribute('aria-busy', 'true');
        chat.live.set(m.id, v);
        if (m.id !== followed) attach(v, 0);
      } else {
        v.reasoning.append(m.reasoning);
        v.content.append(m.content);
        v.finish(m);
      }
      a.append(actions(m, v));
    } else {
      const body = el('div', 'msg-body md');
      body.append(renderMarkdown(m.content));
      a.querySelector('.msg-content').append(body);
      typeset(body);
      a.append(actions(m));
    }
  }
  stick = true;
  box.scrollTop = box.scrollHeight;
  updateComposer();
}

export async function openConversation(id) {
  const r = await call('GET', `/ui/api/conversations/${encodeURIComponent(id)}`);
  chat.conv = r.conversation;
  chat.messages = new Map(r.messages.map((m) => [m.id, m]));
  history.replaceState(null, '', `#c=${encodeURIComponent(id)}`);
  renderChat();
}

export function newChat() {
  chat.conv = null;
  chat.messages = new Map();
  history.replaceState(null, '', location.pathname);
  renderChat();
  $('composer-input').focus();
}

async function switchBranch(id) {
  const leaf = deepestFrom(id);
  chat.conv = await call('PATCH', `/ui/api/conversations/${chat.conv.id}`, { leaf_id: leaf });
  renderChat();
}

function updateComposer() {
  const running = chat.live.size > 0;
  $('send-btn').hidden = running;
  $('stop-btn').hidden = !running;
  $('composer-status').textContent = running ? 'Answering…' : '';
}

function handleEvent(view, ev, data, id) {
  const t = performance.now();
  if (ev === 'delta') {
    const seq = Number(id);
    if (seq <= view.seq) return;  // never shown twice
    view.seq = seq;
    view.delta(JSON.parse(data));
    performance.measure('tandem:token', { start: t });
  } else if (ev === 'done') {
    const msg = JSON.parse(data).message;
    chat.messages.set(msg.id, msg);
    view.finish(msg);
    chat.live.delete(view.id);
    updateComposer();
    chat.onChanged?.();
  } else if (ev === 'error') {
    const e = JSON.parse(data);
    view.stats.textContent = e.message || 'error';
  }
}

// Follows a running answer from event `from` on, reconnecting after network failures.
async function attach(view, from) {
  let attempt = 0;
  view.seq = from;
  while (!view.finished && !view.detached) {
    try {
      const onEvent = (ev, data, id) => { if (!view.detached) handleEvent(view, ev, data, id); };
      await streamEvents('GET', `/ui/api/answers/${view.id}/events?from=${view.seq}`, undefined, onEvent);
      attempt = 0;
      if (view.finished || view.detached) return;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        // The server no longer holds it: what it stored is the answer.
        if (chat.conv) await openConversation(chat.conv.id);
        return;
      }
      if (e instanceof ApiError && e.status < 500) {
        view.stats.textContent = e.message;
        return;
      }
    }
    await sleep(Math.min(200 * 2 ** attempt++, 3000));
  }
}

// Starts an answer under `parentId` (a new user message `content` first, when given).
async function startAnswer(parentId, content) {
  const think = $('think-mode').value;
  if (!chat.conv) {
    const title = (content || 'New chat').replace(/\s+/g, ' ').trim().slice(0, 80);
    chat.conv = await call('POST', '/ui/api/conversations', { title });
    chat.messages = new Map();
    history.replaceState(null, '', `#c=${encodeURIComponent(chat.conv.id)}`);
    chat.onChanged?.();
  }
  const body = { parent_id: parentId || null, ...generationFields(think) };
  if (content !== undefined) body.content = content;
  const convId = chat.conv.id;
  let view = null;
  // The POST's own response is the first connection to the answer.
  try {
    await streamEvents('POST', `/ui/api/conversations/${convId}/answers`, body, (ev, data, id) => {
      if (ev === 'start') {
        const s = JSON.parse(data);
        if (s.user_message) chat.messages.set(s.user_message.id, s.user_message);
        chat.messages.set(s.assistant_message.id, s.assistant_message);
        chat.conv.leaf_id = s.assistant_message.id;
        renderChat(s.assistant_message.id);  // the new branch; this answer is followed here
        view = chat.live.get(s.assistant_message.id);
        return;
      }
      if (view && !view.detached) handleEvent(view, ev, data, id);
    });
  } catch (e) {
    if (!view) throw e;
  }
  // The connection dropped before the end: follow the rest by GET.
  if (view && !view.finished && !view.detached) await attach(view, view.seq);
}

export function initChat() {
  const input = $('composer-input');
  const send = async () => {
    const text = input.value;
    if (!text.trim() || chat.live.size) return;
    input.value = '';
    autosize();
    try {
      await startAnswer(chat.conv?.leaf_id || null, text);
    } catch (e) {
      input.value = text;
      $('composer-status').textContent = e.message;
    }
  };
  const autosize = () => {
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
  };
  input.addEventListener('input', autosize);
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
  $('stop-btn').addEventListener('click', stopAll);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && chat.live.size && !document.querySelector('dialog[open]')) {
      e.preventDefault();
      stopAll();
    }
  });
  list().addEventListener('scroll', () => {
    const b = list();
    stick = b.scrollHeight - b.scrollTop - b.clientHeight < 48;
  }, { passive: true });
  // Copy buttons of code blocks (added by the renderer, handled here for all of them).
  list().addEventListener('click', (e) => {
    const b = e.target.closest('button.copy-code');
    if (!b) return;
    const code = b.parentElement.querySelector('code');
    navigator.clipboard?.writeText(code ? code.textContent : '');
    b.textContent = 'Copied';
  });
  $('export-btn').addEventListener('click', async () => {
    if (!chat.conv) return;
    const j = await call('GET', `/ui/api/conversations/${chat.conv.id}/export`);
    const url = URL.createObjectURL(new Blob([JSON.stringify(j, null, 2)], { type: 'application/json' }));
    const a = el('a');
    a.href = url;
    a.download = `${(chat.conv.title || 'conversation').replace(/[^\w.-]+/g, '_').slice(0, 60)}.json`;
    a.click();
    URL.revokeObjectURL(url);
  });
  renderChat();
}

async function stopAll() {
  for (const id of chat.live.keys())
    call('POST', `/ui/api/answers/${id}/stop`).catch(() => {});
}

async function regenerate(m) {
  if (chat.live.size) return;
  await startAnswer(m.parent_id, undefined);
}

function editMessage(m) {
  if (chat.live.size) return;
  const a = list().querySelector(`article[data-id="${CSS.escape(m.id)}"]`);
  const content = a.querySelector('.msg-content');
  const ta = el('textarea', 'edit-box');
  ta.value = m.content;
  ta.setAttribute('aria-label', 'Edit message');
  const row = el('div', 'msg-actions');
  row.append(button('Send', 'primary', async () => {
    if (!ta.value.trim()) return;
    await startAnswer(m.parent_id, ta.value);
  }), button('Cancel', '', () => renderChat()));
  content.replaceChildren(ta, row);
  ta.focus();
}

async function deleteMessage(m) {
  if (chat.live.has(m.id)) return;
  const r = await call('DELETE', `/ui/api/conversations/${chat.conv.id}/messages/${m.id}`);
  chat.conv = r.conversation;
  chat.messages = new Map(r.messages.map((x) => [x.id, x]));
  renderChat();
  chat.onChanged?.();
}
