"""A panel of judges: other judges named as columns, and the cascade (risk split, a stage that
certifies nothing, ties and blanks, stage k blind to later judges, the export, the CLI)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.certify.cascade import PEOPLE, judge_columns_of, run_cascade
from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.audit.evidence import verdict_evidence
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from tests.conftest import planted_set


def _panel(n: int = 900, seed: int = 0, *, cheap_acc=(0.99, 0.55, 0.55), strong_acc=0.95,
           signal: float = 2.5):
    """Planted rows with two judges: ``cheap`` is nearly always right on type0 and close to a
    coin elsewhere; ``strong`` (the table's judge_winner) is right ``strong_acc`` of the time."""
    df, e_a, e_b, _ = planted_set(n=n, judge_acc=0.7, annotated=0.6, seed=seed, signal=signal)
    rng = np.random.default_rng(seed + 100)
    truth = df["true_winner"].to_numpy()
    other = np.where(truth == "A", "B", "A")
    acc = np.select([df["category"] == f"type{t}" for t in range(3)], list(cheap_acc))
    df["cheap"] = np.where(rng.random(n) < acc, truth, other)
    df["judge_winner"] = np.where(rng.random(n) < strong_acc, truth, other)
    df = df.drop(columns="true_winner")  # no hidden truth where a stage could read it
    return df, PairEmbeddings(e_a, e_b), truth


@pytest.fixture(scope="module")
def panel():
    df, emb, truth = _panel(strong_acc=0.9)
    table = load_comparisons(df, judge_column="cheap")
    res = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1)
    return df, emb, table, res


# -- other judges as first-class columns ---------------------------------------------------------
def test_other_judges_named_explicitly_replace_the_name_heuristic():
    df = pd.DataFrame({"prompt": [f"q{i}" for i in range(4)],
                       "response_a": [f"a{i}" for i in range(4)],
                       "response_b": [f"b{i}" for i in range(4)],
                       "judge_winner": ["A", "B", "A", "B"],
                       "judge_winner_gpt35": ["A", "A", "A", "A"],
                       "second_opinion": ["A", "A", "tie", ""]})
    t = load_comparisons(df)
    assert "agrees_gpt35" in verdict_evidence(t).values          # the heuristic: name says judge
    assert not any("second" in k for k in verdict_evidence(t).values)
    ev = verdict_evidence(t, other_judges=["second_opinion"])
    assert list(k for k in ev.values if k.startswith("agrees_")) == ["agrees_second_opinion"]
    a = ev.values["agrees_second_opinion"]
    np.testing.assert_array_equal(a[:3], [1, -1, 0])
    assert np.isnan(a[3])
    assert not any(k.startswith("agrees_") for k in verdict_evidence(t, other_judges=()).values)
    with pytest.raises(PUAuditError, match="'nope' is not in the table"):
        verdict_evidence(t, other_judges=["nope"])
    with pytest.raises(PUAuditError, match="audited judge's or the people's"):
        verdict_evidence(t, other_judges=["judge_winner"])
    with pytest.raises(PUAuditError, match="prompt"):
        verdict_evidence(t, other_judges=["prompt"])


def test_other_judges_option_on_the_config_and_the_command_line():
    from puaudit.cli.options import config_from_args
    from puaudit.cli.commands import build_parser

    assert AuditConfig().other_judges is None
    cfg = AuditConfig(other_judges=["g35", "claude", "g35"])
    assert cfg.other_judges == ("g35", "claude") and hash(cfg)
    args = build_parser().parse_args(["audit", "in.csv", "-o", "o.csv", "--other-judges", "g35",
                                      "claude"])
    assert config_from_args(args) == cfg
    none = build_parser().parse_args(["audit", "in.csv", "-o", "o.csv", "--other-judges"])
    assert config_from_args(none).other_judges == ()
    for c in (cfg, AuditConfig(other_judges=())):
        argv = ["audit", "in.csv", "-o", "o.csv", *c.to_cli()]
        assert config_from_args(build_parser().parse_args(argv)) == c
    with pytest.raises(PUAuditError, match="other_judges"):
        AuditConfig(other_judges=[""])
    # the manifest's command reproduces them, a name with a space included
    import shlex

    from puaudit.audit.manifest import reproduce_command

    named = AuditConfig(other_judges=("judge b", "g35"), random_state=4)
    argv = shlex.split(reproduce_command({**named.to_dict(), "m_used": 0.5, "encoder": "x"}))
    assert config_from_args(build_parser().parse_args(argv[1:])) == named


