// The page's start: theme, settings, the conversation list, the chat and the dashboard.
import { auth } from './api.js';
import { initChat, openConversation, newChat, chat } from './chat.js';
import { initSidebar, refresh } from './sidebar.js';
import { initSettings, loadModels, openSettings, showKeyField } from './settings.js';
import { showDashboard } from './dashboard.js';
import { parseStats } from './markdown.js';

const $ = (id) => document.getElementById(id);

// Light or dark: the saved choice, else the system's.
function applyTheme(t) {
  document.documentElement.dataset.theme = t;
  $('theme-toggle').setAttribute('aria-label', t === 'dark' ? 'Switch to light theme' : 'Switch to dark theme');
}
const saved = localStorage.getItem('tandem.theme');
applyTheme(saved || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
$('theme-toggle').addEventListener('click', () => {
  const t = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
  localStorage.setItem('tandem.theme', t);
  applyTheme(t);
});

auth.onRequired = (msg) => {
  showKeyField(msg);
  if (!$('settings').open) openSettings(true);
};

async function boot() {
  try {
    await loadModels();
    await refresh();
    const m = /#c=([^&]+)/.exec(location.hash);
    if (m) await openConversation(decodeURIComponent(m[1]));
  } catch (e) {
    $('composer-status').textContent = e.message;
  }
}

initSettings((keyChanged) => { if (keyChanged) boot(); });
initSidebar();
initChat();
$('settings-btn').addEventListener('click', () => openSettings());
$('new-chat').addEventListener('click', () => { showDashboard(false); newChat(); });
$('view-toggle').addEventListener('click', () => showDashboard($('dashboard-view').hidden));
// For tests and the curious: how much Markdown was lexed, and what is live.
window.tandem = { parseStats, chat };
boot();
