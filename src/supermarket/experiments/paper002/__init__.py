"""``supermarket reproduce paper002``: the three diffusion regimes of paper 002 (docs/model.md §8,
limits derived), the chain beside its limit diffusion and the finite-n LNA; the files it writes
and its sizes are listed in docs/fluctuations.md ("supermarket reproduce paper002").
"""

from __future__ import annotations

from .driver import CASES, _config, _progress, run
from .figures import NAMES, _save_figure, plot_comparison, plot_hist, plot_paths, plot_study
from .study import STUDY_CASES, STUDY_KEYS, main, prelimit_study, reflection_study, run_study, study_markdown
from .summary import AGREE_SIGMA, adequacy_sentence, agreement_sentence, flow_sentence, scaling_sentence

__all__ = ["run", "plot_comparison", "CASES"]