def test_other_judges_frame_agreement_on_p_and_weight():
    from puaudit.audit.judges import other_judges_frame

    df, emb, truth = _panel(n=600, strong_acc=0.9)
    table = load_comparisons(df, judge_column="judge_winner")
    res = audit_table(table, emb, AuditConfig(other_judges=("cheap",), scorer="evidence"))
    f = other_judges_frame(res, table)
    assert len(f) == 1 and f.loc[0, "judge"] == "cheap" and f.loc[0, "signal"] == "agrees_cheap"
    # by hand: the cheap judge against people on P, items counted once (one vote per item here)
    p = res.split == "P"
    human = table.human
    want = np.mean(df["cheap"].to_numpy()[p] == human[p])
    assert f.loc[0, "agreement"] == pytest.approx(want)
    assert f.loc[0, "n_p_items"] == p.sum()
    assert f.loc[0, "agreement_lo"] < want < f.loc[0, "agreement_hi"]
    assert f.loc[0, "audited_judge_agreement"] == pytest.approx(np.mean(table.judge[p] == human[p]))
    assert f.loc[0, "coverage"] == 1.0
    # the evidence model leans on it: the strong judge is right where the cheap one agrees
    assert f.loc[0, "weight_lo"] <= f.loc[0, "weight"] <= f.loc[0, "weight_hi"]
    assert f.loc[0, "weight"] > 0
    assert other_judges_frame(audit_table(table, emb, AuditConfig(other_judges=())), table).empty


# -- the cascade ---------------------------------------------------------------------------------
def test_risk_is_split_evenly_across_the_stages(panel):
    df, emb, table, res = panel
    assert [st.audit.certification.choice["risk"] for st in res.stages] == [0.05, 0.05]
    # within a stage, the region's validation rows are cross-certified over the folds at
    # (R / K) / folds each, on the region's P and other validation items
    from puaudit.audit.certify.judge import CERTIFY_FOLDS

    for st in res.stages:
        cert = st.audit.certification
        folds = cert.choice["folds"]
        assert len(folds) == CERTIFY_FOLDS
        assert [f["risk"] for f in folds] == pytest.approx([0.05 / CERTIFY_FOLDS] * 5)
        val = cert.u_val
        assert cert.choice["n_items_by_source"] == [len(set(cert.p_groups)),
                                                    len(set(cert.u_groups[val]))]
        assert set(np.flatnonzero(st.region)[cert.u_rows[val]]) <= set(
            np.flatnonzero(res.split == "validation"))
    s = res.summary()
    assert s["guarantee"] == {"target": 0.85, "risk": 0.1, "risk_per_stage": 0.05,
                              "certification": "joint"}
    # the strong judge was asked about every routed row, so it is a candidate beside the
    # union: each certified at half the risk, cross-certified over the folds
    assert s["union"]["risk_fold"] == pytest.approx(0.05 / CERTIFY_FOLDS)
    assert [f["risk"] for f in s["union"]["folds"]] == pytest.approx([0.01] * CERTIFY_FOLDS)
    assert s["union"]["alone"]["judge"] == "judge_winner"
    assert s["union"]["alone"]["risk"] == pytest.approx(0.05)
    assert {f["certificate"] for f in s["union"]["folds"]} <= {"union", "alone"}
    three = run_cascade(table, emb, ["cheap", "judge_winner", "rule:longer"], target=0.85,
                        risk=0.09)
    assert [st.risk for st in three.stages] == pytest.approx([0.03] * 3)
    assert three.stages[0].audit.certification.choice["risk"] == pytest.approx(0.03)
    # stage 1 of a K-judge cascade is judge 1 alone certified at risk R/K: that routes
    alone = run_cascade(table, emb, ["cheap"], target=0.85, risk=0.05)
    np.testing.assert_array_equal(alone.stages[0].trusted, res.stages[0].certified)
    assert alone.certification == "per-stage"              # one judge: nothing to join


