"""The one retry budget: RetryPolicy, the ledger kept on the cluster's objects, the failure kinds and the
failure policies we write into manifests (and the messages the controllers answer them with). Pure."""
