"""The lifecycle of a run: the contract with runtimes (Observation, Handle, Runtime), the one step that decides
(`step.assess`), the run record kept on the cluster, and the drivers that only wait and do I/O (`drive`)."""
