"""Peak memory of the worst hostile inputs (docs/hostile_inputs.md), each in a fresh interpreter.

Cases (``--case``, repeatable; default all but ``upload`` and ``argilla``; the files are built by
bench/_hostile_files.py or in the case's code below):

* ``short``, ``bomb``, ``wide``: ``read_table`` of a gzip of 1,000,000 short rows, of a 0.4 MB
  gzip that expands to 400 MB (50 MB limit), of a 27 MB header of 2,000,000 column names;
* ``tokenise``: four 5 MB texts embedded with the default encoder;
* ``decoded_parquet``, ``decoded_csv``, ``decoded_jsonl``: ``puaudit audit`` at the default
  limits of a small file that decodes to 5 GB (refused before the encoder is loaded);
* issue 41's command-line cases: ``dict_zip`` (a ``save_to_disk`` zip whose prompt is 100 GB
  expanded), ``argilla`` (one record with 5,000 responses; minutes: the real encoder),
  ``labelstudio`` and ``review_import`` (a 166 MB export of 1,000,039 votes), ``inf_turn`` (an
  MT-Bench ``turn`` of ``1e400``), ``fifo`` (Parquet shards beside a FIFO);
* ``upload``: one dashboard upload at the default limits (rows and MB), read, loaded, its
  embedding texts formatted and hashed, audited with random 384-dimension embeddings.

Peak memory is the child's VmHWM, reset after the input is generated; ``grew`` is peak minus the
RSS at that reset. Prints one line per case and, last, one JSON object with every measurement.
"""

from __future__ import annotations

import json
import textwrap

from bench._support import parser, run_child

_PRELUDE = """
import json, sys, time
def _status(key):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) / 1024 for l in fh if l.startswith(key))
def reset():
    global BASE, T0
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    BASE, T0 = _status("VmRSS:"), time.perf_counter()
OUT = {}
"""

_EPILOGUE = """
OUT.update(peak_mb=_status("VmHWM:"), base_mb=BASE, grew_mb=_status("VmHWM:") - BASE,
           seconds=time.perf_counter() - T0)
print("RESULT " + json.dumps(OUT))
"""

_DECODED = """
    import contextlib, io, pathlib, tempfile
    from bench._hostile_files import gzip_bomb, parquet_bomb
    from puaudit.cli.commands import main
    path = pathlib.Path(tempfile.mkdtemp()) / {file!r}
    {make}
    OUT.update(input_mb=path.stat().st_size / 2**20, decoded_mb=5.12e9 / 2**20)
    reset()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        OUT["rc"] = main(["audit", str(path), "-o", str(path.with_name("out.csv"))])
    OUT["message"] = err.getvalue().strip()[:90]
    OUT["encoder_loaded"] = "puaudit.embed.encoders" in sys.modules
"""

_ISSUE41 = """
    import contextlib, io, json, os, pathlib, tempfile
    from bench._hostile_files import (argilla_record, comparison_columns, hf_bomb,
                                      labelstudio_bomb, zip_folder)
    from puaudit.cli.commands import main
    d = pathlib.Path(tempfile.mkdtemp())
    {make}
    OUT["input_mb"] = sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20
    reset()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        OUT["rc"] = main({args})
    OUT["message"] = err.getvalue().strip().splitlines()[-1][:90] if err.getvalue() else ""
"""

_ISSUE41_CASES = {
    "dict_zip": ('zip_folder(hf_bomb(d / "ds", "dictionary"), d / "ds.zip")\n'
                 '    import shutil; shutil.rmtree(d / "ds")',
                 '["audit", str(d / "ds.zip"), "-o", str(d / "out.csv")]'),
    "argilla": ('argilla_record(d / "records.json", responses=5000)',
                '["audit", str(d / "records.json"), "-o", str(d / "out.csv")]'),
    "labelstudio": ('labelstudio_bomb(d / "ls.json", annotations=999_961, tasks=79)',
                    '["audit", str(d / "ls.json"), "-o", str(d / "out.csv")]'),
    "review_import": ('labelstudio_bomb(d / "ls.json", annotations=999_961, tasks=79)',
                      '["review", "import", str(d / "ls.json"), "--db", str(d / "r.sqlite")]'),
    "inf_turn": ("(d / 'j.jsonl').write_text(json.dumps({'question_id': 81, 'turn': 1, "
                 "'model_a': 'm1', 'model_b': 'm2', 'winner': 'model_a', 'judge': 'gpt4_pair'})"
                 ".replace('\"turn\": 1', '\"turn\": 1e400') + '\\n')",
                 '["audit", str(d / "j.jsonl"), "-o", str(d / "out.csv")]'),
    "fifo": ("import pyarrow as pa, pyarrow.parquet as pq; (d / 's').mkdir(); "
             "pq.write_table(comparison_columns(pa.array(['p0', 'p1'])), d / 's' / 'a.parquet'); "
             "os.mkfifo(d / 's' / 'b.parquet')",
             '["audit", str(d / "s"), "-o", str(d / "out.csv")]'),
}

