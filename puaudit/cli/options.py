"""The options of the commands that audit a table, and the :class:`AuditConfig` they name.

Every audit parameter is one field of :class:`puaudit.audit.config.AuditConfig` (default,
validation, flag and help in one place): :func:`add_config_arguments` adds one option per
field, :func:`config_from_args` reads them back. ``audit``, ``evaluate``, ``sweep``,
``report`` and ``cascade`` share the input's options (:func:`add_table_arguments`) and the
encoder's (:func:`add_audit_arguments`).
"""

from __future__ import annotations

import argparse
import dataclasses

from puaudit.audit.config import AuditConfig
from puaudit.cli.output import add_json_argument
from puaudit.cli.table_input import add_max_rows_argument, add_split_argument

__all__ = ["add_table_arguments", "add_column_arguments", "add_audit_arguments",
           "add_config_arguments", "config_from_args"]


def add_table_arguments(p: argparse.ArgumentParser) -> None:
    """The input's options: its columns, a judge rule, ``--human``, ``--answers``, the input
    limits and ``--split``."""
    add_column_arguments(p, ("prompt", "response_a", "response_b", "judge", "human",
                             "question_type", "question_id", "annotator"))
    p.add_argument("--human", default=None, metavar="FILE",
                   help="human votes to join to a judgment file (MT-Bench human judgments); "
                        "see docs/data_formats.md")
    p.add_argument("--answers", default=None, metavar="DIR",
                   help="benchmark folder with question.jsonl and model_answer/: the texts a "
                        "judgment file (MT-Bench, FastChat, arena-hard-auto) names")
    add_max_rows_argument(p)
    add_split_argument(p)


#: the flag of each column role, where it is not ``--ROLE-col``
_COLUMN_FLAGS = {"question_type": "--type-col", "question_id": "--id-col"}


def add_column_arguments(p: argparse.ArgumentParser, roles: tuple[str, ...]) -> None:
    """One ``--ROLE-col COL`` option per role (``args.col_ROLE``), and ``--judge-rule``."""
    g = p.add_argument_group("columns (auto-detected when omitted)")
    for role in roles:
        flag = _COLUMN_FLAGS.get(role, f"--{role.replace('_', '-')}-col")
        g.add_argument(flag, dest=f"col_{role}", metavar="COL", default=None,
                       help=f"column holding the {role.replace('_', ' ')}")
    p.add_argument("--judge-rule", choices=["longer", "shorter", "position-a"], default=None,
                   help="replace the judge's verdicts by a deterministic rule (a reproducible weak judge)")


def add_audit_arguments(p: argparse.ArgumentParser, *, exclude: tuple[str, ...] = ()) -> None:
    """The audit's options (:func:`add_config_arguments`, less ``exclude``), the encoder's and
    ``--json``."""
    add_config_arguments(p, exclude=exclude)
    p.add_argument("--encoder", default=None, metavar="NAME|PATH",
                   help="default all-MiniLM-L6-v2 (offline); or a local Hugging Face model folder")
    p.add_argument("--encoder-mode", default=None, choices=["auto", "fast", "full"],
                   help="fast: bfloat16 (about 2x faster on CPUs with native bfloat16); full: float32; "
                        "auto (default, or $PUAUDIT_ENCODER_MODE): fast for the default encoder where "
                        "the CPU has native bfloat16, else full. See docs/encoders.md")
    p.add_argument("--embeddings", default=None, metavar="NPZ",
                   help="precomputed embeddings, skipping the encoder: .npz with arrays e_a and e_b "
                        "(one row each per table row) or vectors, idx_a, idx_b (one vector per "
                        "distinct text, two row indices)")
    p.add_argument("--cache-dir", default=None, help="embedding cache folder (default ~/.cache/puaudit)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    add_json_argument(p)


def add_config_arguments(parser: argparse.ArgumentParser, *, exclude: tuple[str, ...] = ()
                         ) -> None:
    """Add one command-line option per :class:`AuditConfig` field (defaults from the class)."""
    g = parser.add_argument_group("audit parameters")
    for f in dataclasses.fields(AuditConfig):
        if f.name in exclude:
            continue
        meta = dict(f.metadata)
        flag, help_ = meta.pop("flag"), meta.pop("help")
        dest = f"cfg_{f.name}"
        if meta.pop("invert", False):
            g.add_argument(flag, dest=dest, action="store_false", default=f.default, help=help_)
            continue
        kind = {"float": float, "int": int}.get(
            str(f.type).replace(" | None", "").strip(), None)
        if f.name == "random_state":
            kind = int
        if f.name == "review_band":
            kind = float
        default_txt = "auto" if f.default is None else f.default
        meta.setdefault("metavar", None if "choices" in meta else f.name.upper())
        if "(default" not in help_:  # a help that explains its default says it once
            help_ = f"{help_} (default {default_txt})"
        g.add_argument(flag, dest=dest, default=f.default, type=kind, help=help_, **meta)


def config_from_args(args: argparse.Namespace, **overrides) -> AuditConfig:
    """The :class:`AuditConfig` named by parsed command-line options."""
    values = {k[4:]: v for k, v in vars(args).items() if k.startswith("cfg_")}
    return AuditConfig(**{**values, **overrides})
