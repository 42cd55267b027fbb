"""Column roles, verdict labels (``"A"``, ``"B"``, ``"tie"`` or missing) and
:class:`ComparisonTable`, the normalised view the audit works on (the frame stays untouched)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from puaudit.errors import CLI, COLUMN_MAPPING, DASHBOARD, PUAuditError
from puaudit.data.vocabulary import match_columns, parse_verdict

__all__ = ["ROLES", "annotator_text", "COLUMN_ALIASES", "ComparisonTable", "text_cells",
           "detect_columns", "guess_columns", "normalize_verdicts", "load_comparisons",
           "apply_judge_rule", "JUDGE_RULES"]

ROLES = ("prompt", "response_a", "response_b", "judge", "human", "question_type", "question_id",
         "turn", "model_a", "model_b", "annotator")
REQUIRED_ROLES = ("prompt", "response_a", "response_b", "judge")

# Ordered by preference: the first alias present wins.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt", "question", "instruction", "query", "input", "user_prompt", "turn_prompt"),
    "response_a": ("response_a", "answer_a", "output_a", "completion_a", "response_1", "answer_1",
                   "output_1", "model_a_response", "response_model_a", "conversation_a"),
    "response_b": ("response_b", "answer_b", "output_b", "completion_b", "response_2", "answer_2",
                   "output_2", "model_b_response", "response_model_b", "conversation_b"),
    "judge": ("judge_winner", "judge_verdict", "judge_label", "judge_preference", "judge_decision",
              "llm_winner", "llm_judge", "llm_verdict", "gpt4_winner", "judge", "winner"),
    "human": ("human_winner", "human_verdict", "human_label", "human_preference", "human",
              "gold_winner", "gold_label", "gold", "label", "winner"),
    "question_type": ("category", "question_type", "question_category", "type", "task", "domain",
                      "subset"),
    "question_id": ("question_id", "qid", "prompt_id", "item_id", "question_idx"),
    "turn": ("turn", "turn_id"),
    "model_a": ("model_a", "model_1"),
    "model_b": ("model_b", "model_2"),
    "annotator": ("human_judge", "annotator", "annotator_id", "worker_id", "worker", "rater",
                  "rater_id", "judge_id", "labeler", "user_id"),
}

ACCEPTED_LABELS_TEXT = ("A / B / tie, model_a / model_b / tie, tie (inconsistent), tie (bothbad), "
                        "1 / 2, or the model name given in the model_a / model_b column")


def guess_columns(df: pd.DataFrame, columns: Mapping[str, str] | None = None) -> dict[str, str]:
    """Role -> column from explicit choices first, then the first alias present; never raises
    (the dashboard shows it even when a required column is missing). A role set to ``None`` or
    ``""`` stays unmapped; a column serves one role at most."""
    return match_columns(df.columns, {r: COLUMN_ALIASES[r] for r in ROLES}, columns)


def detect_columns(df: pd.DataFrame, columns: Mapping[str, str] | None = None) -> dict[str, str]:
    """Map roles to column names, from explicit choices first and aliases second.

    Parameters
    ----------
    df : DataFrame
        The table as read.
    columns : mapping role -> column name, optional
        Explicit choices; they override detection. A value ``None`` or ``""`` means "no such column".

    Returns
    -------
    dict
        Role -> column for every role found (a required role missing raises).
    """
    columns = dict(columns or {})
    unknown_roles = set(columns) - set(ROLES)
    if unknown_roles:
        raise PUAuditError(f"Unknown column role(s) {sorted(unknown_roles)}; roles are {list(ROLES)}.")
    present = list(df.columns)
    for role, col in columns.items():
        if col and col not in present:
            raise PUAuditError(
                f"Column '{col}' (chosen for {role}) is not in the file. Columns present: "
                f"{present}.", column=col)
    mapping = guess_columns(df, columns)
    missing = [r for r in REQUIRED_ROLES if r not in mapping]
    if missing:
        hints = {r: ", ".join(COLUMN_ALIASES[r][:6]) for r in missing}
        lines = "; ".join(f"{r} (looked for: {hints[r]}, ...)" for r in missing)
        raise PUAuditError(
            f"Required column(s) not found: {lines}. Columns present: {present}.",
            column=missing[0], fix={
                CLI: "Rename the column or map it explicitly (CLI: --prompt-col/--response-a-col/"
                     "--response-b-col/--judge-col; Python: columns={'judge': 'my_column', ...}).",
                DASHBOARD: f"Rename the column or map it explicitly (in {COLUMN_MAPPING})."})
    return mapping


def normalize_verdicts(values: Sequence, *, column: str = "verdict",
                       model_a: Sequence | None = None, model_b: Sequence | None = None,
                       allow_missing: bool = True) -> np.ndarray:
    """Normalise verdict labels (:data:`ACCEPTED_LABELS_TEXT`, any case) to ``"A"``, ``"B"``,
    ``"tie"`` or ``None``; the first unknown label (or, unless ``allow_missing``, missing one)
    raises, naming the column, the 1-based row and the value."""
    vals = list(values)
    ma = list(model_a) if model_a is not None else [None] * len(vals)
    mb = list(model_b) if model_b is not None else [None] * len(vals)
    out = np.empty(len(vals), dtype=object)
    for i, v in enumerate(vals):
        try:
            lab = parse_verdict(v, model_a=None if ma[i] is None else str(ma[i]),
                                model_b=None if mb[i] is None else str(mb[i]))
        except KeyError:
            raise PUAuditError(
                f"Column '{column}', row {i + 1}: unknown verdict {str(v)[:60]!r}. Accepted labels: "
                f"{ACCEPTED_LABELS_TEXT} (case-insensitive); leave the cell empty when there is "
                "no verdict.", column=column, row=i + 1) from None
        if lab is None and not allow_missing:
            raise PUAuditError(
                f"Column '{column}', row {i + 1}: the verdict is empty. Every row needs a judge "
                "verdict (A, B or tie); fill it in or drop the row.", column=column, row=i + 1)
        out[i] = lab
    return out


def text_cells(values: Sequence, *, column: str, role: str) -> tuple[np.ndarray, np.ndarray]:
    """(texts, user_text) of a column: for a chat transcript (a JSON list of ``{"role",
    "content"}`` messages, as Chatbot Arena's ``conversation_a``) the last assistant message
    and the user messages joined; else the text and ""."""
    out = np.empty(len(values), dtype=object)
    user = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        user[i] = ""
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out[i] = ""
            continue
        msgs = None
        if isinstance(v, (list, np.ndarray)):
            msgs = list(v)
        elif isinstance(v, str) and v.lstrip().startswith("[{"):
            try:
                msgs = json.loads(v)
            except json.JSONDecodeError:
                msgs = None
        if msgs and all(isinstance(m, dict) and "content" in m for m in msgs):
            assistant = [str(m["content"]) for m in msgs if m.get("role") in ("assistant", "gpt", "model")]
            users = [str(m["content"]) for m in msgs if m.get("role") in ("user", "human")]
            out[i] = assistant[-1] if assistant else str(msgs[-1]["content"])
            user[i] = "\n".join(users)
        elif isinstance(v, dict):
            raise PUAuditError(f"Column '{column}', row {i + 1}: expected text for {role}, found an "
                               "object. Map a text column instead.", column=column, row=i + 1)
        else:
            out[i] = str(v)
    return out, user


@dataclass
class ComparisonTable:
    """Normalised view of a comparison table; ``frame`` is the input, untouched.

    Attributes
    ----------
    columns : dict
        Role -> column name used.
    prompt, response_a, response_b : ndarray of str
    judge, human : ndarray of {"A", "B", "tie", None}
    question_type : ndarray of str (``"all"`` when there is no such column)
    item_id : ndarray of str
        Shared by rows with the same prompt (turn, question id) and unordered pair: several
        votes on one item never straddle P and validation.
    annotator : ndarray of str or None
        Annotator ids as text (:func:`annotator_text`).
    """

    frame: pd.DataFrame
    columns: dict
    prompt: np.ndarray
    response_a: np.ndarray
    response_b: np.ndarray
    judge: np.ndarray
    human: np.ndarray
    question_type: np.ndarray
    item_id: np.ndarray
    annotator: np.ndarray | None = None
    judge_column: str = ""
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def n_annotated(self) -> int:
        return int(sum(h is not None for h in self.human))

    def summary(self) -> dict:
        """Counts for a data summary: rows, types, annotated share, ties, judge-human agreement."""
        judge, human = self.judge, self.human
        strict = np.array([(j in ("A", "B")) and (h in ("A", "B")) for j, h in zip(judge, human)])
        agree = np.array([j == h for j, h in zip(judge, human)])
        types = pd.Series(self.question_type).value_counts().to_dict()
        return {
            "n_rows": len(self),
            "n_question_types": len(types),
            "question_types": {str(k): int(v) for k, v in types.items()},
            "n_annotated": self.n_annotated,
            "annotated_share": self.n_annotated / max(len(self), 1),
            "n_judge_ties": int(sum(j == "tie" for j in judge)),
            "n_human_ties": int(sum(h == "tie" for h in human)),
            "n_items": int(len(set(self.item_id))),
            "n_strict_annotated": int(strict.sum()),
            "judge_human_agreement": float(agree[strict].mean()) if strict.any() else None,
        }

    def content_hash(self) -> str:
        """A hash of everything the audit reads (texts, verdicts, types, items)."""
        h = hashlib.sha256()
        for arr in (self.prompt, self.response_a, self.response_b, self.judge, self.human,
                    self.question_type, self.item_id):
            for v in arr:
                h.update(b"\x1f" + str(v).encode("utf-8", "surrogatepass"))
            h.update(b"\x1e")
        return h.hexdigest()


def _hash_key(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def load_comparisons(df: pd.DataFrame, *, columns: Mapping[str, str] | None = None,
                     judge_column: str | None = None, name: str = "table") -> ComparisonTable:
    """Build a :class:`ComparisonTable` from a raw table.

    Parameters
    ----------
    df : DataFrame
        As returned by :func:`puaudit.data.io.read_table`.
    columns : mapping role -> column, optional
        Explicit column choices (see :data:`ROLES`).
    judge_column : str, optional
        Shortcut for ``columns={"judge": judge_column}`` (a file may hold several judge columns).
    """
    columns = dict(columns or {})
    if judge_column:
        columns["judge"] = judge_column
    if len(df) == 0:
        raise PUAuditError(f"{name}: no data rows.")
    mapping = detect_columns(df, columns)
    get = lambda role: df[mapping[role]].tolist() if role in mapping else None  # noqa: E731

    resp_a, user_a = text_cells(get("response_a"), column=mapping["response_a"], role="response A")
    resp_b, _ = text_cells(get("response_b"), column=mapping["response_b"], role="response B")
    prompt, _ = text_cells(get("prompt"), column=mapping["prompt"], role="prompt")
    # Chat-format responses carry the prompt themselves.
    prompt = np.array([p if p else u for p, u in zip(prompt, user_a)], dtype=object)

    model_a, model_b = get("model_a"), get("model_b")
    judge = normalize_verdicts(get("judge"), column=mapping["judge"], model_a=model_a,
                               model_b=model_b, allow_missing=True)
    if "human" in mapping:
        human = normalize_verdicts(get("human"), column=mapping["human"], model_a=model_a,
                                   model_b=model_b, allow_missing=True)
    else:
        human = np.array([None] * len(df), dtype=object)
    if "question_type" in mapping:
        qtype = np.array([("unknown" if (v is None or str(v).strip() == "" or
                                         (isinstance(v, float) and math.isnan(v))) else str(v).strip())
                          for v in get("question_type")], dtype=object)
    else:
        qtype = np.array(["all"] * len(df), dtype=object)
    qid, turn = get("question_id"), get("turn")
    item = np.empty(len(df), dtype=object)
    for i in range(len(df)):
        # The model pair names the item when known (MT-Bench: question id + turn + model pair);
        # otherwise the two response texts do.
        if model_a is not None and model_b is not None:
            pair = sorted((str(model_a[i]), str(model_b[i])))
        else:
            pair = sorted((str(resp_a[i]), str(resp_b[i])))
        item[i] = _hash_key(str(qid[i]) if qid is not None else "", str(turn[i]) if turn is not None else "",
                            str(prompt[i]), *pair)
    annot = (np.array([annotator_text(v) for v in get("annotator")], dtype=object)
             if "annotator" in mapping else None)
    return ComparisonTable(frame=df, columns=mapping, prompt=prompt, response_a=resp_a,
                           response_b=resp_b, judge=judge, human=human, question_type=qtype,
                           item_id=item, annotator=annot, judge_column=mapping["judge"])


def annotator_text(value) -> str:
    """An annotator id as the text every part of PUAudit compares: ``1``, ``1.0`` (a numeric
    column with gaps) and ``"1"`` are one annotator, as once written to CSV; spaces are dropped
    and a missing id is ``""``."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (float, np.floating)):
        if np.isnan(value):
            return ""
        if float(value).is_integer():
            return str(int(value))
    return str(value).strip()


JUDGE_RULES = ("longer", "shorter", "position-a")


def apply_judge_rule(table: ComparisonTable, rule: str) -> ComparisonTable:
    """Replace the judge's verdicts by a deterministic rule (a reproducible weak judge).

    ``longer``: the longer response (in characters) wins; ``shorter``: the shorter wins;
    ``position-a``: A always wins. Equal lengths give ``tie``.
    """
    if rule not in JUDGE_RULES:
        raise PUAuditError(f"Unknown judge rule '{rule}': choose one of {list(JUDGE_RULES)}.")
    la = np.array([len(t) for t in table.response_a])
    lb = np.array([len(t) for t in table.response_b])
    if rule == "position-a":
        judge = np.array(["A"] * len(table), dtype=object)
    else:
        sign = np.sign(la - lb) if rule == "longer" else np.sign(lb - la)
        judge = np.where(sign > 0, "A", np.where(sign < 0, "B", "tie")).astype(object)
    out = ComparisonTable(**{**table.__dict__})
    out.judge = judge
    out.judge_column = f"rule:{rule}"
    return out