def test_stages_cover_disjoint_regions_and_people_take_the_rest(panel):
    df, emb, table, res = panel
    s1, s2 = res.stages
    assert s1.trusted.any() and s2.trusted.any()      # both judges certify a part
    assert not (s1.trusted & s2.trusted).any()
    routed = res.split != "excluded"
    np.testing.assert_array_equal(s1.region, routed)
    # judge 2 is asked about what stage 1's own certification did not trust
    np.testing.assert_array_equal(s2.region, routed & ~s1.certified)
    assert not (s2.trusted & ~s2.region).any()
    np.testing.assert_array_equal(res.stage == "cheap", s1.trusted)
    np.testing.assert_array_equal(res.stage == "judge_winner", s2.trusted)
    assert set(res.stage) == {"cheap", "judge_winner", PEOPLE}
    # the cheap judge is trusted more often where it is nearly always right
    cat = df["category"].to_numpy()
    assert np.mean(cat[s1.trusted & res.audited] == "type0") > np.mean(cat[res.audited] == "type0")
    s = res.summary()
    a = res.audited
    assert s["coverage"] == pytest.approx(np.mean(res.stage[a] != PEOPLE))
    assert sum(st["coverage"] for st in s["stages"]) == pytest.approx(s["coverage"])
    assert s["stages"][0]["asked"] == 1.0
    assert s["stages"][1]["asked"] == pytest.approx((routed & ~s1.certified).sum() / routed.sum())
    # realised agreement on trusted validation rows, by hand, with each row's stage judge
    val = (res.split == "validation") & (res.stage != PEOPLE)
    v = np.where(res.stage == "cheap", df["cheap"], df["judge_winner"])
    assert s["realised"] == pytest.approx(np.mean(v[val] == table.human[val]))
    assert s["realised"] >= 0.85 and s["realised_ci"][0] < s["realised"] <= s["realised_ci"][1]
    st1 = s["stages"][0]
    want1 = np.mean(df["cheap"].to_numpy()[val & s1.trusted] == table.human[val & s1.trusted])
    assert st1["realised"] == pytest.approx(want1) and st1["n_trusted"] == (s1.trusted & a).sum()


def test_a_stage_that_certifies_nothing_says_so_and_passes_everything_on():
    # a coin everywhere, and texts that say nothing about who is right
    df, emb, _ = _panel(cheap_acc=(0.5, 0.5, 0.5), signal=0.0)
    table = load_comparisons(df, judge_column="cheap")
    res = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1)
    s1, s2 = res.stages
    assert not s1.trusted.any() and "Every row passes on" in s1.message
    assert "No share certifies" in s1.message
    np.testing.assert_array_equal(s2.region, res.split != "excluded")
    assert res.summary()["stages"][1]["asked"] == 1.0
    assert s2.trusted.any() and (res.stage != "cheap").all()


def test_a_judge_column_with_ties_and_blanks(panel):
    df, emb, table, _ = panel
    df = df.copy()
    strong = df["judge_winner"].astype(object).to_numpy().copy()
    strong[::7] = "tie"
    strong[3::11] = ""
    strong[5::13] = None
    df["judge_winner"] = strong
    t = load_comparisons(df, judge_column="cheap")
    res = run_cascade(t, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1)
    s2 = res.stages[1]
    no_verdict = np.array([v not in ("A", "B") for v in strong])
    assert s2.trusted.any() and not (s2.trusted & no_verdict).any()
    # such rows of stage 2's region end with people; the trusted verdicts are always A or B
    left = s2.region & no_verdict & (res.split != "excluded")
    assert left.any() and not (res.stage[left] == "judge_winner").any()
    # stage by stage they go to people; jointly only judge 1 can still take them
    assert (res.as_per_stage().stage[left] == PEOPLE).all()
    assert set(res.stage[left]) <= {"cheap", PEOPLE}
    assert set(res.verdict[res.stage != PEOPLE]) <= {"A", "B"}
    reasons = s2.audit.reason
    assert {"judge tie", "no judge verdict"} <= set(reasons)


