#!/bin/bash
set -euo pipefail
cd /workspace
mkdir -p out
seq 1 200 | xargs -P 16 -I{} sh -c 'printf "item-%s" {} | sha1sum | cut -d" " -f1 | tr -d "\n" > out/{}.txt'
