"""``python -m specverify ...``: the same command as the installed ``specverify``."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