def test_every_row_the_cascade_leaves_out_is_counted_and_named(tmp_path, capsys, panel):
    from puaudit.cli.commands import main

    df, emb, _, _ = panel
    df = df.copy()
    df.loc[[4, 9], "response_b"] = df.loc[[4, 9], "response_a"]  # the same text: identical
    df.loc[[12], "human_winner"] = "tie"
    res = run_cascade(load_comparisons(df, judge_column="cheap"), emb, ["cheap", "judge_winner"],
                      target=0.85, risk=0.1)
    s = res.summary()
    assert s["n_excluded"] == 3 and s["n_rows"] - s["n_routed"] == 3
    assert s["excluded_reasons"] == {"human tie": 1, "identical responses": 2}
    assert s["excluded_rows"] == {"identical responses": [5, 10]}  # 1-based, as the export
    path, npz = _write_panel(tmp_path, df, emb)
    rc = main(["cascade", str(path), "--judges", "cheap", "judge_winner", "--target-agreement",
               "0.85", "-o", str(tmp_path / "c.csv"), "--embeddings", str(npz)])
    assert rc == 0
    assert ("excluded 3 of 900 rows (human tie 1; identical responses 2: rows 5, 10)" in
            capsys.readouterr().out)


def test_stage_k_never_reads_a_later_judges_columns(panel):
    df, emb, table, res = panel
    # a later judge's verdicts, its own extra columns and a column named like it change...
    changed = df.copy()
    changed["judge_winner"] = np.where(changed["judge_winner"] == "A", "B", "A")
    changed["judge_winner_raw"] = "tie (inconsistent)"
    changed["judge_winner_p_a"] = 0.3
    t2 = load_comparisons(changed, judge_column="cheap")
    again = run_cascade(t2, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1)
    # ...and stage 1 certifies the same rows (who judge 2 is asked about), from the same
    # evidence; the joint answer reads judge 2's verdicts by design
    np.testing.assert_array_equal(again.stages[0].certified, res.stages[0].certified)
    ev1 = res.stages[0].audit.evidence
    assert not any("judge_winner" in k or k.startswith("agrees_") for k in ev1)
    np.testing.assert_allclose(again.stages[0].audit.p_judge_right,
                               res.stages[0].audit.p_judge_right, equal_nan=True)
    # stage 2 reads stage 1's judge as evidence
    assert "agrees_cheap" in res.stages[1].audit.evidence
    # ownership by name: the longest judge name that prefixes a column wins
    own = judge_columns_of(["judge_winner", "judge_winner_gpt35", "judge_winner_gpt35_raw",
                            "judge_winner_raw", "prompt"], ["judge_winner_gpt35", "judge_winner"])
    assert own == {"judge_winner": "judge_winner", "judge_winner_gpt35": "judge_winner_gpt35",
                   "judge_winner_gpt35_raw": "judge_winner_gpt35",
                   "judge_winner_raw": "judge_winner"}


def test_export_keeps_every_row_and_column(panel):
    df, emb, table, res = panel
    out = res.to_frame(table)
    assert list(out.columns) == list(df.columns) + ["puaudit_cascade_split",
                                                    "puaudit_cascade_stage",
                                                    "puaudit_cascade_verdict",
                                                    "puaudit_cascade_routed_to"]
    pd.testing.assert_frame_equal(out[df.columns], df)
    # the last judge each row was sent to: judge 2 on its region, the cheap one elsewhere
    routed_to = out["puaudit_cascade_routed_to"].to_numpy()
    np.testing.assert_array_equal(routed_to == "judge_winner", res.stages[1].region)
    np.testing.assert_array_equal(routed_to == "cheap", res.routed & ~res.stages[1].region)
    assert pd.isna(routed_to[~res.routed]).all()
    stage = out["puaudit_cascade_stage"].to_numpy()
    verdict = out["puaudit_cascade_verdict"].to_numpy()
    for judge in ("cheap", "judge_winner"):
        np.testing.assert_array_equal(verdict[stage == judge], df[judge].to_numpy()[stage == judge])
    # people: their verdict where they gave one, else empty
    people = stage == PEOPLE
    human = table.human
    assert all(pd.isna(v) if h is None else v == h
               for v, h in zip(verdict[people], human[people]))


