// Settings kept in this browser (localStorage): model, system prompt, sampling, thinking
// default and budget, and the API key when the server asks for one.
import { auth, call } from './api.js';

const STORE = 'tandem.settings';
const $ = (id) => document.getElementById(id);

export const settings = Object.assign({
  model: '', system: '', temperature: null, top_p: null, top_k: null, max_tokens: null,
  seed: null, think: 'auto', thinking_budget: null,
}, JSON.parse(localStorage.getItem(STORE) || '{}'));

function save() { localStorage.setItem(STORE, JSON.stringify(settings)); }

const numFields = [['s-temperature', 'temperature', parseFloat], ['s-top-p', 'top_p', parseFloat],
  ['s-top-k', 'top_k', (v) => parseInt(v, 10)], ['s-max-tokens', 'max_tokens', (v) => parseInt(v, 10)],
  ['s-seed', 'seed', (v) => parseInt(v, 10)], ['s-budget', 'thinking_budget', (v) => parseInt(v, 10)]];

export let models = [];

export async function loadModels() {
  const r = await call('GET', '/v1/models');
  models = (r.data || []).map((m) => m.id);
  if (!models.includes(settings.model)) settings.model = models[0] || '';
  const sel = $('s-model');
  sel.replaceChildren(...models.map((m) => new Option(m, m, false, m === settings.model)));
  $('model-name').textContent = settings.model;
  return models;
}

export function showKeyField(message) {
  $('s-key-field').hidden = false;
  $('s-key-note').hidden = false;
  if (message) $('s-key-note').textContent = `This server asks for an API key (${message}).`;
}

export function openSettings(focusKey = false) {
  $('s-model').value = settings.model;
  $('s-system').value = settings.system;
  for (const [id, key] of numFields) $(id).value = settings[key] ?? '';
  $('s-think').value = settings.think;
  $('s-key').value = auth.key;
  $('settings').showModal();
  if (focusKey) $('s-key').focus();
}

export function initSettings(onSaved) {
  $('settings').addEventListener('close', () => {
    if ($('settings').returnValue !== 'save') return;
    settings.model = $('s-model').value || settings.model;
    settings.system = $('s-system').value;
    for (const [id, key, parse] of numFields) {
      const v = $(id).value.trim();
      const n = v === '' ? null : parse(v);
      settings[key] = Number.isFinite(n) ? n : null;
    }
    settings.think = $('s-think').value;
    const keyChanged = $('s-key').value !== auth.key;
    auth.key = $('s-key').value.trim();
    save();
    $('model-name').textContent = settings.model;
    $('think-mode').value = settings.think;
    onSaved(keyChanged);
  });
  $('think-mode').value = settings.think;
}

// The generation fields of an answer request.
export function generationFields(think) {
  const f = { model: settings.model, think };
  if (settings.system) f.system = settings.system;
  for (const k of ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed', 'thinking_budget'])
    if (settings[k] !== null && settings[k] !== undefined) f[k] = settings[k];
  return f;
}
