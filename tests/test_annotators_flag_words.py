""""spammer" only for a near-random voter; a flagged voter clearly better (or worse) than chance
is "low skill"."""

import numpy as np

from puaudit.annotators.reliability import flag_reasons


def _row(skill, lo, hi, n=300):
    nan = float("nan")
    return {"skill": skill, "skill_lo": lo, "skill_hi": hi, "n_strict": n,
            "position_bias": nan, "position_bias_lo": nan, "position_bias_hi": nan,
            "length_bias": nan, "length_bias_lo": nan, "length_bias_hi": nan}


def _flags(skill, lo, hi):
    return flag_reasons(_row(skill, lo, hi), "Dawid-Skene", skill_bar=0.8, position_margin=0.1,
                        length_margin=0.1)


def test_gpt4_like_skill_is_low_skill_not_spammer():
    (flag,) = _flags(0.73, 0.70, 0.76)
    assert flag.startswith("low skill: skill (Dawid-Skene) 0.73 [0.70, 0.76] stays below 0.80")
    assert "spammer" not in flag


def test_near_random_voters_are_spammers():
    for skill, lo, hi in ((0.42, 0.32, 0.51), (0.53, 0.46, 0.61), (0.62, 0.54, 0.76)):
        (flag,) = _flags(skill, lo, hi)
        assert flag.startswith("spammer:"), flag
    (flag,) = _flags(0.2, 0.1, 0.3)  # systematically reversed: not random either
    assert flag.startswith("low skill:")
    assert _flags(0.9, 0.85, 0.95) == [] and _flags(np.nan, np.nan, np.nan) == []
