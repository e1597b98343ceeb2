"""Run every benchmark, side by side, and print the tables the README quotes (JSON in benchmarks/results/).

Each one is also a command of its own: `python -m benchmarks.<name> --help`.
"""

from benchmarks import detection, diagnose_scale, manifests, polling, wasted_time, watchers


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
    print("\n## 4. cluster time an application bug burns")
    wasted_time.main([])
    print("\n## 5. manifest build and validation, 100 replicated jobs")
    manifests.main()


if __name__ == "__main__":
    main()