def test_bad_judges_are_one_clear_error(panel):
    df, emb, table, _ = panel
    with pytest.raises(PUAuditError, match="'nope' is not in the table"):
        run_cascade(table, emb, ["nope", "judge_winner"], target=0.85)
    with pytest.raises(PUAuditError, match="named twice"):
        run_cascade(table, emb, ["cheap", "cheap"], target=0.85)
    with pytest.raises(PUAuditError, match="people's verdicts"):
        run_cascade(table, emb, ["cheap", "human_winner"], target=0.85)
    with pytest.raises(PUAuditError, match="rule:"):
        run_cascade(table, emb, ["rule:magic"], target=0.85)
    with pytest.raises(PUAuditError, match="target_agreement"):
        run_cascade(table, emb, ["cheap"], target=1.2)
    with pytest.raises(PUAuditError, match="crowdlab"):
        run_cascade(table, emb, ["cheap"], target=0.85,
                    config=AuditConfig(human_source="crowdlab"))


def test_a_judge_not_asked_yet_certifies_nothing_and_says_what_to_run(panel):
    df, emb, table, res = panel
    t = load_comparisons(df.drop(columns="judge_winner"), judge_column="cheap")
    out = run_cascade(t, emb, ["cheap", "judge2_winner"], target=0.85, risk=0.1)
    # not asked yet: the per-stage answer, whose people rows are whom to ask next
    assert out.certification == "per-stage" and out.union is None
    np.testing.assert_array_equal(out.stages[0].trusted, res.stages[0].certified)
    assert not out.stages[1].trusted.any()
    assert "--only-escalated --winner-column judge2_winner" in out.stages[1].message


# -- the command line ----------------------------------------------------------------------------
def _write_panel(tmp_path, df, emb):
    from puaudit.data.writers import write_table

    path = tmp_path / "panel.csv"
    write_table(df, path)
    npz = tmp_path / "emb.npz"
    np.savez(npz, e_a=emb.e_a, e_b=emb.e_b)
    return path, npz


