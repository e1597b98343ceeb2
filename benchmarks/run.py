"""Run every benchmark, side by side, and print the tables docs/BENCHMARKS.md quotes (JSON in benchmarks/results/).

Each one is also a command of its own: `python -m benchmarks.<name> --help`.
"""

from benchmarks import (
    api_requests,
    detection,
    diagnose_scale,
    diagnose_tails,
    followers,
    goodput,
    idle_cpu,
    manifests,
    peer,
    polling,
    run_requests,
    scale,
    stalls,
    wasted_time,
    watchers,
)


def main() -> None:
    print("## 1. detection latency and API requests: watches against a poller")
    detection.main([])
    print("\n## 2. runs per watcher process")
    # The README's rows: per-run streams are left out at 500 runs (1,000 streams), the burst is also spread.
    watchers.main(["--runs", "10", "100", "500", "--watchers", "now"])
    watchers.main(["--runs", "500", "--watchers", "now", "--spread", "30", "--append"])
    watchers.main(["--runs", "10", "100", "--watchers", "before", "--append"])
    print("\n## 2b. Flyte connector polls: requests per run")
    polling.main([])
    print("\n## 3. diagnose on big gangs")
    diagnose_scale.main()
    diagnose_tails.main([])
    print("\n## 4. cluster time an application bug burns")
    wasted_time.main([])
    print("\n## 5. manifest build and validation, 100 replicated jobs")
    manifests.main()
    print("\n## 6. API requests: a polled look by pod count, an idle watcher process per minute")
    api_requests.main([])  # the random 5-10 min watch timeout needs a 10 min idle window
    api_requests.main(["--pods", "--watch-timeout", "30s", "--idle-seconds", "120", "--append"])
    print("\n## 6b. API requests of one whole run: one in-cluster restart, and none")
    run_requests.main([])
    print("\n## 7. thousands of runs watched by one process")
    # 5,000 (the default's last size) takes well over 15 minutes on 2 shared cores: the rows the docs quote.
    scale.main(["--runs", "1000", "2000"])
    scale.main(["--runs", "1000", "2000", "--rate", "8.33", "--append"])
    print("\n## 7b. idle CPU of one process following quiet runs (this checkout; add --tree LABEL=DIR to compare)")
    idle_cpu.main(["--runs", "300", "1000"])
    print("\n## 8. side by side with the peer: apache-airflow-providers-cncf-kubernetes KubernetesJobOperator against our operators")
    peer.main(["--peer-poll", "10", "2"])
    print("\n## 9. many processes, each following one run, in a churned namespace, beside the peer's (issue 46)")
    followers.main(["--n", "20", "100"])  # 200 takes 20 minutes on 2 cores: `--n 200 --append`
    print("\n## 10. the watchdog: log reads per run per stall window, detection delay, quiet-but-steady runs (issue 47)")
    stalls.main(["--runs", "50", "--pods", "8", "--every", "4.5", "--stall", "5", "--seconds", "120", "--hung", "20"])
    print("\n## 11. the goodput account: requests of quiet polls, CPU of 5,000 runs' accounts (issue 48)")
    goodput.main([])


if __name__ == "__main__":
    main()
