#!/usr/bin/env bash
# Builds and pushes the image, then writes the Flex Template spec to GCS.
#   IMAGE=europe-docker.pkg.dev/PROJECT/REPO/chunkmill:0.1.0 \
#   TEMPLATE=gs://BUCKET/templates/chunkmill.json deploy/dataflow/build.sh
# Run from anywhere; the build context is the repository root. BUILDER=cloudbuild builds
# on Cloud Build instead of a local Docker engine.
set -euo pipefail
: "${IMAGE:?set IMAGE to the Artifact Registry image to push}"
: "${TEMPLATE:?set TEMPLATE to the gs:// path of the template spec to write}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [[ "${BUILDER:-docker}" == cloudbuild ]]; then
  config="$(mktemp)"
  trap 'rm -f "$config"' EXIT
  cat >"$config" <<YAML
steps:
- name: gcr.io/cloud-builders/docker
  env: ["DOCKER_BUILDKIT=1"]
  args: ["build", "-f", "deploy/dataflow/Dockerfile", "-t", "$IMAGE", "."]
images: ["$IMAGE"]
YAML
  gcloud builds submit "$root" --config "$config"
else
  DOCKER_BUILDKIT=1 docker build -f "$here/Dockerfile" -t "$IMAGE" "$root"
  docker push "$IMAGE"
fi

gcloud dataflow flex-template build "$TEMPLATE" \
  --image "$IMAGE" \
  --sdk-language PYTHON \
  --metadata-file "$here/metadata.json"
echo "template $TEMPLATE -> image $IMAGE"
