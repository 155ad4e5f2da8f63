"""A suite written in Python: cases built in code, and a custom evaluator (usable from YAML too)."""

from dataclasses import dataclass

from pydantic_evals import Case
from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext

from evals.inputs import CaseMeta, EvalInputs


@dataclass(repr=False)
class MaxWords(Evaluator):
    """The answer has at most `limit` words (and at least one)."""

    limit: int

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationReason:
        n = len(str(ctx.output).split())
        return EvaluationReason(0 < n <= self.limit, f"{n} words (limit {self.limit})")


CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi"}

cases = [
    Case(name=f"capital-{country.lower()}",
         inputs=EvalInputs(prompt=f"What is the capital of {country}? Answer in one word."),
         metadata=CaseMeta(tags=["reasoning", "facts"]),
         evaluators=[MaxWords(3)])
    for country in CAPITALS
]
for case, city in zip(cases, CAPITALS.values(), strict=True):
    from pydantic_evals.evaluators import Contains

    case.evaluators.append(Contains(city, case_sensitive=False))

cases.append(Case(name="haiku-short", inputs="Write a haiku about sandboxes.",   # a plain prompt string
                  metadata={"tags": ["prose"]}, evaluators=[MaxWords(25)]))
