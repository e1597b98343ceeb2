"""This project's own vocabulary: the labels and annotations of the ledger kept on the cluster objects, the
names of the ConfigMaps a run writes, the offline cluster's Fate kind and the line a task leader's result is on.

Part of the one vocabulary (`jobset_core.constants` names every one of these); kept apart from the upstream
strings so a reader tells what Kubernetes writes from what this project writes.
"""

PROJECT_PREFIX = "jobset-plugins.io/"
RUN_KEY_LABEL = PROJECT_PREFIX + "run-key"
# On everything a submission makes: a gang Job and, through the templates, a JobSet's child Jobs and every
# pod. One label selector then finds all of them for the process's shared watches. A separate label from
# RUN_KEY_LABEL, which marks submissions only (the ledger counts what carries it).
RUN_MEMBER_LABEL = PROJECT_PREFIX + "run-member"
ATTEMPT_ANNOTATION = PROJECT_PREFIX + "attempt"
FREE_ANNOTATION = PROJECT_PREFIX + "free-attempt"
POLICY_ANNOTATION = PROJECT_PREFIX + "retry-policy"
# The `Watchdog` an attempt was submitted with (`Watchdog.to_annotation()`, JSON): any process judges a stall by it
WATCHDOG_ANNOTATION = PROJECT_PREFIX + "watchdog"
# Diagnosis.reason of a gang the watchdog found stalled (no rank wrote progress for `stall_seconds`)
REASON_STALLED = "Stalled"
FREE_INTERRUPTIONS_ANNOTATION = PROJECT_PREFIX + "free-interruptions"  # a gang Job's free pod replacements
# When each in-cluster restart's whole gang ran ({"<restart>": RFC 3339}, JSON), noted once per restart by the look
# that first saw it: the goodput account's spans outlive the pods the JobSet deletes at a restart
GANG_RUNNING_ANNOTATION = PROJECT_PREFIX + "gang-running"
# On a gang Job run again after its gang failed: every earlier gang restart and its cause (JSON list)
GANG_RESTARTS_ANNOTATION = PROJECT_PREFIX + "gang-restarts"
# GangJobSpec.restart: the whole gang again as a fresh Job (coupled ranks), or each index alone (shards)
RESTART_GANG, RESTART_INDEX = "gang", "index"
WORKLOAD_CREATED_BY_ANNOTATION = PROJECT_PREFIX + "workload-created-by"  # WorkloadAPI.created_by, on the Job
GANG_MIN_COUNT_ANNOTATION = PROJECT_PREFIX + "gang-min-count"  # what the gang's PodGroup asks for
CANCELLED_ANNOTATION = PROJECT_PREFIX + "cancelled"
# On an attempt submitted away from nodes a hardware fault implicated: {node: why} (JSON)
AVOIDED_NODES_ANNOTATION = PROJECT_PREFIX + "avoided-nodes"
# An attempt the user threw away to run the task again (Airflow "clear"): kept in the run's history, never
# counted against the budget, never adopted.
CLEARED_ANNOTATION = PROJECT_PREFIX + "cleared"
# An attempt a process was asked to delete on someone's behalf (a cancelled trigger, a killed worker) and kept,
# because nobody could say the task had ended: why, and how to remove it.
KEPT_ANNOTATION = PROJECT_PREFIX + "kept"
# The engine's own attempt number (Flyte's retry_attempt, Airflow's try within the run) that submitted an attempt:
# a cleanup on behalf of one engine attempt never deletes what a later one submitted.
ENGINE_ATTEMPT_ANNOTATION = PROJECT_PREFIX + "engine-attempt"
EVIDENCE_FINALIZER = PROJECT_PREFIX + "evidence"
EVIDENCE_CONFIGMAP_SUFFIX = "-evidence"  # ConfigMap `<attempt>-evidence`: the failed pods a watcher kept
EVIDENCE_PODS_KEY = "pods.json"  # its data key: a JSON list of compacted pods
# Its other data key: a JSON list of the in-cluster restarts' causes as the watcher judged them when it saw
# each restart (`HistoryEntry.to_dict()` each), kept next to the pods they name.
EVIDENCE_RESTARTS_KEY = "restarts.json"
RUN_RECORD_PREFIX = "jobset-run-"  # ConfigMap `jobset-run-<run key>`: every attempt's spending and decision
# On a run record whose run is over: the epoch second after which any process may delete it (a label, so a sweep
# lists only those, by label selector).
RUN_RECORD_EXPIRES_LABEL = PROJECT_PREFIX + "record-expires"
RUN_RECORD_EXPIRES_KEY = "expiresAt"  # the same moment in the record itself (RFC 3339), where the run reads it
# The user's `ttlSecondsAfterFinished`, on a workload a run submitted: the workload's own field holds this plus
# `TTL_HOLD_SECONDS` until the run has recorded its decision, then the run lowers it to this (see
# `lifecycle/ttl.py`), so the cluster never deletes a finished workload before its failure is decided and kept.
TTL_ANNOTATION = PROJECT_PREFIX + "ttl-seconds-after-finished"
# How much longer than the user's TTL the cluster keeps a finished workload when no process of ours comes to record
# its decision (a watcher that crashed): an hour, the API server's default --event-ttl, the time a failure's events
# stay anyway. Never stuck: the cluster's own TTL controller still deletes it then.
TTL_HOLD_SECONDS = 3600
# The offline cluster's own kind: a fault to play, created from outside (`jobset fake-cluster fate`, kubectl)
FATE_API_VERSION = "fakecluster.jobset-plugins.io/v1"
FATE_KIND, FATE_PLURAL = "Fate", "fates"

