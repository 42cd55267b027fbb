"""Generate the hostile and broken input files (docs/hostile_inputs.md; never hand-edited blobs).

Usage::

    python tests/make_hostile_files.py OUT_FOLDER [--large]

or, from a test, ``make_hostile_files(tmp_path)``. Every file is built from code here, so what
each one contains is readable below; ``--large`` / ``include_large=True`` adds the 200,000-row file.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["make_hostile_files", "comparison_rows", "HEADER", "N_ROWS", "LARGE_ROWS",
           "PLANTED_HOST", "planted", "markup_frame", "markup_pairwise"]

HEADER = ["question_id", "category", "prompt", "response_a", "response_b", "judge_winner",
          "human_winner"]
#: rows of every generated table that has data (except ``one_row``)
N_ROWS = 120
LARGE_ROWS = 200_000


def comparison_rows(n: int = N_ROWS, *, annotated: float = 0.5, seed: int = 0,
                    accents: bool = False) -> list[list[str]]:
    """``n`` well-formed comparisons over 3 question types; a share ``annotated`` has a human
    verdict (the rest are left empty). ``accents`` puts non-ASCII Latin-1 letters in the texts."""
    rng = np.random.default_rng(seed)
    word = "café crème naïve" if accents else "plain text"
    rows = []
    for i in range(n):
        judge = "A" if rng.random() < 0.5 else "B"
        human = ("A" if rng.random() < 0.5 else "B") if rng.random() < annotated else ""
        rows.append([str(i), f"type{i % 3}", f"prompt {i} {word}", f"answer a {i} {word}",
                     f"answer b {i} {word} {'x' * int(rng.integers(0, 20))}", judge, human])
    return rows


def _csv_text(header: list[str], rows: list[list[str]], *, lineterminator: str = "\n") -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator=lineterminator)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _large_csv(path: Path, n: int) -> None:
    # written in blocks so that generating it never holds all rows as Python lists
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(_csv_text(HEADER, []))
        for start in range(0, n, 20_000):
            block = comparison_rows(min(20_000, n - start), annotated=0.1, seed=start)
            for r in block:
                r[0] = str(start + int(r[0]))
            f.write(_csv_text(HEADER, block)[len(",".join(HEADER)) + 1:])


def make_hostile_files(folder: str | Path, *, include_large: bool = False) -> dict[str, Path]:
    """Write every hostile input file into ``folder`` and return ``{name: path}``.

    Names: ``empty``, ``header_only``, ``one_row``, ``undecodable``, ``latin1``, ``utf16``,
    ``bom``, ``duplicate_columns``, ``missing_columns``, ``unknown_labels``, ``all_ties``,
    ``no_human_labels``, ``all_human_labels``, ``nan_cells``, ``big_cell``, ``quoted_newlines``,
    ``gzip_named_csv``, ``mixed_types`` (a .jsonl file), and ``rows_200k`` when ``include_large``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    good = comparison_rows()
    files: dict[str, bytes] = {}

    files["empty"] = b""
    files["header_only"] = _csv_text(HEADER, []).encode()
    files["one_row"] = _csv_text(HEADER, comparison_rows(1, annotated=1.0)).encode()
    # control bytes and invalid UTF-8: not text in any encoding
    rng = np.random.default_rng(7)
    files["undecodable"] = bytes(rng.integers(0, 32, 4000, dtype=np.uint8).tolist()) + b"\xff\xfe\xfd"
    files["latin1"] = _csv_text(HEADER, comparison_rows(accents=True)).encode("latin-1")
    files["utf16"] = _csv_text(HEADER, comparison_rows(accents=True)).encode("utf-16")
    files["bom"] = _csv_text(HEADER, comparison_rows(accents=True)).encode("utf-8-sig")
    files["duplicate_columns"] = _csv_text(HEADER + ["judge_winner"],
                                           [r + [r[5]] for r in good]).encode()
    files["missing_columns"] = _csv_text([h for h in HEADER if h != "judge_winner"],
                                         [r[:5] + r[6:] for r in good]).encode()
    unknown = [list(r) for r in good]
    unknown[41][5] = "maybe"  # data row 42
    files["unknown_labels"] = _csv_text(HEADER, unknown).encode()
    files["all_ties"] = _csv_text(HEADER, [r[:5] + ["tie", r[6]] for r in good]).encode()
    files["no_human_labels"] = _csv_text(HEADER, comparison_rows(annotated=0.0)).encode()
    files["all_human_labels"] = _csv_text(HEADER, comparison_rows(annotated=1.0)).encode()
    nan_rows = [list(r) for r in good]
    for i in range(0, N_ROWS, 7):
        nan_rows[i][2] = ""          # empty prompt
    for i in range(3, N_ROWS, 11):
        nan_rows[i][6] = "NaN"       # pandas-style missing human verdict
    for i in range(5, N_ROWS, 13):
        nan_rows[i][5] = ""          # no judge verdict: excluded, still exported
    for i in range(2, N_ROWS, 17):
        nan_rows[i][1] = ""          # no question type
    nan_rows[9][3] = ""              # empty response
    files["nan_cells"] = _csv_text(HEADER, nan_rows).encode()
    big = [list(r) for r in good]
    big[0][3] = ("a long answer, with commas and \"quotes\"\n" * 30000)[:1_000_000]
    files["big_cell"] = _csv_text(HEADER, big).encode()
    nl = [list(r) for r in good]
    for i in range(0, N_ROWS, 4):
        nl[i][3] = f"line one\nline two, with comma\r\nline three {i}"
        nl[i][2] = f"ask \"{i}\"\r\nplease"
    files["quoted_newlines"] = _csv_text(HEADER, nl, lineterminator="\r\n").encode()
    files["gzip_named_csv"] = gzip.compress(_csv_text(HEADER, good).encode(), mtime=0)

    # JSONL whose columns mix types: numbers, text, null, a list, a nested object
    mixed = []
    for i, r in enumerate(good):
        rec = dict(zip(HEADER, r))
        rec["question_id"] = i if i % 2 else str(i)
        rec["judge_winner"] = {"A": 1, "B": 2}[r[5]] if i % 3 == 0 else r[5]
        rec["human_winner"] = None if r[6] == "" else r[6]
        rec["prompt"] = 12345 if i == 4 else r[2]
        rec["score"] = [1, 2.5] if i % 5 == 0 else (0.1234567890123456789 if i % 5 == 1 else "n/a")
        if i % 7 == 0:
            rec["meta"] = {"source": "x", "k": [1, None]}
        mixed.append(json.dumps(rec, ensure_ascii=False))
    files["mixed_types.jsonl"] = ("\n".join(mixed) + "\n").encode()

    paths: dict[str, Path] = {}
    for name, data in files.items():
        name, _, ext = name.partition(".")
        path = folder / f"{name}.{ext or 'csv'}"
        path.write_bytes(data)
        paths[name] = path
    if include_large:
        path = folder / "rows_200k.csv"
        _large_csv(path, LARGE_ROWS)
        paths["rows_200k"] = path
    return paths


