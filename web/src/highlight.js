// highlight.js with the languages models write most, registered by hand so the bundle
// carries only these (the full set is ~1 MB).
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import csharp from 'highlight.js/lib/languages/csharp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import kotlin from 'highlight.js/lib/languages/kotlin';
import markdown from 'highlight.js/lib/languages/markdown';
import php from 'highlight.js/lib/languages/php';
import python from 'highlight.js/lib/languages/python';
import ruby from 'highlight.js/lib/languages/ruby';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import swift from 'highlight.js/lib/languages/swift';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import cmake from 'highlight.js/lib/languages/cmake';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import ini from 'highlight.js/lib/languages/ini';

const langs = { bash, c, cpp, csharp, css, diff, go, java, javascript, json, kotlin, markdown,
  php, python, ruby, rust, shell, sql, swift, typescript, xml, yaml, cmake, dockerfile, ini };
for (const [name, def] of Object.entries(langs)) hljs.registerLanguage(name, def);

// Highlighted HTML for `code`, or null when the language is unknown (the caller escapes).
export function highlight(code, lang) {
  const l = (lang || '').trim().split(/\s+/)[0].toLowerCase();
  if (!l || !hljs.getLanguage(l)) return null;
  return hljs.highlight(code, { language: l, ignoreIllegals: true }).value;
}
