"""The annotator audit: agreement statistics, latent-truth models of the votes, the CLI.

The latent-truth audit's public names import from here; the code lives in modules named for what
they hold (the "models" of this package are models of the annotators' votes, never the
leaderboards of :mod:`puaudit.rankings`):

* :mod:`puaudit.annotators.agreement`: agreement with peers and with the judge, biases, consensus;
* :mod:`puaudit.annotators.votes`: the votes in the models' form (:func:`collect_votes`);
* :mod:`puaudit.annotators.crowdkit_em`: vectorised ports of crowd-kit's Dawid–Skene and MACE;
* :mod:`puaudit.annotators.latent_truth`: the models, their fit and item consensus;
* :mod:`puaudit.annotators.reliability`: per-annotator statistics, intervals, kappas and the
  report (:func:`annotator_model_report`);
* :mod:`puaudit.annotators.simulate`: planted annotators with a known truth.
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
