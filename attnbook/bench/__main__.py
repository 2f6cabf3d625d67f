"""``python -m attnbook.bench``."""

from attnbook.bench.cli import main

if __name__ == "__main__":
    main()
