"""How long the README's first command takes, and on which machine: ``results/demo.md``.

The command is read from the README (the first bash block of its "Two commands" section: a virtual
environment, esbridge installed into it, ``esbridge demo``) and run part by part (its ``&&`` parts) in
a fresh copy of the project, as its test does, each part timed. The demo is given an index name of
its own (``--index esbridge-demo-bench-<time>``), so that it indexes and embeds the sample anew
rather than reusing an earlier demo's index. The demo's steps are
timed from its progress on standard error: when the line of each step (starting the local node,
loading the embedding model, indexing, embedding, calibrating the pipeline's weights, ranking the
queries) first appears, each step lasting until the next one's line appears. A line that shows only
once its step has run for a second (the node's start, the model's loading) is seen that second late.

It runs with a fresh ``ESBRIDGE_HOME`` holding only the downloads of ``$ESBRIDGE_HOME`` (its
``engines/`` and ``models/``, linked): the node is installed and started, and every passage embedded,
as on a user's first run (no embedding cache); the node is stopped and the home removed afterwards.
Stop esbridge's own local nodes before (the demo's node takes the first free port from 9200). Run
the demo once before, so that the downloads are done, as the README's figure assumes::

    python benchmarks/bench_demo.py
    python benchmarks/doc_tables.py --write    # the README's sentence on the demo, from the file
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "results" / "demo.md"
SKIP_DIRS = {".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist"}
#: The demo's steps: the start of each one's progress line on standard error, and its name.
STEPS = (("starting esbridge's local", "node start"), ("loading the sentence-embedding model", "model loading"),
         ("indexing ", "indexing"), ("embedding ", "embedding"), ("calibrating ", "calibrating"),
         ("ranking ", "ranking"))

sys.path.insert(0, str(HERE))
from suite_time import cpu_line, duration  # noqa: E402


def readme_first_command(readme: Path = ROOT / "README.md") -> str:
    """The README's first command: the first bash block of its "Two commands" section."""
    section = readme.read_text(encoding="utf-8").split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    if not blocks:
        raise SystemExit("README.md: no bash block in its 'Two commands' section")
    return str(blocks[0]).strip()


def parts(command: str, index: str, extra: str = "") -> list[str]:
    """The ``&&`` parts of ``command``, the demo's (the last) given ``--index index`` (and ``extra``)."""
    split = [p.strip() for p in command.split(" && ")]
    if not re.search(r"esbridge demo\b", split[-1]):
        raise SystemExit(f"the README's first command does not end with esbridge demo: {command!r}")
    split[-1] += f" --index {index}" + (f" {extra.strip()}" if extra.strip() else "")
    return split


@dataclass
class Progress:
    """What a process wrote to standard error, and when each step's line first appeared (seconds from
    the start)."""

    start: float
    text: str = ""
    seen: dict[str, float] = field(default_factory=dict)

    def feed(self, chunk: str, now: float) -> None:
        self.text += chunk
        for marker, name in STEPS:
            if name not in self.seen and re.search(r"(^|[\r\n])" + re.escape(marker), self.text):
                self.seen[name] = now - self.start


def steps(seen: dict[str, float], total: float) -> list[tuple[str, float, float]]:
    """``(step, first seen at, seconds)`` in the order the steps appeared, each lasting until the next
    one appeared (the last until ``total``)."""
    order = sorted(seen.items(), key=lambda kv: kv[1])
    ends = [at for _, at in order[1:]] + [total]
    return [(name, at, end - at) for (name, at), end in zip(order, ends, strict=True)]


def _pump(stream: object, progress: Progress | None, sink: list[str]) -> None:
    fd = stream.fileno()  # type: ignore[attr-defined]
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        text = chunk.decode("utf-8", "replace")
        sink.append(text)
        if progress is not None:
            progress.feed(text, time.monotonic())


