"""One audit configuration: defaults written once, reported the same by CLI, dashboard, PUAudit."""

import dataclasses

import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import PUAudit
from puaudit.cli.commands import build_parser
from puaudit.errors import PUAuditError


def test_puaudit_reports_the_config_defaults():
    assert PUAudit().get_params() == AuditConfig.defaults()
    assert PUAudit(scorer="probe").get_params() == {**AuditConfig.defaults(), "scorer": "probe"}
    cfg = AuditConfig(m=0.8, rule="paper")
    assert PUAudit(cfg).get_params() == cfg.to_dict() and PUAudit(cfg).m == 0.8


def test_cli_options_carry_the_config_defaults():
    from puaudit.audit.config import config_from_args

    args = build_parser().parse_args(["audit", "in.csv", "-o", "out.csv"])
    assert config_from_args(args) == AuditConfig()
    args = build_parser().parse_args(["audit", "in.csv", "-o", "o.csv", "--pooled", "--m", "0.9",
                                      "--scorer", "prior-ot", "--seed", "3", "--folds", "4"])
    assert config_from_args(args) == AuditConfig(per_type=False, m=0.9, scorer="prior-ot",
                                                 random_state=3, n_folds=4)


def test_dashboard_defaults_come_from_the_config():
    from components import state

    cfg = AuditConfig()
    d = state.AUDIT_DEFAULTS
    assert (d["m"], d["p_ratio"], d["alpha1"], d["alpha2"], d["scorer"], d["rule"], d["margin"],
            d["seed"]) == (cfg.m, cfg.p_ratio, cfg.alpha1, cfg.alpha2, cfg.scorer, cfg.rule,
                           cfg.margin, cfg.random_state)
    assert state.audit_config({**d, "encoder": None}) == cfg


def test_config_is_frozen_hashable_and_validated_once():
    cfg = AuditConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.m = 0.5
    assert hash(cfg) == hash(AuditConfig()) and cfg.replace(m=0.7) != cfg
    for bad in ({"m": 1.5}, {"m": 0}, {"p_ratio": 0}, {"alpha1": 2}, {"scorer": "magic"},
                {"rule": "x"}, {"margin": 0.5}, {"n_folds": 1}, {"reg": -1},
                {"review_band": (0.5, 0.2)}, {"calibration": "x"}):
        with pytest.raises(PUAuditError):
            AuditConfig(**bad)
    with pytest.raises(PUAuditError, match="Unknown audit parameter"):
        cfg.replace(colour="red")