# Our own: the line a `@task.jobset` leader prints its JSON result on (base64), read back from its log. Kept in
# the pod's log, never shown in a task log or on a terminal, where it would be a blob of noise.
RESULT_MARKER = "JOBSET_TASK_RESULT "

# Kueue(admission_timeout_seconds=...) on the JobSet or gang Job it queues (a decimal number of seconds): how long
# the run lets Kueue hold the workload suspended before it ends the attempt. On the object, so every reader (the
# run, an engine's poll in another process, `jobset explain`) judges the wait by the same bound.
KUEUE_ADMISSION_TIMEOUT_ANNOTATION = PROJECT_PREFIX + "kueue-admission-timeout-seconds"
# Our own reason for a workload Kueue did not admit within that bound: Kueue writes none, it holds a workload as long
# as its queue says.
REASON_KUEUE_ADMISSION_TIMEOUT = "KueueAdmissionTimeout"

# Suspect nodes shared by the runs of a namespace (`lifecycle/suspects.py`): one ConfigMap per namespace, its JSON
# list under one key, every entry {node, why, run, attempt, since, until, count}. Every submission reads it and
# keeps its pods off the nodes in force; a hardware failure (or a stalled gang's node fault) writes it.
SUSPECT_NODES_CONFIG_MAP = "jobset-suspect-nodes"
SUSPECT_NODES_KEY = "nodes.json"
# On an attempt whose exclusions left its gang nowhere to be placed, and on every later one of its run: the nodes
# of `AVOIDED_NODES_ANNOTATION` are only preferred against (a preferred node affinity), never required.
AVOIDED_NODES_PREFERRED_ANNOTATION = PROJECT_PREFIX + "avoided-nodes-preferred"
# What a run tells the cluster of a node it found broken, when the platform allows it (`[nodes] report_nodes`):
# a node condition of our own type (read by `kubectl describe node` and every tool that reads conditions; it
# changes no scheduling) and an Event on the Node from our component, with the evidence line.
SUSPECT_CONDITION_TYPE = "JobsetPluginsSuspect"
SUSPECT_CONDITION_REASON = "HardwareFailure"  # status True: a run of ours found a hardware fault on the node
SUSPECT_RELEASED_REASON = "Released"  # status False: repaired, expired or cleared (`jobset nodes clear`)
SUSPECT_EVENT_REASON = "SuspectNode"
PROJECT_COMPONENT = "jobset-plugins"  # the Event source component of what we write on Nodes
