#!/usr/bin/env bash
# Compress job logs older than a day and delete compressed logs older than
# RETENTION_DAYS. Safe to run from cron more than once: every step is idempotent.
#
# Usage: rotate_logs.sh [--dry-run] LOG_DIR
set -euo pipefail

RETENTION_DAYS="${RETENTION_DAYS:-14}"
DRY_RUN=0

if [[ "${1:-}" == "--dry-run" ]]; then
  DRY_RUN=1
  shift
fi

LOG_DIR="${1:?usage: rotate_logs.sh [--dry-run] LOG_DIR}"
if [[ ! -d "$LOG_DIR" ]]; then
  echo "not a directory: $LOG_DIR" >&2
  exit 1
fi

run() {
  if (( DRY_RUN )); then
    echo "would run: $*"
  else
    "$@"
  fi
}

compressed=0
deleted=0

# Compress plain logs not modified for a day. Skip files still open by a writer.
while IFS= read -r -d '' log; do
  if command -v fuser >/dev/null 2>&1 && fuser -s "$log" 2>/dev/null; then
    echo "skipping open file: $log"
    continue
  fi
  run gzip -9 -- "$log"
  compressed=$((compressed + 1))
done < <(find "$LOG_DIR" -type f -name '*.log' -mtime +0 -print0)

# Delete compressed logs past retention.
while IFS= read -r -d '' old; do
  run rm -f -- "$old"
  deleted=$((deleted + 1))
done < <(find "$LOG_DIR" -type f -name '*.log.gz' -mtime "+$RETENTION_DAYS" -print0)

echo "compressed=$compressed deleted=$deleted retention_days=$RETENTION_DAYS dry_run=$DRY_RUN"
