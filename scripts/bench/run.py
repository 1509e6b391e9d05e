"""The one entry point of the benchmarks, probes and figure makers in scripts/bench/.

    python scripts/bench/run.py                  # list them, each with the first line of its docs
    python scripts/bench/run.py NAME [ARGS ...]  # run one: bench_nlm, or bench_nlm.py, with ARGS
    python scripts/bench/run.py NAME --help      # its own usage

A command is a file of this folder: a ``.py`` file whose name does not start with ``_`` (those
are the commands' shared parts), or a ``.sh`` file (run with bash). A file added here is a
command at once, with nothing to register. NAME runs as if started directly (``python
scripts/bench/NAME.py ARGS``, from the same folder): this process becomes it, so that its
output, exit status and signals are its own. What each command measures and writes:
README.md beside this file.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: File endings of the commands, and the program each is run with.
RUNNERS = {".py": (sys.executable,), ".sh": ("bash",)}
SELF = Path(__file__).name
USAGE = "usage: run.py NAME [ARGS ...]   (run.py alone lists the NAMEs)"


def commands(folder: Path = HERE) -> dict[str, Path]:
    """Every command of `folder`, by name without its ending, sorted; this file is not one."""
    found = {}
    for path in sorted(folder.iterdir()):
        if path.suffix in RUNNERS and not path.name.startswith("_") and path.name != SELF:
            found[path.stem] = path
    return found


def summary(path: Path) -> str:
    """The first sentence of a command's docs: its docstring's first paragraph, or a shell
    script's first comment line."""
    text = path.read_text()
    if path.suffix == ".py":
        doc = (ast.get_docstring(ast.parse(text)) or "").strip()
        return " ".join(doc.split("\n\n")[0].split())
    for line in text.splitlines():
        if line.startswith("#") and not line.startswith("#!"):
            return line.lstrip("# ").strip()
    return ""


def listing(found: dict[str, Path]) -> str:
    width = max(map(len, found), default=0)
    return "\n".join(f"  {name:{width}}  {summary(path)}" for name, path in found.items())


def main(argv: list[str]) -> int:
    found = commands()
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print(f"{USAGE}\n\n{__doc__.splitlines()[0]}\n\ncommands:\n{listing(found)}")
        return 0
    # A name with its ending names that file; without, the command of that stem.
    path = {**found, **{p.name: p for p in found.values()}}.get(argv[0])
    if path is None:
        known = ", ".join(found)
        print(f"run.py: no command {argv[0]!r} in {HERE}; there are: {known}", file=sys.stderr)
        return 2
    program = RUNNERS[path.suffix]
    sys.stdout.flush()
    os.execvp(program[0], [*program, str(path), *argv[1:]])
    return 1  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
