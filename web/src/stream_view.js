// Streaming Markdown into the page. Tokens are appended to a buffer as they arrive; a
// single requestAnimationFrame callback renders what is new (so at most one DOM update per
// frame, and no timers: the first token shows on the next frame). Only the last, still open
// block is lexed again each frame; blocks before it are final, rendered once into the
// `done` element and never parsed again.
import { lex, renderTokens } from './markdown.js';
import { typeset } from './math.js';

// A block stays open until the block after it has a full first line: that line is what
// tells a list item from a paragraph after a list, so what comes before is settled.
function settledCount(tokens) {
  let last = tokens.length - 1;
  while (last >= 0 && tokens[last].type === 'space') last--;
  if (last <= 0) return 0;  // one block or none: all open
  if (tokens[last].raw.includes('\n')) return last;
  // The open block's first line is not complete: the block before it stays open too.
  let prev = last - 1;
  while (prev >= 0 && tokens[prev].type === 'space') prev--;
  return Math.max(prev, 0);
}

export class MarkdownStream {
  constructor(el) {
    this.el = el;
    this.text = '';
    this.settled = 0;  // chars of `text` rendered for good
    this.done = document.createElement('div');
    this.done.className = 'md-done';
    this.live = document.createElement('div');
    this.live.className = 'md-live';
    el.replaceChildren(this.done, this.live);
    this.dirty = false;
  }

  append(s) {
    if (!s) return;
    this.text += s.replace(/\r\n?/g, '\n');
    this.dirty = true;
  }

  // Renders what changed; `final` settles everything (the answer ended).
  render(final = false) {
    if (!this.dirty && !final) return false;
    this.dirty = false;
    const tail = this.text.slice(this.settled);
    const tokens = lex(tail);
    let n = final ? tokens.length : settledCount(tokens);
    if (n > 0) {
      let used = 0;
      for (let i = 0; i < n; i++) used += tokens[i].raw.length;
      // The lexer's raw pieces must tile the text; if not, keep it all open (never wrong).
      if (tail.slice(0, used) === tokens.slice(0, n).map((t) => t.raw).join('')) {
        const frag = renderTokens(tokens.slice(0, n), tokens.links);
        this.done.appendChild(frag);
        this.settled += used;
        typeset(this.done);
      } else {
        n = 0;
      }
    }
    const rest = tokens.slice(n);
    if (rest.length) {
      this.live.replaceChildren(renderTokens(rest, tokens.links));
      typeset(this.live);
    } else if (this.live.firstChild) {
      this.live.replaceChildren();
    }
    return true;
  }
}