def test_cli_cascade_writes_the_export_and_one_json_line(tmp_path, capsys, panel):
    from puaudit.cli.commands import main
    from puaudit.data.io import read_table

    df, emb, table, res = panel
    path, npz = _write_panel(tmp_path, df, emb)
    out = tmp_path / "cascade.csv"
    rc = main(["cascade", str(path), "--judges", "cheap", "judge_winner", "--target-agreement",
               "0.85", "--risk", "0.1", "-o", str(out), "--embeddings", str(npz), "--json"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    s = json.loads(captured.out)  # stdout holds the JSON object alone (| jq reads it)
    # the summary a person reads went to stderr
    assert "cascade of 2 judges: agreement >= 0.85" in captured.err
    assert f"wrote {len(df)} rows to {out}" in captured.err
    assert [st["judge"] for st in s["stages"]] == ["cheap", "judge_winner"]
    for st in s["stages"]:
        assert {"judge", "coverage", "n_trusted", "realised", "realised_ci", "asked"} <= set(st)
    assert s["guarantee"] == {"target": 0.85, "risk": 0.1, "risk_per_stage": 0.05,
                              "certification": "joint"}
    assert s["coverage"] == pytest.approx(res.coverage())
    written = read_table(out)
    assert len(written) == len(df)
    assert (written["puaudit_cascade_stage"].to_numpy() == res.stage).all()
    assert "its own certification at risk 0.05 trusted" in captured.err
    # --certify per-stage: each stage's own answer, the same stages
    def cascade_json(out_name, *extra):
        rc = main(["cascade", str(path), "--judges", "cheap", "judge_winner",
                   "--target-agreement", "0.85", "-o", str(tmp_path / out_name), "--embeddings",
                   str(npz), "--json", *extra])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        return json.loads(captured.out), captured.err

    ps, _ = cascade_json("ps.csv", "--certify", "per-stage")
    assert ps["guarantee"]["certification"] == "per-stage" and ps["union"] is None
    assert ps["coverage"] == pytest.approx(res.as_per_stage().coverage())
    assert (read_table(tmp_path / "ps.csv")["puaudit_cascade_stage"].to_numpy()
            == res.as_per_stage().stage).all()
    # --budget: judge 2 asked about what it buys; the JSON says what stage 1 sent on
    b, err = cascade_json("b.csv", "--budget", "1")
    assert b["params"]["budget"] == 1.0 and b["stages"][1]["asked"] == 1.0
    assert b["stages"][0]["n_handed_on"] == (res.stages[0].certified & res.routed).sum() > 0
    assert f"and {b['stages'][0]['n_handed_on']} rows it certified too (budget)" in err
    # bad input: exit 2 with one message, no traceback
    for argv, says in (
            (["--judges", "nope_col", "cheap"], "'nope_col'"),
            (["--judges", "cheap", "--judge-rule", "longer"], "rule:longer"),
            (["--judges", "cheap", "judge_winner", "--budget", "0.9", "--certify", "per-stage"],
             "certify jointly"),
            (["--judges", "cheap", "judge_winner", "--budget", "2"], "budget is a share"),
            (["--judges", "cheap", "--target-agreement", "1.5"], "target_agreement")):
        rest = [] if "--target-agreement" in argv else ["--target-agreement", "0.85"]
        rc = main(["cascade", str(path), "-o", str(tmp_path / "x.csv"), "--embeddings",
                   str(npz), *argv, *rest])
        err = capsys.readouterr().err
        assert rc == 2 and says in err and "Traceback" not in err


# -- the loop with a live judge: ask the next judge only about the rows left for people -----------
def _oracle_reply(truth, accuracy=0.95):
    """A stub judge that knows the planted truth of row i ("answer a i" / "answer b i") and is
    right ``accuracy`` of the time (a fixed hash decides where it errs)."""
    import re

    from tests.judge_stub import _PAIR_RE, _token_entries, _unit, tokenize

    def reply(body):
        messages = body.get("messages") or []
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        m = _PAIR_RE.search(user)
        side, i = re.match(r"answer ([ab]) (\d+)", m.group(1)).groups()
        right = truth[int(i)] == side.upper()        # is the answer shown first the better one?
        if _unit("err", m.group(1)) > accuracy:
            right = not right
        letter = "A" if right else "B"
        double = "[[" in system
        content = "Verdict: " + ("[[" if double else "[") + letter + ("]]" if double else "]")
        return {"content": content, "tokens": _token_entries(tokenize(content), {}, 0.05, user)}
    return reply


def _documented_loop() -> list[list[str]]:
    """The three commands of docs/judge.md's cascade section, split into arguments."""
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "judge.md").read_text()
    section = text.split("## A cascade of judges", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("puaudit ")]


def test_only_escalated_asks_the_rows_left_for_people_and_the_cascade_runs_on(tmp_path, capsys,
                                                                             monkeypatch):
    from puaudit.cli.commands import main
    from puaudit.data.io import read_table
    from tests.judge_stub import StubJudgeServer

    # texts that say nothing: the cheap judge is trusted on type0 only, judge 2 has a large region
    df, emb, truth = _panel(n=1200, cheap_acc=(0.99, 0.5, 0.5), signal=0.0)
    first = df.drop(columns="judge_winner")                # judge 2 not asked yet
    path, npz = _write_panel(tmp_path, first, emb)
    monkeypatch.chdir(tmp_path)
    run1, ask, run2 = _documented_loop()
    assert run1[:2] == ["cascade", "panel.csv"] and ask[:3] == ["judge", "stage1.csv",
                                                                "--only-escalated"]
    extra = ["--embeddings", str(npz), "--json"]
    # 1. the cascade with judge 2 named but not asked: stage 2 says what to run
    rc = main(run1 + extra)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    s1 = json.loads(cap.out)
    assert "--only-escalated" in s1["stages"][1]["message"]
    export = read_table(tmp_path / "stage1.csv")
    left = ((export["puaudit_cascade_stage"] == "people")
            & (export["puaudit_cascade_split"] != "excluded")).to_numpy()
    assert 0 < left.sum() < len(export)
    assert (export.loc[left, "puaudit_cascade_split"] == "P").any()   # P rows of the region too
    # 2. judge 2 is asked about those rows only, and the whole table comes back
    with StubJudgeServer(reply=_oracle_reply(truth, accuracy=0.99)) as stub:
        argv = [stub.url if a.startswith("http://127.0.0.1") else a for a in ask]
        rc = main(argv + ["--backoff", "0.01", "--max-backoff", "0.05", "--no-progress"])
        n_calls = len(stub.calls)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert n_calls == left.sum()
    assert f"{left.sum()} of {len(export)} rows the cascade sends to 'judge2_winner'" in cap.err
    assert "next: puaudit cascade merged.csv" in cap.out
    m = read_table(tmp_path / "merged.csv")
    assert len(m) == len(first) and list(m.columns[:len(first.columns)]) == list(first.columns)
    assert not [c for c in m.columns if c.startswith("puaudit_")]
    asked = (m["judge2_winner"].fillna("").astype(str).str.strip() != "").to_numpy()
    np.testing.assert_array_equal(asked, left)
    assert all(c == "judge2_winner" or c.startswith("judge2_winner_")
               for c in m.columns[len(first.columns):])
    # 3. the cascade on the merged table: stage 1 is the same, stage 2 now certifies
    rc = main(run2 + extra)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    s2 = json.loads(cap.out)
    final = read_table(tmp_path / "final.csv")
    assert s1["guarantee"]["certification"] == "per-stage"
    assert s2["guarantee"]["certification"] == "joint"
    # stage 1's own certification (who judge 2 was asked about) is unchanged
    keep = ("coverage_alone", "n_asked", "asked", "threshold", "certified_lower")
    assert {k: s2["stages"][0][k] for k in keep} == {k: s1["stages"][0][k] for k in keep}
    assert s1["stages"][0]["coverage"] == s1["stages"][0]["coverage_alone"]
    assert s2["stages"][1]["n_trusted"] > 0 and s2["coverage"] > s1["coverage"]
    assert s2["stages"][1]["asked"] == pytest.approx(left.sum() / (export[
        "puaudit_cascade_split"] != "excluded").sum())
    # the rows judge 2 was not asked about are never its to trust
    assert not ((final["puaudit_cascade_stage"] == "judge2_winner").to_numpy() & ~asked).any()


def test_joint_and_per_stage_share_the_stages_and_the_union_trusts_at_least_the_start(panel):
    df, emb, table, res = panel
    ps = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1,
                     certify="per-stage")
    assert ps.certification == "per-stage" and ps.union is None
    np.testing.assert_array_equal(ps.stage, res.as_per_stage().stage)
    np.testing.assert_array_equal(ps.verdict, res.as_per_stage().verdict)
    for a, b in zip(ps.stages, res.stages):
        np.testing.assert_array_equal(a.region, b.region)
        np.testing.assert_array_equal(a.trusted, b.certified)
    # the joint answer's folds certified the whole union at risk R / 5 each
    assert res.union["n_folds_certified"] == 5 and res.union["lower"] >= 0.85
    assert res.summary()["realised"] >= 0.85
    with pytest.raises(PUAuditError, match="certify must be one of"):
        run_cascade(table, emb, ["cheap"], target=0.85, certify="both")


