"""The annotator audit: agreement statistics, latent-truth models of the votes, the CLI.

The latent-truth audit's public names import from here (the module map: docs/development.md).
The "models" of this package are models of the annotators' votes, never the leaderboards of
:mod:`puaudit.rankings`.
"""

from puaudit.annotators.crowdkit_em import dawid_skene_em, mace_em
from puaudit.annotators.latent_truth import (CONSENSUS_MODELS, MODEL_NAMES, MODELS, TruthFit,
                                             fit_truth_model, item_pred_probs,
                                             model_consensus_labels)
from puaudit.annotators.reliability import (STAT_COLUMNS, ModelReport, annotator_model_report,
                                            annotator_stats, fleiss_kappa_items)
from puaudit.annotators.simulate import simulate_votes
from puaudit.annotators.votes import LABELS, VoteData, collect_votes

__all__ = [
    "LABELS", "MODELS", "CONSENSUS_MODELS", "MODEL_NAMES", "STAT_COLUMNS", "VoteData", "TruthFit",
    "ModelReport", "collect_votes", "fit_truth_model", "annotator_stats", "annotator_model_report",
    "model_consensus_labels", "item_pred_probs", "fleiss_kappa_items", "simulate_votes",
    "dawid_skene_em", "mace_em",
]
