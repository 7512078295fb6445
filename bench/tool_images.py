"""What showing tool images costs each request: the first request of a file version reads,
checks and encodes it; later requests of the session reuse that (a few are kept).

    python bench/tool_images.py [--images 5] [--kib 200] [--messages 200] [--reps 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from talaria.messages.media import media_dir, media_name, saved_marker, with_tool_images


def history(home: Path, images: int, kib: int, messages: int) -> list[dict]:
    folder = media_dir(home)
    folder.mkdir(parents=True)
    turns: list[dict] = []
    for index in range(messages // 2):
        turns.append({"role": "user", "content": f"step {index}"})
        content = f"result {index}"
        if index < images:
            raw = b"\x89PNG\r\n\x1a\n" + os.urandom(kib * 1024)
            path = folder / media_name(raw, ".png")
            path.write_bytes(raw)
            content = saved_marker("image", "image/png", len(raw), path)
        turns.append({"role": "tool", "tool_call_id": f"c{index}", "content": content})
    return turns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=5)
    parser.add_argument("--kib", type=int, default=200)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        messages = history(Path(tmp), args.images, args.kib, args.messages)
        folder = media_dir(Path(tmp))
        for label, count in (("without images", 0), (f"{args.images} images", args.images)):
            shown = messages if count else [m for m in messages if "[image " not in m["content"]]
            times = []
            for _ in range(args.reps):
                started = time.perf_counter()
                with_tool_images(shown, folder)
                times.append(time.perf_counter() - started)
            first, later = times[0] * 1000, statistics.median(times[1:]) * 1000
            print(
                f"{args.messages} messages, {label} of {args.kib} KiB: first request "
                f"{first:.2f} ms, later ones {later:.2f} ms (median)"
            )


if __name__ == "__main__":
    main()
