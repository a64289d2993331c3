"""Write speeches.txt in LEAF's JSON layout: train/ and test/ folders of {users, num_samples, user_data}.

    python examples/own-model/shakespeare/make_leaf.py      # rewrites train/ and test/ beside this file

As LEAF's Shakespeare does, each speaker is a user and a sample is 80 characters of their lines (x) with the
character that follows (y). Windows start every 10 characters. Each speaker's text is cut at 85 %: the windows
before the cut are training samples, those after it test samples, so no test window overlaps a training one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
WINDOW, STRIDE, TRAIN_SHARE = 80, 10, 0.85


def speeches(path: Path) -> dict[str, tuple[str, str]]:
    """Each speaker's text (their speeches joined by a space) and play, in the order they first speak."""
    texts: dict[str, list[str]] = defaultdict(list)
    plays: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        play, speaker, text = (part.strip() for part in line.split("|", 2))
        user = f"{play}_{speaker}".replace(" ", "_")
        texts[user].append(text)
        plays[user] = play
    return {user: (" ".join(parts), plays[user]) for user, parts in texts.items()}


def windows(text: str) -> tuple[list[str], list[str]]:
    xs = [text[i : i + WINDOW] for i in range(0, len(text) - WINDOW, STRIDE)]
    ys = [text[i + WINDOW] for i in range(0, len(text) - WINDOW, STRIDE)]
    return xs, ys


def main() -> None:
    splits: dict[str, dict] = {name: {"users": [], "num_samples": [], "user_data": {}, "hierarchies": []}
                               for name in ("train", "test")}  # fmt: skip
    for user, (text, play) in speeches(HERE / "speeches.txt").items():
        cut = int(len(text) * TRAIN_SHARE)
        for name, part in (("train", text[:cut]), ("test", text[cut:])):
            xs, ys = windows(part)
            if not xs:
                continue
            split = splits[name]
            split["users"].append(user)
            split["num_samples"].append(len(xs))
            split["user_data"][user] = {"x": xs, "y": ys}
            split["hierarchies"].append(play)
    for name, split in splits.items():
        (HERE / name).mkdir(exist_ok=True)
        (HERE / name / f"all_data_{name}.json").write_text(json.dumps(split, indent=0) + "\n", encoding="utf-8")
        print(f"{name}: {len(split['users'])} speakers, {sum(split['num_samples'])} samples")


if __name__ == "__main__":
    main()
