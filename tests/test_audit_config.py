"""One audit configuration: defaults written once, reported the same by CLI, dashboard, PUAudit."""

import dataclasses

import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import PUAudit
from puaudit.cli.commands import build_parser
from puaudit.errors import PUAuditError


def _audit_params(est) -> dict:
    return {k: v for k, v in est.get_params().items() if k not in ("config", "encoder", "backend")}


def test_puaudit_reports_the_config_defaults():
    assert _audit_params(PUAudit()) == AuditConfig.defaults()
    assert _audit_params(PUAudit(scorer="probe")) == {**AuditConfig.defaults(), "scorer": "probe"}
    cfg = AuditConfig(m=0.8, rule="paper")
    assert _audit_params(PUAudit(cfg)) == cfg.to_dict() and PUAudit(cfg).m == 0.8
    assert PUAudit(cfg, rule="guarded").resolved_config() == cfg.replace(rule="guarded")


def test_puaudit_is_a_scikit_learn_estimator():
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    est = clone(PUAudit(m=0.7, evidence="none"))
    assert est.m == 0.7 and est.evidence == "none" and est.resolved_config().m == 0.7
    assert est.set_params(scorer="probe", margin=0.1) is est
    assert est.resolved_config() == AuditConfig(m=0.7, evidence="none", scorer="probe",
                                                margin=0.1)
    with pytest.raises(NotFittedError, match="Call fit"):
        est.to_frame()
    with pytest.raises(PUAuditError, match="Unknown audit parameter"):
        PUAudit(nope=1)
    with pytest.raises(PUAuditError, match="m must be in"):  # validated by fit, as in sklearn
        PUAudit(m=1.5).resolved_config()


def test_cli_options_carry_the_config_defaults():
    from puaudit.cli.options import config_from_args

    args = build_parser().parse_args(["audit", "in.csv", "-o", "out.csv"])
    assert config_from_args(args) == AuditConfig()
    args = build_parser().parse_args(["audit", "in.csv", "-o", "o.csv", "--pooled", "--m", "0.9",
                                      "--scorer", "prior-ot", "--seed", "3", "--folds", "4"])
    assert config_from_args(args) == AuditConfig(per_type=False, m=0.9, scorer="prior-ot",
                                                 random_state=3, n_folds=4)


def test_dashboard_defaults_come_from_the_config():
    from components import state

    cfg = AuditConfig()
    assert not hasattr(state, "AUDIT_DEFAULTS")  # no second defaults dict
    assert state.audit_config({**cfg.to_dict(), "encoder": None}) == cfg
    assert state.audit_config({**cfg.to_dict(), "random_state": 3, "evidence": "none",
                               "encoder": "x"}) == cfg.replace(random_state=3, evidence="none")


def test_config_is_frozen_hashable_and_validated_once():
    cfg = AuditConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.m = 0.5
    assert hash(cfg) == hash(AuditConfig()) and cfg.replace(m=0.7) != cfg
    with pytest.raises(PUAuditError, match="Unknown audit parameter"):
        cfg.replace(colour="red")


@pytest.mark.parametrize("bad, message", [
    ({"m": 1.5}, r"m must be in \(0, 1.0\], got 1.5"),
    ({"m": 0}, r"m must be in \(0, 1.0\], got 0.0"),
    ({"p_ratio": 0}, r"p_ratio must be in \(0, 1.0\], got 0.0"),
    ({"alpha1": 2}, r"alpha1 must be in \(0, 1.0\], got 2.0"),
    ({"scorer": "magic"}, r"Unknown scorer 'magic': choose one of \['auto'"),
    ({"rule": "x"}, r"Unknown rule 'x': choose one of \['guarded', 'paper'\]"),
    ({"margin": 0.5}, r"margin must be in \[0, 0.5\), got 0.5"),
    ({"n_folds": 1}, r"n_folds must be at least 2, got 1"),
    ({"reg": -1}, r"reg must be positive, got -1"),
    ({"review_band": (0.5, 0.2)}, r"review_band needs lo < hi, got \(0.5, 0.2\)"),
    ({"calibration": "x"}, r"Unknown calibration 'x': choose one of \['isotonic', 'platt'\]"),
])
def test_a_bad_parameter_is_refused_with_its_name_and_value(bad, message):
    with pytest.raises(PUAuditError, match=message):
        AuditConfig(**bad)


@pytest.mark.parametrize("cfg", [
    AuditConfig(),
    AuditConfig(m=0.7, per_type=False, review_band=(0.2, 0.4), rule="paper", reg=0.2,
                evidence=("bt_gap", "position_first"), target_agreement=0.9, risk=0.05,
                cv_repeats=2, calibration_bags=0, human_source="consensus", random_state=7),
    AuditConfig(evidence="none", scorer="evidence", calibration="platt", n_folds=3),
])
def test_the_manifests_reproduce_command_carries_every_field(cfg):
    import shlex

    from puaudit.cli.options import config_from_args
    from puaudit.audit.manifest import reproduce_command

    cmd = reproduce_command({**cfg.to_dict(), "m_used": 0.5, "encoder": "x"})
    argv = shlex.split(cmd)
    assert argv[:5] == ["puaudit", "audit", "INPUT", "-o", "OUTPUT"]
    assert config_from_args(build_parser().parse_args(argv[1:])) == cfg
