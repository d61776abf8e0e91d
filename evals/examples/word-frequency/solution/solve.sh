#!/bin/bash
set -euo pipefail
cd /workspace
tr -cs 'A-Za-z' '\n' < book.txt | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2 | head -3 | awk '{print $2}' > top3.txt