def run_part(part: str, cwd: Path, env: dict[str, str], watch: bool) -> tuple[float, Progress, str]:
    """Run one part of the command: ``(seconds, its standard error's progress, its standard output)``."""
    start = time.monotonic()
    progress = Progress(start)
    out: list[str] = []
    err: list[str] = []
    proc = subprocess.Popen(["bash", "-c", part], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    readers = [threading.Thread(target=_pump, args=(proc.stdout, None, out)),
               threading.Thread(target=_pump, args=(proc.stderr, progress if watch else None, err))]
    for t in readers:
        t.start()
    code = proc.wait(timeout=1500)
    for t in readers:
        t.join()
    seconds = time.monotonic() - start
    if code != 0:
        raise SystemExit(f"{part!r} exited {code}\n--- stdout ---\n{''.join(out)[-3000:]}\n"
                         f"--- stderr ---\n{''.join(err)[-3000:]}")
    return seconds, progress, "".join(out)


def summary(total: float, timed: list[tuple[str, float]], demo_steps: list[tuple[str, float, float]],
            cpu_text: str) -> str:
    """The sentence the README cites: the whole command, the demo, its steps, the CPU."""
    demo = timed[-1][1]
    before = total - demo
    inner = ", ".join(f"{name} {seconds:.0f} s" for name, _, seconds in demo_steps)
    return (f"{duration(total)} on {cpu_text}: {before:.0f} s to create the environment and install esbridge, "
            f"{duration(demo)} for the demo" + (f" ({inner})" if inner else ""))


def report(command: str, index: str, timed: list[tuple[str, float]], demo_steps: list[tuple[str, float, float]],
           machine: str, cpu_text: str, demo_out: str, demo_args: str = "") -> str:
    """The Markdown of ``results/demo.md``."""
    total = sum(s for _, s in timed)
    result = re.search(r"nDCG@10 over \d+ judged queries: [^\n]*", demo_out)
    lines = ["# The README's first command", "",
             f"Machine: {machine}.", "",
             f"CPU: {cpu_text}.", "",
             f"Command: `{command}`, run in a fresh copy of the project, the demo with `--index {index}"
             + (f" {demo_args.strip()}" if demo_args.strip() else "") + "` "
             "(a new index, in a node of a fresh home, stopped afterwards).", "",
             f"Summary: {summary(total, timed, demo_steps, cpu_text)}", "",
             "| part | s |", "|---|---:|"]
    lines += [f"| `{part}` | {seconds:.1f} |" for part, seconds in timed]
    lines += [f"| the whole command | {total:.1f} |", "",
              "The demo's steps, from its progress on standard error (each from the first appearance of its "
              "line to the next step's):", "",
              "| step | from s | s |", "|---|---:|---:|"]
    lines += [f"| {name} | {at:.1f} | {seconds:.1f} |" for name, at, seconds in demo_steps]
    if result:
        lines += ["", f"The demo's result: {result.group(0).strip()}"]
    return "\n".join(lines) + "\n"


def _copy_project(dest: Path) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIP_DIRS or n.endswith(".egg-info")}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def _stop_nodes(project: Path, env: dict[str, str], home: Path) -> None:
    """Stop the nodes the demo started in the fresh ``home``."""
    for node in sorted(p.name for p in (home / "nodes").glob("*") if p.is_dir()):
        subprocess.run([str(project / ".venv" / "bin" / "esbridge"), "engine", "stop", "--name", node], env=env,
                       cwd=project, check=False, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--demo-args", default="",
                    help="more options for the demo, e.g. '--pipeline ensemble' (the report then names them; "
                         "give another --out, the README cites results/demo.md)")
    args = ap.parse_args()
    from common import machine

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        cpuinfo = ""
    cpu_text = cpu_line(cpuinfo, os.cpu_count())
    command = readme_first_command()
    index = f"esbridge-demo-bench-{int(time.time())}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "ESBRIDGE_URL"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    timed: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        from esbridge.home import cache_dir

        fresh = Path(tmp) / "home"
        fresh.mkdir()
        for name in ("engines", "models"):
            if (cache_dir() / name).is_dir():
                (fresh / name).symlink_to(cache_dir() / name)
        env["ESBRIDGE_HOME"] = str(fresh)
        project = _copy_project(Path(tmp) / "esbridge")
        split = parts(command, index, args.demo_args)
        for part in split[:-1]:
            print(f"running {part!r} ...", file=sys.stderr)
            timed.append((part, run_part(part, project, env, watch=False)[0]))
        print(f"running {split[-1]!r} ...", file=sys.stderr)
        try:
            seconds, progress, out = run_part(split[-1], project, env, watch=True)
        finally:
            _stop_nodes(project, env, fresh)
        timed.append((split[-1], seconds))
    demo_steps = steps(progress.seen, timed[-1][1])
    args.out.write_text(report(command, index, timed, demo_steps, machine(), cpu_text, out, args.demo_args),
                        encoding="utf-8")
    print(f"wrote {args.out}: {summary(sum(s for _, s in timed), timed, demo_steps, cpu_text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