def test_a_budget_sends_the_least_confident_certified_rows_on(panel):
    from puaudit.audit.certify.cascade import stage_probabilities

    df, emb, table, res = panel
    routed = res.routed
    n_routed = int(routed.sum())
    plain_asked = res.stages[1].region.sum() / n_routed
    budget = round(min(1.0, plain_asked + 0.2), 2)
    b = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1, budget=budget)
    s1, s2 = b.stages
    # stage 1's own certification is the same; judge 2 gets exactly what the budget buys
    np.testing.assert_array_equal(s1.certified, res.stages[0].certified)
    assert s2.region.sum() == int(np.floor(budget * n_routed + 1e-9))
    np.testing.assert_array_equal(s2.region, (routed & ~s1.certified) | s1.handed_on)
    assert s1.handed_on.any() and not (s1.handed_on & ~s1.certified).any()
    # ... its least confident certified rows
    q = stage_probabilities([s1], len(routed))[0]
    kept = s1.certified & ~s1.handed_on
    assert q[s1.handed_on].max() <= q[kept].min()
    summary = b.summary()
    assert summary["stages"][0]["n_handed_on"] == s1.handed_on.sum()
    assert summary["stages"][1]["asked"] == pytest.approx(budget, abs=1 / n_routed)
    assert summary["params"]["budget"] == budget
    # judge 2 is trusted only where it was asked; the answer is one certified union
    assert not (s2.trusted & ~s2.region).any() and not (s1.trusted & s2.trusted).any()
    assert b.certification == "joint" and summary["realised"] >= 0.85
    assert (b.stage[s1.handed_on & b.audited] == "judge_winner").any()
    routed_to = b.to_frame(table)["puaudit_cascade_routed_to"].to_numpy()
    np.testing.assert_array_equal(routed_to == "judge_winner", s2.region)
    # stage-by-stage answers would overlap: refused, both ways
    with pytest.raises(PUAuditError, match="overlap"):
        b.as_per_stage()
    with pytest.raises(PUAuditError, match="certify jointly"):
        run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, budget=0.9,
                    certify="per-stage")
    for bad in (0.0, 1.5):
        with pytest.raises(PUAuditError, match="budget is a share"):
            run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, budget=bad)
    # a budget below what is left anyway changes nothing
    low = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1,
                      budget=max(0.01, round(plain_asked - 0.1, 2)))
    np.testing.assert_array_equal(low.stage, res.stage)
    assert low.stages[0].handed_on is None


