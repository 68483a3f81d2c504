// KaTeX, loaded the first time a page shows math (it is most of the page's weight, and most
// chats have none). Math arrives as <span class="math" data-tex data-display> placeholders
// from the Markdown renderer; typeset() fills them in once KaTeX is here.
let katex = null;
let loading = null;

function loadCss() {
  const href = document.querySelector('meta[name="tandem-katex-css"]')?.content;
  if (!href || document.querySelector(`link[href="${href}"]`)) return;
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = href;
  document.head.appendChild(link);
}

function load() {
  if (!loading) {
    loadCss();
    loading = import('katex').then((m) => {
      katex = m.default || m;
      // Everything that arrived while loading.
      typeset(document.body);
    });
  }
  return loading;
}

// Renders the placeholders under `root`. Returns the number still waiting for KaTeX.
export function typeset(root) {
  const pending = root.querySelectorAll('.math:not([data-done])');
  if (!pending.length) return 0;
  if (!katex) {
    load();
    return pending.length;
  }
  for (const el of pending) {
    const tex = el.getAttribute('data-tex') || '';
    try {
      // trust: false (the default) keeps \href, \url and \htmlData from making links or attributes.
      katex.render(tex, el, { displayMode: el.hasAttribute('data-display'), throwOnError: false,
        output: 'htmlAndMathml', maxSize: 50, maxExpand: 500 });
    } catch (e) {
      el.textContent = tex;
    }
    el.setAttribute('data-done', '');
  }
  return 0;
}
