"""What checkpoints cost: a workspace of N files (100 per folder, ~1 KB each), 10 of them
changed per turn. Measures the first snapshot (every file read once), a snapshot after 10
files changed (only those read: what a turn's end or a step after a write costs), a snapshot
before a step when nothing changed (a stat of every file, nothing read or stored), and a
rewind of one turn (a snapshot of the files as they are, the restore of the 10 files, a
snapshot after). Medians of --runs turns.
Usage: python bench/checkpoints.py [--files 1000 50000] [--changed 10] [--runs 5]"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from talaria.checkpoints import SessionCheckpoints


def workspace(root: Path, files: int) -> list[Path]:
    paths = []
    for i in range(files):
        path = root / f"pkg{i // 100:04d}" / f"module {i % 100:02d}.py"
        if i % 100 == 0:
            path.parent.mkdir(parents=True)
        path.write_text(f"# file {i}\n" + "x = 1\n" * 170)
        paths.append(path)
    return paths


def cpu() -> float:
    """Seconds of CPU used so far by this process and the git processes it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(files: int, changed: int, runs: int) -> dict[str, float]:
    """Milliseconds: the first snapshot, then medians of a turn's snapshot and of a rewind."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "work"
        paths = workspace(root, files)
        store = SessionCheckpoints(
            Path(scratch) / "checkpoints", [root], enabled=True, max_file_bytes=1 << 20
        )
        started = time.perf_counter()
        store.begin_turn(0, "first")
        first = time.perf_counter() - started
        store.end_turn()
        snapshots, rewinds, cpus, idle, idle_cpus = [], [], [], [], []
        step = max(1, files // changed)
        for run in range(runs):
            entry = store.begin_turn(run, "turn")
            for path in paths[run:files:step][:changed]:
                path.write_text(f"changed in turn {run}\n")
            started, used = time.perf_counter(), cpu()
            store.before_step("write_file")
            snapshots.append(time.perf_counter() - started)
            cpus.append(cpu() - used)
            started, used = time.perf_counter(), cpu()
            store.before_step("terminal")  # nothing changed since the last snapshot
            idle.append(time.perf_counter() - started)
            idle_cpus.append(cpu() - used)
            store.end_turn()
            started = time.perf_counter()
            report = store.rewind(entry.id, files=True, conversation=False)
            rewinds.append(time.perf_counter() - started)
            assert len(report.restored) == changed, report
    return {
        "first snapshot": first * 1000,
        "turn snapshot": statistics.median(snapshots) * 1000,
        "turn snapshot cpu": statistics.median(cpus) * 1000,
        "unchanged step": statistics.median(idle) * 1000,
        "unchanged step cpu": statistics.median(idle_cpus) * 1000,
        "rewind": statistics.median(rewinds) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, nargs="+", default=[1000, 50000])
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(
        f"| files | first snapshot | snapshot, {args.changed} changed (CPU) "
        "| step snapshot, nothing changed (CPU) | rewind of them |"
    )
    print("|---:|---:|---:|---:|---:|")
    for files in args.files:
        ms = measure(files, args.changed, args.runs)
        print(
            f"| {files:,} | {ms['first snapshot']:,.0f} ms | {ms['turn snapshot']:,.0f} ms "
            f"({ms['turn snapshot cpu']:,.0f} ms) | {ms['unchanged step']:,.0f} ms "
            f"({ms['unchanged step cpu']:,.0f} ms) | {ms['rewind']:,.0f} ms |"
        )


if __name__ == "__main__":
    main()
