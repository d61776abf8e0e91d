#!/bin/bash
set -euo pipefail
cd /workspace
cd repo
git checkout -q -b feature
echo "release notes" > NOTES.md
git add NOTES.md
git -c user.name=oracle -c user.email=oracle@example.com commit -q -m "add notes"
