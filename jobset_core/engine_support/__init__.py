"""What every engine plugin needs beside the lifecycle, written once so the plugins keep only the translation.

An engine (the Flyte connector, the Airflow operator and trigger) turns its own way of asking into calls of the
core and the core's answers into its own words. What is left between the two is the same for every engine and
lives here: one runtime per process and kind (`registry`), the attempts an engine attempt may start, clear,
cancel or take over (`attempts`), the run's history and timeline for the engine's report (`history`), the run's
events in the engine's log once (`events`), the pod logs read through the runtime's one retry policy
(`pod_logs`), and the leader-and-workers shape of a workload (`shape`). The public names are exported from
`jobset_core`; the log excerpt a summary quotes is read where the summary is written (`diagnosis.excerpt`).
"""
