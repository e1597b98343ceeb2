"""The workload model: JobSets, replicated jobs, gang Jobs and gang backends, checked and turned into manifests
(plain dicts). Pure: no I/O."""
