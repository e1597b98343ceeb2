"""The Kubernetes runtime: the API client and its retries (`client`), the process's shared watch streams
(`streams`) and the polled attempts kept on them (`kept`), and the runtime that submits, observes and keeps
the evidence (`runtime`)."""
