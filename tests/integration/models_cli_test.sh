#!/usr/bin/env bash
# The model store from the command line: import (by copy and by reference), list, show,
# cp, rm, create from Modelfiles (errors name the line), the store surviving across
# processes, and a corrupted blob refused by its digest.
set -u
T=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
export TANDEM_MODELS="$tmp/store"
"$T" testmodel --preset tiny --seed 3 --out "$tmp/tiny" >/dev/null || { echo "testmodel failed"; exit 1; }

expect import 0 "imported .* as tiny" -- "$T" import "$tmp/tiny" --name tiny
expect import-progress 0 "copying model.safetensors" -- "$T" import "$tmp/tiny" --name tiny:again
expect import-link 0 "by reference" -- "$T" import "$tmp/tiny" --name linked --link
expect list 0 "tiny:latest .*imported" -- "$T" list
expect list-reference 0 "linked:latest .*reference" -- "$T" list
expect list-models-dir 0 "^NAME" -- "$T" list --models-dir "$tmp/empty"
check list-models-dir-empty "$("$T" list --models-dir "$tmp/empty" | wc -l | grep -qx 1; echo $?)"
expect show 0 "parameters +9\.8M" -- "$T" show tiny
expect show-template 0 "im_start" -- "$T" show tiny --template
expect show-missing nonzero "model 'ghost' not found" -- "$T" show ghost
expect import-not-a-model nonzero "not a model tandem can serve" -- "$T" import "$tmp" --name bad
expect import-bad-name nonzero "not a valid model name" -- "$T" import "$tmp/tiny" --name "bad name"
expect import-missing nonzero "not a folder" -- "$T" import "$tmp/nope" --name x

cat >"$tmp/Modelfile" <<'MF'
# a preset of the imported model
FROM tiny
PARAMETER temperature 0.2
PARAMETER num_ctx 512
PARAMETER stop "<|im_end|>"
PARAMETER stop END
SYSTEM """You are terse.
Answer in one line."""
MESSAGE user Is Toronto in Canada?
MESSAGE assistant yes
LICENSE MIT
MF
expect create 0 "success: created tiny:terse" -- "$T" create tiny:terse -f "$tmp/Modelfile"
expect show-parameters 0 "temperature +0\.2" -- "$T" show tiny:terse --parameters
expect show-system 0 "You are terse" -- "$T" show tiny:terse --system
expect show-modelfile 0 "PARAMETER stop END" -- "$T" show tiny:terse --modelfile
"$T" show tiny:terse --modelfile >"$tmp/Roundtrip"
expect create-from-show 0 "success" -- "$T" create tiny:round -f "$tmp/Roundtrip"
diff <("$T" show tiny:round --modelfile | grep -v "^#") <("$T" show tiny:terse --modelfile | grep -v "^#"); check modelfile-roundtrip $?

printf 'FROM tiny\nPARAMETER temperature hot\n' >"$tmp/Bad1"
expect create-bad-value nonzero "Bad1:2: temperature must be a number" -- "$T" create x -f "$tmp/Bad1"
printf 'FROM tiny\n\nTEMPLATE """{{ .Prompt }}"""\n' >"$tmp/Bad2"
expect create-template nonzero "Bad2:3: TEMPLATE is not supported" -- "$T" create x -f "$tmp/Bad2"
printf 'FROM tiny\nADAPTER ./lora.gguf\n' >"$tmp/Bad3"
expect create-adapter nonzero "Bad3:2: ADAPTER is not supported" -- "$T" create x -f "$tmp/Bad3"
printf '# nothing here\nFROM ghost\n' >"$tmp/Bad4"
expect create-from-missing nonzero "Bad4:2: FROM ghost: no model" -- "$T" create x -f "$tmp/Bad4"
printf 'FROM tiny\nPARAMETER num_gpu 99\n' >"$tmp/Note"
expect create-note 0 "Note:2: parameter num_gpu changes nothing" -- "$T" create tiny:gpu -f "$tmp/Note"
printf 'FROM ./tiny\nPARAMETER seed 7\n' >"$tmp/FromDir"
expect create-from-folder 0 "importing .*tiny" -- "$T" create fromdir -f "$tmp/FromDir"
expect create-no-file nonzero "no such file" -- "$T" create x -f "$tmp/none"

expect cp 0 "copied 'tiny' to 'tiny:copy'" -- "$T" cp tiny tiny:copy
expect cp-missing nonzero "not found" -- "$T" cp ghost x
expect rm 0 "deleted 'tiny:copy'" -- "$T" rm tiny:copy
expect rm-missing nonzero "not found" -- "$T" rm tiny:copy
expect verify 0 "all 5 files match" -- "$T" show tiny --verify

# A corrupted blob is refused by its digest.
blob=$(ls -S "$TANDEM_MODELS"/blobs/sha256-* | head -1)
printf 'XXXX' | dd of="$blob" bs=1 seek=4096 conv=notrunc status=none
expect corrupted-show nonzero "corrupted.*sha256:" -- "$T" show tiny --modelfile
expect corrupted-verify nonzero "corrupted" -- "$T" show tiny --verify

# Removing every model frees the blobs.
"$T" list | awk 'NR>1 {print $1}' | while read -r m; do "$T" rm "$m" >/dev/null; done
check rm-frees-blobs "$([ -z "$(ls "$TANDEM_MODELS/blobs")" ]; echo $?)"
finish
