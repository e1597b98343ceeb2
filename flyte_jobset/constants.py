"""Upstream vocabulary the plugin must spell exactly as flytekit, flytepropeller and Kubernetes do."""

from __future__ import annotations

# The task type propeller routes to this connector (connector-service `supportedTaskTypes`).
TASK_TYPE = "jobset"

# flytekit's entrypoint (bin/entrypoint.py): without FLYTE_FAIL_ON_ERROR=true, `pyflyte-execute` writes the error
# file and exits 0, so the cluster would see a user exception as success.
FAIL_ON_ERROR_ENV = "FLYTE_FAIL_ON_ERROR"
# Distributed error strategy (`_F_DES`) and worker name (`_F_WN`): each replica writes `error-<uuid>.pb` naming
# itself instead of racing for one `error.pb`. Same short names propeller's kfpytorch plugin sets.
DIST_ERROR_STRATEGY_ENV = "_F_DES"
WORKER_NAME_ENV = "_F_WN"
DIST_ERROR_STRATEGY = "Earliest"
ERROR_FILE_PREFIX = "error"
ERROR_FILE_SUFFIX = ".pb"
OUTPUTS_FILE = "outputs.pb"
INPUTS_FILE = "inputs.pb"
DECK_FILE = "deck.html"

# The pod's own name through the downward API, for `_F_WN` and the replicas' output prefix.
POD_NAME_ENV = "JOBSET_POD_NAME"
POD_NAME_FIELD = "metadata.name"

# Where the non-leader replicas write their outputs and error files, under the task's output prefix: only the
# leader's `outputs.pb` (at the prefix itself) becomes the task's outputs.
REPLICAS_DIR = "replicas"
# The entrypoint flag that names a replica's output prefix: flytekit's `pyflyte-execute --output-prefix`,
# Flyte 2's `a0 --outputs-path`.
OUTPUT_PREFIX_FLAGS = ("--output-prefix", "--outputs-path")
# The task entrypoints a local replica runs from this interpreter's environment (flytekit's, Flyte 2's).
ENTRYPOINTS = ("pyflyte-execute", "a0")
# The resolver argument naming the task's module: flytekit's `task-module <name>`, Flyte 2's `mod <name>`.
MODULE_ARGS = ("task-module", "mod")

# The key of the primary container's name in a serialized task's `config` (flytekit `_PRIMARY_CONTAINER_NAME_FIELD`).
PRIMARY_CONTAINER_KEY = "primary_container_name"

# Which runtime runs the JobSet: the embedded local one, or the cluster of the kubeconfig / in-cluster config.
RUNTIME_ENV = "JOBSET_RUNTIME"
RUNTIME_LOCAL = "local"
RUNTIME_KUBERNETES = "kubernetes"
RUNTIMES = (RUNTIME_LOCAL, RUNTIME_KUBERNETES)

# Log link template, with Flyte's own placeholders, e.g.
# "https://console.example.com/logs/{{.namespace}}/{{.podName}}".
LOG_TEMPLATE_ENV = "JOBSET_LOG_TEMPLATE"
DEFAULT_LOG_TEMPLATE = "http://localhost:30080/kubernetes-dashboard/#/log/{{.namespace}}/{{.podName}}/pod?namespace={{.namespace}}"
# Node selector for `interruptible` tasks ("key=value,key2=value2"), as propeller's interruptible-node-selector.
INTERRUPTIBLE_SELECTOR_ENV = "JOBSET_INTERRUPTIBLE_NODE_SELECTOR"
# The timeline's link among the task's logs (propeller shows log links in every phase, a deck only for
# SUCCEEDED), and the URL template of the blob store's console: `{{.uri}}`, `{{.scheme}}`, `{{.bucket}}`,
# `{{.key}}`, e.g. "https://s3.console.aws.amazon.com/s3/object/{{.bucket}}?prefix={{.key}}".
TIMELINE_LINK_NAME = "JobSet timeline"
TIMELINE_URL_TEMPLATE_ENV = "JOBSET_TIMELINE_URL_TEMPLATE"

# flytekit's entrypoint frames a user exception in the container log with this banner (bin/entrypoint.py):
# a log tail that ends with it quotes the framing, not the cause.
FLYTEKIT_ERROR_BANNER = "!! End Error Captured by Flyte !!"
# Flyte 2's `a0` ends a failed task's log with "Task <name> failed with error: ... Uploaded error to <path>"
# (flyte/_internal/runtime/taskrunner.py): a tail with it quotes the framing too.
FLYTE2_ERROR_FRAMING = "Uploaded error to "
ERROR_FRAMINGS = (FLYTEKIT_ERROR_BANNER, FLYTE2_ERROR_FRAMING)

# flytekit's logging level (flytekit/loggers.py LOGGING_ENV_VAR); a local replica runs at CRITICAL so that its
# logged copy of the user's traceback does not come before the run's one-line cause.
FLYTEKIT_LOGGING_ENV = "FLYTE_SDK_LOGGING_LEVEL"
FLYTEKIT_LOGGING_QUIET = 50

# ----- Flyte 2 (`flyte` 2.x) -----------------------------------------------------------------------------------
# What Flyte 2's task entrypoint `a0` reads from its environment (flyte/_bin/runtime.py): the action and run it
# runs as, its project, domain and org, and the run's base folder. A Flyte 2 backend sets them on the pods it
# starts; for the replicas of a JobSet the connector (or a local run) sets them.
V2_ACTION_NAME_ENV = "ACTION_NAME"
V2_RUN_NAME_ENV = "RUN_NAME"
V2_PROJECT_ENV = "FLYTE_INTERNAL_EXECUTION_PROJECT"
V2_DOMAIN_ENV = "FLYTE_INTERNAL_EXECUTION_DOMAIN"
V2_ORG_ENV = "_U_ORG_NAME"
V2_RUN_BASE_ENV = "_U_RUN_BASE"
# flyte.models.CLUSTERED_WORKER_ENV: a worker of a JobSet-backed task. `a0` then runs with no controller (it
# enqueues no sub-actions) and exits 1 after writing `error.pb` when the function raised (flyte's taskrunner),
# so the JobSet sees the failure; without it `a0` exits 0 and the cluster would see a user error as success.
V2_CLUSTERED_WORKER_ENV = "FLYTE_CLUSTERED_WORKER"
# Flyte 2's task type version: the connector server looks connectors up by (type, version).
V2_TASK_TYPE_VERSION = 0
