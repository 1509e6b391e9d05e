"""``python -m avdenoise_vs``: the command line (`avdenoise_vs._cli`)."""

from __future__ import annotations

from avdenoise_vs._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
