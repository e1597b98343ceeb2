"""Run every benchmark in one process, side by side, and print the tables the README quotes."""

from benchmarks import diagnose_scale


def main() -> None:
    print("## diagnose on a gang cascade (1 app error, every peer torn down)")
    diagnose_scale.main()


if __name__ == "__main__":
    main()
