#!/usr/bin/env bash
# The routes curl can check, and a table of bad inputs: each must get its 4xx with an error
# body, and the server must go on answering good requests. Needs TANDEM_URL (with_server.sh).
set -u
U=$TANDEM_URL
passes=0; fails=0
ok() { passes=$((passes+1)); }
bad() { fails=$((fails+1)); echo "FAIL: $*"; }
C=(curl -s -m 60)

# status <method> <path> <body|-> [content-type]: prints "STATUS BODY"
req() {
  local m=$1 p=$2 b=$3
  if [ "$b" = - ]; then "${C[@]}" -X "$m" -o /tmp/tandem_curl_body.$$ -w '%{http_code}' "$U$p"
  else printf '%s' "$b" | "${C[@]}" -X "$m" -H 'Content-Type: application/json' --data-binary @- \
         -o /tmp/tandem_curl_body.$$ -w '%{http_code}' "$U$p"; fi
}
body() { cat /tmp/tandem_curl_body.$$; }
trap 'rm -f /tmp/tandem_curl_body.$$' EXIT

good_chat='{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"temperature":0}'
still_serving() {
  local s; s=$(req POST /v1/chat/completions "$good_chat")
  [ "$s" = 200 ] && body | grep -q '"chat.completion"' && return 0
  echo "still_serving: got status '$s': $(body | head -c 300)"; return 1
}

# --- plain routes
s=$(req GET / -); [ "$s" = 200 ] && [ "$(body)" = "Ollama is running" ] && ok || bad "GET / ($s)"
s=$("${C[@]}" -I -o /dev/null -w '%{http_code}' "$U/"); [ "$s" = 200 ] && ok || bad "HEAD / ($s)"
s=$(req GET /api/version -); [ "$s" = 200 ] && body | grep -qE '"version":"[0-9]+\.[0-9]+\.[0-9]+"' && ok || bad "version"
s=$(req GET /v1/models -); [ "$s" = 200 ] && body | grep -q '"id":"tiny"' && ok || bad "models"
s=$(req GET /v1/models/tiny -); [ "$s" = 200 ] && ok || bad "models/tiny ($s)"
s=$(req GET /v1/models/nope -); [ "$s" = 404 ] && ok || bad "models/nope ($s)"
s=$(req GET /api/ps -); [ "$s" = 200 ] && body | grep -q '"context_length"' && ok || bad "ps"
s=$(req GET /nowhere -); [ "$s" = 404 ] && ok || bad "unknown route ($s)"
s=$(req PUT /api/chat '{}'); [ "$s" = 405 ] && ok || bad "wrong method ($s)"

# --- keep-alive: two requests over one connection
n=$("${C[@]}" -v "$U/api/version" "$U/api/version" 2>&1 | grep -c 'Re-using existing connection')
[ "$n" -ge 1 ] && ok || bad "keep-alive: connection not reused"

# --- the bad-input table: name | route | body | want status | grep in body
while IFS='|' read -r name route data want pat; do
  [ -z "$name" ] && continue
  s=$(req POST "$route" "$data")
  if [ "$s" = "$want" ] && body | grep -qiE "$pat"; then ok; else bad "$name: got $s, want $want; $(body | head -c 300)"; fi
  still_serving || bad "server stopped serving after: $name"
