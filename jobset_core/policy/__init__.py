"""The one retry budget: RetryPolicy and the decisions it makes, the ledger kept on the cluster's objects, the
failure kinds and the failure policies we write into manifests (and the messages the controllers answer them
with). Pure, but for `platform.py`, which reads the platform's settings once when a policy is made."""