CASES = {
    "short": """
        import gzip
        from puaudit.data.io import read_table
        rows = "".join(f"p{i % 50},a{i % 7},b,A,{'B' if i % 7 == 0 else ''}\\n"
                       for i in range(1_000_000))
        raw = ("prompt,response_a,response_b,judge_winner,human_winner\\n" + rows).encode()
        gz = gzip.compress(raw, 6)
        OUT.update(input_mb=len(raw) / 2**20, gz_mb=len(gz) / 2**20)
        del rows, raw
        reset()
        OUT["rows"] = len(read_table(gz, name="short.csv.gz"))
    """,
    "bomb": """
        import zlib
        from puaudit.errors import PUAuditError
        from puaudit.data.io import read_table
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = b"0,0\\n" * 1_000_000
        gz = c.compress(b"a,b\\n") + b"".join(c.compress(block) for _ in range(100)) + c.flush()
        OUT.update(input_mb=400, gz_mb=len(gz) / 2**20)
        reset()
        try:
            read_table(gz, name="bomb.csv.gz", max_bytes=50 * 2**20)
        except PUAuditError as exc:
            OUT["message"] = str(exc)[:90]
    """,
    "wide": """
        from puaudit.errors import PUAuditError
        from puaudit.data.io import read_table
        header = ",".join(f"column_{i}" for i in range(2_000_000)).encode() + b"\\n"
        OUT["input_mb"] = len(header) / 2**20
        reset()
        try:
            read_table(header, name="wide.csv", max_columns=3_000_000)
        except PUAuditError as exc:
            OUT["message"] = str(exc)[:90]
    """,
    "tokenise": """
        from puaudit.embed.encoders import get_encoder
        enc = get_encoder(None, cache_dir=None, device="cpu").load()
        words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do ".split()
        texts = [f"text {i} " + " ".join(words[(i + k) % len(words)] for k in range(900_000))
                 for i in range(4)]
        OUT["input_mb"] = sum(map(len, texts)) / 2**20
        reset()
        OUT["shape"] = list(enc.encode(texts).shape)
    """,
    "decoded_parquet": _DECODED.format(make="parquet_bomb(path)", file="bomb.parquet"),
    "decoded_csv": _DECODED.format(make="gzip_bomb(path, jsonl=False)", file="bomb.csv.gz"),
    "decoded_jsonl": _DECODED.format(make="gzip_bomb(path, jsonl=True)", file="bomb.jsonl.gz"),
    **{name: _ISSUE41.format(make=make, args=args)
       for name, (make, args) in _ISSUE41_CASES.items()},
    "upload": """
        import gc
        import numpy as np
        import pandas as pd
        from puaudit.audit.estimator import PUAudit, PairEmbeddings
        from puaudit.data.limits import upload_limits
        from puaudit.embed.cache import text_key
        from puaudit.embed.text import format_text
        from puaudit.data.writers import table_to_bytes
        from puaudit.data.schema import load_comparisons
        from components.uploads import read_upload
        lim = upload_limits()
        n = lim.max_rows
        per_row = int(lim.max_bytes * 0.98 / n)
        rng = np.random.default_rng(0)
        word = "lorem ipsum dolor sit amet consectetur adipiscing elit "
        cell = lambda k, i: (f"{k} {i} " + word * (per_row // (3 * len(word)) + 1))[: per_row // 3]
        df = pd.DataFrame({"question_id": [str(i // 2) for i in range(n)],
                           "category": [f"t{i % 5}" for i in range(n)],
                           "prompt": [cell("p", i // 2) for i in range(n)],
                           "response_a": [cell("a", i) for i in range(n)],
                           "response_b": [cell("b", i) for i in range(n)],
                           "judge_winner": rng.choice(["A", "B"], n),
                           "human_winner": np.where(rng.random(n) < 0.3,
                                                    rng.choice(["A", "B"], n), "")})
        data = table_to_bytes(df, "csv")
        del df
        gc.collect()
        OUT.update(input_mb=len(data) / 2**20, rows=n, limit_mb=lim.max_mb)
        reset()
        frame = read_upload(data, "upload.csv", max_upload_mb=10**6)
        table = load_comparisons(frame)
        texts = [format_text(p, r) for p, r in zip(list(table.prompt) * 2,
                                                    list(table.response_a) + list(table.response_b))]
        keys = [text_key(t) for t in texts]
        OUT["after_texts_mb"] = _status("VmHWM:") - BASE
        e = rng.standard_normal((2, n, 384)).astype(np.float32)
        est = PUAudit().fit(table, PairEmbeddings(e[0], e[1]))
        OUT["cons_orig"] = est.result_.summary()["cons_orig"]
    """,
}


def run_case(name: str, *, timeout: int = 1800) -> dict:
    """Run one case in a fresh interpreter and return its measurements."""
    code = textwrap.dedent(_PRELUDE) + textwrap.dedent(CASES[name]) + textwrap.dedent(_EPILOGUE)
    return run_child(["-c", code], timeout=timeout, label=f"case {name}")


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--case", action="append", choices=sorted(CASES),
                    help="case to run (repeatable; default: all but upload and argilla)")
    args = ap.parse_args(argv)
    cases = args.case or [c for c in CASES if c not in ("upload", "argilla")]
    results = {}
    for name in cases:
        res = run_case(name)
        results[name] = res
        print(f"{name:<9} input {res.get('input_mb', 0):8.1f} MB   peak +{res['grew_mb']:7.1f} MB "
              f"({res['grew_mb'] / max(res.get('input_mb', 1), 1e-9):5.1f}x)   "
              f"{res['seconds']:6.1f} s   {res.get('message', '')}", flush=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
