#!/bin/bash
set -euo pipefail
cd /workspace
{ echo "hour,count"; awk '$2 == "ERROR" { print substr($1, 1, 13) }' app.log | sort | uniq -c | awk '{ print $2 "," $1 }'; } > errors.csv
