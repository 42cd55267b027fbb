"""Readers for the files evaluation tools write, each turned into a comparison table.

:func:`puaudit.data.load.load_input` reads a file, tells from its fields which tool wrote it
(:func:`detect`) and converts it; a comparison table of our own comes back as read. One module
per format: :mod:`.mtbench` (the MT-Bench human-judgments release), :mod:`.fastchat_pair`
(FastChat's pairwise judgments), :mod:`.alpaca_eval` (AlpacaEval annotations),
:mod:`.arena_hard` (arena-hard-auto judgments), :mod:`.labelstudio` (Label Studio's JSON
export) and :mod:`.argilla` (Argilla records, a ``to_disk`` folder too), the last two one row
per person's vote (:mod:`.tool_votes`); :mod:`.answers` reads the benchmark folder that
supplies the texts a judgment file names, :mod:`.release` a release folder (or zip) holding
both. See docs/data_formats.md.
"""

from puaudit.data.formats.detect import FORMATS, detect

__all__ = ["FORMATS", "detect"]
