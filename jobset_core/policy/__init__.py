"""The one retry budget: `RetryPolicy` (budget.py) made of small parts (counted.py: the count and the backoff;
free.py: what is free and its cap; translation.py: the failure policies the manifests carry; platform.py: the
platform's defaults, judged; stored.py: the policy on submitted objects), the decisions it makes, the ledger kept
on the cluster's objects, the failure kinds, and the rules we write with the messages the controllers answer them
with (contract.py). Pure: the platform's settings are read by `jobset_core/platform_config.py`."""