done <<'TABLE'
malformed JSON|/v1/chat/completions|{"model":"tiny","messages":[|400|not valid JSON
body not an object|/v1/chat/completions|[1,2]|400|JSON object
messages wrong type|/v1/chat/completions|{"model":"tiny","messages":"hi"}|400|"param":"messages"
empty messages|/v1/chat/completions|{"model":"tiny","messages":[]}|400|must not be empty
unknown role|/v1/chat/completions|{"model":"tiny","messages":[{"role":"wizard","content":"x"}]}|400|messages\[0\]\.role
unknown model|/v1/chat/completions|{"model":"nope","messages":[{"role":"user","content":"x"}]}|404|model_not_found
missing model|/v1/chat/completions|{"messages":[{"role":"user","content":"x"}]}|400|"param":"model"
temperature wrong type|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"temperature":"hot"}|400|"param":"temperature"
negative max_tokens|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":-1}|400|"param":"max_tokens"
huge max_tokens|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":99999999999}|400|"param":"max_tokens"
max_tokens over context|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":100000}|400|context_length_exceeded
huge n|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"n":100000}|400|"param":"n"
top_p out of range|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"top_p":-3}|400|"param":"top_p"
five stop strings|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}|400|"param":"stop"
response_format refused|/v1/chat/completions|{"model":"tiny","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}|400|"param":"response_format"
completion token out of vocab|/v1/completions|{"model":"tiny","prompt":[999999999]}|400|out of range
completion empty prompt|/v1/completions|{"model":"tiny","prompt":""}|400|"param":"prompt"
ollama format refused|/api/generate|{"model":"tiny","prompt":"x","format":"json"}|400|format
ollama template refused|/api/generate|{"model":"tiny","prompt":"x","template":"{{ .Prompt }}"}|400|template
ollama unknown model|/api/chat|{"model":"nope","messages":[{"role":"user","content":"x"}]}|404|model 'nope' not found
ollama bad option type|/api/chat|{"model":"tiny","messages":[{"role":"user","content":"x"}],"options":{"num_ctx":"big"}}|400|num_ctx
ollama unknown role|/api/chat|{"model":"tiny","messages":[{"role":"bot","content":"x"}]}|400|role
TABLE

# invalid UTF-8 inside a JSON string
s=$(printf '{"model":"tiny","messages":[{"role":"user","content":"\xff\xfe bad"}]}' | "${C[@]}" -H 'Content-Type: application/json' --data-binary @- -o /tmp/tandem_curl_body.$$ -w '%{http_code}' "$U/v1/chat/completions")
[ "$s" = 400 ] && body | grep -qi 'utf-8' && ok || bad "invalid UTF-8: got $s $(body | head -c 200)"
still_serving || bad "server stopped serving after invalid UTF-8"

# prompt longer than the context (the server runs with --max-model-len 256)
long=$(printf 'word %.0s' $(seq 600))
s=$(req POST /v1/chat/completions "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}")
[ "$s" = 400 ] && body | grep -q context_length_exceeded && ok || bad "long prompt: got $s"
s=$(req POST /api/generate "{\"model\":\"tiny\",\"prompt\":\"$long\",\"stream\":false}")
[ "$s" = 400 ] && body | grep -q '"error"' && ok || bad "ollama long prompt: got $s"
still_serving || bad "server stopped serving after a long prompt"

# a truncated HTTP request and a garbage one: the connection fails, the server goes on
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mo' | timeout 3 bash -c "cat > /dev/tcp/127.0.0.1/${U##*:}" 2>/dev/null
printf 'NOT HTTP AT ALL\r\n\r\n' | timeout 3 bash -c "cat > /dev/tcp/127.0.0.1/${U##*:}" 2>/dev/null
still_serving && ok || bad "server stopped serving after broken HTTP"

# SSE framing: data: lines, [DONE] at the end, usage chunk when asked
sse=$(printf '%s' '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}' | "${C[@]}" -N -H 'Content-Type: application/json' --data-binary @- "$U/v1/chat/completions")
[ "$(printf '%s' "$sse" | grep -c '^data: ')" -ge 3 ] && ok || bad "SSE chunks"
[ "$(printf '%s\n' "$sse" | grep '^data: ' | tail -1)" = "data: [DONE]" ] && ok || bad "SSE [DONE] last"
printf '%s' "$sse" | grep '^data: {' | tail -1 | grep -q '"choices":\[\],.*"usage":{"prompt_tokens"' && ok || bad "SSE usage chunk"

# NDJSON framing for Ollama
nd=$(printf '%s' '{"model":"tiny","prompt":"hi","options":{"num_predict":4}}' | "${C[@]}" -N --data-binary @- -D /tmp/tandem_curl_hdr.$$ "$U/api/generate")
grep -qi 'content-type: application/x-ndjson' /tmp/tandem_curl_hdr.$$ && ok || bad "NDJSON content type"
rm -f /tmp/tandem_curl_hdr.$$
printf '%s\n' "$nd" | tail -1 | grep -q '"done":true.*"eval_duration"' && ok || bad "NDJSON final line"

# client disconnect: a long stream cut after the first bytes must stop its engine request
timeout 2 "${C[@]}" -N -o /dev/null -H 'Content-Type: application/json' --data-binary \
  '{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":200,"ignore_eos":true,"stream":true}' \
  "$U/v1/chat/completions" &
cpid=$!
sleep 0.5
kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null
running=1
for _ in $(seq 50); do
  running=$("${C[@]}" "$U/health" | grep -oE '"running":[0-9]+' | cut -d: -f2)
  [ "$running" = 0 ] && break
  sleep 0.1
done
[ "$running" = 0 ] && ok || bad "disconnect did not cancel (running=$running)"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
