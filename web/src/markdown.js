// Markdown to safe DOM: marked (GFM) with math and highlighted code, then DOMPurify. Model
// text is untrusted: whatever it holds (<script>, onerror=, javascript: links, <iframe>,
// <form>, SVG tricks) leaves DOMPurify inert, and the page's Content-Security-Policy allows
// no inline script besides.
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import { highlight } from './highlight.js';

const esc = (s) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;',
  '"': '&quot;', "'": '&#39;' })[c]);

// $$...$$ and \[...\] blocks; $...$ and \(...\) inline. An inline $ must hug its text
// ("$x$", not "$ 5 and $"), and the closing one must not be followed by a digit, so
// prices stay text.
const mathBlock = {
  name: 'mathBlock', level: 'block',
  start(src) { const m = src.match(/\$\$|\\\[/); return m ? m.index : undefined; },
  tokenizer(src) {
    const m = /^\$\$([\s\S]+?)\$\$(?:\n|$)/.exec(src) || /^\\\[([\s\S]+?)\\\](?:\n|$)/.exec(src);
    if (m) return { type: 'mathBlock', raw: m[0], text: m[1].trim() };
  },
  renderer(t) { return `<div class="math" data-display data-tex="${esc(t.text)}">${esc(t.text)}</div>\n`; },
};
const mathInline = {
  name: 'mathInline', level: 'inline',
  start(src) { const m = src.match(/\$|\\\(/); return m ? m.index : undefined; },
  tokenizer(src) {
    let m = /^\$\$([^$]+?)\$\$/.exec(src);
    if (m) return { type: 'mathInline', raw: m[0], text: m[1].trim(), display: true };
    m = /^\$(?=[^\s$])((?:\\.|[^\\$\n])*?[^\s\\$])\$(?!\d)/.exec(src) || /^\\\((.+?)\\\)/.exec(src);
    if (m) return { type: 'mathInline', raw: m[0], text: m[1] };
  },
  renderer(t) {
    return `<span class="math"${t.display ? ' data-display' : ''} data-tex="${esc(t.text)}">${esc(t.text)}</span>`;
  },
};

export const marked = new Marked({
  gfm: true,
  breaks: false,
  extensions: [mathBlock, mathInline],
  renderer: {
    code({ text, lang }) {
      const hl = highlight(text, lang);
      const l = (lang || '').trim().split(/\s+/)[0];
      const cls = l ? ` class="hljs language-${esc(l)}"` : ' class="hljs"';
      return `<pre><code${cls}>${hl ?? esc(text)}</code></pre>\n`;
    },
  },
});

let counts = { parses: 0, chars: 0 };
export const parseStats = () => counts;

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer nofollow');
  }
});
const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object',
    'embed', 'base', 'link', 'meta'],
  FORBID_ATTR: ['style', 'formaction', 'srcset'],
};

// Copy buttons go in after sanitizing: they are the page's, not the model's.
function addCopyButtons(frag) {
  for (const pre of frag.querySelectorAll('pre')) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy-code';
    b.textContent = 'Copy';
    b.setAttribute('aria-label', 'Copy code');
    pre.prepend(b);
  }
}

// Safe DOM for already-lexed block tokens (`links` from the lexer that made them).
export function renderTokens(tokens, links) {
  const list = tokens.slice();
  list.links = links || {};
  const html = marked.parser(list);
  const frag = DOMPurify.sanitize(html, PURIFY);
  addCopyButtons(frag);
  return frag;
}

export function lex(src) {
  counts.parses++;
  counts.chars += src.length;
  return marked.lexer(src);
}

// Whole text at once (history, finished messages).
export function renderMarkdown(src) {
  const tokens = lex(src);
  return renderTokens(tokens, tokens.links);
}
