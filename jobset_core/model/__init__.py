"""The workload model: JobSets, replicated jobs, gang Jobs and gang backends, checked and turned into manifests
(plain dicts), and where an attempt's pods may land. Pure: no I/O."""