def test_a_pending_judge_is_asked_about_what_the_budget_routes_to_it(panel):
    from puaudit.audit.certify.escalation import cascade_escalated_rows

    df, emb, _, res = panel
    first = df.drop(columns="judge_winner")                # judge 2 not asked yet
    table = load_comparisons(first, judge_column="cheap")
    budget = round(min(1.0, res.stages[1].region.sum() / res.routed.sum() + 0.2), 2)
    pending = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, budget=budget)
    export = pending.to_frame(table)
    rows, pos = cascade_escalated_rows(export, judge="judge_winner")
    np.testing.assert_array_equal(pos, np.flatnonzero(pending.stages[1].region))
    assert not [c for c in rows.columns if c.startswith("puaudit_")]
    # some of them stage 1 certified: they are not left for people, yet judge 2 sees them
    assert (export["puaudit_cascade_stage"].to_numpy()[pos] == "cheap").any()
    # a judge the export does not route to (or one already asked): the rows left for people
    _, people = cascade_escalated_rows(export, judge="someone_else")
    want = (export["puaudit_cascade_stage"] == PEOPLE) & (export["puaudit_cascade_split"]
                                                          != "excluded")
    np.testing.assert_array_equal(people, np.flatnonzero(want.to_numpy()))
    _, asked_already = cascade_escalated_rows(export, judge="cheap")
    np.testing.assert_array_equal(asked_already, people)


def test_cascade_never_trusts_fewer_rows_of_a_fold_than_its_strongest_judge_alone(panel):
    from puaudit.audit.certify.judge import certify_folds

    df, emb, table, res = panel
    solo = run_cascade(table, emb, ["judge_winner"], target=0.85, risk=0.05)
    folds = certify_folds(np.asarray(table.item_id).astype(str), random_state=0)
    audited = res.audited
    for f in range(5):
        mine = audited & (folds == f)
        assert (res.stage[mine] != PEOPLE).sum() >= (solo.stage[mine] != PEOPLE).sum()
    chose = [a["certificate"] for a in res.union["folds"]]
    assert res.union["alone"]["n_folds_chosen"] == chose.count("alone")


def test_strong_judge_not_asked_everywhere_is_no_candidate_and_the_union_takes_the_risk():
    df, emb, _ = _panel(n=600, strong_acc=0.9)
    df.loc[df.index[:40], "judge_winner"] = ""  # not asked about these rows
    table = load_comparisons(df, judge_column="cheap")
    res = run_cascade(table, emb, ["cheap", "judge_winner"], target=0.85, risk=0.1)
    assert "alone" not in res.union
    assert res.union["risk_fold"] == pytest.approx(0.1 / 5)


def test_a_stage_that_tests_nothing_passes_its_risk_on():
    df, emb, _ = _panel(n=600, strong_acc=0.9)
    table = load_comparisons(df, judge_column="cheap")
    # the first judge is not in the table yet at the end: the loop of docs/judge.md asks it
    # last; here a judge with no verdicts at all comes first and tests nothing
    df2 = df.assign(nobody="")
    t2 = load_comparisons(df2, judge_column="cheap")
    res = run_cascade(t2, emb, ["nobody", "cheap", "judge_winner"], target=0.85, risk=0.09,
                      certify="per-stage")
    assert res.stages[0].audit is None
    assert [st.risk for st in res.stages] == pytest.approx([0.03, 0.045, 0.045])
