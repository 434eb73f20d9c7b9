# Cloud Scheduler -> Dataflow Flex Template launch, every night.
# Only stable arguments: chunkmill names the run (UTC timestamp) and diffs against the run in
# OUTPUT/LATEST, so the schedule keeps no state and never passes a run id or manifest.

variable "project" { type = string }
variable "region" { type = string }
variable "template" { type = string } # gs://.../chunkmill.json (deploy/dataflow/build.sh)
variable "image" { type = string }    # the image the template was built with
variable "input" { type = string }    # e.g. gs://acme-docs/**
variable "output" { type = string }   # e.g. gs://acme-chunks/prod
variable "temp_location" { type = string }
variable "launcher_service_account" {
  type        = string
  description = "Service account Cloud Scheduler acts as; needs roles/dataflow.developer and iam.serviceAccountUser on the worker account."
}
variable "worker_service_account" { type = string }

resource "google_cloud_scheduler_job" "chunkmill_nightly" {
  project   = var.project
  region    = var.region
  name      = "chunkmill-nightly"
  schedule  = "30 1 * * *"
  time_zone = "Etc/UTC"

  # A failed launch (for instance while the previous night still runs) is not retried in a
  # loop: the next night diffs against the last good run anyway.
  retry_config {
    retry_count = 1
  }

  http_target {
    http_method = "POST"
    uri         = "https://dataflow.googleapis.com/v1b3/projects/${var.project}/locations/${var.region}/flexTemplates:launch"
    oauth_token {
      service_account_email = var.launcher_service_account
    }
    headers = { "Content-Type" = "application/json" }
    body = base64encode(jsonencode({
      launchParameter = {
        # Dataflow refuses a second running job with this name: two nights never overlap.
        jobName              = "chunkmill-nightly"
        containerSpecGcsPath = var.template
        parameters = {
          input                            = var.input
          output                           = var.output
          sdk_container_image              = var.image
          number_of_worker_harness_threads = "4"
        }
        # deploy/dataflow/nightly.options says why each value.
        environment = {
          flexrsGoal          = "FLEXRS_COST_OPTIMIZED"
          maxWorkers          = 32
          machineType         = "n2-standard-4"
          tempLocation        = var.temp_location
          serviceAccountEmail = var.worker_service_account
        }
      }
    }))
  }
}