# -- markup in the data ----------------------------------------------------------------------
#: host of every planted URL: port 9 (discard) refuses at once, and no request may go there
PLANTED_HOST = "127.0.0.1:9"


def planted(kind: str, tag: str) -> str:
    """A string that a Markdown or HTML renderer would turn into a request or a live link:
    ``kind`` "img" (Markdown image), "link" (HTML anchor), "html" (HTML image) or "style"
    (Streamlit colour directive and bold, harmless but must show as typed)."""
    url = f"http://{PLANTED_HOST}/puaudit-planted-{tag}"
    return {"img": f"![{tag}]({url}.png)", "link": f'<a href="{url}">{tag}</a>',
            "html": f'<img src="{url}.gif">', "style": f":red[{tag}] **{tag}**"}[kind]


def markup_frame(n_items: int = 90, *, seed: int = 0):
    """A comparison table whose cells, column names, question types, annotator ids and model
    names hold Markdown images, HTML links and images (see :func:`planted`). Each item has two
    annotators, 60% of votes are strict, so every page (audit, annotators, models) has content;
    one extra column's name is an image and its cells are spreadsheet formulas, so the Export
    page's formula warning names it."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    types = [planted("img", "type"), planted("link", "type"), planted("style", "type")]
    people = [planted("img", "ann"), planted("link", "ann"), "plain person", planted("html", "ann")]
    models = [planted("img", "model"), planted("link", "model"), "model-c", planted("html", "model")]
    rows = []
    for item in range(n_items):
        ma, mb = rng.choice(len(models), 2, replace=False)
        judge = "A" if rng.random() < 0.5 else "B"
        for k in range(2):
            human = ("A" if rng.random() < 0.5 else "B") if rng.random() < 0.6 else ""
            rows.append({
                "question_id": str(item), "category": types[item % 3],
                "prompt": f"{planted('img', 'prompt')} question {item}",
                "response_a": f"answer a {item} {planted('link', 'resp')}",
                "response_b": f"answer b {item} {'x' * int(rng.integers(0, 30))}",
                "model_a": models[ma], "model_b": models[mb],
                "judge_winner": judge, "human_winner": human,
                "annotator": people[(item + k) % len(people)],
                planted("img", "column"): f"=HYPERLINK(\"http://{PLANTED_HOST}/f\")",
                planted("link", "column"): "cell",
            })
    return pd.DataFrame(rows)


def markup_pairwise():
    """A TrustJudge pairwise table (both orders) with planted judge, category and candidate
    names, and cyclic verdicts so that the cycle inspector draws named edges."""
    import pandas as pd

    cands = [planted("img", "cand"), planted("link", "cand"), planted("style", "cand"), "plain"]
    rows = []
    for q in range(6):
        for i in range(len(cands)):
            for j in range(i + 1, len(cands)):
                cyc = (j - i) == 1 or (i == 0 and j == len(cands) - 1)
                v = "A" if (j - i) == 1 else ("B" if cyc else ("A" if (q + i + j) % 2 else "B"))
                rows.append({"question_id": f"q{q}", "category": planted("link", "cat"),
                             "judge": planted("img", "judge"), "candidate_i": cands[i],
                             "candidate_j": cands[j], "verdict_1": v,
                             "verdict_2": "B" if v == "A" else "A"})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--large", action="store_true", help="also write the 200,000-row file")
    a = ap.parse_args()
    for name, p in make_hostile_files(a.folder, include_large=a.large).items():
        print(f"{name:<20} {p.stat().st_size:>12,} bytes  {p}", file=sys.stdout)
