"""radvqa.generate: scene graphs -> QA rows (strategies qba, vindr, rin, diff), templates as YAML
data (``templates/*.yaml``), deterministic sampling, grades and splits.

    gen = Generator(onto, GenerateOptions(strategies=("qba", "vindr", "rin", "diff"), seed=0))
    rows = gen.generate(sg, prior=None)
"""

from __future__ import annotations

from radvqa.generate.engine import STRATEGIES, GenerateOptions, Generator, make_qa_id
from radvqa.generate.templates import TemplateError
from radvqa.splits import assign_split, check_leakage

__all__ = ["STRATEGIES", "GenerateOptions", "Generator", "TemplateError", "assign_split", "check_leakage",
           "make_qa_id"]
