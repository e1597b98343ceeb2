"""Where runs run: a Kubernetes cluster through the official client (`kube`), or this machine (`local`)."""
