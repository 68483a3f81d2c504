// Builds the chat page and, with --cpp, the C++ source that embeds it in the binary.
//
//   node build.mjs --out DIR [--cpp FILE]
//
// esbuild bundles src/main.js (ES modules, code splitting: KaTeX is a chunk of its own,
// loaded on the first math) and the CSS; every asset gets a content hash in its name
// (served with a one-year immutable cache), index.html refers to them and is never cached.
// Each text file is also precompressed with gzip and brotli at their best settings; the
// server picks the variant the browser accepts. The first load (index.html, main JS and
// CSS, and the chunks main imports statically) must stay under 300 KB compressed: the
// build fails past that.
//
// Without web/node_modules (npm ci not run) the C++ source holds a one-page notice saying
// how to build the page, so the server still builds and says what is missing.
// Inputs are hashed: when nothing changed, the run ends at once and the C++ file is left
// untouched (no recompilation).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const outDir = path.resolve(opt('--out') || path.join(here, 'dist'));
const cppFile = opt('--cpp') && path.resolve(opt('--cpp'));
const FIRST_LOAD_LIMIT = 300 * 1024;

function walk(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  }).sort();
}

// The hash of everything the output depends on.
function inputsHash() {
  const h = createHash('sha256');
  const files = [path.join(here, 'build.mjs'), path.join(here, 'package-lock.json'), ...walk(path.join(here, 'src'))];
  const stamp = path.join(here, 'node_modules', '.package-lock.json');
  if (fs.existsSync(stamp)) files.push(stamp);
  for (const f of files) h.update(f).update(fs.readFileSync(f));
  h.update(cppFile || '');
  return h.digest('hex');
}

function writeIfChanged(file, data) {
  if (fs.existsSync(file) && Buffer.compare(fs.readFileSync(file), Buffer.from(data)) === 0) return;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(`${file}.tmp`, data);
  fs.renameSync(`${file}.tmp`, file);
}

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.woff2': 'font/woff2', '.json': 'application/json',
  '.svg': 'image/svg+xml', '.map': 'application/json',
};

// KaTeX's CSS lists woff2, woff and ttf for each font; every browser that runs the page
// takes woff2, so only those are bundled.
const katexWoff2Only = {
  name: 'katex-woff2-only',
  setup(b) {
    b.onLoad({ filter: /katex(\.min)?\.css$/ }, async (a) => ({
      loader: 'css',
      contents: fs.readFileSync(a.path, 'utf8')
        .replace(/,\s*url\([^)]*\.woff\)\s*format\("woff"\)/g, '')
        .replace(/,\s*url\([^)]*\.ttf\)\s*format\("truetype"\)/g, ''),
    }));
  },
};

async function build() {
  const esbuild = await import('esbuild');
  const assets = path.join(outDir, 'assets');
  fs.rmSync(outDir, { recursive: true, force: true });
  const r = await esbuild.build({
    absWorkingDir: here,
    entryPoints: { main: 'src/main.js', style: 'src/styles.css', katex: 'node_modules/katex/dist/katex.min.css' },
    bundle: true, splitting: true, format: 'esm', minify: true, metafile: true, write: true,
    target: ['chrome111', 'firefox115', 'safari16.4'],
    outdir: assets, entryNames: '[name]-[hash]', chunkNames: '[name]-[hash]', assetNames: '[name]-[hash]',
    publicPath: '/ui/assets', loader: { '.woff2': 'file' }, plugins: [katexWoff2Only],
    legalComments: 'none', logLevel: 'warning',
  });
  const outs = r.metafile.outputs;
  const byEntry = {};
  for (const [file, o] of Object.entries(outs)) if (o.entryPoint) byEntry[o.entryPoint] = `/ui/assets/${path.basename(file)}`;
  const html = fs.readFileSync(path.join(here, 'src/index.html'), 'utf8')
    .replace('{{main.js}}', byEntry['src/main.js'])
    .replace('{{main.css}}', byEntry['src/styles.css'])
    .replace('{{katex.css}}', byEntry['node_modules/katex/dist/katex.min.css']);
  if (html.includes('{{')) throw new Error('index.html has an unreplaced {{...}}');
  fs.writeFileSync(path.join(outDir, 'index.html'), html);

  // The first load: index.html, main.js and what it imports statically, the page CSS.
  const first = new Set([path.join(outDir, 'index.html')]);
  const addJs = (file) => {
    const abs = path.resolve(here, file);
    if (first.has(abs)) return;
    first.add(abs);
    for (const imp of outs[file].imports) if (imp.kind === 'import-statement') addJs(imp.path);
  };
  for (const [file, o] of Object.entries(outs)) {
    if (o.entryPoint === 'src/main.js') addJs(file);
    if (o.entryPoint === 'src/styles.css') first.add(path.resolve(here, file));
  }
  return { first };
}

function compress(buf, type) {
  if (!/^text\/|json|svg/.test(type) || buf.length < 256) return { gzip: null, br: null };
  const gzip = zlib.gzipSync(buf, { level: 9 });
  const br = zlib.brotliCompressSync(buf, { params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: buf.length } });
  const worth = (c) => (c.length < buf.length * 0.9 ? c : null);
  return { gzip: worth(gzip), br: worth(br) };
}

