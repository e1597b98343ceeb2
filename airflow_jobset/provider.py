"""Provider registration: Airflow finds this through the `apache_airflow_provider` entry point.

The connection is the cncf-kubernetes provider's `kubernetes` connection type, reused as it is: no new
connection type, so existing connections (in-cluster, kubeconfig, context) work unchanged.
"""

from __future__ import annotations

from typing import Any

DISTRIBUTION = "jobset-plugins"
INTEGRATION = "Kubernetes JobSet"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": DISTRIBUTION,
        "name": "Kubernetes JobSet",
        "description": "Gang-scheduled JobSets and Indexed Jobs with one retry budget and root-cause failure diagnosis.",
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://jobset.sigs.k8s.io/",
                "tags": ["software"],
            }
        ],
        "operators": [{"integration-name": INTEGRATION, "python-modules": ["airflow_jobset.operators"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": ["airflow_jobset.triggers"]}],
        "task-decorators": [{"class-name": "airflow_jobset.decorators.jobset_task", "name": "jobset"}],
    }
