#!/bin/bash
set -euo pipefail
cd /workspace
cd repo
git -c user.name=oracle -c user.email=oracle@example.com revert --no-edit HEAD >/dev/null