// A C++ string literal for any bytes: printable ASCII as is, the rest as octal escapes
// (three digits, so a following digit can never extend one).
function literal(buf) {
  let s = '';
  let line = 0;
  const parts = [];
  for (const b of buf) {
    let c;
    if (b === 0x22) c = '\\"';
    else if (b === 0x5c) c = '\\\\';
    else if (b === 0x3f) c = '\\?';  // no trigraphs, no "??" surprises
    else if (b >= 0x20 && b < 0x7f) c = String.fromCharCode(b);
    else c = `\\${b.toString(8).padStart(3, '0')}`;
    s += c;
    line += c.length;
    if (line > 100) { parts.push(s); s = ''; line = 0; }
  }
  parts.push(s);
  return parts.map((p) => `"${p}"`).join('\n    ');
}

function cpp(files, built) {
  let out = `// Generated by web/build.mjs from web/src: do not edit. The chat page's files, each as
// sent (identity) and precompressed (gzip, brotli; empty where compression does not pay).
#include "server/web_assets.h"

namespace tandem::server {
namespace {
`;
  const rows = [];
  files.forEach((f, i) => {
    out += `constexpr char k${i}[] = ${literal(f.body)};\n`;
    if (f.gzip) out += `constexpr char k${i}gz[] = ${literal(f.gzip)};\n`;
    if (f.br) out += `constexpr char k${i}br[] = ${literal(f.br)};\n`;
    const sv = (name, b) => (b ? `std::string_view(${name}, ${b.length})` : 'std::string_view()');
    rows.push(`    {"${f.name}", "${f.type}", ${sv(`k${i}`, f.body)}, ${sv(`k${i}gz`, f.gzip)}, ${sv(`k${i}br`, f.br)},
     "\\"${f.etag}\\"", ${f.immutable}, ${f.first}},`);
  });
  out += `const WebAsset kAssets[] = {
${rows.join('\n')}
};
}  // namespace

std::span<const WebAsset> web_assets() {
  return kAssets;
}

bool web_page_built() {
  return ${built};
}

}  // namespace tandem::server
`;
  return out;
}

function fileEntry(abs, rel, first) {
  const body = fs.readFileSync(abs);
  const type = TYPES[path.extname(abs)] || 'application/octet-stream';
  return { name: rel, type, body, ...compress(body, type), first,
    etag: createHash('sha256').update(body).digest('hex').slice(0, 20), immutable: rel !== 'index.html' };
}

// Parallel builds may start this twice at once: one runs, the other waits, then finds the
// work done.
async function withLock(fn) {
  const lock = `${outDir}.lock`;
  fs.mkdirSync(path.dirname(lock), { recursive: true });
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      // A lock left by a build that was killed is stale after two minutes.
      if (Date.now() - fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs > 120000) fs.rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`${lock} is held by another build`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

async function main() {
  const hash = inputsHash();
  const stampFile = path.join(outDir, '.inputs.sha256');
  const current = () => cppFile && fs.existsSync(cppFile) && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === hash;
  if (current()) return;
  await withLock(async () => {
    if (!current()) await buildAll(hash, stampFile);
  });
}

async function buildAll(hash, stampFile) {
  let entries;
  let built = true;
  if (!fs.existsSync(path.join(here, 'node_modules', 'esbuild'))) {
    built = false;
    const notice = Buffer.from(`<!doctype html><html lang="en"><meta charset="utf-8"><title>tandem</title>
<body style="font-family:system-ui;max-width:40em;margin:4em auto"><h1>tandem</h1>
<p>This build of tandem has no web page: its npm packages were not installed when it was built.
Run <code>make deps</code> (or <code>npm ci</code> in <code>web/</code>) and build again.</p>
<p>The APIs work as usual: <code>/v1/chat/completions</code>, <code>/api/chat</code>.</p></body></html>\n`);
    const e = { name: 'index.html', type: TYPES['.html'], body: notice, ...compress(notice, TYPES['.html']),
      etag: createHash('sha256').update(notice).digest('hex').slice(0, 20), immutable: false, first: true };
    entries = [e];
    console.log('[web] web/node_modules is missing: embedding a notice page (run `make deps`)');
  } else {
    const { first } = await build();
    entries = walk(outDir).filter((f) => !path.basename(f).startsWith('.')).map((abs) =>
      fileEntry(abs, path.relative(outDir, abs).split(path.sep).join('/'), first.has(abs)));
    for (const e of entries) {
      for (const [k, b] of [['gz', e.gzip], ['br', e.br]]) if (b) fs.writeFileSync(path.join(outDir, `${e.name}.${k}`), b);
    }
    const size = (pick) => entries.filter((e) => e.first).reduce((a, e) => a + (pick(e) || e.body).length, 0);
    const gz = size((e) => e.gzip);
    const br = size((e) => e.br);
    const all = entries.reduce((a, e) => a + e.body.length, 0);
    console.log(`[web] ${entries.length} files, ${(all / 1024).toFixed(0)} KB in all; first load ${(br / 1024).toFixed(1)} KB brotli, ${(gz / 1024).toFixed(1)} KB gzip`);
    fs.writeFileSync(path.join(outDir, 'first-load.json'), JSON.stringify({ brotli: br, gzip: gz, files: entries.filter((e) => e.first).map((e) => e.name) }, null, 1));
    if (gz > FIRST_LOAD_LIMIT) throw new Error(`the first load is ${gz} bytes gzip, over the ${FIRST_LOAD_LIMIT} budget`);
  }
  if (cppFile) {
    writeIfChanged(cppFile, cpp(entries, built));
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(stampFile, hash);
  }
}

main().catch((e) => { console.error(`[web] build failed: ${e.message}`); process.exit(1); });
