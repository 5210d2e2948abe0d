"""``python -m wotbench.analysis RUN_DIR``: analyse a run directory and print the verdict."""
import sys

from wotbench.analysis import main

if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m wotbench.analysis RUN_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
