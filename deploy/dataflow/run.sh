#!/usr/bin/env bash
# Launches one run from the Flex Template with the recommended nightly options
# (nightly.options). Only stable arguments: the run id (a UTC timestamp) and the prior
# manifest (the run named in OUTPUT/LATEST) are picked by chunkmill itself.
#   PROJECT=acme REGION=europe-west1 TEMPLATE=gs://BUCKET/templates/chunkmill.json \
#   IMAGE=europe-docker.pkg.dev/acme/chunkmill/chunkmill:0.1.0 \
#   INPUT='gs://acme-docs/**' OUTPUT=gs://acme-chunks/prod TEMP=gs://acme-tmp/dataflow \
#   deploy/dataflow/run.sh [extra template parameters, e.g. strategy=paragraph]
set -euo pipefail
for v in PROJECT REGION TEMPLATE IMAGE INPUT OUTPUT TEMP; do
  [[ -n "${!v:-}" ]] || { echo "run.sh: set $v" >&2; exit 2; }
done
here="$(cd "$(dirname "$0")" && pwd)"

# Parameters go through gcloud's --parameters, whose default separator is ','; a glob may
# contain commas, so each parameter is passed on its own flag.
params=(--parameters "input=$INPUT" --parameters "output=$OUTPUT")
params+=(--parameters "sdk_container_image=$IMAGE")
while read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  params+=(--parameters "${line#--}")
done <"$here/nightly.options"
for extra in "$@"; do
  params+=(--parameters "$extra")
done

# One job name per night: Dataflow refuses a second running job with the same name in a
# region, which keeps two nightly launches from overlapping.
gcloud dataflow flex-template run "chunkmill-nightly" \
  --project "$PROJECT" --region "$REGION" \
  --template-file-gcs-location "$TEMPLATE" \
  --temp-location "$TEMP/temp" --staging-location "$TEMP/staging" \
  "${params[@]}"
