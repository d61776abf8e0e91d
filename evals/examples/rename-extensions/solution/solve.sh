#!/bin/bash
set -euo pipefail
cd /workspace
find docs -name '*.txt' | while read -r f; do mv "$f" "${f%.txt}.md"; done
